"""The load generator's check on itself: did it deliver the load it was asked for?

Summaries only (p50/p99/max by nearest rank): the statistics proper, with intervals and verdicts,
live in `pytest_inferaccept.stats`. These numbers tell whether the client was the bottleneck.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.load.schedules import WorkerResult


def summary(values: Iterable[float]) -> dict[str, Any]:
    """n, p50, p99 and max (nearest rank) of `values`; None for an empty sample."""
    data = sorted(values)
    n = len(data)
    if not n:
        return {"n": 0, "p50": None, "p99": None, "max": None}

    def rank(q: float) -> float:
        return data[min(n - 1, max(0, math.ceil(q * n) - 1))]

    return {"n": n, "p50": rank(0.50), "p99": rank(0.99), "max": data[-1]}


def window(records: Sequence[RequestRecord]) -> tuple[float, float]:
    """First non-warm-up send to last non-warm-up end ((0, 0) when there is none)."""
    measured = [r for r in records if not r.warmup]
    if not measured:
        return (0.0, 0.0)
    return (min(r.send for r in measured), max(r.end for r in measured))


def achieved_concurrency(records: Sequence[RequestRecord], span: tuple[float, float]) -> float:
    """Time-weighted mean of requests in flight over the window (each request's overlap / length)."""
    lo, hi = span
    if hi <= lo:
        return 0.0
    busy = sum(max(0.0, min(r.end, hi) - max(r.send, lo)) for r in records if not r.warmup)
    return busy / (hi - lo)


def _rate(times: Sequence[float]) -> float | None:
    """Events per second between the first and the last of `times`: (n - 1) gaps over the span."""
    if len(times) < 2:
        return None
    span = max(times) - min(times)
    return (len(times) - 1) / span if span > 0 else None


def worker_check(result: WorkerResult) -> dict[str, Any]:
    """Asked vs achieved load, lags and CPU of one worker."""
    plan = result.plan
    measured = [r for r in result.records if not r.warmup]
    span = window(result.records)
    wall = ((result.phase_end or 0.0) - (result.phase_start or 0.0))
    out: dict[str, Any] = {
        "worker": result.worker,
        "mode": plan.get("mode"),
        "loop": result.loop_impl,
        "records": len(result.records),
        "measured": len(measured),
        "window": list(span),
        "achieved_concurrency": achieved_concurrency(result.records, span),
        "achieved_rate": _rate([r.send for r in measured]),
        "loop_lag": summary(result.loop_lags),
        "cpu_seconds": result.cpu_seconds,
        "process_cpu_seconds": result.process_cpu_seconds,
        "wall_seconds": wall,
        "cpu_utilisation": result.cpu_seconds / wall if wall > 0 else None,
        "stopped_by": result.stopped_by,
        "t0": result.t0,
    }
    if plan.get("mode") == "closed":
        out["asked_concurrency"] = plan.get("concurrency")
        out["schedule_lag"] = summary(result.turnarounds)
        out["schedule_lag_meaning"] = "seconds from a request's end to its slot's next send"
    else:
        out["asked_rate"] = plan.get("rate")
        out["scheduled_rate"] = _rate([r.scheduled for r in measured if r.scheduled is not None])
        out["schedule_lag"] = summary(r.send - r.scheduled for r in measured if r.scheduled is not None)
        out["schedule_lag_meaning"] = "seconds from a request's target time to its send"
    return out


def total_check(results: Sequence[WorkerResult], checks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The whole run: sums of achieved load over workers, lags pooled, CPU summed."""
    records = [r for res in results for r in res.records]
    lags = [x for res in results for x in res.loop_lags]
    sched: list[float] = []
    for res in results:
        if res.plan.get("mode") == "closed":
            sched.extend(res.turnarounds)
        else:
            sched.extend(r.send - r.scheduled for r in res.records
                         if not r.warmup and r.scheduled is not None)
    cpu = sum(res.cpu_seconds for res in results)
    wall = max((c["wall_seconds"] for c in checks), default=0.0)

    def add(key: str) -> float | None:
        values = [c.get(key) for c in checks]
        nums = [float(v) for v in values if isinstance(v, (int, float))]
        return sum(nums) if nums else None

    return {
        "workers": len(results),
        "records": len(records),
        "measured": sum(1 for r in records if not r.warmup),
        "asked_concurrency": add("asked_concurrency"),
        "achieved_concurrency": add("achieved_concurrency"),
        "asked_rate": add("asked_rate"),
        "scheduled_rate": add("scheduled_rate"),
        "achieved_rate": add("achieved_rate"),
        "schedule_lag": summary(sched),
        "loop_lag": summary(lags),
        "cpu_seconds": cpu,
        "wall_seconds": wall,
        "cpu_utilisation": cpu / wall if wall > 0 else None,
        "cpu_utilisation_per_worker_max": max((c["cpu_utilisation"] or 0.0 for c in checks), default=None),
    }


def selfcheck(results: Sequence[WorkerResult]) -> dict[str, Any]:
    """JSON-ready self-check: one entry per worker and the total."""
    checks = [worker_check(r) for r in results]
    return {"per_worker": checks, "total": total_check(results, checks)}
