"""Headroom as a multiple of the team's own traffic: a recorded trace replayed faster, step by step.

Each step replays the trace at its recorded arrival times divided by a speed factor (0.5 sends
at half the recorded pace, 2 at twice it), open loop: a send the client made late is counted and
judged as in every replay, never silently shifted (no coordinated omission). The factors climb
until the circuit breaker, like the ladder's levels, and the climb says the rest: the highest
factor meeting every SLO (the headroom), the knee, and what the next factor costs ("meets the
SLOs up to speed=1.5; ... at speed=2 TTFT p95 is 3.4 s"). With an SLO the headline leads with the
headroom as a factor and its 95% interval ("holds 1.54× of the recorded traffic (95% interval 1×
to 2×)", stats/headroom.py): the interval runs from the last factor conclusively within every
limit to the first conclusively beyond one, so the factors' spacing is its resolution. Each step's
prompts open with a tag of their own (the run and the factor), so that no step is answered from
a prefix cache an earlier step filled with the same trace (see `at_speed`).

A kind added through the scenario registry (scenario_kinds.py): this module and one line there.
Nothing here imports pytest.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capacity.climb import climb
from pytest_inferaccept.model import CapacityParams
from pytest_inferaccept.stats.headroom import Headroom, Step, headroom

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.runner import CapacityRunner
    from pytest_inferaccept.capacity.scenarios import CapacityResult, Judgement
    from pytest_inferaccept.load.workloads import TraceEntry, TraceWorkload
    from pytest_inferaccept.run.load import LoadResult

FACTORS: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
"""The speed factors tried when none are given: half the recorded pace up to four times it."""


def at_speed(trace: TraceWorkload, factor: float, tag: str = "") -> TraceWorkload:
    """The trace with every arrival offset divided by `factor`; with a `tag`, every prompt opens with it.

    The tag keeps one step's prompts from meeting the prefix cache another step filled: replayed
    unchanged, each step after the first found the whole trace cached (llama-server b11434, 40
    requests at the recorded pace: TTFT p95 1.29 s the first time, 33 ms the second). Prefixes
    the trace shares within itself are still shared within a step, after the tag."""
    from dataclasses import replace

    if factor <= 0:
        raise ValueError(f"a speed factor must be above 0, got {factor:g}")
    entries = tuple(e.model_copy(update={"arrival": (e.arrival or 0.0) / factor, **_tagged(e, tag)})
                    for e in trace.entries)
    return replace(trace, entries=entries, source=f"{trace.source} at {factor:g}×")


def _tagged(entry: TraceEntry, tag: str) -> dict[str, Any]:
    """The entry's prompt or first message with `tag` before its text ({} without a tag)."""
    if not tag:
        return {}
    if entry.prompt is not None:
        return {"prompt": f"{tag}\n{entry.prompt}"}
    messages = [dict(m) for m in entry.messages or []]
    first = messages[0]
    content = first.get("content")
    if isinstance(content, list):
        first["content"] = [{"type": "text", "text": tag}, *content]
    else:
        first["content"] = f"{tag}\n{content or ''}"
    return {"messages": messages}


def start(runner: CapacityRunner, *, trace: str | Path | TraceWorkload,
          factors: Sequence[float] = FACTORS, duration: float | None = None,
          need: float = 1.0) -> CapacityResult:
    """Replay `trace` at each speed factor in turn until the breaker; the headroom and its interval.

    `trace` is a JSONL trace file (docs/trace-format.md) or a TraceWorkload whose every entry has
    an `arrival` offset; each step lasts at most `duration` seconds (--capacity-step-duration).
    `need` is the factor the server must hold (1: the recorded traffic itself; 1.5: half as much
    again): NO-GO when the headroom's interval lies below it, GO when at or above it, and "cannot
    tell" (invalid) when it straddles it. With --slo-judge point the climb's reading decides
    (the highest factor passing on point estimates, against `need`).
    """
    if need <= 0:
        raise ValueError(f"need is a speed factor above 0, got {need:g}")
    from pytest_inferaccept.load.workloads import TraceWorkload, WorkloadError
    from pytest_inferaccept.run.testload import LoadInputError

    try:
        workload = trace if isinstance(trace, TraceWorkload) else TraceWorkload.from_file(trace)
        if not workload.has_arrivals:
            raise WorkloadError(f"the headroom replays a trace at its recorded times, but "
                                f"{workload.source or 'it'} has entries without an `arrival` offset")
    except WorkloadError as exc:
        # Bad input to the plugin, not a finding about the server: the test cannot judge it.
        runner.ledger.mark_invalid(f"the load was not started: {exc}")
        raise LoadInputError(f"the load was not started: {exc}") from None
    cap = runner.settings.capacity
    seconds = duration or cap.step_duration
    _say_if_short(runner, len(workload.entries))
    chosen = tuple(sorted(float(f) for f in factors))
    run = secrets.token_hex(4)  # this run's steps share no prompt with an earlier run's either
    judged: list[Step] = []
    confidence: list[float] = []

    def step(factor: float) -> LoadResult:
        tagged = at_speed(workload, factor, tag=f"[replay {run} at speed {factor:g}]")
        measured = runner.measure_step(f"speed={factor:g}", replay=True, workload=tagged, duration=seconds,
                                       warmup=0)
        if measured.evaluation is not None:
            confidence.append(measured.evaluation.confidence)
            judged.append(Step(level=factor, rows=measured.evaluation.rows,
                               usable=not (measured.client_bound and measured.client_check != "warn")))
        return measured

    found: list[Headroom] = []

    def lead() -> tuple[str, list[Judgement] | None]:
        if not judged:
            return "", None
        est = headroom(judged, confidence=confidence[0])
        found.append(est)
        return est.words(), (None if runner.settings.load.judge_on_point else _judge(est, need))

    params = CapacityParams(levels=list(chosen), max_seconds_per_step=seconds, min_level=need,
                            breaker_error_rate=cap.breaker_error_rate, breaker_latency_s=cap.breaker_latency)
    result = climb(kind="headroom", label=runner.label, levels=chosen, run_step=step,
                   sampler=runner.sampler(), slo=runner.slo, breaker_errors=cap.breaker_error_rate,
                   breaker_latency_s=cap.breaker_latency, min_level=need, params=params, say=runner.say,
                   unit="speed", lead=lead)
    if found:
        result.findings.headroom = found[0].view()
    return result


def _judge(found: Headroom, need: float) -> list[Judgement]:
    """Fail when the interval lies below `need`; pass when it lies at or above it; else cannot tell."""
    if found.high is not None and found.high <= need:
        return [("fail", f"does not hold {need:g}× of the recorded traffic: {found.words()}")]
    if found.low >= need:
        return []
    return [("invalid", f"cannot tell whether it holds {need:g}× of the recorded traffic: {found.words()} "
                        f"(more requests a step, or factors closer to {need:g}×, would settle it)")]


def _say_if_short(runner: CapacityRunner, entries: int) -> None:
    """Say up front when each step (the whole trace, once) holds fewer requests than the SLO needs."""
    if runner.slo is None:
        return
    from pytest_inferaccept.stats.plan import plan_run

    plan = plan_run(runner.slo, point_estimate=runner.settings.load.judge_on_point)
    if entries < plan.least:
        need = plan.need(plan.least_key)
        setting = need.setting if need is not None else plan.least_key
        runner.say(f"inferaccept: headroom: the trace holds {entries} requests and each speed replays it "
                   f"once, but {setting} needs at least {plan.least} measured requests to pass even on a "
                   f"perfect server: no speed can pass the SLO (replay a longer trace)")
