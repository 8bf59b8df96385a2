"""Was the load generator itself the bottleneck? Reasons that make a run INVALID, not NO-GO.

The load engine fills a `SelfCheck` (or its JSON form, see `SelfCheck.from_json`) per run;
`bottleneck_reasons` turns it into plain sentences. An empty list means the client kept up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["closed", "open"]
_AFTERWORD = "the measurements describe the client, not the server"


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """Limits beyond which the client, not the server, is taken to have set the pace."""

    concurrency_fraction: float = 0.98
    """Closed loop: achieved concurrency below this share of the asked concurrency."""
    rate_fraction: float = 0.95
    """Open loop: achieved request rate below this share of the asked rate."""
    schedule_lag_p99_s: float = 0.010
    """Requests leaving later than planned by more than this at p99 (open loop)."""
    loop_lag_p99_s: float = 0.020
    """The event loop waking later than asked by more than this at p99."""
    cpu_utilisation: float = 0.90
    """A worker process using more than this share of one CPU core (cpu seconds / wall seconds)."""


@dataclass(frozen=True, kw_only=True)
class Lag:
    """Percentiles of a lag in seconds."""

    p50: float
    p99: float
    max: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Lag | None:
        """Read {"p50", "p99", "max"} in seconds; None stays None."""
        if data is None:
            return None
        return cls(p50=float(data["p50"]), p99=float(data["p99"]), max=float(data["max"]))

@dataclass(frozen=True, kw_only=True)
class ClientLoad:
    """What one worker (or all workers together) was asked to do and did; None: not measured.

    `achieved_concurrency` is the time-weighted mean of requests in flight over the steady part
    of the run: from the moment every slot has sent its first request to the last send, so the
    ramp-up and the drain at the end do not pull it down (`steady_concurrency` computes it).
    `achieved_rate` is requests sent per second between the first and the last send.
    """

    worker: int | None = None
    """Worker index; None for the total over all workers."""
    asked_concurrency: float | None = None
    achieved_concurrency: float | None = None
    asked_rate: float | None = None
    achieved_rate: float | None = None
    schedule_lag_s: Lag | None = None
    loop_lag_s: Lag | None = None
    cpu_s: float | None = None
    wall_s: float | None = None
    cpu_utilisation: float | None = None
    """cpu_s / wall_s: 1.0 is one core busy all the time."""
    node: str | None = None
    """The Ray node the worker ran on (--load-cluster); None on this machine."""
    died: str | None = None
    """Why the worker died mid-run (a Ray actor lost with its node); None: it finished."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClientLoad:
        """Read the JSON form; missing keys are None."""

        def num(key: str) -> float | None:
            value = data.get(key)
            return None if value is None else float(value)

        worker = data.get("worker")
        return cls(worker=None if worker is None else int(worker),
                   asked_concurrency=num("asked_concurrency"),
                   achieved_concurrency=num("achieved_concurrency"),
                   asked_rate=num("asked_rate"), achieved_rate=num("achieved_rate"),
                   schedule_lag_s=Lag.from_json(data.get("schedule_lag_s")),
                   loop_lag_s=Lag.from_json(data.get("loop_lag_s")),
                   cpu_s=num("cpu_s"), wall_s=num("wall_s"), cpu_utilisation=num("cpu_utilisation"),
                   node=data.get("node"), died=data.get("died"))

@dataclass(frozen=True, kw_only=True)
class SelfCheck:
    """The load engine's account of itself for one run: the total and each worker."""

    mode: Mode
    total: ClientLoad
    workers: tuple[ClientLoad, ...] = field(default_factory=tuple)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SelfCheck:
        """Read {"mode": "closed" | "open", "total": {...}, "workers": [{...}, ...]}."""
        mode = data.get("mode")
        if mode not in ("closed", "open"):
            raise ValueError(f"selfcheck mode must be 'closed' or 'open', got {mode!r}")
        return cls(mode=mode, total=ClientLoad.from_json(data.get("total") or {}),
                   workers=tuple(ClientLoad.from_json(w) for w in data.get("workers") or ()))



def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.1f} ms"


def _pace_reasons(load: ClientLoad, mode: Mode, th: Thresholds, who: str) -> list[str]:
    out = []
    asked, got = load.asked_concurrency, load.achieved_concurrency
    # In a closed loop the client's part of the pace is its turnaround (a request's end to its
    # slot's next send), judged in _process_reasons as schedule lag. Achieved concurrency also
    # falls when the server answers in a millisecond (a fast 500 or 400) or a worker finishes its
    # share early, neither of which is the client's doing: it decides only without a turnaround.
    if (mode == "closed" and asked and got is not None and got < th.concurrency_fraction * asked
            and load.schedule_lag_s is None):
        out.append(f"{who}could not keep {asked:g} requests in flight: {got:.1f} on average "
                   f"({got / asked:.0%}); {_AFTERWORD}")
    asked, got = load.asked_rate, load.achieved_rate
    if mode == "open" and asked and got is not None and got < th.rate_fraction * asked:
        out.append(f"{who}could not send {asked:g} requests/s: it sent {got:.2f}/s "
                   f"({got / asked:.0%}); {_AFTERWORD}")
    return out


def lateness(load: ClientLoad, th: Thresholds) -> dict[Literal["schedule", "loop", "cpu"], float]:
    """What ran late in one client process, beyond its threshold: the schedule lag's and the event
    loop's p99 (seconds) and the CPU share; empty when the process kept time."""
    out: dict[Literal["schedule", "loop", "cpu"], float] = {}
    if load.schedule_lag_s is not None and load.schedule_lag_s.p99 > th.schedule_lag_p99_s:
        out["schedule"] = load.schedule_lag_s.p99
    if load.loop_lag_s is not None and load.loop_lag_s.p99 > th.loop_lag_p99_s:
        out["loop"] = load.loop_lag_s.p99
    cpu = load.cpu_utilisation
    if cpu is None and load.cpu_s is not None and load.wall_s:
        cpu = load.cpu_s / load.wall_s
    if cpu is not None and cpu > th.cpu_utilisation:
        out["cpu"] = cpu
    return out


def _process_reasons(load: ClientLoad, th: Thresholds, who: str) -> list[str]:
    out = []
    late = lateness(load, th)
    if "schedule" in late and load.schedule_lag_s is not None:
        out.append(f"{who}sent requests {_ms(late['schedule'])} late at p99 "
                   f"(max {_ms(load.schedule_lag_s.max)}; limit {_ms(th.schedule_lag_p99_s)}): "
                   f"the server saw less load than the schedule asked for; {_AFTERWORD}")
    if "loop" in late and load.loop_lag_s is not None:
        out.append(f"{who}event loop ran {_ms(late['loop'])} late at p99 (max {_ms(load.loop_lag_s.max)}; "
                   f"limit {_ms(th.loop_lag_p99_s)}): time stamps carry that delay, so latencies are "
                   f"overstated; {_AFTERWORD}")
    if "cpu" in late:
        out.append(f"{who}used {late['cpu']:.0%} of a CPU core (limit {th.cpu_utilisation:.0%}): "
                   f"a saturated client reads answers late and inflates latencies; {_AFTERWORD}")
    return out


def bottleneck_reasons(data: SelfCheck | Mapping[str, Any],
                       thresholds: Thresholds | None = None) -> list[str]:
    """Plain sentences saying why the client may have been the bottleneck; empty: it kept up.

    Pace (concurrency, rate) is judged on the total; lag and CPU per worker process, since one
    saturated worker distorts its own share of the records. With one worker or none listed,
    everything is judged on the total.
    """
    check = data if isinstance(data, SelfCheck) else SelfCheck.from_json(data)
    th = thresholds or Thresholds()
    # A dead worker is the cause; the shortfall in pace it leaves is its symptom, so it comes first.
    reasons = [f"worker {w.worker}{_on(w)} died ({w.died}): its requests in flight are counted as lost "
               f"and the rest of its share was never sent; {_AFTERWORD}" for w in check.workers if w.died]
    reasons += _pace_reasons(check.total, check.mode, th, "the client ")
    if len(check.workers) > 1:
        for w in check.workers:
            reasons += _process_reasons(w, th, f"worker {w.worker}{_on(w)}: the client ")
    else:
        reasons += _process_reasons(check.total, th, "the client ")
    return reasons


def _on(worker: ClientLoad) -> str:
    return f" on node {worker.node}" if worker.node else ""


def steady_concurrency(spans: Iterable[tuple[float, float]], asked: int) -> float | None:
    """Time-weighted mean of requests in flight from the asked-th send to the last send.

    spans are (send, end) of every request a closed-loop schedule sent, warm-up included.
    Before the asked-th send the slots are still filling; after the last send they drain, and
    neither says whether the client kept up. None when that steady stretch has no length.
    """
    ordered = sorted(spans)
    if asked < 1 or len(ordered) < asked:
        return None
    start, stop = ordered[asked - 1][0], ordered[-1][0]
    if stop <= start:
        return None
    area = 0.0
    for send, end in ordered:
        lo, hi = max(send, start), min(end, stop)
        if hi > lo:
            area += hi - lo
    return area / (stop - start)
