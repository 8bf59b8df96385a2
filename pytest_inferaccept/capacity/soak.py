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
)

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.stats.projection import Horizon

EXPLAINED_AS = {
    "ttft_drift": "latency_drift",
    "e2e_drift": "latency_drift",
    "memory_growth": "memory_growing",
    "gpu_memory_growth": "memory_growing",
    "errors": "errors_begin",
}
"""The explanation a failing check gives, by check."""


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

    `knee` is the ladder's knee (its `findings["knee"]`) when `concurrency` was derived from it: an
    unconfirmed one is said beside the basis, in the notes and in the headline.
    """
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
            tolerance=memory_tolerance, source=memory.source, finished=finished)
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
    params: dict[str, Any] = {
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
    }
    row = step_row(concurrency, result, sampler.peaks(t0, t1))
    # How long a soak would have found a leak that uses the headroom within half the horizon.
    plans = [(c["plan"]["soak_needed_s"], name) for name, c in checks.items()
             if c.get("plan") and c["status"] != "fail"]
    needed, which = max(plans) if plans else (None, None)
    findings: dict[str, Any] = {"checks": checks, "soak_needed_s": needed, "soak_needed_for": which,
                                "soak_needed_text": None}
    notes: list[str] = []
    if needed is not None and duration < needed:
        growth = "memory growth that would use its budget" if "memory" in str(which) else (
            "a latency drift that would cross the SLO")
        plan = (f"a soak of at least {duration_words(needed)} would find, 95% of the time, {growth} within "
                f"half of {traffic.horizon_words()}; this one ran {duration_words(duration)}")
        findings["soak_needed_text"] = plan
        notes.append(plan)
        say(f"inferaccept: soak: {plan}")
    caveat = knee_caveat(knee)
    if caveat:
        params["basis_caveat"] = caveat
        notes.append(f"the concurrency comes from {caveat}")
    notes += not_measured(sampler)
    failing = {name: check for name, check in checks.items() if check["status"] == "fail"}
    judged: list[Judgement] = [("fail", check["text"]) for check in failing.values()]
    if not failing and all(
        c["status"] in ("not_enough_data", "not_measured") for k, c in checks.items() if k != "errors"
    ):
        judged.append(("invalid", "the soak was too short to judge drift (fewer than 8 windows with "
                                  "answers)"))
    bound = row["client_bound"]
    where = f"{basis}; {caveat}" if caveat else basis
    # A failing check in full (its projection and time to the limit); the others in short.
    headline = f"{duration:g} s at c={concurrency} ({where}): " + "; ".join(
        c["text"] if c["status"] == "fail" else c.get("answer") or c["text"] for c in checks.values()
    )
    return conclude(
        kind="soak",
        label=label,
        steps=[row],
        params=params,
        headline=headline,
        bound=f"the client was the bottleneck: {'; '.join(bound)}" if bound else "",
        judged=judged,
        failures_when_bound=True,
        findings=findings,
        explanations=[{"kind": EXPLAINED_AS[name], "level": concurrency, "text": check["text"],
                       "evidence": {"check": name}} for name, check in failing.items()],
        series=series,
        telemetry=sampler.to_json(),
        notes=notes,
    )


def _window_medians(points: list[tuple[float, float]], width: float) -> list[tuple[float, float]]:
    from pytest_inferaccept.stats.trend import windows

    return windows(points, width)


def _window_counts(times: list[float], width: float) -> list[tuple[float, int]]:
    counts = Counter(int(t // width) for t in times)
    return [((k + 0.5) * width, n) for k, n in sorted(counts.items())]
