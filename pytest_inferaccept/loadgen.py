"""The `loadgen` fixture's object: runs the load engine for a test and judges it against the SLO.

The engine (pytest_inferaccept.load) and the statistics (pytest_inferaccept.stats) know nothing
of pytest; this module binds them to the server under test, the settings, the test's SLO and
its evidence. Each run's result is kept on the test, so the plugin judges every run the test
made when the test ends, and writes them to the results and the records file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pytest_inferaccept.markers import SloSpec
from pytest_inferaccept.server import ServerUnderTest
from pytest_inferaccept.settings import Settings

if TYPE_CHECKING:
    from pytest_inferaccept.load import LoadRun, LoadSpec, Workload
    from pytest_inferaccept.stats import LoadSummary, SloEvaluation


class LoadInputError(ValueError):
    """A load that could not start: a malformed trace, an impossible schedule (nothing was sent)."""


@dataclass(kw_only=True)
class LoadResult:
    """One `loadgen.run`: the engine's run, its statistics, and how the SLO judged it."""

    label: str
    run: LoadRun
    summary: LoadSummary
    slo: SloSpec | None
    evaluation: SloEvaluation | None
    """None when no SLO applies: the run was measured and recorded, not judged."""
    client_bound: list[str] = field(default_factory=list)
    """Why the client, not the server, limited the run (empty: the measurement is trustworthy)."""
    client_check: str = "strict"
    """How the run treats a client-bound measurement (--client-check): strict or warn."""

    @property
    def records(self) -> list[Any]:
        """Every request's record (warm-up included, flagged)."""
        return self.run.records

    def stat(self, metric: str, stat: str = "p95") -> float | None:
        """A latency statistic in seconds, e.g. stat("ttft", "p95"); None when not measured."""
        summary = self.summary.metrics.get(metric)
        est = summary.stat(stat) if summary is not None else None
        return None if est is None else est.value

    @property
    def error_rate(self) -> float | None:
        """Failed fraction of the measured requests."""
        return None if self.summary.error_rate is None else self.summary.error_rate.value

    @property
    def throughput(self) -> float | None:
        """Output tokens per second over the measured window."""
        return self.summary.throughput_tokens_per_s

    def to_json(self) -> dict[str, Any]:
        """The test's `load` entry in the results document."""
        return {
            "label": self.label,
            "spec": self.run.spec,
            "stopped_by": self.run.stopped_by,
            "summary": self.summary.to_json(),
            "slo": self.evaluation.to_json() if self.evaluation is not None else None,
            "slo_limits": self.slo.to_json() if self.slo is not None else None,
            "selfcheck": {**self.run.selfcheck, "client_bound": list(self.client_bound),
                          "client_check": self.client_check},
            "server_metrics": self.run.server_metrics,
        }


class LoadGen:
    """Runs load against the server under test; `run(...)` returns a LoadResult (`arun` in async tests).

    The test's `@pytest.mark.slo` (else the session's --slo / --slo-profile) judges every run
    when the test ends; without any SLO the runs are measured and recorded, not judged.
    """

    def __init__(self, *, server: ServerUnderTest, settings: Settings, slo: SloSpec | None,
                 label: str, keep: Callable[[LoadResult], None],
                 bad_input: Callable[[str], None] = lambda _: None,
                 say: Callable[[str], None] = lambda _: None) -> None:
        self.server = server
        self.settings = settings
        self.slo = slo
        self.label = label
        self._keep = keep
        self._bad_input = bad_input
        self._say = say
        self.results: list[LoadResult] = []

    def spec(self, *, concurrency: int | None = None, rate: float | None = None,
             requests: int | None = None, duration: float | None = None,
             workload: str | Path | Workload | None = None, warmup: int | None = None,
             kind: Literal["chat", "completions", "embeddings"] = "chat", workers: int | None = None,
             burstiness: float = 1.0, replay: bool = False, seed: int = 0,
             extra_body: dict[str, Any] | None = None) -> LoadSpec:
        """The engine's LoadSpec for these arguments, with the session's server, key and bounds."""
        from pytest_inferaccept.load import LoadSpec, TraceWorkload

        if isinstance(workload, (str, Path)):
            workload = TraceWorkload.from_file(workload)
        if concurrency is None and rate is None and not replay:
            concurrency = self.settings.load.concurrency
        if requests is None and duration is None:
            requests, duration = self.settings.load.requests, self.settings.load.duration
        s = self.settings
        model = self.server.embedding_model if kind == "embeddings" else self.server.model
        base = self.server.embedding_url if kind == "embeddings" else self.server.base_url
        return LoadSpec(
            base_url=base, model=model or self.server.model, api_key=s.api_key, kind=kind,
            concurrency=concurrency, rate=rate, replay=replay, burstiness=burstiness,
            requests=requests, duration=duration,
            warmup=warmup if warmup is not None else min(4, concurrency or 2),
            workload=workload, request_timeout=s.request_timeout, connect_timeout=s.connect_timeout,
            max_response_bytes=s.max_response_bytes,
            workers=workers if workers is not None else s.load.workers, seed=seed,
            extra_body=extra_body)

    def _checked_spec(self, kwargs: dict[str, Any]) -> LoadSpec:
        """The spec, or a clear stop before anything is sent when the workload or options are bad."""
        from pytest_inferaccept.load import WorkloadError

        try:
            return self.spec(**kwargs)
        except (WorkloadError, ValueError) as exc:
            # Bad input to the plugin, not a finding about the server: the test cannot judge it.
            self._bad_input(f"the load was not started: {exc}")
            raise LoadInputError(f"the load was not started: {exc}") from None

    def run(self, **kwargs: Any) -> LoadResult:
        """Run one load (closed loop at `concurrency`, or open loop at `rate` req/s); blocking."""
        from pytest_inferaccept.load import LoadInterrupted, run_load

        spec = self._checked_spec(kwargs)
        self._announce(spec)
        try:
            run = run_load(spec)
        except LoadInterrupted as stopped:
            self._finish(stopped.run)  # what was measured is kept, then the interruption goes on
            raise
        return self._finish(run)

    async def arun(self, **kwargs: Any) -> LoadResult:
        """The async twin of `run`, on the test's own event loop (pytest-asyncio or anyio)."""
        from pytest_inferaccept.load import run_load_async

        spec = self._checked_spec(kwargs)
        self._announce(spec)
        return self._finish(await run_load_async(spec))

    def _announce(self, spec: LoadSpec) -> None:
        """One line before a run starts: a load run can take minutes and prints nothing itself."""
        shape = (f"{spec.concurrency} in flight" if spec.concurrency else
                 f"{spec.rate:g} requests/s" if spec.rate else "trace replay")
        bounds = ", ".join(b for b in (f"{spec.requests} requests" if spec.requests else "",
                                       f"at most {spec.duration:g} s" if spec.duration else "") if b)
        self._say(f"inferaccept: load {self.label}: {shape}, {bounds}, {spec.warmup} warm-up, "
                  f"{spec.workers} worker(s); stops by itself within {spec.hard_seconds():.0f} s")

    def _finish(self, run: LoadRun) -> LoadResult:
        from pytest_inferaccept.stats import bottleneck_reasons, evaluate, summarize

        run.selfcheck = client_check(run)
        summary = summarize(run.records, run.window, slo=self.slo)
        evaluation = (evaluate(summary, self.slo, point_estimate=self.settings.load.judge_on_point)
                      if self.slo is not None else None)
        label = self.label if not self.results else f"{self.label}#{len(self.results) + 1}"
        result = LoadResult(label=label, run=run, summary=summary, slo=self.slo, evaluation=evaluation,
                            client_bound=bottleneck_reasons(run.selfcheck),
                            client_check=self.settings.load.client_check)
        self.results.append(result)
        self._keep(result)
        p95 = result.stat("ttft", "p95")
        self._say(f"inferaccept: load {label}: {summary.counts.measured} measured, {summary.counts.failed} "
                  f"failed, TTFT p95 {'n/a' if p95 is None else f'{p95 * 1000:.0f} ms'}, "
                  f"{summary.throughput_tokens_per_s or 0:.1f} output tokens/s ({run.stopped_by})")
        return result


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
                "cpu_utilisation": entry.get("cpu_utilisation")}

    total_raw = dict(raw.get("total") or {})
    total = load_of(total_raw, run.records, total_raw.get("asked_concurrency"))
    total["worker"] = None
    workers = [load_of(w, [r for r in run.records if r.worker == w.get("worker")], w.get("asked_concurrency"))
               for w in engine_workers]
    return {"mode": mode, "total": total, "workers": workers if len(workers) > 1 else [], "engine": raw}


class SloJudgement(AssertionError):
    """The SLO judged the test's load runs and found them failing or unable to be judged."""

    def __init__(self, title: str, lines: tuple[str, ...]) -> None:
        self.title = title
        self.lines = lines
        super().__init__(f"{title}: {'; '.join(lines)}")

    def long(self) -> str:
        """The finding with one line per figure (for the terminal)."""
        return self.title + ":\n" + "\n".join(f"  - {line}" for line in self.lines)


@dataclass(frozen=True, kw_only=True)
class Judgement:
    """The SLO verdict over every load run of one test."""

    status: Literal["pass", "fail", "invalid", "unjudged"]
    title: str = ""
    lines: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """The finding on one line."""
        return f"{self.title}: {'; '.join(self.lines)}" if self.lines else self.title


def judge(results: list[LoadResult], slo: SloSpec | None, *, from_marker: bool,
          client_check: str = "strict") -> Judgement:
    """Judge a test's load runs: client-bound → invalid; any fail → fail; too few samples → invalid."""
    if not results:
        if from_marker:
            return Judgement(status="invalid", title=(
                "@pytest.mark.slo is on a test that ran no load: call loadgen.run(...) in the test "
                "(the marker judges the load the test runs), or remove the marker"))
        return Judgement(status="unjudged")
    several = len(results) > 1
    bound = [f"{r.label}: {reason}" if several else reason for r in results for reason in r.client_bound]
    if slo is None:
        # Nothing to judge: figures the client limited are recorded with a warning, not a verdict.
        return Judgement(status="unjudged", warnings=tuple(
            f"measured without an SLO, and the client limited the run: {b}" for b in bound))
    warnings: tuple[str, ...] = ()
    if bound and client_check == "warn":
        warnings = tuple(f"judged although the client limited the run (--client-check warn): {b}"
                         for b in bound)
        bound = []
    if bound:
        return Judgement(status="invalid", title="the client was the bottleneck, so the run cannot "
                         "judge the server", lines=tuple(bound))
    failed = [(r, m) for r in results if r.evaluation is not None for m in r.evaluation.messages("fail")]
    if failed:
        lines = [f"{r.label}: {m}" if several else m for r, m in failed]
        return Judgement(status="fail", title="SLO not met", lines=tuple(lines), warnings=warnings)
    short = [(r, m) for r in results if r.evaluation is not None
             for m in r.evaluation.messages("not_enough_data")]
    if short:
        lines = [f"{r.label}: {m}" if several else m for r, m in short]
        return Judgement(status="invalid", title="not enough data to judge the SLO", lines=tuple(lines),
                         warnings=warnings)
    return Judgement(status="pass", warnings=warnings)
