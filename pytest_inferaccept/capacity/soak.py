"""The soak: one long closed-loop run, its latency drift, memory growth and error onset in production terms.

The checks themselves (rates, projections to the horizon, limits) are in soak_judge.py; this
module runs the load, gathers the series and words the outcome (docs/capacity.md). Nothing here
imports pytest.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capacity import soak_judge as judge
from pytest_inferaccept.capacity.analysis import knee_caveat
from pytest_inferaccept.capacity.scenarios import (
    CapacityResult,
    Judgement,
    Measure,
    Say,
    conclude,
    not_measured,
    quiet,
    step_row,
    telemetry_of,
)
from pytest_inferaccept.capacity.soak_slo import Window, judge_errors, judge_slo, judge_windows
from pytest_inferaccept.model import (
    AnySoakCheck,
    CapacityExplanation,
    CapacityFindings,
    CapacityKnee,
    CapacityParams,
    CapacitySeries,
    DriftCheck,
    ErrorsCheck,
    ExplanationEvidence,
    Point,
    SloCheck,
    SloWindowsCheck,
)
from pytest_inferaccept.stats.projection import horizon_view
from pytest_inferaccept.stats.trend import MIN_POINTS

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.stats.projection import Horizon as HorizonSpec

EXPLAINED_AS = {
    "ttft_drift": "latency_drift",
    "ttft_tail_drift": "latency_drift",
    "e2e_drift": "latency_drift",
    "e2e_tail_drift": "latency_drift",
    "memory_growth": "memory_growing",
    "gpu_memory_growth": "memory_growing",
    "errors": "errors_begin",
}
"""The explanation a failing check gives, by check (the SLO's own checks say theirs in the reasons)."""

DRIFTS = ("ttft_drift", "ttft_tail_drift", "e2e_drift", "e2e_tail_drift", "memory_growth",
          "gpu_memory_growth")
"""The checks that read a series over time: with none of them judged, the soak was too short."""


def soak(
    measure: Measure,
    sampler: Sampler,
    *,
    concurrency: int,
    duration: float,
    slo: SloSpec | None,
    drift_tolerance: float,
    memory_tolerance: float,
    alpha: float,
    label: str,
    workload: Any = None,
    basis: str,
    knee: CapacityKnee | Mapping[str, Any] | None = None,
    horizon: HorizonSpec | None = None,
    memory_limit: float | None = None,
    capacity: Callable[[int], tuple[float, str] | None] | None = None,
    say: Say = quiet,
) -> CapacityResult:
    """A long closed-loop run: latency drift, memory growth and error onset, in production terms.

    Each drift is a rate (per request, per hour at the soak's traffic) with an interval that
    allows for correlated windows, projected over `horizon` (default 24 h of this traffic) and
    judged against its limit: for memory, a share of the memory the server has (`memory_limit`
    bytes when declared, else `capacity(pid)` of a launched server: its cgroup's limit or the
    host's RAM; GPU memory against the GPU's own); for latency, the SLO's limit on it. Without
    a limit the tolerances say how much relative growth within the horizon is a finding. Growth
    that levels off within the soak is a filling cache, not a leak (docs/capacity.md).

    `knee` is the ladder's knee (its `findings.knee`) when `concurrency` was derived from it: an
    unconfirmed one is said beside the basis, in the notes and in the headline.
    """
    from pytest_inferaccept.capacity.sampler import memory_capacity
    from pytest_inferaccept.stats.projection import BUDGET_SHARE, duration_words
    from pytest_inferaccept.stats.projection import Horizon as HorizonSpec

    chosen_horizon = horizon or HorizonSpec(seconds=24 * 3600.0)
    with sampler:
        t0 = sampler.now()
        result = measure(
            "soak", concurrency=concurrency, duration=duration, warmup=concurrency, workload=workload
        )
        t1 = sampler.now()
    # A request the client failed in its own code says nothing of the server (as in every summary).
    measured = sorted((r for r in result.records if not r.warmup and not r.harness_error),
                      key=lambda r: r.send)
    start = measured[0].send if measured else 0.0
    window = max(1.0, duration / 20)
    ok = [r for r in measured if r.ok]
    checks: dict[str, AnySoakCheck] = {}
    series = CapacitySeries(window_s=window)
    traffic = judge.Traffic(request_rate=result.summary.request_rate_per_s, duration_s=duration,
                            horizon=chosen_horizon, alpha=alpha)
    # The SLO itself, over the whole soak and window by window, before how it drifts.
    whole = judge_slo(result.evaluation)
    if whole is not None:
        checks["slo"] = whole
    by_window = judge_windows(_windows(measured, start, window), slo, width_s=window)
    if by_window is not None:
        checks["slo_windows"] = by_window
    for metric in ("ttft", "e2e"):
        points = [(r.send - start, getattr(r, metric)) for r in ok if getattr(r, metric) is not None]
        what = "TTFT" if metric == "ttft" else "end-to-end latency"
        slo_limits = [lim for lim in (slo.latency if slo is not None else ()) if lim.metric == metric]
        limits = [(lim.key, lim.limit, value) for lim in slo_limits
                  for value in [result.stat(metric, lim.stat, successful=True)] if value is not None]
        checks[f"{metric}_drift"] = judge.judge_latency(
            points, what=what, metric=metric, window_s=window, traffic=traffic, limits=limits,
            tolerance=drift_tolerance)
        setattr(series, metric, [(round(t, 3), round(v, 6)) for t, v in _window_medians(points, window)])
        checks[f"{metric}_tail_drift"] = _tail(points, what=what, metric=metric, window_s=window,
                                               traffic=traffic, limits=limits, tolerance=drift_tolerance,
                                               duration=duration, series=series)
    memory = sampler.series.get("memory_bytes") or sampler.series.get("launched_rss_bytes")
    if memory is not None and len(memory.points) >= 2:
        pts = [(t - t0, v) for t, v in memory.points if t0 <= t <= t1 + 1]
        # Requests the server had finished at each sample: growth per request is fitted against
        # them, not per second divided by an average rate (which a rate that varies would skew).
        # The engine's clock starts when the measure does, about t0: an offset only shifts counts.
        ends = sorted(r.end for r in result.records)
        first = min((r.send for r in result.records), default=0.0)
        finished = [bisect.bisect_right(ends, first + t) for t, _ in pts]
        found = (memory_limit, "--memory-limit") if memory_limit else (
            (capacity or memory_capacity)(sampler.pid) if sampler.pid is not None else None)
        checks["memory_growth"] = judge.judge_memory(
            pts, what=f"memory ({memory.source})", window_s=window, traffic=traffic,
            capacity=judge.Capacity(total=found[0], share=BUDGET_SHARE, source=found[1]) if found else None,
            tolerance=memory_tolerance, source=memory.source, finished=finished,
            in_flight=concurrency)
        series.memory_bytes = [(round(t, 3), v) for t, v in pts]
    else:
        checks["memory_growth"] = DriftCheck(
            status="not_measured",
            text="memory growth not measured: no memory gauge on /metrics and the "
            "server was not launched by the plugin",
        )
    gpu = judge.gpu_memory_check(sampler, t0, t1, window_s=window, traffic=traffic,
                                 tolerance=memory_tolerance)
    if gpu is not None:
        checks["gpu_memory_growth"] = gpu
    failed = [r for r in measured if not r.ok]
    first = f"{failed[0].error}: {failed[0].error_detail[:120]}" if failed else ""
    checks["errors"] = judge_errors([r.send - start for r in failed], len(measured),
                                    slo_limit=slo.error_rate if slo is not None else None, first=first)
    series.errors = [(round(t, 3), n) for t, n in _window_counts([r.send - start for r in failed], window)]
    params = CapacityParams(
        concurrency=concurrency, duration_s=duration, basis=basis, window_s=window,
        drift_tolerance=drift_tolerance, memory_tolerance=memory_tolerance, alpha=alpha,
        horizon=horizon_view(chosen_horizon), horizon_s=traffic.horizon_s,
        horizon_words=traffic.horizon_words(), request_rate_per_s=traffic.request_rate,
        memory_limit=memory_limit, budget_share=BUDGET_SHARE)
    row = step_row(concurrency, result, sampler.peaks(t0, t1))
    # How long a soak would have found a leak that uses the headroom within half the horizon.
    plans = [(c.plan.soak_needed_s, name) for name, c in checks.items()
             if isinstance(c, DriftCheck) and c.plan is not None and c.status != "fail"]
    needed, which = max(plans) if plans else (None, None)
    findings = CapacityFindings(checks=checks, soak_needed_s=needed, soak_needed_for=which,
                                soak_needed_text=None)
    notes: list[str] = []
    if needed is not None and duration < needed:
        growth = "memory growth that would use its budget" if "memory" in str(which) else (
            "a latency drift that would cross the SLO")
        plan = (f"a soak of at least {duration_words(needed)} would find, 95% of the time, {growth} within "
                f"half of {traffic.horizon_words()}; this one ran {duration_words(duration)}")
        findings.soak_needed_text = plan
        notes.append(plan)
        say(f"inferaccept: soak: {plan}")
    caveat = knee_caveat(knee)
    if caveat:
        params.basis_caveat = caveat
        notes.append(f"the concurrency comes from {caveat}")
    notes += not_measured(sampler)
    bound = row.client_bound
    failing = {name: check for name, check in checks.items() if check.status == "fail"}
    judged = _judged(checks, bound=bool(bound))
    where = f"{basis}; {caveat}" if caveat else basis
    # A failing check in full (its projection and time to the limit); the others in short.
    headline = f"{duration:g} s at c={concurrency} ({where}): " + "; ".join(
        c.text if c.status == "fail" else c.answer or c.text for c in checks.values()
    )
    return conclude(
        kind="soak",
        label=label,
        steps=[row],
        params=params,
        headline=headline,
        slo=slo,
        bound=f"the client was the bottleneck: {'; '.join(bound)}" if bound else "",
        judged=judged,
        failures_when_bound=True,
        findings=findings,
        explanations=[CapacityExplanation(kind=EXPLAINED_AS[name], level=concurrency, text=check.text,
                                          evidence=ExplanationEvidence(check=name))
                      for name, check in failing.items() if name in EXPLAINED_AS],
        series=series,
        telemetry=telemetry_of(sampler),
        notes=notes,
    )


def _judged(checks: Mapping[str, AnySoakCheck], *, bound: bool) -> list[Judgement]:
    """The soak's own findings: each failing check, and what leaves it undecided.

    The SLO's error_rate is judged in the SLO's own check, so the error check adds a finding only
    for the soak's default limit. While the client limited the run, an SLO found missed by latency
    alone says nothing of the server: only a miss that failed requests decide is kept.
    """
    out: list[Judgement] = []
    for check in checks.values():
        if check.status != "fail" or (isinstance(check, ErrorsCheck) and check.decides):
            continue
        if isinstance(check, (SloCheck, SloWindowsCheck)) and bound and not check.by_failures:
            continue
        out.append(("fail", check.text))
    whole = checks.get("slo")
    if whole is not None and whole.status == "not_enough_data":
        out.append(("invalid", whole.text))
    if not any(c.status == "fail" for c in checks.values()) and all(
            checks[k].status in ("not_enough_data", "not_measured") for k in DRIFTS if k in checks):
        out.append(("invalid", "the soak was too short to judge drift (fewer than 8 windows with answers)"))
    return out


def _tail(points: list[tuple[float, float]], *, what: str, metric: str, window_s: float,
          traffic: judge.Traffic, limits: list[tuple[str, float, float]], tolerance: float, duration: float,
          series: CapacitySeries) -> DriftCheck:
    """The drift of the latency's tail: each window's p95 (or p90) over its median (soak_judge.judge_tail),
    projected against the SLO's tail limits (p90 and above) on the metric."""
    chosen = judge.tail_windows(len(points), duration, window_s)
    if chosen is None:
        return DriftCheck(status="not_enough_data", level=None,
                          text=f"{what} tail not judged: {len(points)} answers are too few for a tail per "
                               f"window (at least {judge.TAIL_LEAST} a window in {MIN_POINTS} windows)",
                          answer=f"{what} tail not judged (too few answers)")
    width, level, least = chosen
    tails = [(key, limit, value) for key, limit, value in limits
             if key.rsplit("_", 1)[-1] in ("p90", "p95", "p99", "p999")]
    tail: list[Point] = [(round(t, 3), round(v, 6))
                         for t, v in _window_medians(points, width, level=level, least=least)]
    setattr(series, f"{metric}_tail", tail)
    return judge.judge_tail(points, what=what, window_s=width, level=level, least=least, traffic=traffic,
                            limits=tails, tolerance=tolerance)


def _windows(measured: list[Any], start: float, width: float) -> list[Window]:
    """The soak's requests by window of `width` seconds from the first send, counted as the SLO counts."""
    from pytest_inferaccept.stats.summary import summarize

    groups: dict[int, list[Any]] = {}
    for r in measured:
        groups.setdefault(int((r.send - start) // width), []).append(r)
    out = []
    for k, records in sorted(groups.items()):
        s = summarize(records, (start + k * width, start + (k + 1) * width))
        out.append(Window(start_s=k * width, end_s=(k + 1) * width, values=s.samples.metrics,
                          measured=s.counts.measured, failed=s.counts.failed))
    return out


def _window_medians(points: list[tuple[float, float]], width: float, *, level: float = 0.5,
                    least: int = 1) -> list[tuple[float, float]]:
    from pytest_inferaccept.stats.trend import windows

    return windows(points, width, level=level, least=least)


def _window_counts(times: list[float], width: float) -> list[tuple[float, int]]:
    counts = Counter(int(t // width) for t in times)
    return [((k + 0.5) * width, n) for k, n in sorted(counts.items())]
