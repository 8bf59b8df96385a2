"""The load engine's API: a LoadSpec in, a LoadRun out (records, window, self-check, server metrics).

Interrupting: a Ctrl-C during `run_load` stops the run cleanly (in-flight requests are cancelled
and recorded) and raises `LoadInterrupted`, a KeyboardInterrupt that carries the LoadRun measured
so far in `.run`, so the caller can keep the results and still stop. A second Ctrl-C stops at once
(the records measured so far still travel on the exception).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.load.schedules import WorkerResult, WorkerRun, new_loop
from pytest_inferaccept.load.selfcheck import selfcheck, window
from pytest_inferaccept.load.spec import LoadSpec

__all__ = ["LoadInterrupted", "LoadRun", "LoadSpec", "read_records", "run_load", "run_load_async",
           "write_records"]

StoppedBy = Literal["requests", "duration", "max_seconds", "interrupted"]


@dataclass(kw_only=True)
class LoadRun:
    """What one load run measured."""

    spec: dict[str, Any]
    records: list[RequestRecord]
    """Every request, warm-up included (flagged), failures included, in index order."""
    window: tuple[float, float]
    """First non-warm-up send to last non-warm-up end, seconds on the workers' clocks."""
    selfcheck: dict[str, Any]
    server_metrics: dict[str, Any]
    stopped_by: StoppedBy

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form without the records (see `write_records`)."""
        errors: dict[str, int] = {}
        for r in self.records:
            if r.error is not None and not r.warmup:
                errors[r.error] = errors.get(r.error, 0) + 1
        return {"spec": self.spec, "window": list(self.window), "selfcheck": self.selfcheck,
                "server_metrics": self.server_metrics, "stopped_by": self.stopped_by,
                "counts": {"records": len(self.records),
                           "warmup": sum(1 for r in self.records if r.warmup),
                           "errors": errors}}


class LoadInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a load run; `.run` holds everything measured until then."""

    def __init__(self, run: LoadRun) -> None:
        super().__init__("load run interrupted")
        self.run = run


def assemble(spec: LoadSpec, results: list[WorkerResult], server_metrics: dict[str, Any],
             *, interrupted: bool = False, extra_check: Mapping[str, Any] | None = None) -> LoadRun:
    """One LoadRun from the workers' results."""
    records = sorted((r for res in results for r in res.records), key=lambda r: (r.index, r.worker))
    reasons = {res.stopped_by for res in results}
    order: tuple[StoppedBy, ...] = ("interrupted", "max_seconds", "duration", "requests")
    stopped: StoppedBy = next((r for r in order if r in reasons), "requests")
    if interrupted:
        stopped = "interrupted"
    check = selfcheck(results)
    if extra_check:
        check.update(extra_check)
    return LoadRun(spec=spec.describe(), records=records, window=window(records), selfcheck=check,
                   server_metrics=server_metrics, stopped_by=stopped)


async def run_load_async(spec: LoadSpec, *, stop: Callable[[], bool] | None = None) -> LoadRun:
    """Run on the caller's event loop (one worker; more run in processes from a helper thread).

    `stop`, polled every ~10 ms, ends the run early with stopped_by "interrupted". Cancelling the
    awaiting task cancels the run and loses its records: use `stop` to end a run and keep them.
    """
    if spec.workers > 1 or spec.cluster is not None:
        loop = asyncio.get_running_loop()
        results, metrics, interrupted, extra = await loop.run_in_executor(None, _backend(spec), spec)
        return assemble(spec, results, metrics, interrupted=interrupted, extra_check=extra)
    runner = _single_runner(spec, stop or (lambda: False))
    return await runner.run_to_load_run()


class _SingleRun:
    """A single-worker run, its metrics scrapes, and the state kept if it dies half-way."""

    def __init__(self, spec: LoadSpec, should_stop: Callable[[], bool]) -> None:
        self.spec = spec
        self.before: dict[str, Any] | None = None
        self.worker = WorkerRun(spec.plans()[0], should_stop=should_stop, between=self._between)

    async def _between(self) -> None:
        if self.spec.scrape_metrics:
            from pytest_inferaccept.load import telemetry

            self.before = await telemetry.scrape(self.spec.base_url, timeout=self.spec.metrics_timeout,
                                                 api_key=self.spec.api_key)

    async def run_to_load_run(self) -> LoadRun:
        from pytest_inferaccept.load import telemetry

        result = await self.worker.run()
        metrics: dict[str, Any] = {}
        if self.before is not None:
            after = await telemetry.scrape(self.spec.base_url, timeout=self.spec.metrics_timeout,
                                           api_key=self.spec.api_key)
            metrics = telemetry.deltas(self.before, after)
        return assemble(self.spec, [result], metrics)

    def salvage(self) -> LoadRun:
        """A LoadRun from whatever was recorded, when the run itself could not finish."""
        w = self.worker
        w.close_pending()
        result = WorkerResult(worker=0, records=w.records, stopped_by="interrupted",
                              loop_lags=list(w.loop_lags), turnarounds=list(w.turnarounds),
                              plan={"mode": self.spec.mode})
        return assemble(self.spec, [result], {}, interrupted=True)


def _single_runner(spec: LoadSpec, should_stop: Callable[[], bool]) -> _SingleRun:
    return _SingleRun(spec, should_stop)


def run_load(spec: LoadSpec) -> LoadRun:
    """Run a load test and return what it measured; blocking.

    One worker runs in this thread on a fresh event loop (in a helper thread when this thread
    already runs one); more workers run as processes, or as Ray actors when `spec.cluster` is set.
    Ctrl-C raises LoadInterrupted with the run.
    """
    stop = threading.Event()
    if spec.workers > 1 or spec.cluster is not None:
        results, metrics, interrupted, extra = _backend(spec)(spec)
        run = assemble(spec, results, metrics, interrupted=interrupted, extra_check=extra)
        if interrupted:
            raise LoadInterrupted(run)
        return run
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        run = _run_here(spec, stop, handle_sigint=threading.current_thread() is threading.main_thread())
    else:
        run = _run_in_thread(spec, stop)
    if run.stopped_by == "interrupted":
        raise LoadInterrupted(run)
    return run


Backend = Callable[[LoadSpec], tuple[list[WorkerResult], dict[str, Any], bool, dict[str, Any]]]


def _backend(spec: LoadSpec) -> Backend:
    """Where several workers run: Ray actors (--load-cluster; Ray is imported there only) or processes."""
    if spec.cluster is not None:
        from pytest_inferaccept.load.cluster import run_actors

        return run_actors
    from pytest_inferaccept.load.workers import run_processes

    return run_processes


def _run_here(spec: LoadSpec, stop: threading.Event, *, handle_sigint: bool) -> LoadRun:
    single = _SingleRun(spec, stop.is_set)
    loop = new_loop(spec.loop)
    previous: Any = None
    if handle_sigint:
        previous = signal.getsignal(signal.SIGINT)

        def on_sigint(signum: int, frame: object) -> None:
            if stop.is_set():
                raise KeyboardInterrupt  # a second Ctrl-C: stop at once
            stop.set()

        signal.signal(signal.SIGINT, on_sigint)
    try:
        return loop.run_until_complete(single.run_to_load_run())
    except KeyboardInterrupt:
        raise LoadInterrupted(single.salvage()) from None
    finally:
        if handle_sigint:
            signal.signal(signal.SIGINT, previous)
        _close_loop(loop)


def _run_in_thread(spec: LoadSpec, stop: threading.Event) -> LoadRun:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["run"] = _run_here(spec, stop, handle_sigint=False)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="inferaccept-load", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.1)
    except KeyboardInterrupt:
        stop.set()
        thread.join()
    if "error" in box:
        raise box["error"]
    run: LoadRun = box["run"]
    return run


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def write_records(path: str | os.PathLike[str],
                  runs: Mapping[str, LoadRun] | Iterable[tuple[str, LoadRun]]) -> None:
    """Write every record of every run as JSONL, each line with its run's label (a test id)."""
    pairs = runs.items() if isinstance(runs, Mapping) else runs
    with Path(path).open("w", encoding="utf-8") as fh:
        for label, run in pairs:
            for rec in run.records:
                fh.write(json.dumps({"run": label, **rec.to_json()}, separators=(",", ":")) + "\n")


def read_records(path: str | os.PathLike[str]) -> dict[str, list[RequestRecord]]:
    """Read a file written by `write_records`: run label -> records."""
    out: dict[str, list[RequestRecord]] = {}
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                data = json.loads(line)
                label = data.pop("run")
                out.setdefault(label, []).append(RequestRecord.from_json(data))
    return out
