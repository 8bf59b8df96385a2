"""A traffic spike: steady load at a base concurrency, a jump to base × factor held a while, then back.

One continuous timeline, never steps that let the server rest between them: a closed loop of
`base` users runs for before + hold + after seconds, and a second closed loop of (factor − 1) ×
base users runs beside it for `hold` seconds, started `before` seconds in (two loads of the
engine at once, each on its own thread and event loop; their records are put on one clock).
Each request belongs to the phase it was *sent* in: before, during (from the extra load's first
send to the moment it stopped sending) and after. Requests still in the server when the spike
ends finish in the after phase's time, so the way back includes draining them, as it would for
users.

What is measured: the failures during the spike, by kind and status, with 429/503 answers
carrying Retry-After ("rejected cleanly") apart from every other failure (timeouts, 5xx, a
429/503 that does not say when to come back); TTFT and end-to-end p99 before, during and after
(over the answered requests: the step rows); the queue gauge from /metrics (the sampler's
`waiting` role, vllm:num_requests_waiting or its twins) at its peak before and during; the
answers per second before and during; and, window by window from the spike's end, the time
until latency is back within its limits.

How it is judged:

- **Failures**: the requests sent during the spike that failed, other than clean rejections, over
  those sent less the clean rejections; NO-GO when the 95% interval of that share lies wholly
  above `max_failures` (1%), not enough data when only its point does. Clean rejections are not
  failures: a server asked for several times what it can serve that turns the excess away at
  once and says when to come back is doing what a spike calls for (shedding instead of
  queueing); a client retries. They are counted and named, never judged by their share, because
  the closed loop sends again at once (it does not wait the Retry-After), so their number says
  how fast the client retried, not how many users were turned away; what the server still
  served is shown beside them (answers per second during against before). A 429/503 without
  Retry-After counts as a failure: the client is not told when to come back.
- **Recovery**: from the spike's end, windows of `window` seconds (by default wide enough for about
  ten answers at the base rate); a window is within when each limit holds for the requests sent
  in it, a failed or rejected request counting as slower than any limit (an empty window is
  not within: every user was still waiting). The limits are the SLO's percentile limits on TTFT
  and end-to-end latency; without them, or when the SLO was already missed before the spike, the
  pre-spike p95 of each × `tolerance` (1.5), said which. The recovery time is the start of the
  first window from which every later window is within, to one window's precision; NO-GO when
  it is above `recover_within` (30 s) or latency never came back within the after phase.
- **Queue**: NO-GO when the queue gauge rose during the spike, nothing was rejected and latency
  during the spike was beyond the limits: the server let its queue grow instead of shedding.
  Without a queue gauge the latency alone cannot tell a queue from a slower batch: said, not
  judged.

A client that limited the run voids the latency judgements (it can inflate latency), not the
failures. A kind added through the scenario registry (scenario_kinds.py). Nothing here imports
pytest.
"""

from __future__ import annotations

import gc
import math
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from pytest_inferaccept.capacity.scenarios import (
    CapacityResult,
    Judgement,
    conclude,
    ms,
    step_row,
    telemetry_of,
)
from pytest_inferaccept.model import (
    CapacityFindings,
    CapacityParams,
    CapacitySeries,
    Point,
    SpikeFigures,
    SpikeStep,
    SpikeWindow,
)

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.runner import CapacityRunner
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.load.records import RequestRecord
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.run.load import LoadResult

DEFAULT_BASE = 2
"""The base concurrency when no ladder ran before the spike (else the soak's level)."""
FACTOR = 4.0
BEFORE_S, HOLD_S, AFTER_S = 30.0, 30.0, 60.0
RECOVER_WITHIN_S = 30.0
MAX_FAILURES = 0.01
"""The share of the spike's requests (clean rejections apart) allowed to fail."""
TOLERANCE = 1.5
"""Without SLO latency limits: recovered when back within the pre-spike p95 × this."""
WINDOW_ANSWERS = 10
"""The automatic window holds about this many answers at the base rate."""
SHED_STATUSES = frozenset({429, 503})
GAVE_UP = frozenset({"timeout", "stall"})
METRICS = ("ttft", "e2e")
"""The latencies recovery is judged on (per request, so a window has its own percentile)."""
Phase = Literal["before", "during", "after"]


def start(runner: CapacityRunner, *, base: int | None = None, factor: float = FACTOR,
          before: float = BEFORE_S, hold: float = HOLD_S, after: float = AFTER_S,
          recover_within: float = RECOVER_WITHIN_S, max_failures: float = MAX_FAILURES,
          tolerance: float = TOLERANCE, window: float | None = None,
          workload: Any = None) -> CapacityResult:
    """Base load, a jump to base × `factor` for `hold` seconds, back to base; the failures and the way back.

    `base` defaults to the soak's level when a ladder ran before (or --soak-concurrency), else 2.
    """
    from pytest_inferaccept.run.testload import LoadInputError

    cap = runner.settings.capacity
    if base is None:
        if cap.soak_concurrency or any(r.kind == "ladder" and r.steps for r in runner.history):
            base, basis = runner.soak_level()
        else:
            base, basis = DEFAULT_BASE, f"the default {DEFAULT_BASE} (no ladder ran before the spike)"
    else:
        basis = "as asked"
    problem = _bad_options(base, factor, before, hold, after, recover_within, max_failures, tolerance, window)
    if problem:
        runner.ledger.mark_invalid(f"the load was not started: {problem}")
        raise LoadInputError(f"the load was not started: {problem}")
    peak = max(base + 1, round(base * factor))
    params = CapacityParams(concurrency=base, basis=basis, factor=peak / base, before_s=before, hold_s=hold,
                            after_s=after, recover_within_s=recover_within, max_failure_share=max_failures,
                            tolerance=tolerance, window_s=window)
    runner.say(f"inferaccept: spike: c={base} ({basis}) for {before:g} s, then c={peak} for {hold:g} s, then "
               f"c={base} for {after:g} s")
    runner.alive()  # the first answer of a cold server is not the before phase's
    sampler = runner.sampler(interval=min(1.0, max(0.2, hold / 10)))
    base_result, extra_result, mono_t0 = _timeline(runner, sampler, base=base, extra=peak - base,
                                                   before=before, hold=hold, after=after, workload=workload)
    return _judge(runner, sampler, base_result, extra_result, mono_t0=mono_t0, base=base, peak=peak,
                  hold=hold, params=params, recover_within=recover_within, max_failures=max_failures,
                  tolerance=tolerance, window=window)


def _bad_options(base: int, factor: float, before: float, hold: float, after: float, recover_within: float,
                 max_failures: float, tolerance: float, window: float | None) -> str:
    """Why the options cannot make a spike ('' when they can)."""
    if base < 1:
        return f"a spike needs a base concurrency of at least 1, not {base}"
    if factor <= 1:
        return f"a spike's factor must be above 1, not {factor:g}"
    if min(before, hold, after) <= 0:
        return "before, hold and after must each be above 0 seconds"
    if not 0 < recover_within < after:
        return (f"recover_within ({recover_within:g} s) must be above 0 and shorter than the after phase "
                f"({after:g} s), or a slow recovery could not be told from one that never came")
    if not 0 <= max_failures < 1 or tolerance < 1 or (window is not None and window <= 0):
        return "max_failures must be in [0, 1), tolerance at least 1 and window above 0"
    return ""


def _timeline(runner: CapacityRunner, sampler: Sampler, *, base: int, extra: int, before: float, hold: float,
              after: float, workload: Any) -> tuple[LoadResult, LoadResult | None, float]:
    """The base load for the whole timeline, the extra load beside it from `before` for `hold` seconds.

    Returns both results and the offset that puts the engine's clock (perf_counter) on the
    sampler's (monotonic).
    """
    box: dict[str, Any] = {}

    def spike() -> None:
        try:
            box["result"] = runner.measure_step("spike-extra", concurrency=extra, duration=hold, warmup=0,
                                                workload=workload, seed=1)
        except BaseException as exc:  # raised again in the caller's thread once the base load ends
            box["error"] = exc

    # As in recovery: the engine's first import and a full collection over a large test process
    # would otherwise land inside the timeline and hold both loads' event loops.
    import pytest_inferaccept.load.schedules  # noqa: F401

    gc.collect()
    gc.freeze()
    timer = threading.Timer(before, spike)
    timer.name = "inferaccept-spike"
    timer.daemon = True
    mono_minus_perf = time.monotonic() - time.perf_counter()
    with sampler:
        timer.start()
        try:
            base_result = runner.measure_step("spike-base", concurrency=base, duration=before + hold + after,
                                              warmup=0, workload=workload)
        finally:
            gc.unfreeze()
            timer.cancel()  # the base load raised before the spike: no spike
            timer.join()
    if "error" in box:
        raise box["error"]
    return base_result, box.get("result"), mono_minus_perf


def _t0(result: LoadResult) -> float:
    """The engine's t0 of a single-worker run (perf_counter seconds; record times count from it)."""
    engine = result.run.selfcheck.get("engine", result.run.selfcheck)
    starts = [float(w["t0"]) for w in engine.get("per_worker") or [] if isinstance(w.get("t0"), (int, float))]
    return min(starts) if starts else 0.0


def _shifted(r: RequestRecord, by: float) -> RequestRecord:
    """The record with every moment moved by `by` seconds (onto the timeline's clock)."""
    def move(t: float | None) -> float | None:
        return None if t is None else t + by

    return replace(r, scheduled=move(r.scheduled), send=r.send + by, headers=move(r.headers),
                   first_byte=move(r.first_byte), first_event=move(r.first_event),
                   first_token_any=move(r.first_token_any), first_content=move(r.first_content),
                   end=r.end + by, content_times=[t + by for t in r.content_times])


def _is_clean(r: RequestRecord) -> bool:
    """A 429 or 503 that says when to come back: load shed the way a client can act on."""
    return r.status in SHED_STATUSES and bool(r.retry_after) and not r.ok


def _is_bare(r: RequestRecord) -> bool:
    return r.status in SHED_STATUSES and not r.retry_after and not r.ok


def _latency(r: RequestRecord, metric: str) -> float:
    """A request's TTFT or e2e; a failed (or rejected) one counts as slower than any limit."""
    if not r.ok:
        return math.inf
    value = r.ttft if metric == "ttft" else r.e2e
    return math.inf if value is None else value


def _stat(records: Sequence[RequestRecord], metric: str, level: float) -> float | None:
    from pytest_inferaccept.stats.percentiles import quantile

    values = sorted(_latency(r, metric) for r in records)
    return quantile(values, level) if values else None


def _phase_result(runner: CapacityRunner, label: str, records: list[RequestRecord], span: tuple[float, float],
                  level: int, spec: dict[str, Any], bound: list[str], check: str) -> LoadResult:
    """One phase as a load result of its own (its records, its window, its SLO evaluation)."""
    from pytest_inferaccept.load.engine import LoadRun
    from pytest_inferaccept.run.load import LoadResult as Result
    from pytest_inferaccept.stats import evaluate, summarize

    slo = runner.slo
    summary = summarize(records, span, slo=slo)
    evaluation = evaluate(summary, slo, point_estimate=runner.settings.load.judge_on_point) if slo else None
    length = span[1] - span[0]
    busy = sum(max(0.0, min(r.end, span[1]) - max(r.send, span[0])) for r in records)
    total = {"asked_concurrency": level, "achieved_concurrency": busy / length if length > 0 else None}
    run = LoadRun(spec={**spec, "concurrency": level, "duration": length}, records=records, window=span,
                  selfcheck={"mode": "closed", "total": total, "workers": []}, server_metrics={},
                  stopped_by="duration")
    return Result(label=label, run=run, summary=summary, slo=slo, evaluation=evaluation, client_bound=bound,
                  client_check=check)


def _limits(slo: SloSpec | None, before: list[RequestRecord],
            tolerance: float) -> tuple[Literal["slo", "pre_spike"], dict[str, float], str]:
    """What recovery is judged against: the SLO's TTFT/e2e percentile limits when the base load met
    them, else the pre-spike p95 × tolerance; and the words for it."""
    from pytest_inferaccept.stats.percentiles import PERCENTILE_LEVELS

    given = {f"{lim.metric}_{lim.stat}": lim.limit for lim in (slo.latency if slo is not None else ())
             if lim.metric in METRICS and lim.stat in PERCENTILE_LEVELS}
    missed = []
    for key, limit in given.items():
        metric, stat = key.split("_", 1)
        value = _stat(before, metric, PERCENTILE_LEVELS[stat])
        if value is None or value > limit:
            missed.append(f"{key} {_secs(value)} > {ms(limit)}")
    if given and not missed:
        return "slo", given, "the SLO: " + ", ".join(f"{k} ≤ {ms(v)}" for k, v in given.items())
    own = {f"{m}_p95": v * tolerance for m in METRICS
           if (v := _stat(before, m, 0.95)) is not None and math.isfinite(v)}
    why = ("the SLO has no percentile limit on TTFT or end-to-end latency" if slo is not None and not given
           else "no SLO" if not given
           else f"the SLO was already missed before the spike ({'; '.join(missed)})")
    listed = ", ".join(f"{k} ≤ {ms(v)}" for k, v in own.items())
    text = (f"the pre-spike p95 × {tolerance:g} ({why}): {listed}" if own
            else f"nothing to judge recovery against: {why}, and no answer before the spike")
    return "pre_spike", own, text


def _secs(value: float | None) -> str:
    return "n/a" if value is None else "∞ (failed requests)" if math.isinf(value) else ms(value)


def _within(records: Sequence[RequestRecord],
            limits: dict[str, float]) -> tuple[bool, dict[str, float | None]]:
    """Whether every limit holds over these requests (none sent: not within), and each figure."""
    from pytest_inferaccept.stats.percentiles import PERCENTILE_LEVELS

    figures: dict[str, float | None] = {}
    ok = bool(records)
    for key, limit in limits.items():
        metric, stat = key.split("_", 1)
        value = _stat(records, metric, PERCENTILE_LEVELS[stat])
        figures[key] = value
        ok = ok and value is not None and value <= limit
    return ok, figures


def _windows(records: list[RequestRecord], *, end_of_spike: float, end: float, width: float,
             limits: dict[str, float]) -> tuple[list[SpikeWindow], float | None]:
    """The timeline in windows aligned on the spike's end, and the recovery time (None: never back)."""
    from pytest_inferaccept.stats.percentiles import PERCENTILE_LEVELS

    first = math.floor((min((r.send for r in records), default=0.0) - end_of_spike) / width)
    slots: dict[int, list[RequestRecord]] = {}
    for r in records:
        slots.setdefault(int((r.send - end_of_spike) // width), []).append(r)
    # Whole windows only: a last sliver after the loads stopped sending holds few requests or none.
    last = math.floor((end - end_of_spike) / width + 1e-6) - 1
    # The ttft/e2e a window shows is the one its recovery limit reads (p95 without an SLO percentile).
    shown = {m: next((k for k in limits if k.startswith(f"{m}_")), f"{m}_p95") for m in METRICS}
    out: list[SpikeWindow] = []
    good_from: int | None = None
    for k in range(int(first), max(last, 0) + 1):
        members = slots.get(k, [])
        values = {m: _stat(members, m, PERCENTILE_LEVELS[shown[m].split("_", 1)[1]]) for m in METRICS}
        within: bool | None = None
        if k >= 0:
            within = _within(members, limits)[0] if limits else None
            # the run of windows within the limits that lasts to the end starts here
            good_from = (k if good_from is None else good_from) if within else None
        out.append(SpikeWindow(start_s=round(end_of_spike + k * width, 3), requests=len(members),
                               failed=sum(1 for r in members if not r.ok),
                               ttft=_finite(values["ttft"]), e2e=_finite(values["e2e"]), within=within))
    return out, None if good_from is None else good_from * width


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 6)


def _judge(runner: CapacityRunner, sampler: Sampler, base_result: LoadResult,
           extra_result: LoadResult | None, *, mono_t0: float, base: int, peak: int, hold: float,
           params: CapacityParams, recover_within: float, max_failures: float, tolerance: float,
           window: float | None) -> CapacityResult:
    from pytest_inferaccept.stats.percentiles import proportion_interval

    slo = runner.slo
    runs = [base_result] + ([extra_result] if extra_result is not None else [])
    bound = [f"{r.label}: {why}" for r in runs for why in r.client_bound]
    # Every measured request on one clock, in seconds from the base load's first send.
    start_perf = _t0(base_result) + min((r.send for r in base_result.records), default=0.0)
    records: list[RequestRecord] = []
    for result in runs:
        by = _t0(result) - start_perf
        records += [_shifted(r, by) for r in result.records if not r.warmup and not r.harness_error]
    records.sort(key=lambda r: r.send)
    extra_sends = [r.send + _t0(extra_result) - start_perf for r in extra_result.records
                   if not r.warmup] if extra_result is not None else []
    end = float(base_result.run.spec.get("duration") or 0.0)
    if not extra_sends:
        why = f"the base load ended before the spike began ({base_result.run.stopped_by})"
        return conclude(kind="spike", label=runner.label, steps=[], params=params,
                        headline=f"no spike: {why}", slo=slo, judged=[("invalid", why)])
    spike_start = min(extra_sends)
    spike_end = spike_start + hold
    phases: dict[Phase, tuple[float, float, int]] = {
        "before": (0.0, spike_start, base), "during": (spike_start, spike_end, peak),
        "after": (spike_end, end, base)}
    members: dict[Phase, list[RequestRecord]] = {
        p: [r for r in records if lo <= r.send < hi or (p == "after" and r.send >= hi)]
        for p, (lo, hi, _) in phases.items()}
    sampler_at = start_perf + mono_t0 - sampler.t0  # the timeline's 0 on the sampler's clock
    rows: list[SpikeStep] = []
    for phase, (lo, hi, level) in phases.items():
        mine = members[phase]
        span = (lo, max(hi, max((r.end for r in mine), default=hi)))
        result = _phase_result(runner, f"{runner.label}[{phase}]", mine, span, level, base_result.run.spec,
                               bound if phase == "during" else [f"{base_result.label}: {b}"
                                                                for b in base_result.client_bound],
                               base_result.client_check)
        row = step_row(level, result, sampler.peaks(sampler_at + lo, sampler_at + hi), into=SpikeStep)
        row.phase, row.start_s, row.end_s = phase, round(lo, 3), round(hi, 3)
        row.rejected_clean = sum(1 for r in mine if _is_clean(r))
        row.rejected_bare = sum(1 for r in mine if _is_bare(r))
        row.timeouts = sum(1 for r in mine if r.error in GAVE_UP)
        rows.append(row)
    if runner.settings.load.client_check == "warn":
        bound = []  # judged anyway; each row keeps them as warnings
    during, after = members["during"], members["after"]
    clean_during = sum(1 for r in during if _is_clean(r))
    broken = [r for r in during if not r.ok and not _is_clean(r)]
    counted = len(during) - clean_during
    share = len(broken) / counted if counted else None
    low = proportion_interval(len(broken), counted)[0] if counted else None
    reference, limits, reference_text = _limits(slo, members["before"], tolerance)
    width = window or _auto_width(members["before"], spike_start, params.after_s or 0.0)
    params.window_s = width
    windows, recovery_s = _windows(records, end_of_spike=spike_end, end=end, width=width, limits=limits)
    queue = sampler.series.get("waiting")
    waiting_before = queue.peak(0.0, sampler_at + spike_start) if queue else None
    waiting_during = queue.peak(sampler_at + spike_start, sampler_at + spike_end) if queue else None
    spiked = _within(during, limits) if limits else (True, {})
    answered_before = sum(1 for r in members["before"] if r.ok)
    answered_during = sum(1 for r in during if r.ok)
    failure_kinds = Counter(_kind(r) for r in during + after if not r.ok and not _is_clean(r))
    figures = SpikeFigures(
        spike_start_s=round(spike_start, 3), spike_end_s=round(spike_end, 3), end_s=round(end, 3),
        requests_during=len(during), failed_during=len(broken), failure_share=share, failure_share_low=low,
        failures_after=sum(1 for r in after if not r.ok and not _is_clean(r)),
        failure_kinds=dict(failure_kinds.most_common()),
        rejected_clean=sum(1 for r in during + after if _is_clean(r)),
        rejected_bare=sum(1 for r in during + after if _is_bare(r)),
        timeouts=sum(1 for r in during + after if r.error in GAVE_UP),
        answered_rate_before=answered_before / spike_start if spike_start > 0 else None,
        answered_rate_during=answered_during / hold,
        waiting_before=waiting_before, waiting_during=waiting_during,
        queue_source=queue.source if queue else None, handling="absorbed", reference=reference,
        limits={k: round(v, 6) for k, v in limits.items()}, reference_text=reference_text,
        recovery_s=recovery_s, recovered=recovery_s is not None, windows=windows)
    judged = _verdict(figures, spiked=spiked, max_failures=max_failures, recover_within=recover_within,
                      after=end - spike_end, width=width, bound=bool(bound))
    failing = next((r.failure_text for r in rows if r.failing), "")
    return conclude(
        kind="spike", label=runner.label, steps=rows, params=params,
        headline=_headline(figures, rows, base=base, peak=peak, hold=hold, recover_within=recover_within),
        slo=slo, failing=failing, bound=f"the client was the bottleneck: {'; '.join(bound)}" if bound else "",
        judged=judged, failures_when_bound=True, findings=_findings(figures),
        series=_series(windows, width), telemetry=telemetry_of(sampler),
        notes=_notes(figures, sampler))


def _kind(r: RequestRecord) -> str:
    if r.status is not None and r.status >= 400:
        return f"HTTP {r.status}" + (" without Retry-After" if r.status in SHED_STATUSES else "")
    return str(r.error)


def _auto_width(before: list[RequestRecord], spike_start: float, after: float) -> float:
    """About WINDOW_ANSWERS answers at the base rate, in half seconds; at least 0.5 s, at most a quarter of
    the after phase."""
    answered = sum(1 for r in before if r.ok)
    rate = answered / spike_start if spike_start > 0 and answered else None
    wanted = WINDOW_ANSWERS / rate if rate else after / 4
    return max(0.5, min(math.ceil(wanted * 2) / 2, max(0.5, math.floor(after / 4 * 2) / 2)))


def _verdict(f: SpikeFigures, *, spiked: tuple[bool, dict[str, float | None]], max_failures: float,
             recover_within: float, after: float, width: float, bound: bool) -> list[Judgement]:
    """The spike's findings, and how the server took it (set on `f`)."""
    judged: list[Judgement] = []
    kinds = ", ".join(f"{k} ×{n}" for k, n in f.failure_kinds.items())
    if f.failure_share is not None and f.failure_share > max_failures:
        words = (f"{f.failed_during} of the spike's requests failed ({f.failure_share:.1%} of those not "
                 f"rejected cleanly; {kinds}), above the {max_failures:.0%} allowed")
        conclusive = f.failure_share_low is not None and f.failure_share_low > max_failures
        judged.append(("fail", words) if conclusive else
                      ("invalid", f"{words}, but too few requests to be sure (95% interval from "
                                  f"{(f.failure_share_low or 0):.1%})"))
    latency_beyond = not spiked[0] and bool(f.limits)
    grew = f.waiting_during is not None and f.waiting_during > (f.waiting_before or 0.0)
    if judged and judged[0][0] == "fail":
        f.handling = "failed"
        f.handling_text = "failed requests during the spike"
    elif f.rejected_clean:
        f.handling = "rejected_cleanly"
        f.handling_text = (f"rejected cleanly: {f.rejected_clean} answers 429/503 with Retry-After (the "
                           "closed loop sends again at once, so the count is the client's pace), while "
                           f"answering {_rate(f.answered_rate_during)} during the spike against "
                           f"{_rate(f.answered_rate_before)} before it")
    elif latency_beyond and grew:
        f.handling = "queued"
        beyond = ", ".join(f"{k} {_secs(v)}" for k, v in spiked[1].items()
                           if v is None or v > f.limits.get(k, math.inf))
        f.handling_text = (f"let its queue grow instead of shedding: {f.queue_source} rose to "
                           f"{f.waiting_during:g} during the spike (peak {f.waiting_before or 0:g} before), "
                           f"no request was rejected, and latency during the spike was beyond "
                           f"{'the SLO' if f.reference == 'slo' else 'the pre-spike p95 × tolerance'} "
                           f"({beyond})")
        if not bound:
            judged.append(("fail", f.handling_text))
    elif latency_beyond:
        f.handling = "slowed"
        f.handling_text = ("slowed past the limits during the spike without rejecting anything" +
                           ("; whether it queued is not known (no queue gauge on /metrics)"
                            if f.queue_source is None else ""))
    else:
        f.handling_text = "absorbed the spike within the limits, rejecting nothing"
    if bound or not f.limits:
        if not f.limits:
            judged.append(("invalid", f"recovery not judged: {f.reference_text}"))
        return judged
    if f.recovery_s is None:
        judged.append(("fail", f"latency was not back within {f.reference_text} by the end of the after "
                               f"phase, {after:.1f} s after the spike (recovery must take at most "
                               f"{recover_within:g} s)"))
    elif f.recovery_s > recover_within:
        judged.append(("fail", f"latency took {f.recovery_s:.1f} s after the spike to come back within "
                               f"{f.reference_text} (to {width:g} s windows), above the {recover_within:g} s "
                               "allowed"))
    return judged


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} answers/s"


def _headline(f: SpikeFigures, rows: list[SpikeStep], *, base: int, peak: int, hold: float,
              recover_within: float) -> str:
    """'c=2 → 8 for 10 s: 0 of 480 requests failed during the spike; TTFT p99 ...; back within ...'."""
    p99 = {r.phase: r for r in rows}

    def trio(metric: str) -> str:
        return " / ".join(_secs(getattr(p99[p], f"{metric}_p99")) if p in p99 else "n/a"
                          for p in ("before", "during", "after"))

    clean = p99["during"].rejected_clean if "during" in p99 else 0
    failures = (f"{f.failed_during} of {f.requests_during - clean} requests failed during the spike"
                + (f", {clean} more were rejected cleanly" if clean else ""))
    back = ("never back within the limits in the after phase" if f.recovery_s is None and f.limits
            else "recovery not judged" if not f.limits
            else f"back within the limits {f.recovery_s:.1f} s after the spike "
                 f"(at most {recover_within:g} s)")
    queue = (f"; queue peak {f.waiting_during:g} during against {f.waiting_before or 0:g} before"
             if f.waiting_during is not None else "")
    return (f"c={base} → {peak} for {hold:g} s: {failures}; TTFT p99 {trio('ttft')}, e2e p99 {trio('e2e')} "
            f"(before / during / after, answered); {back}{queue}; {f.handling_text}")


def _findings(figures: SpikeFigures) -> CapacityFindings:
    return CapacityFindings(spike=figures, unit="concurrency")


def _series(windows: list[SpikeWindow], width: float) -> CapacitySeries:
    """Each window's TTFT and e2e (at the statistic recovery reads), answers and failures, by its middle."""
    def mid(w: SpikeWindow) -> float:
        return round(w.start_s + width / 2, 3)

    ttft: list[Point] = [(mid(w), w.ttft) for w in windows if w.ttft is not None]
    e2e: list[Point] = [(mid(w), w.e2e) for w in windows if w.e2e is not None]
    ok: list[Point] = [(mid(w), w.requests - w.failed) for w in windows]
    errors: list[Point] = [(mid(w), w.failed) for w in windows if w.failed]
    return CapacitySeries(window_s=width, ttft=ttft, e2e=e2e, ok=ok, errors=errors)


def _notes(f: SpikeFigures, sampler: Sampler) -> list[str]:
    notes = [f"recovery is judged against {f.reference_text}"]
    if f.queue_source is None:
        notes.append("queue not measured: no waiting-requests gauge on /metrics")
    notes += [f"not measured: {a}" for a in sampler.absent() if "waiting" in a or "/metrics" in a]
    return notes

