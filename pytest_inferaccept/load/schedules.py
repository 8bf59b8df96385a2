"""One worker's run on its own event loop: warm-up, then a closed, open or replay schedule.

Closed loop: `concurrency` coroutines, each sending its next request as soon as its previous one
ended (no semaphore, so no bursts). Open loop: requests sent at absolute target times drawn from
exponential (Poisson) or gamma gaps; replay: at a trace's recorded offsets. Targets are absolute,
so sleeping late never accumulates into drift, and each record keeps `scheduled` so the lag shows.
Every run is bounded by a hard deadline; whatever is in flight then is cancelled and recorded.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_inferaccept.load.client import ClientLimits, StreamClient, build_body, make_session
from pytest_inferaccept.load.records import RequestKind, RequestRecord
from pytest_inferaccept.load.workloads import Workload

Mode = Literal["closed", "open", "replay"]
StopReason = Literal["requests", "duration", "max_seconds", "interrupted"]

_EARLY = 0.0015
"""Wake this long before a send target: event-loop timers overshoot by up to ~1.3 ms."""
_TICK = 0.01
"""Interval of the event-loop lag sampler (and of polling the stop flag)."""


class PhaseAborted(Exception):
    """Raised by a between-phases hook when the run must not go on (another worker failed)."""


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Everything one worker needs for its share of a run (picklable, for worker processes)."""

    worker: int = 0
    workers: int = 1
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    kind: RequestKind = "chat"
    mode: Mode
    concurrency: int = 1
    """This worker's concurrency (closed loop)."""
    rate: float = 0.0
    """This worker's rate in requests/s (open loop)."""
    burstiness: float = 1.0
    requests: int | None = None
    """This worker's measured requests (None: until the duration ends)."""
    duration: float | None = None
    warmup: int = 0
    """This worker's warm-up requests."""
    warmup_offset: int = 0
    """Requests with index below this are warm-up requests (the run's total warm-up count)."""
    max_seconds: float
    workload: Workload
    positions: tuple[int, ...] | None = None
    """Replay: the trace positions this worker sends, in arrival order."""
    limits: ClientLimits = field(default_factory=ClientLimits)
    extra_body: Mapping[str, Any] | None = None
    seed: int = 0
    loop: Literal["auto", "asyncio", "uvloop"] = "auto"


@dataclass(kw_only=True)
class WorkerResult:
    """What one worker measured, on its own clock (seconds since its t0)."""

    worker: int
    records: list[RequestRecord]
    stopped_by: StopReason
    phase_start: float | None = None
    """When the measured phase began (None: it never did)."""
    phase_end: float | None = None
    loop_lags: list[float] = field(default_factory=list)
    """Event-loop lag samples during the measured phase (seconds late per ~10 ms tick)."""
    turnarounds: list[float] = field(default_factory=list)
    """Closed loop: seconds from a request's end to the same slot's next send."""
    cpu_seconds: float = 0.0
    """CPU of the event-loop thread during the measured phase."""
    process_cpu_seconds: float = 0.0
    loop_impl: str = "asyncio"
    plan: dict[str, Any] = field(default_factory=dict)
    t0: float = 0.0
    """This worker's t0 as a raw reading of its clock (perf_counter: CLOCK_MONOTONIC on Linux, shared
    by the processes of one machine), so `t0 + record time` can be set against another process's
    timestamps, such as a server's own log. Only meaningful on the same machine."""


def gaps(rate: float, burstiness: float, rng: random.Random) -> Callable[[], float]:
    """Inter-arrival gaps with mean 1/rate: exponential (burstiness 1) or gamma of that shape."""
    if burstiness == 1.0:
        return lambda: rng.expovariate(rate)
    scale = 1.0 / (rate * burstiness)
    return lambda: rng.gammavariate(burstiness, scale)


class WorkerRun:
    """Runs one Plan on the running event loop and returns a WorkerResult."""

    def __init__(self, plan: Plan, *, should_stop: Callable[[], bool] = lambda: False,
                 between: Callable[[], Awaitable[None]] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.plan = plan
        self.should_stop = should_stop
        self.between = between
        self.clock = clock
        self.records: list[RequestRecord] = []
        self.pending: dict[int, RequestRecord] = {}
        """Records whose request has not finished, by id() (records are unhashable)."""
        self.inflight: set[asyncio.Task[None]] = set()
        self.loop_lags: list[float] = []
        self._lag_epoch = 0
        self.turnarounds: list[float] = []
        self.stopping = False
        self.stopped_by: StopReason = "requests"
        self.t0 = 0.0
        self.hard_deadline = 0.0
        self._stop_event: asyncio.Event | None = None
        self._client: StreamClient | None = None

    async def run(self) -> WorkerResult:
        """Warm up, measure, and return everything recorded."""
        plan = self.plan
        self.t0 = self.clock()
        self.hard_deadline = self.t0 + plan.max_seconds
        self._stop_event = asyncio.Event()
        limit = plan.concurrency if plan.mode == "closed" else 0
        session = make_session(limit=limit, connect_timeout=plan.limits.connect_timeout,
                               api_key=plan.api_key)
        self._client = StreamClient(session, plan.base_url, plan.kind, limits=plan.limits,
                                    t0=self.t0, clock=self.clock)
        ticker = asyncio.ensure_future(self._tick())
        result = WorkerResult(worker=plan.worker, records=self.records, stopped_by="requests",
                              loop_impl=_loop_name(), plan=_plan_json(plan))
        try:
            if plan.warmup:
                await self._phase(self._closed(min(plan.warmup, max(plan.concurrency, 1)),
                                               plan.warmup, None, warmup=True))
            if not self.stopping and self.between is not None:
                try:
                    await self.between()
                except PhaseAborted:
                    self.stopping, self.stopped_by = True, "interrupted"
            if not self.stopping:
                self.stopped_by = "requests"
                # Objects alive now (modules, sessions, warm-up records) are frozen out of the
                # cyclic collector: a full collection over them paused the loop ~50 ms mid-run.
                gc.collect()
                gc.freeze()
                self.loop_lags.clear()
                self._lag_epoch += 1  # a tick that slept through the collection above is not a lag
                cpu0, pcpu0 = time.thread_time(), time.process_time()
                result.phase_start = self.clock() - self.t0
                try:
                    await self._phase(self._measured())
                finally:
                    gc.unfreeze()
                result.phase_end = self.clock() - self.t0
                result.cpu_seconds = time.thread_time() - cpu0
                result.process_cpu_seconds = time.process_time() - pcpu0
        finally:
            ticker.cancel()
            await self._cancel_inflight()
            self.close_pending()
            await self._client.close()
            await session.close()
        result.stopped_by = self.stopped_by
        result.t0 = self.t0
        result.loop_lags = list(self.loop_lags)
        result.turnarounds = list(self.turnarounds)
        return result

    # -- phases ---------------------------------------------------------------------------------

    def _measured(self) -> Awaitable[None]:
        plan = self.plan
        if plan.mode == "closed":
            return self._closed(plan.concurrency, plan.requests, plan.duration, warmup=False)
        return self._open()

    async def _phase(self, body: Awaitable[None]) -> None:
        """Run one phase until it ends, the stop flag is set or the hard deadline passes."""
        assert self._stop_event is not None
        main = asyncio.ensure_future(body)
        stop = asyncio.ensure_future(self._stop_event.wait())
        try:
            remaining = max(self.hard_deadline - self.clock(), 0.0)
            await asyncio.wait({main, stop}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not main.done():
                self.stopping = True
                if not self._stop_event.is_set():
                    self.stopped_by = "max_seconds"
                main.cancel()
                await self._cancel_inflight()
                await asyncio.wait({main})
        if main.done() and not main.cancelled():
            exc = main.exception()
            if exc is not None:
                raise exc

    async def _closed(self, users: int, bound: int | None, duration: float | None, *,
                      warmup: bool) -> None:
        start = self.clock()
        counter = iter(range(bound)) if bound is not None else None
        taken = 0

        def next_position() -> int | None:
            nonlocal taken
            if self.stopping:
                return None
            if duration is not None and self.clock() - start >= duration:
                if not warmup:
                    self.stopped_by = "duration"
                return None
            if counter is not None and next(counter, None) is None:
                return None
            taken += 1
            return taken - 1

        async def user() -> None:
            prev_end: float | None = None
            while True:
                k = next_position()
                if k is None:
                    return
                rec, body = self._prepare(self._index(k, warmup), k, warmup)
                await self._send(rec, body)
                if prev_end is not None and not warmup:
                    self.turnarounds.append(rec.send - prev_end)
                prev_end = rec.end

        await asyncio.gather(*(user() for _ in range(users)))

    async def _open(self) -> None:
        plan = self.plan
        start = self.clock()
        if plan.mode == "replay":
            positions = plan.positions or ()
            if plan.requests is not None:
                positions = positions[:plan.requests]
            targets: Iterator[tuple[int, float]] = (
                (p, start + (plan.workload.item(p, 0).arrival or 0.0)) for p in positions)
        else:
            rng = random.Random(plan.seed * 7919 + plan.worker)
            gap = gaps(plan.rate, plan.burstiness, rng)

            def draw() -> Iterator[tuple[int, float]]:
                t = start
                k = 0
                while plan.requests is None or k < plan.requests:
                    t += gap()
                    yield k, t
                    k += 1
            targets = draw()
        for k, (position, target) in enumerate(targets):
            if self.stopping:
                break
            if plan.duration is not None and target - start >= plan.duration:
                self.stopped_by = "duration"
                break
            index = self._index(k, False)
            rec, body = self._prepare(index, position, False)
            rec.scheduled = target - self.t0
            try:
                await self._until(target)
            except asyncio.CancelledError:
                self._unsent(rec)  # never sent: not a request of this run
                raise
            if self.stopping:
                self._unsent(rec)
                break
            task = asyncio.ensure_future(self._send(rec, body))
            self.inflight.add(task)
            task.add_done_callback(self.inflight.discard)
        while self.inflight:
            await asyncio.wait(set(self.inflight))

    async def _until(self, target: float) -> None:
        clock = self.clock
        delay = target - clock()
        if delay > _EARLY:
            await asyncio.sleep(delay - _EARLY)
        while clock() < target and not self.stopping:
            await asyncio.sleep(0)  # the last ~1 ms: yield until due (timers are too coarse)

    def _unsent(self, rec: RequestRecord) -> None:
        if self.records and self.records[-1] is rec:
            self.records.pop()
        else:
            self.records.remove(rec)
        self.pending.pop(id(rec), None)

    # -- requests -------------------------------------------------------------------------------

    def _index(self, k: int, warmup: bool) -> int:
        """The run-wide unique index: warm-up 0..W-1, measured from W; workers interleave."""
        plan = self.plan
        base = 0 if warmup else plan.warmup_offset
        return base + plan.worker + k * plan.workers

    def _prepare(self, index: int, position: int, warmup: bool) -> tuple[RequestRecord, bytes]:
        plan = self.plan
        item = plan.workload.item(position, index)
        body = build_body(plan.kind, plan.model, prompt=item.prompt, messages=item.messages,
                          max_tokens=item.max_tokens, extra=plan.extra_body)
        rec = RequestRecord(index=index, worker=plan.worker, kind=plan.kind, warmup=warmup,
                            tags=item.tags, max_tokens=item.max_tokens if plan.kind != "embeddings" else None,
                            input_tokens_target=item.input_tokens)
        self.records.append(rec)
        self.pending[id(rec)] = rec
        return rec, body

    async def _send(self, rec: RequestRecord, body: bytes) -> None:
        assert self._client is not None
        await self._client.send(rec, body)
        self.pending.pop(id(rec), None)

    async def _cancel_inflight(self) -> None:
        tasks = [t for t in self.inflight if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def close_pending(self) -> None:
        """Records whose request never finished (cancelled before it could record it) are cancelled."""
        now = self.clock() - self.t0
        for rec in self.pending.values():
            if rec.error is None:
                rec.error = "cancelled"
                rec.error_detail = "the run ended while the request was in flight"
            if rec.end == 0.0:
                rec.send = rec.send or (rec.scheduled if rec.scheduled is not None else now)
                rec.end = now
        self.pending.clear()

    async def _tick(self) -> None:
        """Sample how late a ~10 ms sleep wakes up, and poll the stop flag."""
        assert self._stop_event is not None
        clock = self.clock
        while True:
            t = clock()
            epoch = self._lag_epoch
            await asyncio.sleep(_TICK)
            if epoch == self._lag_epoch:
                self.loop_lags.append(max(clock() - t - _TICK, 0.0))
            if not self.stopping and self.should_stop():
                self.stopping = True
                self.stopped_by = "interrupted"
                self._stop_event.set()


def new_loop(kind: Literal["auto", "asyncio", "uvloop"] = "auto") -> asyncio.AbstractEventLoop:
    """A fresh event loop: uvloop when installed (or asked for), else asyncio's default."""
    if kind != "asyncio":
        try:
            import uvloop  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            if kind == "uvloop":
                raise
        else:
            return uvloop.new_event_loop()  # type: ignore[no-any-return,unused-ignore]
    return asyncio.new_event_loop()


def _loop_name() -> str:
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def _plan_json(plan: Plan) -> dict[str, Any]:
    return {"worker": plan.worker, "mode": plan.mode, "concurrency": plan.concurrency,
            "rate": plan.rate, "requests": plan.requests, "duration": plan.duration,
            "warmup": plan.warmup}
