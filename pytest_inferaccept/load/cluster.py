"""The load workers as Ray actors (--load-cluster): the same per-worker run, on the cluster's nodes.

Each actor runs one `Plan` from `LoadSpec.plans()` with `WorkerRun` on its own thread and event
loop, as a local worker process does (workers.py); only where the plans run changes. The driver
(this process):

- connects to the cluster (or starts an in-process one for `local`) and creates one actor per
  plan with `scheduling_strategy="SPREAD"` and at most one CPU each;
- measures each actor's clock offset (offset = actor reading - midpoint of the driver's send and
  receive; of 5 calls the one with the shortest round trip is kept; error bound = its RTT / 2),
  before the run and after it (their difference bounds the drift);
- sends every actor the same start time, on the actor's own clock; after the warm-up, once every
  actor waits, scrapes /metrics and sends a common go time the same way;
- polls every actor every 0.5 s: finished records come back in batches while the run goes on,
  tagged with the node, and so does a list of the requests in flight;
- when an actor dies (RayActorError), its requests in flight at its last report are counted as
  lost client-side ("cancelled", the detail naming the node), the other actors are stopped, and
  the run ends with what was measured; the self-check says which worker on which node died.

Ray is imported here only, inside functions, so nothing else in the package loads it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.load.records import RequestKind, RequestRecord
from pytest_inferaccept.load.schedules import PhaseAborted, Plan, WorkerResult, WorkerRun, new_loop

if TYPE_CHECKING:
    from pytest_inferaccept.load.spec import LoadSpec

RAY_MISSING = "--load-cluster needs Ray, which is not installed: pip install 'pytest-inferaccept[ray]'"
ACTOR_PREFIX = "inferaccept-load-"
"""Actors are named ACTOR_PREFIX + run id + "-w" + worker (`ray list actors` shows them)."""
POLL_INTERVAL = 0.5
"""Seconds between the driver's polls of each actor (records come back in batches at this pace)."""
SWEEP_INTERVAL = 0.25
"""Seconds between an actor's sweeps of its finished records into the next batch."""
STARTUP_TIMEOUT = 60.0
"""Seconds for every actor to be placed, start and answer (a cold node imports aiohttp, pydantic)."""
START_DELAY = 0.5
"""Seconds from sending the start time to the start itself: every actor must have it by then."""
GO_DELAY = 0.25
"""The same for the measured phase, after the warm-up and the /metrics scrape."""
CLOCK_SAMPLES = 5
_GRACE = 10.0
_UNAVAILABLE_LIMIT = 20
"""Polls in a row an actor may be unavailable (a node's transient trouble) before it counts as dead."""
_MEASURED_STATES = ("warmed", "done", "failed")

_InFlight = tuple[int, bool, float, "float | None", RequestKind, tuple[str, ...], "int | None", "int | None"]
"""A request in flight, kept light: index, warm-up, send, scheduled, kind, tags, max_tokens, input target."""


class LoadActor:
    """One worker inside a Ray actor: `WorkerRun` on its own thread and event loop, polled by the driver.

    A plain class: `run_actors` turns it into a Ray actor (threaded, so `poll` and `stop` are
    answered while the run goes on). Records are swept on the run's own loop, where no request
    is half-recorded, into a batch that `poll` hands over.
    """

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.node = _node_address()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ready: list[RequestRecord] = []
        self._inflight: list[_InFlight] = []
        self._state = "created"
        self._error: str | None = None
        self._go_at: float | None = None
        self._t0: float | None = None
        self._result: WorkerResult | None = None
        self._thread: threading.Thread | None = None
        self._cursor = 0
        self._shipped: set[int] = set()

    def info(self) -> dict[str, Any]:
        """Where this actor runs: node address, host name, process, cores and load average."""
        import ray

        return {"node": self.node, "hostname": socket.gethostname(), "pid": os.getpid(),
                "node_id": ray.get_runtime_context().get_node_id(), "cpus": os.cpu_count(),
                "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}

    def clock(self) -> float:
        """This actor's monotonic clock (the one its records are stamped on)."""
        return time.perf_counter()

    def start(self, at: float) -> None:
        """Start the run on its own thread; it begins at `at` on this actor's clock."""
        self._state = "starting"
        self._thread = threading.Thread(target=self._main, args=(at,), name="inferaccept-load-actor",
                                        daemon=True)
        self._thread.start()

    def go(self, at: float) -> None:
        """Begin the measured phase at `at` on this actor's clock (after the warm-up)."""
        self._go_at = at

    def stop(self) -> None:
        """Stop the run: what is in flight is cancelled and recorded, and the records still come back."""
        self._stop.set()

    def poll(self) -> dict[str, Any]:
        """The records finished since the last poll, the requests in flight, and the run's state."""
        with self._lock:
            batch, self._ready = self._ready, []
            return {"state": self._state, "records": batch, "inflight": list(self._inflight),
                    "error": self._error, "t0": self._t0}

    def state(self) -> str:
        """The run's phase: created, starting, warmup, warmed, measuring, done or failed."""
        return self._state

    def result(self) -> WorkerResult | None:
        """The run's result without its records (they came with the polls); None if it never ended."""
        return self._result

    # -- the run, on its own thread ---------------------------------------------------------------

    def _main(self, at: float) -> None:
        loop = new_loop(self.plan.loop)
        try:
            loop.run_until_complete(self._drive(at))
        except BaseException:
            with self._lock:
                self._error = traceback.format_exc()
                self._state = "failed"
        finally:
            loop.close()

    async def _drive(self, at: float) -> None:
        worker = WorkerRun(self.plan, should_stop=self._stop.is_set, between=self._between)
        await _sleep_until(at)
        self._state = "warmup"
        sweeper = asyncio.ensure_future(self._sweeping(worker))
        try:
            self._t0 = time.perf_counter()  # WorkerRun takes its t0 on entry, a few µs later
            result = await worker.run()
        except BaseException:
            worker.close_pending()
            self._sweep(worker)
            raise
        finally:
            sweeper.cancel()
        self._t0 = result.t0
        self._sweep(worker)
        result.records = []
        with self._lock:
            self._result = result
            self._state = "done"

    async def _between(self) -> None:
        """Wait, after the warm-up, for the driver's common go time."""
        with self._lock:
            self._state = "warmed"
        limit = time.perf_counter() + self.plan.max_seconds + STARTUP_TIMEOUT
        while self._go_at is None:
            if self._stop.is_set() or time.perf_counter() > limit:
                raise PhaseAborted
            await asyncio.sleep(0.005)
        await _sleep_until(self._go_at)
        with self._lock:
            self._state = "measuring"

    async def _sweeping(self, worker: WorkerRun) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL)
            self._sweep(worker)

    def _sweep(self, worker: WorkerRun) -> None:
        """Move finished records into the next batch; note the requests in flight (on the run's loop)."""
        records, pending = worker.records, worker.pending
        fresh = []
        # Records before the cursor are all shipped; after it, some finish out of order. A record
        # removed unsent (open loop) is one still pending, so it is never before the cursor.
        for rec in records[self._cursor:]:
            key = id(rec)
            if key in self._shipped or key in pending:
                continue
            rec.node = self.node
            fresh.append(rec)
            self._shipped.add(key)
        while self._cursor < len(records) and id(records[self._cursor]) in self._shipped:
            self._shipped.discard(id(records[self._cursor]))
            self._cursor += 1
        # Open loop: a record waiting for its send time is pending but not sent, so not in flight.
        inflight = [(r.index, r.warmup, r.send, r.scheduled, r.kind, r.tags, r.max_tokens,
                     r.input_tokens_target) for r in pending.values()
                    if not (r.scheduled is not None and r.send == 0.0)]
        with self._lock:
            self._ready.extend(fresh)
            self._inflight = inflight


async def _sleep_until(target: float) -> None:
    """Sleep until `target` on this process's perf_counter, the last ~2 ms by yielding."""
    delay = target - time.perf_counter()
    if delay > 0.002:
        await asyncio.sleep(delay - 0.002)
    while time.perf_counter() < target:
        await asyncio.sleep(0)


def _node_address() -> str:
    try:
        import ray

        return str(ray.util.get_node_ip_address())
    except Exception:  # outside Ray (a unit test): the host's name
        return socket.gethostname()


# -- the driver -------------------------------------------------------------------------------------


@dataclass
class _Actor:
    """The driver's view of one actor."""

    plan: Plan
    handle: Any
    info: dict[str, Any] = field(default_factory=dict)
    offset: float = 0.0
    rtt: float = 0.0
    offset_after: float | None = None
    rtt_after: float | None = None
    start_at: float = 0.0
    """The common start on this actor's clock."""
    t0: float | None = None
    state: str = "created"
    records: list[RequestRecord] = field(default_factory=list)
    inflight: list[_InFlight] = field(default_factory=list)
    batches: int = 0
    poll_ref: Any = None
    unavailable: int = 0
    error: str | None = None
    died: str | None = None
    lost: int = 0

    @property
    def node(self) -> str:
        """The node's address, or a placeholder when the actor never answered."""
        return str(self.info.get("node") or "unknown")

    @property
    def finished(self) -> bool:
        """True when nothing more will come from this actor."""
        return self.died is not None or self.state in ("done", "failed")


def connect(address: str) -> bool:
    """Connect this process to Ray at `address`; True when this call started a local Ray.

    A process that already has a Ray connection (a test's or a conftest's `ray.init`) keeps it.
    """
    try:
        import ray
    except ImportError:
        raise RuntimeError(RAY_MISSING) from None
    if ray.is_initialized():
        return False
    if address == "local":
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        return True
    target = (os.environ.get("RAY_ADDRESS") or "auto") if address == "auto" else address
    ray.init(address=target, log_to_driver=False)
    return False


def run_actors(spec: LoadSpec) -> tuple[list[WorkerResult], dict[str, Any], bool, dict[str, Any]]:
    """Run `spec` on Ray actors: (results, server metric deltas, interrupted, extra self-check).

    The same contract as `workers.run_processes`, so `engine.assemble` merges the results.
    """
    assert spec.cluster is not None
    started_here = connect(spec.cluster)
    import ray

    plans = spec.plans()
    cpus = float(ray.cluster_resources().get("CPU", 0.0))
    if cpus <= 0:
        raise RuntimeError(f"the Ray cluster at {spec.cluster} has no CPUs to place load workers on")
    # One core per actor where the cluster has them; on fewer, they share (the self-check shows it).
    per_actor = min(1.0, int(cpus / len(plans) * 100) / 100) or 0.01
    remote: Any = ray.remote(LoadActor)
    run_id = uuid.uuid4().hex[:8]
    actors = [_Actor(plan=plan, handle=remote.options(
        name=f"{ACTOR_PREFIX}{run_id}-w{plan.worker}", num_cpus=per_actor, max_concurrency=4,
        scheduling_strategy="SPREAD").remote(plan)) for plan in plans]
    driver = _Driver(spec, actors)
    try:
        results, metrics, interrupted = driver.run()
    finally:
        for a in actors:
            ray.kill(a.handle, no_restart=True)
    extra = driver.selfcheck(started_here=started_here, actor_cpus=per_actor)
    if not results and not interrupted:
        detail = "\n".join(f"worker {w}: {msg}" for w, msg in extra.get("worker_errors", {}).items())
        raise RuntimeError(f"no Ray load actor returned a result:\n{detail}")
    return results, metrics, interrupted, extra


class _Driver:
    """Starts the actors together, polls them for records, and turns deaths into lost requests."""

    def __init__(self, spec: LoadSpec, actors: list[_Actor]) -> None:
        import ray

        self.ray = ray
        self.spec = spec
        self.actors = actors
        self.before: dict[str, Any] | None = None
        self.go_sent = False
        self.stopping = False

    def run(self) -> tuple[list[WorkerResult], dict[str, Any], bool]:
        """Start, poll until every actor has finished or died, and collect."""
        from pytest_inferaccept.load import telemetry

        ray = self.ray
        interrupted = False
        try:
            self._start()
            deadline = time.perf_counter() + START_DELAY + self.actors[0].plan.max_seconds + 2 * _GRACE
            while not all(a.finished for a in self.actors):
                self._poll_round()
                self._advance()
                if time.perf_counter() > deadline:
                    self._give_up("no result within the run's hard bound and its grace")
                    break
        except KeyboardInterrupt:
            interrupted = True
            self._stop_all()
            deadline = time.perf_counter() + _GRACE
            while True:  # an actor that was never started ("created") has nothing to hand back
                self._poll_round()
                if (all(a.finished or a.state == "created" for a in self.actors)
                        or time.perf_counter() > deadline):
                    break
        results = [self._result(a) for a in self.actors]
        for a in self.actors:
            if a.died is None and a.error is None:
                a.offset_after, a.rtt_after = _clock_offset(ray, a.handle)
        metrics: dict[str, Any] = {}
        if self.before is not None and not interrupted:
            after = telemetry.scrape_blocking(self.spec.base_url, timeout=self.spec.metrics_timeout,
                                              api_key=self.spec.api_key)
            metrics = telemetry.deltas(self.before, after)
        return [r for r in results if r is not None], metrics, interrupted

    def _start(self) -> None:
        ray = self.ray
        refs = [a.handle.info.remote() for a in self.actors]
        _, waiting = ray.wait(refs, num_returns=len(refs), timeout=STARTUP_TIMEOUT)
        if waiting:
            cpus = ray.cluster_resources().get("CPU", 0)
            raise RuntimeError(
                f"{len(waiting)} of {len(refs)} Ray actors did not start within {STARTUP_TIMEOUT:g} s "
                f"(the cluster has {cpus:g} CPUs): ask for fewer --load-workers or add nodes")
        for a, ref in zip(self.actors, refs, strict=True):
            a.info = ray.get(ref)
            a.offset, a.rtt = _clock_offset(ray, a.handle)
        start = time.perf_counter() + START_DELAY
        for a in self.actors:
            a.start_at = start + a.offset
        ray.get([a.handle.start.remote(a.start_at) for a in self.actors])

    def _poll_round(self) -> None:
        """One poll of every live actor; waits at most POLL_INTERVAL, and at least that long overall."""
        ray = self.ray
        began = time.perf_counter()
        live = [a for a in self.actors if not a.finished]
        for a in live:
            if a.poll_ref is None:
                a.poll_ref = a.handle.poll.remote()
        refs = [a.poll_ref for a in live]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=POLL_INTERVAL)
        done = set(ready)
        for a in live:
            if a.poll_ref in done:
                ref, a.poll_ref = a.poll_ref, None
                self._take(a, ref)
        rest = POLL_INTERVAL - (time.perf_counter() - began)
        if rest > 0 and not all(a.finished for a in self.actors):
            time.sleep(rest)

    def _take(self, a: _Actor, ref: Any) -> None:
        from ray.exceptions import ActorUnavailableError, RayActorError, RayError

        try:
            reply = self.ray.get(ref)
        except ActorUnavailableError as exc:  # transient (a node's network): try again, up to a limit
            a.unavailable += 1
            if a.unavailable >= _UNAVAILABLE_LIMIT:
                self._died(a, exc)
            return
        except (RayActorError, RayError) as exc:
            self._died(a, exc)
            return
        a.unavailable = 0
        a.batches += 1
        a.records.extend(reply["records"])
        a.inflight = reply["inflight"]
        a.state = reply["state"]
        a.t0 = reply["t0"] if reply["t0"] is not None else a.t0
        if reply["error"]:
            a.error = reply["error"]
            self._stop_all()

    def _advance(self) -> None:
        """The common go after the warm-up: once every actor waits, scrape /metrics, then go."""
        if self.go_sent or self.stopping:
            return
        if not all(a.state in _MEASURED_STATES for a in self.actors):
            return
        if any(a.state != "warmed" for a in self.actors):
            self._stop_all()  # one ended before the measured phase: nobody starts it
            return
        from pytest_inferaccept.load import telemetry

        if self.spec.scrape_metrics:
            self.before = telemetry.scrape_blocking(self.spec.base_url, timeout=self.spec.metrics_timeout,
                                                    api_key=self.spec.api_key)
        go = time.perf_counter() + GO_DELAY
        for a in self.actors:
            a.handle.go.remote(go + a.offset)
        self.go_sent = True

    def _died(self, a: _Actor, exc: BaseException) -> None:
        """The actor is gone: its requests in flight at its last report are lost, the others stop."""
        a.died = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]
        now = time.perf_counter() + a.offset - (a.t0 if a.t0 is not None else a.start_at)
        detail = (f"worker {a.plan.worker} on node {a.node} died with this request in flight: lost by the "
                  "client, not an error of the server")
        for index, warmup, send, scheduled, kind, tags, max_tokens, target in a.inflight:
            a.records.append(RequestRecord(
                index=index, worker=a.plan.worker, kind=kind, warmup=warmup, tags=tags, scheduled=scheduled,
                send=send, end=max(now, send), error="cancelled", error_detail=detail, max_tokens=max_tokens,
                input_tokens_target=target, node=a.node))
        a.lost = len(a.inflight)
        a.inflight = []
        self._stop_all()

    def _give_up(self, why: str) -> None:
        for a in self.actors:
            if not a.finished:
                self._died(a, TimeoutError(why))

    def _stop_all(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        for a in self.actors:
            if not a.finished:
                a.handle.stop.remote()

    def _result(self, a: _Actor) -> WorkerResult | None:
        """The actor's result with every record it sent back; a dead one's from what arrived."""
        result = None
        if a.died is None and a.state == "done":
            try:
                result = self.ray.get(a.handle.result.remote(), timeout=_GRACE)
            except Exception as exc:
                a.died = f"{type(exc).__name__} while fetching its result"
        if result is None:
            if not a.records and a.died is None:
                return None
            result = WorkerResult(worker=a.plan.worker, records=[], stopped_by="interrupted",
                                  t0=a.t0 or a.start_at, plan=_plan_summary(a.plan))
        result.records = a.records
        return result

    def selfcheck(self, *, started_here: bool, actor_cpus: float) -> dict[str, Any]:
        """The cluster part of the self-check: nodes, clock offsets with their bounds, deaths."""
        ray = self.ray
        workers = []
        nodes: dict[str, dict[str, Any]] = {}
        for a in self.actors:
            drift = None if a.offset_after is None else a.offset_after - a.offset
            workers.append({
                "worker": a.plan.worker, "node": a.node, "hostname": a.info.get("hostname"),
                "pid": a.info.get("pid"),
                "clock_offset_s": a.offset, "clock_offset_error_s": a.rtt / 2, "clock_rtt_s": a.rtt,
                "clock_offset_after_s": a.offset_after,
                "clock_offset_after_error_s": None if a.rtt_after is None else a.rtt_after / 2,
                "clock_drift_s": drift,
                "start_skew_s": None if a.t0 is None else a.t0 - a.start_at,
                "t0_on_driver_clock_s": None if a.t0 is None else a.t0 - a.offset,
                "batches": a.batches, "records": len(a.records), "lost": a.lost,
                "died": a.died or (_last_line(a.error) if a.error else None),
            })
            node = nodes.setdefault(a.node, {"hostname": a.info.get("hostname"), "cpus": a.info.get("cpus"),
                                             "load_avg": a.info.get("load_avg"), "workers": []})
            node["workers"].append(a.plan.worker)
        out: dict[str, Any] = {"cluster": {
            "address": self.spec.cluster, "ray_version": getattr(ray, "__version__", None),
            "started_here": started_here, "actor_cpus": actor_cpus, "nodes": nodes, "workers": workers,
            "clock": ("offset = actor's perf_counter - midpoint of the driver's send and receive, the "
                      f"shortest of {CLOCK_SAMPLES} round trips; error bound = that round trip / 2"),
        }}
        errors = {str(a.plan.worker): a.error or f"died: {a.died}" for a in self.actors if a.error or a.died}
        if errors:
            out["worker_errors"] = errors
        return out


def _clock_offset(ray: Any, handle: Any) -> tuple[float, float]:
    """(offset, round trip) of an actor's clock against this process's, from the fastest of a few calls."""
    best: tuple[float, float] | None = None
    for _ in range(CLOCK_SAMPLES):
        sent = time.perf_counter()
        reading = float(ray.get(handle.clock.remote()))
        got = time.perf_counter()
        sample = (reading - (sent + got) / 2, got - sent)
        if best is None or sample[1] < best[1]:
            best = sample
    assert best is not None
    return best


def _plan_summary(plan: Plan) -> dict[str, Any]:
    return {"worker": plan.worker, "mode": plan.mode, "concurrency": plan.concurrency, "rate": plan.rate,
            "requests": plan.requests, "duration": plan.duration, "warmup": plan.warmup}


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return f"its run raised {lines[-1].strip()}" if lines else "its run failed"
