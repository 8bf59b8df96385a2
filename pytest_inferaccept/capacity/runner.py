"""The capacity runner: the scenarios a test starts through `loadgen`, bound to the session.

`CapacityRunner` gives each scenario module (ladder, sweep, soak, push, push_length, lengths,
interference, prefix_cache, multi_turn, recovery) its step runner (`measure_step`: one bounded load
through the test's spec builder, its records kept, judged by nobody alone), a telemetry sampler,
a liveness probe and the session's settings, and keeps what it returns on the test's ledger. A
sweep or a soak built around the ladder's knee gets that knee in its plan (`SweepPlan`,
`SoakPlan`), never from state left behind. A kind added later is a module with a `start(runner,
**options)` function and a line in scenario_kinds.py: `loadgen.scenario(kind, ...)` starts it.
Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.run.testload import NotApplicable, TestLedger

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.capacity.scenarios import CapacityResult
    from pytest_inferaccept.correctness.under_load import UnderLoad
    from pytest_inferaccept.load import LoadRun, LoadSpec, Workload
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.model import CapacityKnee
    from pytest_inferaccept.run.load import LoadResult
    from pytest_inferaccept.server import ServerUnderTest
    from pytest_inferaccept.settings import Settings


@dataclass(frozen=True)
class SweepPlan:
    """The sweep's rates, why these, and the ladder knee they were built around (None: not from a knee).

    Unpacks as `rates, why` (what `rates_around_knee()` returned before it carried the knee).
    """

    rates: tuple[float, ...]
    why: str
    knee: CapacityKnee | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.rates, self.why))


@dataclass(frozen=True)
class SoakPlan:
    """The soak's concurrency, where it came from, and the ladder knee it is a share of (None: not one).

    Unpacks as `concurrency, basis` (what `soak_level()` returned before it carried the knee).
    """

    concurrency: int
    basis: str
    knee: CapacityKnee | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.concurrency, self.basis))


class CapacityRunner:
    """Starts a test's capacity scenarios against the session's server and keeps their results."""

    def __init__(self, *, server: ServerUnderTest, settings: Settings, slo: SloSpec | None, label: str,
                 ledger: TestLedger, checked_spec: Callable[[dict[str, Any]], LoadSpec],
                 result: Callable[[LoadRun, str], LoadResult], launched_pid: int | None = None,
                 restart: Callable[..., dict[str, Any]] | None = None) -> None:
        self.server = server
        self.settings = settings
        self.slo = slo
        self.label = label
        self.ledger = ledger
        self.history = ledger.history
        """Every capacity scenario of the session so far (a sweep or a soak plan reads the ladder's)."""
        self.say = ledger.say
        """A progress line for the user (the terminal's `inferaccept:` lines, hidden under -q)."""
        self._spec_for = checked_spec
        """The test's spec builder: the session's server, key and bounds; bad input stops it cleanly."""
        self._run_result = result
        self._launched_pid = launched_pid
        self._restart = restart
        """Kill and restart the launched server (the session's); None when the plugin did not launch it."""
        self._under_load: UnderLoad | None = None
        """The known-answer items sent beside each load while `graded()` is open (None: not graded)."""

    def scenario(self, kind: str, **options: Any) -> CapacityResult:
        """Start a scenario by its kind (scenario_kinds.py): its method here, else its module's
        start(runner, **options)."""
        import importlib

        from pytest_inferaccept.scenario_kinds import by_name

        registered = by_name(kind)
        method = getattr(self, registered.method, None)
        if method is not None:
            return method(**options)  # type: ignore[no-any-return]
        module = importlib.import_module(f"pytest_inferaccept.capacity.{registered.module}")
        return self._record(module.start(self, **options))

    def measure_step(self, tag: str, **kwargs: Any) -> LoadResult:
        """One step of a capacity scenario: run and summarize it, keep its records, judge nothing."""
        from pytest_inferaccept.load import LoadInterrupted

        label = f"{self.label}[{tag}]"
        spec = self._spec_for(kwargs)
        try:
            run = self._beside(label, spec)
        except LoadInterrupted as stopped:
            self.ledger.keep_records(label, stopped.run)  # what was measured is kept
            raise
        self.ledger.keep_records(label, run)
        return self._run_result(run, label)

    def _beside(self, label: str, spec: LoadSpec) -> LoadRun:
        """run_load(spec), with the known-answer items sent beside it and placed on its clock while
        `graded()` is open. A single request in flight is the alone baseline itself: nothing is sent
        beside it (it would double it)."""
        from pytest_inferaccept.load import run_load

        grading = self._under_load
        if grading is None or (spec.concurrency is not None and spec.concurrency <= 1):
            return run_load(spec)
        level = spec.concurrency if spec.concurrency is not None else spec.rate
        with grading.beside(label, level) as sender:
            run = run_load(spec)
        grading.keep(sender, run)
        return run

    @contextmanager
    def graded(self, *, levels: int = 1, spread_over: float | None = None) -> Iterator[UnderLoad | None]:
        """Known-answer items graded beside the loads run inside the block (docs/correctness.md, "Under
        load"): chosen and answered alone on entry, sent beside each load, answered again on a normal
        exit; `levels` is how many loads the block plans (they share the 5% of a false NO-GO),
        `spread_over` the seconds of a single long load to spread them over. Yields the session, or
        None when --correctness-under-load is 0 or the set cannot be read (said, not graded)."""
        from pytest_inferaccept.correctness.items import ItemSetError, load_bundled, load_items
        from pytest_inferaccept.correctness.under_load import UnderLoad

        chosen = self.settings.correctness
        if not chosen.under_load_items or self._under_load is not None:
            yield None
            return
        try:
            pool = load_bundled() if chosen.set_path is None else load_items(chosen.set_path)
        except ItemSetError as exc:
            self.say(f"inferaccept: answers under load not graded: {exc}")
            yield None
            return
        grading = UnderLoad(base_url=self.server.base_url, model=self.server.model, pool=pool,
                            count=chosen.under_load_items, tolerance=chosen.tolerance,
                            real_change_tolerance=chosen.real_change_tolerance, comparisons=levels,
                            api_key=self.settings.api_key, timeout=self.settings.request_timeout,
                            spread_over=spread_over, say=self.say)
        grading.before()
        self._under_load = grading if grading.chosen else None
        try:
            yield grading
        finally:
            self._under_load = None
        grading.after()

    def sampler(self, interval: float = 1.0) -> Sampler:
        """Telemetry beside a scenario: /metrics gauges, the launched process's memory, GPUs."""
        from pytest_inferaccept.capacity.sampler import Sampler

        return Sampler(base_url=self.server.base_url, api_key=self.settings.api_key, interval=interval,
                       pid=self._launched_pid, gpu_command=self.settings.capacity.gpu_telemetry)

    def alive(self, timeout: float | None = None) -> tuple[bool, str]:
        """Does the server answer a one-token chat request within `timeout` (default: the request timeout)?"""
        from pytest_inferaccept.http import client_for

        body = {"model": self.server.model, "max_tokens": 1,
                "messages": [{"role": "user", "content": "Say OK."}]}
        try:
            with client_for(self.settings, self.server.base_url, read_timeout=timeout) as client:
                resp = client.post("/v1/chat/completions", json=body)
        except Exception as exc:
            return False, f"{type(exc).__name__}: {str(exc)[:200]}"
        if resp.status_code != 200:
            return False, f"HTTP {resp.status_code}"
        return True, f"HTTP 200 in {resp.elapsed.total_seconds():.2f} s"

    def _record(self, result: CapacityResult) -> CapacityResult:
        self.ledger.keep_scenario(result)
        self.say(f"inferaccept: {result.kind} {self.label}: {result.status.upper()}: {result.headline}")
        return result

    def ladder(self, levels: list[int] | tuple[int, ...] | None = None, *, requests: int | None = None,
               duration: float | None = None, settle: int | None = None, min_concurrency: int | None = None,
               workload: str | Path | Workload | None = None, graded: bool = False) -> CapacityResult:
        """Closed loop at each concurrency level until the breaker: knee and highest SLO-compliant level.

        `graded`: known-answer items graded at every level (`graded()`), the highest level where the
        answers held beside the knee."""
        from pytest_inferaccept.capacity.ladder import ladder

        cap = self.settings.capacity
        chosen = tuple(levels or cap.ladder)
        return self._record(self._maybe_graded(graded, len(chosen), lambda: ladder(
            self.measure_step, self.sampler(), levels=chosen,
            requests=requests or self.step_requests(), duration=duration or cap.step_duration,
            settle=cap.settle if settle is None else settle, slo=self.slo,
            breaker_errors=cap.breaker_error_rate, breaker_latency_s=cap.breaker_latency,
            min_level=min_concurrency or cap.min_concurrency, label=self.label, workload=workload,
            say=self.say)))

    def _maybe_graded(self, graded: bool, levels: int, make: Callable[[], CapacityResult],
                      spread_over: float | None = None) -> CapacityResult:
        """The scenario `make()` runs, with known-answer items graded beside its loads when `graded`."""
        if not graded:
            return make()
        with self.graded(levels=levels, spread_over=spread_over) as grading:
            result = make()
        return grading.apply(result) if grading is not None else result

    def step_requests(self) -> int:
        """Requests per capacity step: --capacity-step-requests, else the count the SLO plans for; says up
        front what the step's time bound and a too small count do to the SLO (docs/capacity.md)."""
        cap = self.settings.capacity
        if self.slo is None:
            return cap.step_requests
        from pytest_inferaccept.stats.plan import plan_run

        plan = plan_run(self.slo, point_estimate=self.settings.load.judge_on_point)
        requests = cap.step_requests if cap.step_requests_given else max(cap.step_requests, plan.planned)
        short = plan.refusal(requests)
        bound = plan.time_words(requests, cap.step_duration, None, option="--capacity-step-duration")
        if cap.step_requests_given:
            head = f"inferaccept: capacity steps of --capacity-step-requests {requests}"
            if short:
                self.say(f"{head}: {short}; no level can pass the SLO")
            elif bound:
                self.say(f"{head}: each step {bound}")
        elif requests > cap.step_requests:
            self.say(f"inferaccept: capacity steps sized from the SLO (each step): {plan.planned_words()}"
                      + (f"; each step {bound}" if bound else ""))
        return requests

    def sweep(self, rates: list[float] | tuple[float, ...] | SweepPlan | None = None, *,
              requests: int | None = None, duration: float | None = None, min_rate: float | None = None,
              workload: str | Path | Workload | None = None) -> CapacityResult:
        """Open loop (Poisson) at each rate: the highest rate meeting the SLOs, achieved vs asked rates.

        Given the plan `rates_around_knee()` returned, the sweep carries the ladder knee it was
        built on (its doubt, when unconfirmed, said in the notes); given bare rates, none.
        """
        from pytest_inferaccept.capacity.sweep import sweep

        cap = self.settings.capacity
        knee = rates.knee if isinstance(rates, SweepPlan) else None
        if isinstance(rates, SweepPlan):
            rates = rates.rates
        chosen = tuple(rates or cap.sweep_rates or (1.0, 2.0, 4.0, 8.0))
        return self._record(sweep(
            self.measure_step, self.sampler(), rates=chosen, requests=requests or self.step_requests(),
            duration=duration or cap.step_duration, slo=self.slo, breaker_errors=cap.breaker_error_rate,
            breaker_latency_s=cap.breaker_latency, min_rate=min_rate, label=self.label, workload=workload,
            knee=knee, say=self.say))

    def soak(self, *, concurrency: int | None = None, duration: float, basis: str = "as asked",
             plan: SoakPlan | None = None, workload: str | Path | Workload | None = None,
             graded: bool = False) -> CapacityResult:
        """A long run at one concurrency: latency drift, memory growth, error onset, projected to the horizon.

        The horizon and the memory the server has come from --soak-horizon and --memory-limit.
        Given the plan `soak_level()` returned, its concurrency, basis and the ladder knee it came
        from (said when unconfirmed) are the soak's. `graded`: known-answer items spread over the
        soak (`graded()`).
        """
        if plan is not None:
            concurrency, basis = plan.concurrency if concurrency is None else concurrency, plan.basis
        if concurrency is None:
            raise TypeError("soak() needs concurrency= or plan=")
        from pytest_inferaccept.capacity.soak import soak

        cap = self.settings.capacity
        # At least 60 memory samples, so that each third of a short soak can be judged on its own.
        interval = min(1.0, max(0.2, duration / 60))
        level = concurrency
        return self._record(self._maybe_graded(graded, 1, lambda: soak(
            self.measure_step, self.sampler(interval), concurrency=level, duration=duration,
            slo=self.slo, drift_tolerance=cap.drift_tolerance, memory_tolerance=cap.memory_tolerance,
            alpha=0.01, label=self.label, workload=workload, basis=basis,
            knee=plan.knee if plan is not None else None, horizon=cap.soak_horizon,
            memory_limit=cap.memory_limit, say=self.say), spread_over=duration))

    def push(self, levels: list[int] | tuple[int, ...] | None = None, *, requests: int | None = None,
             duration: float | None = None, workload: str | Path | Workload | None = None,
             graded: bool = False) -> CapacityResult:
        """Raise concurrency until errors or latency cross the breaker; graceful shedding or a fall?

        `graded`: known-answer items graded at each step and after the push (`graded()`): answers
        that go wrong before the breaker trips, or stay wrong after it, are a NO-GO."""
        from pytest_inferaccept.capacity.push import push

        cap = self.settings.capacity
        chosen = tuple(levels or _doubling(max(cap.ladder), cap.push_max))
        return self._record(self._maybe_graded(graded, len(chosen), lambda: push(
            self.measure_step, self.alive, levels=chosen, requests=requests or 40,
            duration=duration or cap.step_duration, breaker_errors=cap.breaker_error_rate,
            breaker_latency_s=cap.breaker_latency, request_timeout=self.settings.request_timeout,
            label=self.label, workload=workload, say=self.say)))

    def push_length(self, lengths: list[int] | tuple[int, ...] | None = None, *,
                    requests: int = 3) -> CapacityResult:
        """Prompts of growing length past the context window: refused cleanly, or not?"""
        from pytest_inferaccept.capacity.push_length import push_length

        window = self.settings.capacity.context_window or context_window(self.server.version_info)
        top = int(window * 1.5) if window else 8192
        chosen = tuple(lengths or _doubling(128, top, include_top=True))
        return self._record(push_length(
            self.measure_step, self.alive, lengths=chosen, context_window=window, requests=requests,
            duration=self.settings.capacity.step_duration, request_timeout=self.settings.request_timeout,
            label=self.label, say=self.say))

    def lengths(self, *, input_buckets: list[str] | tuple[str, ...] | None = None,
                output_buckets: list[str] | tuple[str, ...] | None = None, requests: int = 16,
                concurrency: int = 2, duration: float | None = None) -> CapacityResult:
        """Latency per input and per output length bucket (short … very long, within the context window)."""
        from pytest_inferaccept.capacity.lengths import lengths

        window = self.settings.capacity.context_window or context_window(self.server.version_info)
        return self._record(lengths(
            self.measure_step, self.sampler(), context_window=window,
            input_buckets=tuple(input_buckets or ("short", "medium", "long", "very_long")),
            output_buckets=tuple(output_buckets or ("short", "medium", "long")), requests=requests,
            concurrency=concurrency, duration=duration or self.settings.capacity.step_duration,
            label=self.label, say=self.say))

    def interference(self, *, concurrency: int = 4, requests: int = 32, long_tokens: int | None = None,
                     long_share: float = 0.25, short_tokens: int = 64, threshold: float = 2.0,
                     max_ratio: float | None = None, duration: float | None = None) -> CapacityResult:
        """Short prompts' TTFT alone vs mixed with long prompts; fails only past `max_ratio` (p95)."""
        from pytest_inferaccept.capacity.effects import usable_input
        from pytest_inferaccept.capacity.interference import interference

        window = self.settings.capacity.context_window or context_window(self.server.version_info)
        usable = usable_input(window, 32)
        return self._record(interference(
            self.measure_step, self.sampler(), concurrency=concurrency, requests=requests,
            duration=duration or self.settings.capacity.step_duration, short_tokens=short_tokens,
            long_tokens=long_tokens or (min(4096, usable) if usable else 1536), long_share=long_share,
            output_tokens=32, threshold=threshold, max_ratio=max_ratio, label=self.label, say=self.say))

    def prefix_cache(self, *, prefix_tokens: int | None = None, requests: int = 24, concurrency: int = 2,
                     duration: float | None = None) -> CapacityResult:
        """TTFT with one shared long prefix vs unique prompts, beside the server's prefix-cache counters."""
        from pytest_inferaccept.capacity.effects import usable_input
        from pytest_inferaccept.capacity.prefix_cache import prefix_cache

        window = self.settings.capacity.context_window or context_window(self.server.version_info)
        usable = usable_input(window, 16)
        return self._record(prefix_cache(
            self.measure_step, self.sampler(), concurrency=concurrency, requests=requests,
            duration=duration or self.settings.capacity.step_duration,
            prefix_tokens=prefix_tokens or (max(128, min(2048, usable - 64)) if usable else 1024),
            suffix_tokens=64, output_tokens=16, label=self.label, say=self.say))

    def multi_turn(self, *, conversations: int = 8, turns: int = 6, concurrency: int = 8,
                   user_tokens: int = 96, answer_tokens: int = 64,
                   duration: float | None = None) -> CapacityResult:
        """Conversations resending their history each turn: TTFT per turn index."""
        from pytest_inferaccept.capacity.multi_turn import multi_turn

        window = self.settings.capacity.context_window or context_window(self.server.version_info)
        return self._record(multi_turn(
            self.measure_step, self.sampler(), conversations=conversations, turns=turns,
            concurrency=concurrency, user_tokens=user_tokens, answer_tokens=answer_tokens,
            context_window=window, duration=duration or self.settings.capacity.step_duration,
            label=self.label, say=self.say))

    def _last_ladder(self) -> CapacityResult | None:
        return next((r for r in reversed(self.history) if r.kind == "ladder" and r.steps), None)

    def rates_around_knee(self) -> SweepPlan:
        """Sweep rates around the last ladder's knee (its request rate × 0.25 … 1.25), why, and that knee."""
        cap = self.settings.capacity
        if cap.sweep_rates:
            return SweepPlan(cap.sweep_rates, "--sweep-rates")
        from pytest_inferaccept.model import CapacityStep

        ladder = self._last_ladder()
        if ladder is not None:
            knee = ladder.findings.knee
            level = (knee.level if knee is not None else None) or ladder.steps[-1].level
            row = next(r for r in ladder.steps if r.level == level)
            rate = row.request_rate_per_s if isinstance(row, CapacityStep) else None
            if rate:
                rates = tuple(sorted({round(rate * f, 2) for f in (0.25, 0.5, 0.75, 1.0, 1.25)} - {0.0}))
                found = knee if knee is not None and knee.level else None
                where = "knee" if found is not None else "top level (no knee)"
                return SweepPlan(rates, f"around the ladder's {where}: {rate:.2f} requests/s at c={level:g}",
                                 found)
        return SweepPlan((1.0, 2.0, 4.0, 8.0), "default rates (no ladder ran before the sweep)")

    def soak_level(self) -> SoakPlan:
        """The soak's concurrency, where it came from (--soak-concurrency, else a share of the knee), that
        knee."""
        cap = self.settings.capacity
        if cap.soak_concurrency:
            return SoakPlan(cap.soak_concurrency, "--soak-concurrency")
        ladder = self._last_ladder()
        if ladder is not None:
            knee = ladder.findings.knee
            if knee is not None and knee.level:
                c = max(1, round(cap.soak_fraction * knee.level))
                basis = f"{cap.soak_fraction:g} × the ladder's knee at c={knee.level:g}"
                # the knee travels with the plan: the soak says when it is unconfirmed
                return SoakPlan(c, basis, knee)
            best = ladder.findings.max_slo_level
            if best:
                c = max(1, round(cap.soak_fraction * best))
                return SoakPlan(c, f"{cap.soak_fraction:g} × the highest SLO-compliant level c={best:g} "
                                   "(no knee)")
        return SoakPlan(self.settings.load.concurrency, "--load-concurrency (no ladder knee known)")

    def require_capacity(self) -> None:
        """Skip the test unless the run asked for the capacity scenarios (--capacity)."""
        if not self.settings.capacity.enabled:
            raise NotApplicable(CAPACITY_NEEDS_FLAG)

    def recovery(self, concurrency: int | None = None, duration: float = 20.0,
                 kill_after: float = 3.0) -> CapacityResult:
        """Kill the launched server `kill_after` s into a load and restart it: time to ready, requests lost.

        Skips the test when the plugin did not launch the server (--server-cmd or --server-preset).
        """
        if self._restart is None:
            raise NotApplicable(RECOVERY_NEEDS_LAUNCH)
        from pytest_inferaccept.capacity.recovery import recovery

        return self._record(recovery(
            self.measure_step, self.alive, self._restart,
            concurrency=concurrency or self.settings.load.concurrency, duration=duration,
            kill_after=kill_after, request_timeout=self.settings.request_timeout, label=self.label,
            say=self.say))

    @property
    def can_relaunch(self) -> bool:
        """True when the plugin launched the server, so a scenario may stop and start it."""
        return self._restart is not None

    def relaunch(self, command: str | tuple[str, ...] | None = None,
                 why: str = "failure recovery", drill: bool = False) -> dict[str, Any]:
        """Kill the launched server and start `command` on its port (None: its own command again).

        The session's restart (run/servers.py `restart_chat_server`): its answer holds the
        monotonic moments, the pids and the command stopped. NotApplicable when the plugin did not
        launch the server. With `drill`, a command that does not become ready is no outage."""
        if self._restart is None:
            raise NotApplicable(RECOVERY_NEEDS_LAUNCH)
        return self._restart(command, why, drill)


RECOVERY_NEEDS_LAUNCH = ("failure recovery needs a server the plugin launched "
                         "(--server-cmd or --server-preset)")
"""Why `loadgen.recovery()` skips against a server the plugin did not start."""
CAPACITY_NEEDS_FLAG = "capacity scenarios run with --capacity (they take minutes)"
"""Why the bundled capacity tests skip in a run that did not ask for them."""


def _doubling(start: int, top: int, *, include_top: bool = False) -> list[int]:
    """start, 2*start, 4*start, ... up to top (and top itself when asked)."""
    out = []
    level = max(1, start)
    while level <= top:
        out.append(level)
        level *= 2
    if include_top and (not out or out[-1] != top):
        out.append(top)
    return out


def context_window(info: Any) -> int | None:
    """The context window a server reports about itself (vLLM max_model_len, llama.cpp n_ctx)."""
    if isinstance(info, dict):
        for key in ("max_model_len", "n_ctx", "max_input_tokens", "context_length"):
            value = info.get(key)
            if isinstance(value, int) and value > 0:
                return value
        for value in info.values():
            found = context_window(value)
            if found:
                return found
    if isinstance(info, list):
        for value in info:
            found = context_window(value)
            if found:
                return found
    return None
