"""The `loadgen` fixture's object: runs the load engine for a test and judges it against the SLO.

The engine (pytest_inferaccept.load) and the statistics (pytest_inferaccept.stats) know nothing
of pytest; this module binds them to the server under test, the settings, the test's SLO and
its evidence. Each run's result is kept on the test, so the plugin judges every run the test
made when the test ends, and writes them to the results and the records file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pytest_inferaccept.capacity.runner import (
    CAPACITY_NEEDS_FLAG,
    RECOVERY_NEEDS_LAUNCH,
    CapacityRunner,
    SoakPlan,
    SweepPlan,
    context_window,
)
from pytest_inferaccept.markers import SloSpec
from pytest_inferaccept.run.load import LoadResult
from pytest_inferaccept.run.testload import (
    LoadInputError,
    NotApplicable,
    TestLedger,
    client_check,
    load_result,
)
from pytest_inferaccept.settings import Settings

if TYPE_CHECKING:
    from typing_extensions import TypedDict, Unpack

    from pytest_inferaccept.capacity.scenarios import CapacityResult
    from pytest_inferaccept.load import LoadRun, LoadSpec, Workload
    from pytest_inferaccept.server import ServerUnderTest
    from pytest_inferaccept.stats.slo import SloEvaluation, SloRow


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


__all__ = ["CAPACITY_NEEDS_FLAG", "RECOVERY_NEEDS_LAUNCH", "LoadGen", "LoadInputError", "NotApplicable",
           "SloJudgement", "SoakPlan", "SweepPlan", "TestLedger", "client_check", "context_window", "judge"]


class LoadGen(CapacityRunner):
    """Runs load against the server under test; `run(...)` returns a LoadResult (`arun` in async tests).

    The test's `@pytest.mark.slo` (else the session's --slo / --slo-profile) judges every run
    when the test ends; without any SLO the runs are measured and recorded, not judged. The
    capacity scenarios (`ladder`, `sweep`, `soak`, ...) are the capacity runner's (capacity/runner.py).
    """

    def __init__(self, *, server: ServerUnderTest, settings: Settings, slo: SloSpec | None,
                 label: str, ledger: TestLedger | None = None, launched_pid: int | None = None,
                 restart: Callable[..., dict[str, Any]] | None = None,
                 reasons: Callable[[], bool] | None = None) -> None:
        ledger = ledger if ledger is not None else TestLedger()
        """Where this test's runs and scenarios go (the session's lists behind it)."""
        super().__init__(server=server, settings=settings, slo=slo, label=label, ledger=ledger,
                         checked_spec=self._checked_spec, result=self._result, launched_pid=launched_pid,
                         restart=restart)
        self._reasons = reasons
        """Whether the server is seen to reason (the session's probe); None: not known, not asked."""
        self.reasoning_note = ""
        """Why the last default workload asked for more max_tokens than its default."""
        self._default_chat = False
        """The last spec's workload is the default chat workload (sized for reasoning where seen)."""
        self.results: list[LoadResult] = self.ledger.runs
        self.sized = ""
        """Why the last default-sized run asked for more requests than --load-requests' default."""
        self.capacity: list[CapacityResult] = self.ledger.scenarios

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
        embeddings_base = self.server.embedding_url or self.server.base_url
        base = embeddings_base if kind == "embeddings" else self.server.base_url
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
        from pytest_inferaccept.load import LoadInterrupted

        spec = self._announce(self._checked_spec(kwargs))
        try:
            run = self._beside(self.label, spec)
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
        self.say(f"inferaccept: load {self.label}: {shape}, {bounds}, {spec.warmup} warm-up, "
                  f"{spec.workers} worker(s); stops by itself within {spec.hard_seconds():.0f} s"
                  + (f" ({said})" if said else ""))
        return spec

    def _result(self, run: LoadRun, label: str) -> LoadResult:
        """The run's statistics, its SLO evaluation and the client's account of itself."""
        return load_result(run, label, slo=self.slo, point=self.settings.load.judge_on_point,
                           client_check_mode=self.settings.load.client_check)

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
        self.say(f"inferaccept: load {label}: {summary.counts.measured} measured, {summary.counts.failed} "
                  f"failed, TTFT p95 {shown}, "
                  f"{summary.throughput_tokens_per_s or 0:.1f} output tokens/s ({run.stopped_by})")
        first = next((r for r in run.records if r.harness_error), None)
        if first is not None:
            self.say(f"inferaccept: load {label}: {summary.counts.client_errors} request(s) failed in the "
                      f"client's own code (not counted against the server); the first traceback:\n"
                      f"{first.error_detail}")
        return result

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

    1. A conclusive server failure is NO-GO whatever else holds: answers that contradict themselves
       (load/consistency.py: two finish_reasons, usage against the stream), every request failed, failures
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
    # Answers that contradict themselves (two finish_reasons, usage against the stream) are the
    # server's at any load, SLO or none, whatever the client did (load/consistency.py).
    inconsistent = [each(r, line) for r in results for line in _inconsistent(r)]
    if conclusive or inconsistent:
        title = (("SLO not met" if slo is not None else "the server failed the load") if conclusive
                 else "the server's answers contradicted themselves under load")
        return Judgement(status="fail", title=title, lines=(*conclusive, *inconsistent), warnings=tuple(
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
    # The documented rule (stats.evaluate_runs): every run against the SLO, the worst decides.
    judged = _evaluate_runs(results, slo)
    failed = [each(r, row.message) for r, ev in judged for row in ev.rows
              if row.status == "fail" and not _needs_room(row, slo, accounts[id(r)])]
    if failed:
        return Judgement(status="fail", title="SLO not met", lines=tuple(failed),
                         warnings=(*warnings, *roomless))
    short = [(r, m) for r, ev in judged for m in ev.messages("not_enough_data")]
    if roomless or short:
        title = ("the workload left no room for content, so the SLO could not be judged (nothing failed)"
                 if roomless else "not enough data to judge the SLO")
        return Judgement(status="invalid", title=title,
                         lines=(*roomless, *(each(r, m) for r, m in short)), warnings=warnings)
    return Judgement(status="pass", warnings=warnings)


def _evaluate_runs(results: list[LoadResult], slo: SloSpec) -> list[tuple[LoadResult, SloEvaluation]]:
    """Each run with its SLO evaluation, judged together by `stats.evaluate_runs` (runs measured
    without an SLO are left out, as they were never judged)."""
    from pytest_inferaccept.stats import evaluate_runs

    judged = [r for r in results if r.evaluation is not None]
    if not judged:
        return []
    first = judged[0].evaluation
    assert first is not None
    together = evaluate_runs([r.summary for r in judged], slo, confidence=first.confidence,
                             point_estimate=first.point_estimate)
    return list(zip(judged, together.runs, strict=True))


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


def _inconsistent(result: LoadResult) -> list[str]:
    """The run's answers that broke a per-request consistency rule, one sentence a rule."""
    from pytest_inferaccept.load.consistency import findings

    return findings(result.consistency)


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
