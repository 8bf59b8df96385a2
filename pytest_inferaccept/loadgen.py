"""The `loadgen` fixture's object: runs the load engine for a test and judges it against the SLO.

The engine (pytest_inferaccept.load) and the statistics (pytest_inferaccept.stats) know nothing
of pytest; this module binds them to the server under test, the settings, the test's SLO and
its evidence. Each run's result is kept on the test, so the plugin judges every run the test
made when the test ends, and writes them to the results and the records file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pytest_inferaccept.markers import SloSpec
from pytest_inferaccept.run.load import LoadResult
from pytest_inferaccept.server import ServerUnderTest
from pytest_inferaccept.settings import Settings

if TYPE_CHECKING:
    from typing_extensions import TypedDict, Unpack

    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.capacity.scenarios import CapacityResult
    from pytest_inferaccept.load import LoadRun, LoadSpec, Workload
    from pytest_inferaccept.stats.slo import SloRow


if TYPE_CHECKING:
    class RunOptions(TypedDict, total=False):
        """What `loadgen.run(...)` accepts (every key optional; the session's options fill the rest)."""

        concurrency: int | None
        """Requests in flight (closed loop); default --load-concurrency."""
        rate: float | None
        """Requests per second (open loop, Poisson unless burstiness is set) instead of concurrency."""
        requests: int | None
        """Measured requests; with neither requests nor duration, sized from the SLO."""
        duration: float | None
        """The most seconds of measured load."""
        workload: str | Path | Workload | None
        """A trace file (JSONL) or a Workload; default: a synthetic chat workload."""
        warmup: int | None
        kind: Literal["chat", "completions", "embeddings"]
        workers: int | None
        burstiness: float
        replay: bool
        seed: int
        extra_body: dict[str, Any] | None


class LoadInputError(ValueError):
    """A load that could not start: a malformed trace, an impossible schedule (nothing was sent)."""


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


class NotApplicable(Exception):
    """This test does not apply to this run (no --capacity, no launched server): the plugin skips
    it with the message, as `pytest.skip` would, without the load code knowing pytest."""


class LoadGen:
    """Runs load against the server under test; `run(...)` returns a LoadResult (`arun` in async tests).

    The test's `@pytest.mark.slo` (else the session's --slo / --slo-profile) judges every run
    when the test ends; without any SLO the runs are measured and recorded, not judged.
    """

    def __init__(self, *, server: ServerUnderTest, settings: Settings, slo: SloSpec | None,
                 label: str, ledger: TestLedger | None = None, launched_pid: int | None = None,
                 restart: Callable[[], dict[str, Any]] | None = None,
                 reasons: Callable[[], bool] | None = None) -> None:
        self.server = server
        self.settings = settings
        self.slo = slo
        self.label = label
        self.ledger = ledger if ledger is not None else TestLedger()
        """Where this test's runs and scenarios go (the session's lists behind it)."""
        self._say = self.ledger.say
        self._launched_pid = launched_pid
        self._restart = restart
        """Kill and restart the launched server (the session's); None when the plugin did not launch it."""
        self._reasons = reasons
        """Whether the server is seen to reason (the session's probe); None: not known, not asked."""
        self.reasoning_note = ""
        """Why the last default workload asked for more max_tokens than its default."""
        self._default_chat = False
        """The last spec's workload is the default chat workload (sized for reasoning where seen)."""
        self.results: list[LoadResult] = self.ledger.runs
        self._from_knee: dict[str, Any] = {}
        """Soak bases derived from a ladder's knee, with that knee (its certainty travels along)."""
        self._rates_knee: tuple[tuple[float, ...], Any] | None = None
        """The rates rates_around_knee() last derived from a ladder's knee, with that knee."""
        self.sized = ""
        """Why the last default-sized run asked for more requests than --load-requests' default."""
        self.capacity: list[CapacityResult] = self.ledger.scenarios
        self.history: list[CapacityResult] = self.ledger.history
        """Every capacity scenario of the session so far (the sweep and the soak read the ladder's)."""

    def _spec(self, *, concurrency: int | None = None, rate: float | None = None,
             requests: int | None = None, duration: float | None = None,
             workload: str | Path | Workload | None = None, warmup: int | None = None,
             kind: Literal["chat", "completions", "embeddings"] = "chat", workers: int | None = None,
             burstiness: float = 1.0, replay: bool = False, seed: int = 0,
             extra_body: dict[str, Any] | None = None) -> LoadSpec:
        """The engine's LoadSpec for these arguments, with the session's server, key and bounds."""
        from pytest_inferaccept.load import LoadSpec, TraceWorkload

        self.sized = ""
        self.reasoning_note = ""
        self._default_chat = workload is None and kind == "chat"
        if isinstance(workload, (str, Path)):
            workload = TraceWorkload.from_file(workload)
        if concurrency is None and rate is None and not replay:
            concurrency = self.settings.load.concurrency
        if requests is None and duration is None:
            requests, duration = self.settings.load.requests, self.settings.load.duration
            if not self.settings.load.requests_given and self.slo is not None:
                from pytest_inferaccept.stats.plan import plan_run

                plan = plan_run(self.slo, point_estimate=self.settings.load.judge_on_point)
                if plan.planned > requests:
                    requests = plan.planned
                    self.sized = f"sized from the SLO: {plan.planned_words()}"
        s = self.settings
        model = self.server.embedding_model if kind == "embeddings" else self.server.model
        base = self.server.embedding_url if kind == "embeddings" else self.server.base_url
        return LoadSpec(
            base_url=base, model=model or self.server.model, api_key=s.api_key, kind=kind,
            concurrency=concurrency, rate=rate, replay=replay, burstiness=burstiness,
            requests=requests, duration=duration,
            warmup=warmup if warmup is not None else min(4, concurrency or 2),
            workload=workload, request_timeout=s.request_timeout, connect_timeout=s.connect_timeout,
            stall_timeout=s.load_stall_timeout,
            max_response_bytes=s.max_response_bytes,
            workers=workers if workers is not None else s.load.workers, seed=seed,
            extra_body=extra_body, cluster=s.load.cluster)

    def _checked_spec(self, kwargs: RunOptions | dict[str, Any]) -> LoadSpec:
        """The spec, or a clear stop before anything is sent when the workload or options are bad."""
        from pytest_inferaccept.load import WorkloadError

        try:
            return self._spec(**kwargs)
        except (WorkloadError, ValueError) as exc:
            # Bad input to the plugin, not a finding about the server: the test cannot judge it.
            self.ledger.mark_invalid(f"the load was not started: {exc}")
            raise LoadInputError(f"the load was not started: {exc}") from None

    def run(self, **kwargs: Unpack[RunOptions]) -> LoadResult:
        """Run one load (closed loop at `concurrency`, or open loop at `rate` req/s); blocking."""
        from pytest_inferaccept.load import LoadInterrupted, run_load

        spec = self._announce(self._checked_spec(kwargs))
        try:
            run = run_load(spec)
        except LoadInterrupted as stopped:
            self._finish(stopped.run)  # what was measured is kept, then the interruption goes on
            raise
        return self._finish(run)

    async def arun(self, **kwargs: Unpack[RunOptions]) -> LoadResult:
        """The async twin of `run`, on the test's own event loop (pytest-asyncio or anyio)."""
        from pytest_inferaccept.load import run_load_async

        spec = self._announce(self._checked_spec(kwargs))
        return self._finish(await run_load_async(spec))

    def _for_reasoning(self, spec: LoadSpec) -> LoadSpec:
        """The default workload with room for content after the reasoning, on a server seen to reason."""
        if not self._default_chat or self._reasons is None or not self._reasons():
            return spec
        from dataclasses import replace

        from pytest_inferaccept.load.workloads import REASONING_MAX_TOKENS, default_workload

        # 32 tokens would all go to reasoning: no content, so no TTFT to judge
        self.reasoning_note = (f"max_tokens {REASONING_MAX_TOKENS}: the server reasons, so its answers "
                               f"need room for content after the reasoning")
        return replace(spec, workload=default_workload(reasoning=True))

    def _announce(self, spec: LoadSpec) -> LoadSpec:
        """One line before a judged run starts (a load run can take minutes and prints nothing itself),
        with what its size and time bound mean for its SLO; a run too small for the SLO stops here,
        before anything is sent (LoadInputError, the test INVALID). Returns the spec to run (the
        default workload sized for a reasoning server, asked only once the run is not refused)."""
        plan = None
        if self.slo is not None and spec.mode != "replay":
            from pytest_inferaccept.stats.plan import plan_run

            plan = plan_run(self.slo, point_estimate=self.settings.load.judge_on_point)
            refusal = plan.refusal(spec.requests) if spec.requests is not None and not self.sized else ""
            refusal = refusal or plan.time_refusal(spec.duration, spec.rate)
            if refusal:
                self.ledger.mark_invalid(f"the load was not started: {refusal}")
                raise LoadInputError(f"the load was not started: {refusal}")
        spec = self._for_reasoning(spec)
        notes = [note for note in (self.sized, self.reasoning_note) if note]
        if plan is not None:
            if spec.requests is not None and not self.sized:
                notes.append(plan.power_words(spec.requests))
            bound = plan.time_words(spec.requests, spec.duration, spec.rate,
                                    option="--load-duration" if self.sized else "its duration")
            notes.append(f"the run {bound}" if bound else "")
        shape = (f"{spec.concurrency} in flight" if spec.concurrency else
                 f"{spec.rate:g} requests/s" if spec.rate else "trace replay")
        bounds = ", ".join(b for b in (f"{spec.requests} requests" if spec.requests else "",
                                       f"at most {spec.duration:g} s" if spec.duration else "") if b)
        said = "; ".join(note for note in notes if note)
        self._say(f"inferaccept: load {self.label}: {shape}, {bounds}, {spec.warmup} warm-up, "
                  f"{spec.workers} worker(s); stops by itself within {spec.hard_seconds():.0f} s"
                  + (f" ({said})" if said else ""))
        return spec

    def _result(self, run: LoadRun, label: str) -> LoadResult:
        """The run's statistics, its SLO evaluation and the client's account of itself."""
        from pytest_inferaccept.stats import bottleneck_reasons, evaluate, summarize

        run.selfcheck = client_check(run)
        summary = summarize(run.records, run.window, slo=self.slo)
        evaluation = (evaluate(summary, self.slo, point_estimate=self.settings.load.judge_on_point)
                      if self.slo is not None else None)
        return LoadResult(label=label, run=run, summary=summary, slo=self.slo, evaluation=evaluation,
                          client_bound=bottleneck_reasons(run.selfcheck),
                          client_check=self.settings.load.client_check)

    def _finish(self, run: LoadRun) -> LoadResult:
        label = self.label if not self.results else f"{self.label}#{len(self.results) + 1}"
        result = self._result(run, label)
        self.ledger.keep(result)
        p95 = result.stat("ttft", "p95")
        summary = result.summary
        from pytest_inferaccept.stats.summary import content_never_came

        empty = content_never_came("ttft", summary.counts.failed, summary.counts.no_content)
        shown = ("n/a" if p95 is None
                 else "∞ (no content: only reasoning or tool calls)" if math.isinf(p95) and empty
                 else "∞ (failed requests)" if math.isinf(p95) else f"{p95 * 1000:.0f} ms")
        self._say(f"inferaccept: load {label}: {summary.counts.measured} measured, {summary.counts.failed} "
                  f"failed, TTFT p95 {shown}, "
                  f"{summary.throughput_tokens_per_s or 0:.1f} output tokens/s ({run.stopped_by})")
        first = next((r for r in run.records if r.harness_error), None)
        if first is not None:
            self._say(f"inferaccept: load {label}: {summary.counts.client_errors} request(s) failed in the "
                      f"client's own code (not counted against the server); the first traceback:\n"
                      f"{first.error_detail}")
        return result

    # -- capacity scenarios: many bounded steps, judged as one scenario, not as separate runs --

    def _measure(self, tag: str, **kwargs: Any) -> LoadResult:
        """One step of a capacity scenario: run and summarize it, keep its records, judge nothing."""
        from pytest_inferaccept.load import LoadInterrupted, run_load

        label = f"{self.label}[{tag}]"
        spec = self._checked_spec(kwargs)
        try:
            run = run_load(spec)
        except LoadInterrupted as stopped:
            self.ledger.keep_records(label, stopped.run)  # what was measured is kept
            raise
        self.ledger.keep_records(label, run)
        return self._result(run, label)

    def _sampler(self, interval: float = 1.0) -> Sampler:
        """Telemetry beside a scenario: /metrics gauges, the launched process's memory, GPUs."""
        from pytest_inferaccept.capacity.sampler import Sampler

        return Sampler(base_url=self.server.base_url, api_key=self.settings.api_key, interval=interval,
                       pid=self._launched_pid, gpu_command=self.settings.capacity.gpu_telemetry)

    def _alive(self, timeout: float | None = None) -> tuple[bool, str]:
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
        self._say(f"inferaccept: {result.kind} {self.label}: {result.status.upper()}: {result.headline}")
        return result

    def ladder(self, levels: list[int] | tuple[int, ...] | None = None, *, requests: int | None = None,
               duration: float | None = None, settle: int | None = None, min_concurrency: int | None = None,
               workload: str | Path | Workload | None = None) -> CapacityResult:
        """Closed loop at each concurrency level until the breaker: knee and highest SLO-compliant level."""
        from pytest_inferaccept.capacity.ladder import ladder

        cap = self.settings.capacity
        return self._record(ladder(
            self._measure, self._sampler(), levels=tuple(levels or cap.ladder),
            requests=requests or self._step_requests(), duration=duration or cap.step_duration,
            settle=cap.settle if settle is None else settle, slo=self.slo,
            breaker_errors=cap.breaker_error_rate, breaker_latency_s=cap.breaker_latency,
            min_level=min_concurrency or cap.min_concurrency, label=self.label, workload=workload,
            say=self._say))

    def _step_requests(self) -> int:
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
                self._say(f"{head}: {short}; no level can pass the SLO")
            elif bound:
                self._say(f"{head}: each step {bound}")
        elif requests > cap.step_requests:
            self._say(f"inferaccept: capacity steps sized from the SLO (each step): {plan.planned_words()}"
                      + (f"; each step {bound}" if bound else ""))
        return requests

    def sweep(self, rates: list[float] | tuple[float, ...] | None = None, *, requests: int | None = None,
              duration: float | None = None, min_rate: float | None = None,
              workload: str | Path | Workload | None = None) -> CapacityResult:
        """Open loop (Poisson) at each rate: the highest rate meeting the SLOs, achieved vs asked rates."""
        from pytest_inferaccept.capacity.sweep import sweep

        cap = self.settings.capacity
        chosen = tuple(rates or cap.sweep_rates or (1.0, 2.0, 4.0, 8.0))
        knee = self._rates_knee[1] if self._rates_knee and self._rates_knee[0] == chosen else None
        return self._record(sweep(
            self._measure, self._sampler(), rates=chosen, requests=requests or self._step_requests(),
            duration=duration or cap.step_duration, slo=self.slo, breaker_errors=cap.breaker_error_rate,
            breaker_latency_s=cap.breaker_latency, min_rate=min_rate, label=self.label, workload=workload,
            knee=knee, say=self._say))

    def soak(self, *, concurrency: int, duration: float, basis: str = "as asked",
             workload: str | Path | Workload | None = None) -> CapacityResult:
        """A long run at one concurrency: latency drift, memory growth, error onset, projected to the horizon.

        The horizon and the memory the server has come from --soak-horizon and --memory-limit.
        """
        from pytest_inferaccept.capacity.soak import soak

        cap = self.settings.capacity
        # At least 60 memory samples, so that each third of a short soak can be judged on its own.
        interval = min(1.0, max(0.2, duration / 60))
        return self._record(soak(
            self._measure, self._sampler(interval), concurrency=concurrency, duration=duration, slo=self.slo,
            drift_tolerance=cap.drift_tolerance, memory_tolerance=cap.memory_tolerance, alpha=0.01,
            label=self.label, workload=workload, basis=basis, knee=self._from_knee.get(basis),
            horizon=cap.soak_horizon, memory_limit=cap.memory_limit, say=self._say))

    def push(self, levels: list[int] | tuple[int, ...] | None = None, *, requests: int | None = None,
             duration: float | None = None, workload: str | Path | Workload | None = None) -> CapacityResult:
        """Raise concurrency until errors or latency cross the breaker; graceful shedding or a fall?"""
        from pytest_inferaccept.capacity.push import push

        cap = self.settings.capacity
        chosen = tuple(levels or _doubling(max(cap.ladder), cap.push_max))
        return self._record(push(
            self._measure, self._alive, levels=chosen, requests=requests or 40,
            duration=duration or cap.step_duration, breaker_errors=cap.breaker_error_rate,
            breaker_latency_s=cap.breaker_latency, request_timeout=self.settings.request_timeout,
            label=self.label, workload=workload, say=self._say))

    def push_length(self, lengths: list[int] | tuple[int, ...] | None = None, *,
                    requests: int = 3) -> CapacityResult:
        """Prompts of growing length past the context window: refused cleanly, or not?"""
        from pytest_inferaccept.capacity.push_length import push_length

        window = self.settings.capacity.context_window or context_window(self.server.version_info)
        top = int(window * 1.5) if window else 8192
        chosen = tuple(lengths or _doubling(128, top, include_top=True))
        return self._record(push_length(
            self._measure, self._alive, lengths=chosen, context_window=window, requests=requests,
            duration=self.settings.capacity.step_duration, request_timeout=self.settings.request_timeout,
            label=self.label, say=self._say))

    def lengths(self, *, input_buckets: list[str] | tuple[str, ...] | None = None,
                output_buckets: list[str] | tuple[str, ...] | None = None, requests: int = 16,
                concurrency: int = 2, duration: float | None = None) -> CapacityResult:
        """Latency per input and per output length bucket (short … very long, within the context window)."""
        from pytest_inferaccept.capacity.lengths import lengths

        window = self.settings.capacity.context_window or context_window(self.server.version_info)
        return self._record(lengths(
            self._measure, self._sampler(), context_window=window,
            input_buckets=tuple(input_buckets or ("short", "medium", "long", "very_long")),
            output_buckets=tuple(output_buckets or ("short", "medium", "long")), requests=requests,
            concurrency=concurrency, duration=duration or self.settings.capacity.step_duration,
            label=self.label, say=self._say))

    def interference(self, *, concurrency: int = 4, requests: int = 32, long_tokens: int | None = None,
                     long_share: float = 0.25, short_tokens: int = 64, threshold: float = 2.0,
                     max_ratio: float | None = None, duration: float | None = None) -> CapacityResult:
        """Short prompts' TTFT alone vs mixed with long prompts; fails only past `max_ratio` (p95)."""
        from pytest_inferaccept.capacity.effects import usable_input
        from pytest_inferaccept.capacity.interference import interference

        window = self.settings.capacity.context_window or context_window(self.server.version_info)
        usable = usable_input(window, 32)
        return self._record(interference(
            self._measure, self._sampler(), concurrency=concurrency, requests=requests,
            duration=duration or self.settings.capacity.step_duration, short_tokens=short_tokens,
            long_tokens=long_tokens or (min(4096, usable) if usable else 1536), long_share=long_share,
            output_tokens=32, threshold=threshold, max_ratio=max_ratio, label=self.label, say=self._say))

    def prefix_cache(self, *, prefix_tokens: int | None = None, requests: int = 24, concurrency: int = 2,
                     duration: float | None = None) -> CapacityResult:
        """TTFT with one shared long prefix vs unique prompts, beside the server's prefix-cache counters."""
        from pytest_inferaccept.capacity.effects import usable_input
        from pytest_inferaccept.capacity.prefix_cache import prefix_cache

        window = self.settings.capacity.context_window or context_window(self.server.version_info)
        usable = usable_input(window, 16)
        return self._record(prefix_cache(
            self._measure, self._sampler(), concurrency=concurrency, requests=requests,
            duration=duration or self.settings.capacity.step_duration,
            prefix_tokens=prefix_tokens or (max(128, min(2048, usable - 64)) if usable else 1024),
            suffix_tokens=64, output_tokens=16, label=self.label, say=self._say))

    def multi_turn(self, *, conversations: int = 8, turns: int = 6, concurrency: int = 8,
                   user_tokens: int = 96, answer_tokens: int = 64,
                   duration: float | None = None) -> CapacityResult:
        """Conversations resending their history each turn: TTFT per turn index."""
        from pytest_inferaccept.capacity.multi_turn import multi_turn

        window = self.settings.capacity.context_window or context_window(self.server.version_info)
        return self._record(multi_turn(
            self._measure, self._sampler(), conversations=conversations, turns=turns, concurrency=concurrency,
            user_tokens=user_tokens, answer_tokens=answer_tokens, context_window=window,
            duration=duration or self.settings.capacity.step_duration, label=self.label, say=self._say))


    def _last_ladder(self) -> CapacityResult | None:
        return next((r for r in reversed(self.history) if r.kind == "ladder" and r.steps), None)

    def rates_around_knee(self) -> tuple[tuple[float, ...], str]:
        """Sweep rates around the last ladder's knee (its request rate × 0.25 … 1.25), and why."""
        cap = self.settings.capacity
        if cap.sweep_rates:
            return cap.sweep_rates, "--sweep-rates"
        ladder = self._last_ladder()
        if ladder is not None:
            level = ladder.findings["knee"]["level"] or ladder.steps[-1]["level"]
            row = next(r for r in ladder.steps if r["level"] == level)
            rate = row.get("request_rate_per_s")
            if rate:
                rates = tuple(sorted({round(rate * f, 2) for f in (0.25, 0.5, 0.75, 1.0, 1.25)} - {0.0}))
                where = "knee" if ladder.findings["knee"]["level"] else "top level (no knee)"
                knee = ladder.findings["knee"]
                self._rates_knee = (rates, knee) if knee["level"] else None
                return rates, f"around the ladder's {where}: {rate:.2f} requests/s at c={level:g}"
        return (1.0, 2.0, 4.0, 8.0), "default rates (no ladder ran before the sweep)"

    def soak_level(self) -> tuple[int, str]:
        """The soak's concurrency and where it came from (--soak-concurrency, else a share of the knee)."""
        cap = self.settings.capacity
        if cap.soak_concurrency:
            return cap.soak_concurrency, "--soak-concurrency"
        ladder = self._last_ladder()
        if ladder is not None:
            knee = ladder.findings["knee"]["level"]
            if knee:
                c = max(1, round(cap.soak_fraction * knee))
                basis = f"{cap.soak_fraction:g} × the ladder's knee at c={knee:g}"
                self._from_knee[basis] = ladder.findings["knee"]  # the soak says when it is unconfirmed
                return c, basis
            best = ladder.findings.get("max_slo_level")
            if best:
                c = max(1, round(cap.soak_fraction * best))
                return c, f"{cap.soak_fraction:g} × the highest SLO-compliant level c={best:g} (no knee)"
        return self.settings.load.concurrency, "--load-concurrency (no ladder knee known)"

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
            self._measure, self._alive, self._restart,
            concurrency=concurrency or self.settings.load.concurrency, duration=duration,
            kill_after=kill_after, request_timeout=self.settings.request_timeout, label=self.label,
            say=self._say))


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
    """Judge a test's load runs, ranked by evidence (docs/statistics.md, "The verdict").

    1. A conclusive server failure is NO-GO whatever else holds: every request failed, failures
       beyond doubt above the error rate the SLO allows (its `error_rate`, else the share its
       tightest latency limit leaves room for, never more than half), a latency figure or a
       goodput that failed requests alone put beyond its limit. A client limit can inflate
       latency; it cannot cause the server's failures, except those its own late clock decided
       (timeouts, stalls, requests cut by the run's end), which are set aside here.
    2. A fault in the client's own code, then a client that limited the run: INVALID.
    3. Any other failing limit: NO-GO. 4. A limit the workload left no room to measure (answers
       that spent max_tokens on reasoning) or without enough data: INVALID. 5. GO.
    """
    if not results:
        if from_marker:
            return Judgement(status="invalid", title=(
                "@pytest.mark.slo is on a test that ran no load: call loadgen.run(...) in the test "
                "(the marker judges the load the test runs), or remove the marker"))
        return Judgement(status="unjudged")
    several = len(results) > 1

    def each(r: LoadResult, line: str) -> str:
        return f"{r.label}: {line}" if several else line

    accounts = {id(r): _account(r) for r in results}
    bound = [each(r, reason) for r in results for reason in r.client_bound]
    excused = [each(r, line) for r in results if (line := _excused_line(r, accounts[id(r)]))]
    harness = [each(r, _harness_line(r)) for r in results if r.summary.counts.client_errors]
    conclusive = [each(r, line) for r in results for line in _conclusive(r, slo, accounts[id(r)])]
    roomless = [each(r, line) for r in results if (line := _no_room_line(r, slo, accounts[id(r)]))]
    if conclusive:
        return Judgement(status="fail", title="SLO not met" if slo is not None else
                         "the server failed the load", lines=tuple(conclusive), warnings=tuple(
                             f"also: {b}" for b in (*harness, *bound, *excused, *roomless)))
    if harness:
        return Judgement(status="invalid", title="the client failed on its own (a fault in the "
                         "plugin, not the server), so the run cannot judge the server", lines=tuple(harness))
    if slo is None:
        # Nothing to judge: figures the client limited are recorded with a warning, not a verdict.
        return Judgement(status="unjudged", warnings=(*(
            f"measured without an SLO, and the client limited the run: {b}" for b in (*bound, *excused)),
            *roomless))
    warnings: tuple[str, ...] = ()
    if bound and client_check == "warn":
        warnings = tuple(f"judged although the client limited the run (--client-check warn): {b}"
                         for b in (*bound, *excused))
        bound = []
    if bound:
        return Judgement(status="invalid", title="the client was the bottleneck, so the run cannot "
                         "judge the server", lines=(*bound, *excused))
    failed = [each(r, row.message) for r in results if r.evaluation is not None
              for row in r.evaluation.rows
              if row.status == "fail" and not _needs_room(row, slo, accounts[id(r)])]
    if failed:
        return Judgement(status="fail", title="SLO not met", lines=tuple(failed),
                         warnings=(*warnings, *roomless))
    short = [(r, m) for r in results if r.evaluation is not None
             for m in r.evaluation.messages("not_enough_data")]
    if roomless or short:
        title = ("the workload left no room for content, so the SLO could not be judged (nothing failed)"
                 if roomless else "not enough data to judge the SLO")
        return Judgement(status="invalid", title=title,
                         lines=(*roomless, *(each(r, m) for r, m in short)), warnings=warnings)
    return Judgement(status="pass", warnings=warnings)


def _failures(result: LoadResult) -> str:
    """How the measured requests failed, by class with the first detail of each."""
    return "; ".join(result.summary.samples.failures)


@dataclass(frozen=True)
class _Account:
    """What a run's failures are once the client's share is set aside, and its roomless answers."""

    failed: int
    """Measured requests that failed, less those the client's lateness explains."""
    excused: int
    """Timeouts, stalls and requests cut by the run's end while the client itself ran late (its
    clock decided them, not the server)."""
    late: str
    """How the client ran late, in words ('' when it kept time)."""
    no_room: int
    """Successful answers cut by max_tokens before any content: every token went to reasoning."""
    max_tokens: int | None
    """The largest max_tokens those answers asked for."""


def _account(result: LoadResult) -> _Account:
    """The run's failures less the client's own, and its answers that had no room for content."""
    from pytest_inferaccept.stats.slo import CLIENT_CLOCKED

    measured = [r for r in result.records if not r.warmup and not r.harness_error]
    late = _late_workers(result) if result.client_bound else {}
    spec = result.run.spec
    request_limit = _seconds(spec.get("request_timeout"))
    limits = {"stall": _seconds(spec.get("stall_timeout")) or request_limit, "timeout": request_limit}
    excused = sum(1 for r in measured if r.error in CLIENT_CLOCKED and r.worker in late
                  and _lateness_explains(late[r.worker][1], limits.get(str(r.error))))
    roomless = [r for r in measured if r.ok and r.first_content is None and r.finish_reason == "length"]
    return _Account(failed=result.summary.counts.failed - excused, excused=excused,
                    late=next(iter(why for why, _ in late.values()), ""), no_room=len(roomless),
                    max_tokens=max((r.max_tokens for r in roomless if r.max_tokens), default=None))


EXPLAINS_SHARE = 0.5
"""A client late by at least this share of the limit that fired (the stall or request timeout) can
have caused the failure; a lateness far below it cannot (46 ms of loop lag does not make a 1 s
silence look longer than a 0.3 s stall limit)."""


def _seconds(value: object) -> float | None:
    """A positive limit in seconds from a run's spec, or None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def _lateness_explains(delay: float | None, limit: float | None) -> bool:
    """Can a client late by `delay` seconds have decided a failure at `limit`? Unknown either way: yes."""
    return delay is None or limit is None or delay >= EXPLAINS_SHARE * limit


def _late_workers(result: LoadResult) -> dict[int, tuple[str, float | None]]:
    """The worker processes whose own clock ran late (event loop, schedule, CPU), with how, and by how
    many seconds at p99 (None: late by its CPU share, not a delay)."""
    from pytest_inferaccept.stats.selfcheck import SelfCheck, Thresholds, lateness

    try:
        check = SelfCheck.from_json(result.run.selfcheck)
    except (ValueError, KeyError, TypeError):
        return {}
    th = Thresholds()
    loads = check.workers or (check.total,)
    workers = {r.worker for r in result.records}
    out: dict[int, tuple[str, float | None]] = {}
    for load in loads:
        late = lateness(load, th)  # the self-check's own thresholds, so both say the same of a worker
        why = (f"the client's event loop ran {late['loop'] * 1000:.0f} ms late at p99" if "loop" in late else
               f"the client sent requests {late['schedule'] * 1000:.0f} ms late at p99" if "schedule" in late
               else f"the client used {late['cpu']:.0%} of a CPU core" if "cpu" in late else "")
        delay = late.get("loop", late.get("schedule"))
        if why:
            # The total speaks for every worker; a listed worker for its own requests.
            entry = (why, None if delay is None else float(delay))
            out.update({w: entry for w in workers} if load.worker is None else {load.worker: entry})
    return out


def _beyond(k: int, n: int, limit: float, *, on_point: bool, conf: float) -> bool:
    """Are k failures of n beyond `limit` as a share: on the count, or beyond doubt (the interval's
    lower end above it)?"""
    from pytest_inferaccept.stats.percentiles import proportion_estimate

    if n <= 0 or k <= 0:
        return False
    if on_point or limit <= 0:
        return k / n > limit
    low = proportion_estimate(k, n, conf).low
    return low is not None and low > limit


def _still_server_failure(row: SloRow, result: LoadResult, acc: _Account) -> bool:
    """Does a row decided by failures stay decided once the client's own timeouts are set aside?"""
    from pytest_inferaccept.stats.slo import room_beyond

    stat = row.key.rsplit("_", 1)[-1]
    if not acc.excused or stat == "mean":  # a mean fails by failures only on answers without content
        return True
    counts = result.summary.counts
    on_point, conf = row.basis == "point_estimate", result.summary.confidence
    if row.key == "goodput_min":
        # Were every excused request good, would goodput stay below its limit? (The interval of the
        # good share is below L exactly when that of the rest is above 1 - L.)
        rest = counts.measured - counts.ok - acc.excused
        return _beyond(rest, counts.measured, round(1.0 - row.limit, 12), on_point=on_point, conf=conf)
    share = row.limit if row.key == "error_rate" else room_beyond(stat)
    return _beyond(acc.failed, counts.measured, share, on_point=on_point, conf=conf)


def _needs_room(row: SloRow, slo: SloSpec | None, acc: _Account) -> bool:
    """Is this row one that answers cut before any content make undecidable (content TTFT, goodput
    with a TTFT limit) in a run that had such answers?"""
    if not acc.no_room or row.status == "pass":
        return False
    if row.key == "goodput_min" and slo is not None:
        from pytest_inferaccept.stats.summary import per_request_limits

        return "ttft" in per_request_limits(slo)
    return row.key.startswith("ttft_") and not row.key.startswith("ttft_any_")


def _conclusive(result: LoadResult, slo: SloSpec | None, acc: _Account | None = None) -> list[str]:
    """The run's failures that no client limit can explain: the server's own, beyond doubt."""
    acc = acc or _account(result)
    counts = result.summary.counts
    if counts.measured and counts.ok == 0 and acc.failed == counts.measured:
        return [f"every one of the {counts.measured} measured requests failed: {_failures(result)}"]
    if slo is None:
        # Measured, not judged; but a server failing most answers is failing, SLO or none.
        if _beyond(acc.failed, counts.measured, 0.5, on_point=False, conf=result.summary.confidence):
            return [f"measured without an SLO, but {acc.failed} of {counts.measured} measured "
                    f"requests failed: {_failures(result)}"]
        return []
    rows = [] if result.evaluation is None else [
        row for row in result.evaluation.rows if row.status == "fail" and row.by_failures
        and not _needs_room(row, slo, acc) and _still_server_failure(row, result, acc)]
    lines = [row.message for row in rows]
    if rows and counts.failed:
        lines.append(f"failed requests: {_failures(result)}")
    return lines


def _excused_line(result: LoadResult, acc: _Account) -> str:
    """The failures set aside as the client's own, in words ('' when none were)."""
    if not acc.excused:
        return ""
    return (f"{acc.excused} of {result.summary.counts.measured} measured requests timed out, stalled or "
            f"were cut by the run's end while {acc.late}: the client's own clock decided them, so they "
            f"are not counted as the server's failures")


def _no_room_line(result: LoadResult, slo: SloSpec | None, acc: _Account) -> str:
    """What answers cut by max_tokens before any content mean for the run ('' when there were none,
    or when the SLO's content figures passed all the same)."""
    if not acc.no_room:
        return ""
    rows = [] if result.evaluation is None else [
        row.key for row in result.evaluation.rows if _needs_room(row, slo, acc)]
    if slo is not None and not rows:
        return ""
    from pytest_inferaccept.load.workloads import REASONING_MAX_TOKENS

    asked = acc.max_tokens
    enough = max(REASONING_MAX_TOKENS, 4 * asked) if asked else REASONING_MAX_TOKENS
    figures = f" ({', '.join(rows)} could not be measured)" if rows else ""
    return (f"the workload left no room for content: {acc.no_room} of {result.summary.counts.measured} "
            f"answers spent all of max_tokens {asked if asked else '(not set)'} on reasoning and were cut "
            f"(finish_reason length) before any content{figures}; nothing failed. Run with max_tokens of "
            f"{enough} or more (a workload with more output tokens)")


def _harness_line(result: LoadResult) -> str:
    """The client's own fault, with the last line of its first traceback (the whole one is logged)."""
    counts = result.summary.counts
    first = next((r for r in result.run.records if r.harness_error), None)
    last = first.error_detail.strip().splitlines()[-1] if first is not None and first.error_detail else ""
    return (f"{counts.client_errors} request(s) failed in the client's own code, not counted against "
            f"the server: {last}")
