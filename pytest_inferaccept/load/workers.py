"""Several local worker processes for one run: spawned, started together, results merged.

Processes are started with `spawn` (the parent may be a pytest process with threads, which
`fork` would copy in a broken state). Each worker runs its own event loop on its own clock, t0 =
the release of the common start barrier. Two more barrier rounds let the parent scrape /metrics
between the warm-up and the measured phase. Workers ignore SIGINT: the parent turns Ctrl-C into
the shared stop flag, so each worker cancels its in-flight requests and still reports its records.
This module imports no pytest; `worker_main` is the entry point each process runs.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import signal
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.load.schedules import PhaseAborted, Plan, WorkerResult, WorkerRun, new_loop

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Barrier, Event

    from pytest_inferaccept.load.spec import LoadSpec

STARTUP_TIMEOUT = 60.0
"""Seconds for every worker process to start (import aiohttp, pydantic) and reach the barrier."""
_GRACE = 10.0
"""Seconds a worker gets, after its hard bound or a stop, to hand its records back."""


def worker_main(plan: Plan, barrier: Barrier, stop: Event, results: Queue[Any]) -> None:
    """Entry point of one worker process: wait for the start, run the plan, send back the result."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        try:
            barrier.wait(STARTUP_TIMEOUT)
        except threading.BrokenBarrierError:
            results.put((plan.worker, "aborted", None))
            return

        async def between() -> None:
            # Blocking the loop here is fine: nothing is in flight between the phases.
            try:
                barrier.wait(plan.max_seconds + _GRACE)  # every worker finished its warm-up
                barrier.wait(STARTUP_TIMEOUT)  # the parent scraped /metrics: go
            except threading.BrokenBarrierError:
                raise PhaseAborted from None

        loop = new_loop(plan.loop)
        try:
            result = loop.run_until_complete(WorkerRun(plan, should_stop=stop.is_set, between=between).run())
        finally:
            loop.close()
        results.put((plan.worker, "ok", result))
    except BaseException:
        results.put((plan.worker, "error", traceback.format_exc()))


def run_processes(spec: LoadSpec) -> tuple[list[WorkerResult], dict[str, Any], bool, dict[str, Any]]:
    """Run `spec` in worker processes: (results, server metric deltas, interrupted, extra self-check)."""
    from pytest_inferaccept.load import telemetry

    plans = spec.plans()
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(plans) + 1)
    stop = ctx.Event()
    results: Queue[Any] = ctx.Queue()
    procs = [ctx.Process(target=worker_main, args=(plan, barrier, stop, results),
                         name=f"inferaccept-load-{plan.worker}", daemon=True) for plan in plans]
    collected: dict[int, WorkerResult] = {}
    errors: dict[int, str] = {}
    watching = threading.Event()
    interrupted = False
    before = after = None
    hard = plans[0].max_seconds
    try:
        for p in procs:
            p.start()
        watcher = threading.Thread(target=_watch, args=(procs, barrier, watching), daemon=True)
        watcher.start()
        try:
            barrier.wait(STARTUP_TIMEOUT)  # all started: their t0
            barrier.wait(hard + _GRACE)  # all warmed up
            if spec.scrape_metrics:
                before = telemetry.scrape_blocking(spec.base_url, timeout=spec.metrics_timeout,
                                                   api_key=spec.api_key)
            barrier.wait(STARTUP_TIMEOUT)  # go
            watching.set()  # from here on a worker that exits has simply finished
        except threading.BrokenBarrierError:
            stop.set()  # a worker died or timed out: the others stop too and report
        _collect(results, procs, collected, errors, deadline=time.monotonic() + hard + 2 * _GRACE)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        barrier.abort()
        _collect(results, procs, collected, errors, deadline=time.monotonic() + _GRACE)
    finally:
        watching.set()
        for p in procs:
            p.join(2.0)
            if p.is_alive():
                p.terminate()
                p.join(2.0)
    if before is not None and not interrupted:
        after = telemetry.scrape_blocking(spec.base_url, timeout=spec.metrics_timeout, api_key=spec.api_key)
    for plan, p in zip(plans, procs, strict=True):
        if plan.worker not in collected and plan.worker not in errors:
            errors[plan.worker] = f"worker process ended without a result (exit code {p.exitcode})"
    if interrupted:
        # Stopped before a worker got going is not a failure: an empty run says what happened.
        errors = {w: msg for w, msg in errors.items() if msg != "aborted"}
    if not collected and not interrupted:
        detail = "\n".join(f"worker {w}: {msg}" for w, msg in sorted(errors.items()))
        raise RuntimeError(f"no load worker returned a result:\n{detail}")
    extra = {"worker_errors": {str(w): msg for w, msg in sorted(errors.items())}} if errors else {}
    return ([collected[w] for w in sorted(collected)], telemetry.deltas(before, after), interrupted, extra)


def _collect(results: Queue[Any], procs: list[Any], collected: dict[int, WorkerResult],
             errors: dict[int, str], *, deadline: float) -> None:
    """Take results until every worker answered, all are dead with nothing left, or the deadline."""
    expected = len(procs)
    while len(collected) + len(errors) < expected and time.monotonic() < deadline:
        try:
            worker, status, payload = results.get(timeout=0.2)
        except queue.Empty:
            if not any(p.is_alive() for p in procs):
                # A dead process may still have its result in the pipe: one last look.
                try:
                    worker, status, payload = results.get(timeout=0.5)
                except queue.Empty:
                    return
            else:
                continue
        if status == "ok":
            collected[worker] = payload
        else:
            errors[worker] = payload or status


def _watch(procs: list[Any], barrier: Barrier, done: threading.Event) -> None:
    """Break the barrier when a worker ends before the start, so nobody waits for a dead process."""
    while not done.wait(0.1):
        if any(p.exitcode is not None for p in procs):
            barrier.abort()
            return
