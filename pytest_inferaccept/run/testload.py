"""One test's load below the `loadgen` object: its ledger, how a run becomes a LoadResult, and the
client's account of itself.

Both the `loadgen` fixture's object (loadgen.py) and the capacity runner (capacity/runner.py) build
on it, so neither imports the other for it. No pytest here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.run.load import LoadResult

if TYPE_CHECKING:
    from pytest_inferaccept.load import LoadRun
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.model import CapacityScenario as CapacityResult


class LoadInputError(ValueError):
    """A load that could not start: a malformed trace, an impossible schedule (nothing was sent)."""


class NotApplicable(Exception):
    """This test does not apply to this run (no --capacity, no launched server): the plugin skips
    it with the message, as `pytest.skip` would, without the load code knowing pytest."""


def _quiet(_: str) -> None:
    return None


@dataclass
class TestLedger:
    """One test's load: its judged runs and scenarios, and the session's records and history."""

    __test__ = False  # not a test class, whatever its name

    runs: list[LoadResult] = field(default_factory=list)
    """The test's load runs, judged together against its SLO when the test ends."""
    scenarios: list[CapacityResult] = field(default_factory=list)
    """The test's capacity scenarios, each judged as one."""
    records: list[tuple[str, Any]] = field(default_factory=list)
    """(label, LoadRun) of every run of the session, steps of scenarios included (--inferaccept-records)."""
    history: list[CapacityResult] = field(default_factory=list)
    """Every capacity scenario of the session so far (a sweep or a soak reads the ladder's knee)."""
    say: Callable[[str], None] = _quiet
    """A progress line for the user (hidden under -q)."""
    mark_invalid: Callable[[str], None] = _quiet
    """The test cannot judge the server (a load that could not start): its evidence says why."""

    def keep(self, result: LoadResult) -> None:
        """A judged run: the test's, and its records the session's."""
        self.runs.append(result)
        self.records.append((result.label, result.run))

    def keep_records(self, label: str, run: Any) -> None:
        """The records of a run no SLO judges alone (a capacity step, an interrupted run)."""
        self.records.append((label, run))

    def keep_scenario(self, result: CapacityResult) -> None:
        """A capacity scenario: the test's, and the session's history."""
        self.scenarios.append(result)
        if self.history is not self.scenarios:
            self.history.append(result)



def client_check(run: LoadRun) -> dict[str, Any]:
    """The engine's account of itself in the shape the statistics judge (stats.SelfCheck).

    Achieved concurrency is taken over the steady stretch (from the asked-th send to the last
    send): the ramp-up and the drain of a bounded run say nothing about whether the client kept
    up. The engine's own figures stay under "engine".
    """
    from pytest_inferaccept.stats import steady_concurrency

    raw = run.selfcheck
    if "total" in raw and "mode" in raw:
        return raw  # already in the statistics' shape
    engine_workers = list(raw.get("per_worker") or [])
    # Trace replay at recorded arrival times is judged like an open loop: a rate, not slots.
    is_open = any(w.get("mode") in ("open", "replay") for w in engine_workers) or run.spec.get("rate")
    mode = "open" if is_open else "closed"

    def lag(entry: Any) -> dict[str, Any] | None:
        if not isinstance(entry, dict) or entry.get("p99") is None:
            return None
        return {"p50": entry.get("p50"), "p99": entry.get("p99"), "max": entry.get("max")}

    # Ray actors (--load-cluster): which node each worker ran on, and whether it died mid-run.
    actors = {a.get("worker"): a for a in (raw.get("cluster") or {}).get("workers") or []}

    def load_of(entry: dict[str, Any], records: list[Any], asked: Any) -> dict[str, Any]:
        achieved = entry.get("achieved_concurrency")
        if mode == "closed" and isinstance(asked, (int, float)):
            # Measured requests only: the pause between warm-up and measurement is not the client's.
            steady = steady_concurrency([(r.send, r.end) for r in records if not r.warmup], int(asked))
            achieved = steady if steady is not None else achieved
        return {"worker": entry.get("worker"), "asked_concurrency": asked if mode == "closed" else None,
                "achieved_concurrency": achieved if mode == "closed" else None,
                # Against the rate the Poisson draw scheduled, not the nominal one: a short run's
                # arrivals vary around the nominal rate by chance, not because the client lagged.
                "asked_rate": entry.get("scheduled_rate") or entry.get("asked_rate"),
                "achieved_rate": entry.get("achieved_rate"),
                "schedule_lag_s": lag(entry.get("schedule_lag")), "loop_lag_s": lag(entry.get("loop_lag")),
                "cpu_s": entry.get("cpu_seconds"), "wall_s": entry.get("wall_seconds"),
                "cpu_utilisation": entry.get("cpu_utilisation"),
                "node": actors.get(entry.get("worker"), {}).get("node"),
                "died": actors.get(entry.get("worker"), {}).get("died")}

    total_raw = dict(raw.get("total") or {})
    total = load_of(total_raw, run.records, total_raw.get("asked_concurrency"))
    total["worker"] = None
    workers = [load_of(w, [r for r in run.records if r.worker == w.get("worker")], w.get("asked_concurrency"))
               for w in engine_workers]
    listed = len(workers) > 1 or any(w["died"] for w in workers)
    return {"mode": mode, "total": total, "workers": workers if listed else [], "engine": raw}


def load_result(run: LoadRun, label: str, *, slo: SloSpec | None, point: bool,
                client_check_mode: str) -> LoadResult:
    """A run's statistics, its SLO evaluation (`point`: judged on the point estimate) and the
    client's account of itself, as one LoadResult."""
    from pytest_inferaccept.stats import bottleneck_reasons, evaluate, summarize

    run.selfcheck = client_check(run)
    summary = summarize(run.records, run.window, slo=slo)
    evaluation = evaluate(summary, slo, point_estimate=point) if slo is not None else None
    return LoadResult(label=label, run=run, summary=summary, slo=slo, evaluation=evaluation,
                      client_bound=bottleneck_reasons(run.selfcheck), client_check=client_check_mode)
