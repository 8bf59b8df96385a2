"""The capacity scenarios: ladder, open-loop sweep, soak, push to failure (concurrency and length).

Each scenario runs bounded load steps through a `measure` callable (the `loadgen` fixture's, so
every step uses the session's server, key, bounds and records file), samples telemetry beside
them, and returns a `CapacityResult`: a status, a one-sentence headline, the per-step table,
findings, explanations and series. Nothing here imports pytest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import TYPE_CHECKING, Any, Literal

from pytest_inferaccept.capacity.analysis import (
    breaker,
    explain,
    find_knee,
    knee_caveat,
    latency_of,
    max_slo_level,
)
from pytest_inferaccept.capacity.sampler import Sampler

if TYPE_CHECKING:
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.run.load import LoadResult
    from pytest_inferaccept.stats.projection import Horizon

Status = Literal["pass", "fail", "invalid"]
Measure = Callable[..., "LoadResult"]
"""measure(tag, **loadgen.run keyword arguments) -> LoadResult, not judged on its own."""
Alive = Callable[[], tuple[bool, str]]
"""Does the server still answer a small request? (ok, what was seen)."""

GRACEFUL_STATUSES = frozenset({429, 503})


@dataclass(kw_only=True)
class CapacityResult:
    """One scenario's outcome, as the results document and the report take it."""

    kind: Literal["ladder", "sweep", "soak", "push", "push_length", "recovery",
                  "length", "interference", "prefix", "multi_turn"]
    label: str
    status: Status
    headline: str
    findings: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    explanations: list[dict[str, Any]] = field(default_factory=list)
    series: dict[str, Any] = field(default_factory=dict)
    telemetry: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    """Why the status is fail or invalid, one sentence each."""
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The test's `capacity` entry in the results document."""
        return {
            "kind": self.kind,
            "label": self.label,
            "status": self.status,
            "headline": self.headline,
            "reasons": self.reasons,
            "findings": self.findings,
            "steps": self.steps,
            "explanations": self.explanations,
            "series": self.series,
            "telemetry": self.telemetry,
            "notes": self.notes,
            "params": self.params,
        }


def step_row(level: float, result: LoadResult, peaks: dict[str, float] | None = None, *,
             failing_above: float = 0.5) -> dict[str, Any]:
    """One step's figures: counts, latency percentiles, throughput, achieved load, SLO, telemetry peaks.

    `failures` says what failed, by kind, and `failing` whether the step failed as a whole: its
    failures other than load shedding (429/503) are conclusively more than `failing_above` of
    its requests, or every request failed (see capacity/failures.py). `failure_text` names them
    ("under concurrency 2, 38 of 40 answers were incomplete: no content, no finish_reason").
    """
    from pytest_inferaccept.capacity.failures import describe

    s = result.summary
    measured = [r for r in result.records if not r.warmup]
    failed = [r for r in measured if not r.ok]
    total = result.run.selfcheck.get("total") or {}
    row: dict[str, Any] = {
        "level": level,
        "label": result.label,
        "measured": s.counts.measured,
        "failed": s.counts.failed,
        "error_rate": result.error_rate,
        "throughput_tokens_per_s": s.throughput_tokens_per_s,
        "request_rate_per_s": s.request_rate_per_s,
        "achieved_concurrency": total.get("achieved_concurrency"),
        "asked_rate": total.get("asked_rate"),
        "achieved_rate": total.get("achieved_rate"),
        "slo_status": result.evaluation.status if result.evaluation is not None else None,
        "slo_failures": "; ".join(result.evaluation.messages("fail")) if result.evaluation else "",
        # --client-check warn: the step is judged anyway; the reasons stay as warnings.
        "client_bound": list(result.client_bound) if result.client_check != "warn" else [],
        "client_warnings": list(result.client_bound) if result.client_check == "warn" else [],
        "error_classes": dict(Counter(r.error for r in failed if r.error)),
        "error_statuses": {str(k): v for k, v in Counter(r.status for r in failed if r.status).items()},
        "stopped_by": result.run.stopped_by,
        "telemetry": dict(peaks or {}),
    }
    failures = describe(result.records, result.run.spec, failing_above=failing_above)
    row["failures"] = failures
    row["failing"] = failures["failing"]
    row["failure_text"] = failures["text"]
    # Latency over the answered requests (descriptive: the knee and the charts read it); the
    # failures are in `failed`, `failures` and `failing`, and the SLO judged every request.
    for metric in ("ttft", "e2e", "itl"):
        for stat in ("p50", "p95", "p99"):
            row[f"{metric}_{stat}"] = result.stat(metric, stat, successful=True)
    return row


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _statuses(row: dict[str, Any]) -> str:
    """' (HTTP 503 ×52)', ' (incomplete ×20)' for a step's failures by kind, or ''.

    An error answer is named by its status; a failure after a 200 (an incomplete answer, a
    stream cut) by its class, never as "HTTP 200".
    """
    kinds = (row.get("failures") or {}).get("kinds")
    if kinds is None:  # a row from before failures were described: statuses of error answers only
        statuses = row.get("error_statuses") or {}
        kinds = {f"HTTP {s}": n for s, n in sorted(statuses.items()) if int(s) >= 300}
    short: Counter[str] = Counter()
    for kind, n in kinds.items():
        short[kind.split(" (")[0]] += n
    return f" ({', '.join(f'{k} ×{n}' for k, n in short.most_common())})" if short else ""


def _level(unit: str, level: float) -> str:
    return f"{unit}={level:g}" if unit == "c" else f"{level:g} req/s"


def _climb(
    kind: Literal["ladder", "sweep"],
    label: str,
    levels: Sequence[float],
    run_step: Callable[[float], LoadResult],
    sampler: Sampler,
    *,
    slo: SloSpec | None,
    breaker_errors: float,
    breaker_latency_s: float,
    min_level: float | None,
    params: dict[str, Any],
    say: Callable[[str], None],
) -> CapacityResult:
    unit = "c" if kind == "ladder" else "rate"
    rows: list[dict[str, Any]] = []
    stopped = ""
    with sampler:
        for level in levels:
            t0 = sampler.now()
            measured = run_step(level)
            row = step_row(level, measured, sampler.peaks(t0, sampler.now()))
            row["window_s"] = [round(t0, 3), round(sampler.now(), 3)]
            rows.append(row)
            say(
                f"inferaccept: {kind} {_level(unit, level)}: {row['measured']} measured, "
                f"{row['failed']} failed, "
                f"TTFT p95 {_ms(row['ttft_p95'])}, {row['throughput_tokens_per_s'] or 0:.1f} tokens/s"
                + (f", SLO {row['slo_status']}" if row["slo_status"] else "")
            )
            why = breaker(row, max_error_rate=breaker_errors, max_latency_s=breaker_latency_s)
            if why:
                stopped = f"stopped climbing after {_level(unit, level)}: {why} (circuit breaker)"
                break
            if row["client_bound"]:
                stopped = f"stopped climbing at {_level(unit, level)}: the client was the bottleneck"
                break
    # A level whose answers mostly failed (or all did) is a finding, whatever the knee says.
    bad = next((r for r in rows if r.get("failing")), None)
    knee = find_knee([r for r in rows if not r.get("failing")], unit=unit, closed_loop=kind == "ladder")
    best, why_best = max_slo_level(rows, unit=unit) if slo is not None else (None, "no SLO given")
    result = CapacityResult(
        kind=kind,
        label=label,
        status="pass",
        headline="",
        steps=rows,
        params=params,
        telemetry=sampler.to_json(),
    )
    result.findings = {
        "knee": knee.to_json(),
        "max_slo_level": best,
        "max_slo_reason": why_best,
        "stopped_early": stopped or None,
        "unit": "concurrency" if unit == "c" else "requests/s",
    }
    result.explanations = explain(rows, knee.level, unit=unit)
    if stopped:
        result.notes.append(stopped)
    result.notes += [f"not measured: {a}" for a in sampler.absent()]
    # The verdict: a first level the client could not drive says nothing about the server.
    if rows and rows[0]["client_bound"]:
        result.status = "invalid"
        result.reasons.append(
            f"the client was the bottleneck already at {_level(unit, rows[0]['level'])}: "
            + "; ".join(rows[0]["client_bound"])
        )
    elif slo is not None and best is None:
        first = rows[0] if rows else None
        if first is not None and first["slo_status"] == "fail":
            result.status = "fail"
            result.reasons.append(
                f"does not meet the SLOs even at {_level(unit, first['level'])}: {first['slo_failures']}"
            )
        else:
            result.status = "invalid"
            result.reasons.append(f"no level could be judged against the SLOs: {why_best}")
    elif min_level is not None and slo is not None and best is not None and best < min_level:
        result.status = "fail"
        result.reasons.append(
            f"meets the SLOs only up to {_level(unit, best)}; required: "
            f"{_level(unit, min_level)} ({why_best})"
        )
    if knee.level is not None and not knee.confirmed:
        result.notes.append(f"knee {knee.certainty}")
    result.headline = _headline(rows, knee.level, best, why_best, slo is not None, unit,
                                confirmed=knee.confirmed)
    if bad is not None:  # NO-GO whatever else holds: the server broke, the client did not
        result.status = "fail"
        result.reasons.insert(0, bad["failure_text"])
        result.headline = f"{bad['failure_text']}; {result.headline}"
    return result


def _headline(
    rows: list[dict[str, Any]],
    knee: float | None,
    best: float | None,
    why_best: str,
    judged: bool,
    unit: str,
    *,
    confirmed: bool = True,
) -> str:
    parts = []
    if judged:
        parts.append(
            f"meets the SLOs up to {_level(unit, best)}"
            if best is not None
            else "meets the SLOs at no level measured"
        )
    beyond = sum(1 for r in rows if knee is not None and r["level"] > knee)
    parts.append(
        f"knee at {_level(unit, knee)}"
        + ("" if confirmed else f" (not confirmed: only {beyond} level{'' if beyond == 1 else 's'} above it)")
        if knee is not None
        else f"no knee up to {_level(unit, rows[-1]['level'])}"
        if rows
        else "no levels measured"
    )
    above = next((r for r in rows if best is not None and r["level"] > best), None) if judged else None
    if above is not None:
        parts.append(
            f"at {_level(unit, above['level'])} TTFT p95 is {_ms(above['ttft_p95'])}"
            + (f" and {above['error_rate']:.0%} fail" if above.get("error_rate") else "")
        )
    elif knee is not None:
        over = next((r for r in rows if r["level"] > knee), None)
        if over is not None:
            parts.append(f"at {_level(unit, over['level'])} latency p95 is {_ms(latency_of(over))}")
    return "; ".join(parts)


def ladder(
    measure: Measure,
    sampler: Sampler,
    *,
    levels: Sequence[int],
    requests: int,
    duration: float,
    settle: int,
    slo: SloSpec | None,
    breaker_errors: float,
    breaker_latency_s: float,
    min_level: int | None = None,
    label: str,
    workload: Any = None,
    say: Callable[[str], None] = lambda _: None,
) -> CapacityResult:
    """Closed loop at each concurrency: `settle` rounds of warm-up per slot, then a measured window."""

    def step(c: float) -> LoadResult:
        n = int(c)
        return measure(
            f"c={n}",
            concurrency=n,
            requests=max(requests, 2 * n),
            duration=duration,
            warmup=n * settle,
            workload=workload,
        )

    params = {
        "levels": list(levels),
        "requests_per_level": requests,
        "max_seconds_per_level": duration,
        "settle_rounds": settle,
        "breaker_error_rate": breaker_errors,
        "breaker_latency_s": breaker_latency_s,
        "min_level": min_level,
    }
    return _climb(
        "ladder",
        label,
        levels,
        step,
        sampler,
        slo=slo,
        breaker_errors=breaker_errors,
        breaker_latency_s=breaker_latency_s,
        min_level=min_level,
        params=params,
        say=say,
    )


def sweep(
    measure: Measure,
    sampler: Sampler,
    *,
    rates: Sequence[float],
    requests: int,
    duration: float,
    slo: SloSpec | None,
    breaker_errors: float,
    breaker_latency_s: float,
    min_rate: float | None = None,
    label: str,
    workload: Any = None,
    seed: int = 0,
    knee: Mapping[str, Any] | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> CapacityResult:
    """Open loop (Poisson arrivals) at each rate, each step bounded by `requests` and `duration`.

    `knee` is the ladder's knee (its `findings["knee"]`) when the rates were chosen around it: an
    unconfirmed one is said in the notes and the headline, since the rates inherit its doubt.
    """

    def step(rate: float) -> LoadResult:
        return measure(
            f"rate={rate:g}",
            rate=rate,
            requests=max(requests, 1),
            duration=duration,
            warmup=2,
            workload=workload,
            seed=seed,
        )

    params = {
        "rates": list(rates),
        "requests_per_step": requests,
        "max_seconds_per_step": duration,
        "breaker_error_rate": breaker_errors,
        "breaker_latency_s": breaker_latency_s,
        "min_rate": min_rate,
    }
    result = _climb(
        "sweep",
        label,
        rates,
        step,
        sampler,
        slo=slo,
        breaker_errors=breaker_errors,
        breaker_latency_s=breaker_latency_s,
        min_level=min_rate,
        params=params,
        say=say,
    )
    for row in result.steps:
        asked, got = row.get("asked_rate"), row.get("achieved_rate")
        row["achieved_fraction"] = got / asked if asked and got is not None else None
    caveat = knee_caveat(knee)
    if caveat:
        result.params["basis_caveat"] = caveat
        result.notes.insert(0, f"rates chosen around {caveat}")
        result.headline += f"; rates chosen around {caveat}"
    return result


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
    knee: Mapping[str, Any] | None = None,
    horizon: Horizon | None = None,
    memory_limit: float | None = None,
    capacity: Callable[[int], tuple[float, str] | None] | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> CapacityResult:
    """A long closed-loop run: latency drift, memory growth and error onset, in production terms.

    Each drift is a rate (per request, per hour at the soak's traffic) with an interval that
    allows for correlated windows, projected over `horizon` (default 24 h of this traffic) and
    judged against its limit: for memory, a share of the memory the server has (`memory_limit`
    bytes when declared, else `capacity(pid)` of a launched server: its cgroup's limit or the
    host's RAM; GPU memory against the GPU's own); for latency, the SLO's limit on it. Without
    a limit the tolerances say how much relative growth within the horizon is a finding. Growth
    that levels off within the soak is a filling cache, not a leak (docs/capacity.md).

    `knee` is the ladder's knee (its `findings["knee"]`) when `concurrency` was derived from it: an
    unconfirmed one is said beside the basis, in the notes and in the headline.
    """
    from pytest_inferaccept.capacity import soak_judge as judge
    from pytest_inferaccept.capacity.sampler import memory_capacity
    from pytest_inferaccept.stats.projection import BUDGET_SHARE, Horizon, duration_words

    chosen_horizon = horizon or Horizon(seconds=24 * 3600.0)
    with sampler:
        t0 = sampler.now()
        result = measure(
            "soak", concurrency=concurrency, duration=duration, warmup=concurrency, workload=workload
        )
        t1 = sampler.now()
    measured = sorted((r for r in result.records if not r.warmup), key=lambda r: r.send)
    start = measured[0].send if measured else 0.0
    window = max(1.0, duration / 20)
    ok = [r for r in measured if r.ok]
    checks: dict[str, dict[str, Any]] = {}
    series: dict[str, Any] = {"window_s": window}
    traffic = judge.Traffic(request_rate=result.summary.request_rate_per_s, duration_s=duration,
                            horizon=chosen_horizon, alpha=alpha)
    for metric in ("ttft", "e2e"):
        points = [(r.send - start, getattr(r, metric)) for r in ok if getattr(r, metric) is not None]
        limits = [(lim.key, lim.limit, value) for lim in (slo.latency if slo is not None else ())
                  if lim.metric == metric
                  for value in [result.stat(metric, lim.stat, successful=True)] if value is not None]
        checks[f"{metric}_drift"] = judge.judge_latency(
            points, what="TTFT" if metric == "ttft" else "end-to-end latency", metric=metric, window_s=window,
            traffic=traffic, limits=limits, tolerance=drift_tolerance)
        series[metric] = [[round(t, 3), round(v, 6)] for t, v in _window_medians(points, window)]
    memory = sampler.series.get("memory_bytes") or sampler.series.get("launched_rss_bytes")
    if memory is not None and len(memory.points) >= 2:
        pts = [(t - t0, v) for t, v in memory.points if t0 <= t <= t1 + 1]
        found = (memory_limit, "--memory-limit") if memory_limit else (
            (capacity or memory_capacity)(sampler.pid) if sampler.pid is not None else None)
        checks["memory_growth"] = judge.judge_memory(
            pts, what=f"memory ({memory.source})", window_s=window, traffic=traffic,
            capacity=judge.Capacity(total=found[0], share=BUDGET_SHARE, source=found[1]) if found else None,
            tolerance=memory_tolerance, source=memory.source)
        series["memory_bytes"] = [[round(t, 3), v] for t, v in pts]
    else:
        checks["memory_growth"] = {
            "status": "not_measured",
            "text": "memory growth not measured: no memory gauge on /metrics and the "
            "server was not launched by the plugin",
        }
    gpu = judge.gpu_memory_check(sampler, t0, t1, window_s=window, traffic=traffic,
                                 tolerance=memory_tolerance)
    if gpu is not None:
        checks["gpu_memory_growth"] = gpu
    failed = [r for r in measured if not r.ok]
    limit = slo.error_rate if slo is not None and slo.error_rate is not None else 0.01
    rate = len(failed) / len(measured) if measured else None
    onset = (failed[0].send - start) if failed else None
    checks["errors"] = {
        "status": "pass"
        if rate is not None and rate <= limit
        else "fail"
        if rate is not None
        else "not_enough_data",
        "error_rate": rate,
        "limit": limit,
        "onset_s": onset,
        "text": (
            "no request failed"
            if not failed
            else f"{len(failed)} of {len(measured)} failed ({rate:.1%}; limit {limit:.0%}); the first "
            f"{onset:.1f} s into the soak ({failed[0].error}: {failed[0].error_detail[:120]})"
        ),
    }
    series["errors"] = [[round(t, 3), n] for t, n in _window_counts([r.send - start for r in failed], window)]
    out = CapacityResult(
        kind="soak",
        label=label,
        status="pass",
        headline="",
        series=series,
        telemetry=sampler.to_json(),
        params={
            "concurrency": concurrency,
            "duration_s": duration,
            "basis": basis,
            "window_s": window,
            "drift_tolerance": drift_tolerance,
            "memory_tolerance": memory_tolerance,
            "alpha": alpha,
            "horizon": chosen_horizon.to_json(),
            "horizon_s": traffic.horizon_s,
            "horizon_words": traffic.horizon_words(),
            "request_rate_per_s": traffic.request_rate,
            "memory_limit": memory_limit,
            "budget_share": BUDGET_SHARE,
        },
    )
    out.steps = [step_row(concurrency, result, sampler.peaks(t0, t1))]
    # How long a soak would have found a leak that uses the headroom within half the horizon.
    plans = [(c["plan"]["soak_needed_s"], name) for name, c in checks.items()
             if c.get("plan") and c["status"] != "fail"]
    needed, which = max(plans) if plans else (None, None)
    out.findings = {"checks": checks, "soak_needed_s": needed, "soak_needed_for": which,
                    "soak_needed_text": None}
    if needed is not None and duration < needed:
        growth = "memory growth that would use its budget" if "memory" in str(which) else (
            "a latency drift that would cross the SLO")
        plan = (f"a soak of at least {duration_words(needed)} would find, 95% of the time, {growth} within "
                f"half of {traffic.horizon_words()}; this one ran {duration_words(duration)}")
        out.findings["soak_needed_text"] = plan
        out.notes.append(plan)
        say(f"inferaccept: soak: {plan}")
    caveat = knee_caveat(knee)
    if caveat:
        out.params["basis_caveat"] = caveat
        out.notes.append(f"the concurrency comes from {caveat}")
    out.notes += [f"not measured: {a}" for a in sampler.absent()]
    for name, check in checks.items():
        if check["status"] == "fail":
            out.status = "fail"
            out.reasons.append(check["text"])
            out.explanations.append(
                {
                    "kind": {
                        "ttft_drift": "latency_drift",
                        "e2e_drift": "latency_drift",
                        "memory_growth": "memory_growing",
                        "gpu_memory_growth": "memory_growing",
                        "errors": "errors_begin",
                    }[name],
                    "level": concurrency,
                    "text": check["text"],
                    "evidence": {"check": name},
                }
            )
    if out.steps[0]["client_bound"]:
        out.status = "invalid"
        out.reasons.insert(0, "the client was the bottleneck: " + "; ".join(result.client_bound))
    elif out.status == "pass" and all(
        c["status"] in ("not_enough_data", "not_measured") for k, c in checks.items() if k != "errors"
    ):
        out.status = "invalid"
        out.reasons.append("the soak was too short to judge drift (fewer than 8 windows with answers)")
    where = f"{basis}; {caveat}" if caveat else basis
    # A failing check in full (its projection and time to the limit); the others in short.
    out.headline = f"{duration:g} s at c={concurrency} ({where}): " + "; ".join(
        c["text"] if c["status"] == "fail" else c.get("answer") or c["text"] for c in checks.values()
    )
    return out


def _window_medians(points: list[tuple[float, float]], width: float) -> list[tuple[float, float]]:
    from pytest_inferaccept.stats.trend import windows

    return windows(points, width)


def _window_counts(times: list[float], width: float) -> list[tuple[float, int]]:
    counts = Counter(int(t // width) for t in times)
    return [((k + 0.5) * width, n) for k, n in sorted(counts.items())]


def _classify(result: LoadResult, alive: tuple[bool, str], request_timeout: float) -> dict[str, Any]:
    """How the server failed at a boundary: graceful shedding, or not (and why).

    An answer that came with HTTP 200 and then failed (incomplete, a stream cut) is named by
    what went wrong, never as "answered HTTP 200"; an incomplete answer is never graceful.
    """
    from pytest_inferaccept.capacity.failures import describe, incomplete_text
    from pytest_inferaccept.load.records import HARNESS_ERROR

    failed = [r for r in result.records if not r.warmup and not r.ok]
    statuses = Counter(r.status for r in failed if r.status is not None)
    classes = Counter(r.error for r in failed if r.error)
    shed = [r for r in failed if r.status in GRACEFUL_STATUSES]
    fast = median(r.e2e for r in shed) if shed else None
    hung = [r for r in failed if r.e2e > request_timeout + 2]
    problems = []
    described = describe(result.records)
    empty = incomplete_text(described["kinds"], described["measured"])
    if empty:
        problems.append(empty)
    # Error answers by status; a 200 that failed afterwards is named by its class below.
    bad_status = {s: n for s, n in statuses.items() if s >= 300 and s not in GRACEFUL_STATUSES}
    if bad_status:
        problems.append("answered " + ", ".join(f"HTTP {s} ×{n}" for s, n in sorted(bad_status.items())))
    for cls, n in classes.most_common():
        if cls not in ("http_4xx", "http_5xx", "incomplete", HARNESS_ERROR):
            problems.append(f"{n} request(s) ended in {cls}")
    if hung:
        problems.append(f"{len(hung)} request(s) hung past the request timeout ({request_timeout:g} s)")
    if not alive[0]:
        problems.append(f"the server did not answer afterwards ({alive[1]})")
    if fast is not None and fast > 1.0:
        problems.append(f"rejections were slow (median {fast:.2f} s)")
    retry_after = sum(1 for r in shed if r.retry_after)
    return {
        "failed": len(failed),
        "statuses": {str(k): v for k, v in statuses.items()},
        "error_classes": dict(classes),
        "shed": len(shed),
        "retry_after": retry_after,
        "rejection_median_s": fast,
        "alive_after": alive[0],
        "alive_detail": alive[1],
        "graceful": not problems and (bool(shed) or not failed),
        "problems": problems,
    }


def push(
    measure: Measure,
    alive: Alive,
    *,
    levels: Sequence[int],
    requests: int,
    duration: float,
    breaker_errors: float,
    breaker_latency_s: float,
    request_timeout: float,
    label: str,
    workload: Any = None,
    say: Callable[[str], None] = lambda _: None,
) -> CapacityResult:
    """Raise concurrency until errors or latency cross the breaker; how did the server fail there?

    Incomplete answers (HTTP 200 with nothing generated or no finish_reason) end the climb at
    the first level that has one, and the push fails naming them: never "queues rather than
    rejecting".
    """
    import math

    from pytest_inferaccept.capacity.failures import incomplete_text

    rows: list[dict[str, Any]] = []
    boundary: dict[str, Any] | None = None
    note = ""
    for c in levels:
        result = measure(
            f"push c={c}",
            concurrency=c,
            requests=max(requests, 2 * c),
            duration=duration,
            warmup=0,
            workload=workload,
        )
        row = step_row(c, result)
        after = alive()
        row["alive_after"] = after[0]
        rows.append(row)
        latency = latency_of(row)
        p95 = "beyond any limit (failed requests count as infinite)" if latency == math.inf else _ms(latency)
        say(
            f"inferaccept: push c={c}: {row['measured']} measured, {row['failed']} failed"
            f"{_statuses(row)}, latency p95 {p95}; "
            f"{'answers afterwards' if after[0] else 'NO ANSWER afterwards'}"
        )
        # An empty 200 is a broken answer, not load shed: one is a boundary whatever the breaker says,
        # and it is named first (the breaker would only see its error rate, or an infinite latency).
        why = (incomplete_text(row["failures"]["kinds"], row["measured"])
               or breaker(row, max_error_rate=breaker_errors, max_latency_s=breaker_latency_s)
               or (row["failure_text"] if row["failing"] else None))
        if not after[0]:
            why = f"the server did not answer afterwards ({after[1]})"
        if why:
            boundary = {"level": c, "why": why, **_classify(result, after, request_timeout)}
            break
        if row["client_bound"]:
            note = f"the client could not push past c={c}: " + "; ".join(row["client_bound"])
            break
    out = CapacityResult(
        kind="push",
        label=label,
        status="pass",
        headline="",
        steps=rows,
        params={
            "levels": list(levels),
            "requests_per_level": requests,
            "max_seconds_per_level": duration,
            "breaker_error_rate": breaker_errors,
            "breaker_latency_s": breaker_latency_s,
        },
    )
    out.findings = {"boundary": boundary}
    if note:
        out.notes.append(note)
    if boundary is None:
        top = rows[-1]["level"] if rows else 0
        out.headline = (
            f"did not break up to c={top:g}"
            + (f" ({note})" if note else "")
            + ": the boundary is above what was pushed"
        )
        if note and len(rows) <= 1:
            out.status = "invalid"
            out.reasons.append(note)
        return out
    c = boundary["level"]
    if boundary["graceful"] and boundary["failed"]:
        out.headline = (
            f"sheds load gracefully at c={c}: {boundary['shed']} rejected with "
            f"{', '.join('HTTP ' + s for s in boundary['statuses'])} "
            f"({boundary['retry_after']} with Retry-After), median rejection "
            f"{_ms(boundary['rejection_median_s'])}, and it answers afterwards"
        )
    elif boundary["graceful"]:
        out.headline = (
            f"at c={c} {boundary['why']} without errors: the server queues rather than "
            "rejecting, and it answers afterwards"
        )
        out.explanations.append({"kind": "queueing", "level": c, "text": out.headline, "evidence": {}})
    else:
        out.status = "fail"
        out.headline = f"falls over at c={c} instead of shedding load: " + "; ".join(boundary["problems"])
        out.reasons.append(out.headline)
    out.explanations.append({"kind": "boundary", "level": c, "text": out.headline, "evidence": boundary})
    return out


def push_length(
    measure: Measure,
    alive: Alive,
    *,
    lengths: Sequence[int],
    context_window: int | None,
    requests: int,
    duration: float,
    request_timeout: float,
    label: str,
    say: Callable[[str], None] = lambda _: None,
) -> CapacityResult:
    """Prompts of growing length up to (and past) the context window: a clean 4xx beyond it, or not?"""
    from pytest_inferaccept.load.workloads import Fixed, SyntheticWorkload

    rows: list[dict[str, Any]] = []
    boundary: dict[str, Any] | None = None
    for n in lengths:
        result = measure(
            f"prompt {n} tokens",
            concurrency=1,
            requests=requests,
            duration=duration,
            warmup=0,
            workload=SyntheticWorkload(input=Fixed(n), output=Fixed(8), seed=n),
        )
        row = step_row(n, result)
        after = alive()
        row["alive_after"] = after[0]
        rows.append(row)
        say(
            f"inferaccept: prompt length {n}: {row['failed']} of {row['measured']} failed"
            f"{_statuses(row)}, TTFT p95 {_ms(row['ttft_p95'])}"
        )
        if row["failed"] or not after[0]:
            info = _classify(result, after, request_timeout)
            statuses = {int(s) for s in info["statuses"]}
            clean = (
                all(400 <= s < 500 for s in statuses)
                and info["alive_after"]
                and not any(info["error_classes"].get(k) for k in ("timeout", "stall", "connect"))
            )
            boundary = {"length": n, **info, "graceful": clean}
            break
    out = CapacityResult(
        kind="push_length",
        label=label,
        status="pass",
        headline="",
        steps=rows,
        params={"lengths": list(lengths), "context_window": context_window, "requests_per_length": requests},
    )
    out.findings = {"boundary": boundary, "context_window": context_window}
    if boundary is None:
        out.headline = f"every prompt length up to {lengths[-1] if lengths else 0} tokens was answered"
        return out
    n = boundary["length"]
    within = context_window is not None and n <= context_window * 0.9
    if boundary["graceful"]:
        out.headline = (
            f"prompts of {n} tokens are refused cleanly ("
            + ", ".join(f"HTTP {s}" for s in boundary["statuses"])
            + ") and the server answers "
            "afterwards" + (f"; the context window is {context_window}" if context_window else "")
        )
        if within:
            out.status = "fail"
            out.reasons.append(
                f"prompts of {n} tokens are refused although the context window is {context_window} tokens"
            )
    else:
        out.status = "fail"
        problems = boundary["problems"] or ["errors other than a clean 4xx"]
        out.headline = f"prompts of {n} tokens break the server instead of a clean refusal: " + "; ".join(
            problems
        )
        out.reasons.append(out.headline)
    return out
