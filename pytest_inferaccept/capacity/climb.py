"""Climbing levels of load, one bounded step each, until the breaker: what the ladder and the sweep share.

Each level is measured beside the telemetry sampler; the climb stops early when errors or
latency cross the circuit breaker or the client becomes the bottleneck. The rows then give the
knee, the highest level that meets the SLOs and the explanations (capacity/analysis.py), and
`conclude` the status: a failing level first (most of its requests failed, or a level the scenario
must meet failed its SLO by failed requests alone), then a client that could not drive the first
level, then the SLOs. Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pytest_inferaccept.capacity.analysis import breaker, explain, find_knee, latency_of, max_slo_level
from pytest_inferaccept.capacity.scenarios import (
    CapacityResult,
    Judgement,
    Say,
    conclude,
    ms,
    not_measured,
    step_row,
    telemetry_of,
)
from pytest_inferaccept.model import CapacityFindings, CapacityParams, CapacityStep

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.run.load import LoadResult


def level_text(unit: str, level: float) -> str:
    """'c=8' for a concurrency, '4.5 req/s' for a request rate, 'speed=1.5' for a trace's pace."""
    return f"{level:g} req/s" if unit == "rate" else f"{unit}={level:g}"


UNIT_WORDS = {"c": "concurrency", "rate": "requests/s", "speed": "× the recorded traffic"}
"""What `findings.unit` says of each unit a climb takes."""


def climb(
    kind: str,
    *,
    label: str,
    levels: Sequence[float],
    run_step: Callable[[float], LoadResult],
    sampler: Sampler,
    slo: SloSpec | None,
    breaker_errors: float,
    breaker_latency_s: float,
    min_level: float | None,
    params: CapacityParams,
    say: Say,
    each_row: Callable[[CapacityStep], None] | None = None,
    caveat: str = "",
    unit: str | None = None,
    lead: Callable[[], tuple[str, list[Judgement] | None]] | None = None,
) -> CapacityResult:
    """Measure each level in turn; the knee, the highest level within the SLOs, and the verdict.

    `each_row` adds a kind's own figures to every row once the climb ends; `caveat` is the doubt
    of an unconfirmed ladder knee the levels were chosen around, said first in the notes and last
    in the headline. `unit` names the levels: "c" for the ladder, "rate" for the sweep (the
    defaults), "speed" for a trace replayed faster. `lead`, called once the steps are measured
    when an SLO judged them, gives the headline's first words in place of "meets the SLOs up to
    ..." ("" keeps them) and the judgements that replace those the climb draws from the highest
    level within the SLOs (None keeps them): the headroom's factor, its interval and its rule.
    """
    unit = unit or ("c" if kind == "ladder" else "rate")
    rows: list[CapacityStep] = []
    stopped = ""
    with sampler:
        for level in levels:
            t0 = sampler.now()
            measured = run_step(level)
            row = step_row(level, measured, sampler.peaks(t0, sampler.now()))
            row.window_s = [round(t0, 3), round(sampler.now(), 3)]
            rows.append(row)
            say(
                f"inferaccept: {kind} {level_text(unit, level)}: {row.measured} measured, "
                f"{row.failed} failed, "
                f"TTFT p95 {ms(row.ttft_p95)}, {row.throughput_tokens_per_s or 0:.1f} tokens/s"
                + (f", SLO {row.slo_status}" if row.slo_status else "")
            )
            why = breaker(row, max_error_rate=breaker_errors, max_latency_s=breaker_latency_s)
            if why:
                stopped = f"stopped climbing after {level_text(unit, level)}: {why} (circuit breaker)"
                break
            if row.client_bound:
                stopped = f"stopped climbing at {level_text(unit, level)}: the client was the bottleneck"
                break
    if each_row is not None:
        for row in rows:
            each_row(row)
    # A level whose answers mostly failed (or all did) is a finding, whatever the knee says.
    bad = next((r for r in rows if r.failing), None)
    knee = find_knee([r for r in rows if not r.failing], unit=unit, closed_loop=kind == "ladder")
    best, why_best = max_slo_level(rows, unit=unit) if slo is not None else (None, "no SLO given")
    # A first level the client could not drive says nothing about the server.
    bound = (f"the client was the bottleneck already at {level_text(unit, rows[0].level)}: "
             + "; ".join(rows[0].client_bound)) if rows and rows[0].client_bound else ""
    judged: list[Judgement] = []
    said, own = lead() if lead is not None and slo is not None and rows else ("", None)
    if own is not None:
        judged = list(own)
    elif slo is not None and best is None:
        first = rows[0] if rows else None
        if first is not None and first.slo_status == "fail":
            judged.append(("fail", f"does not meet the SLOs even at {level_text(unit, first.level)}: "
                                   f"{first.slo_failures}"))
        else:
            judged.append(("invalid", f"no level could be judged against the SLOs: {why_best}"))
    elif min_level is not None and slo is not None and best is not None and best < min_level:
        judged.append(("fail", f"meets the SLOs only up to {level_text(unit, best)}; required: "
                               f"{level_text(unit, min_level)} ({why_best})"))
    # A level the scenario must meet (the first, or every one up to min_level) whose SLO failed
    # requests alone decided fails it, whatever a client limit or an undecided level says.
    decided = _decided_by_failures(rows, min_level) if slo is not None else None
    if decided is not None and bad is None:
        judged = [(s, why) for s, why in judged if not why.startswith("does not meet the SLOs even at")]
    notes = [f"rates chosen around {caveat}"] if caveat else []
    notes += [stopped] if stopped else []
    notes += not_measured(sampler)
    if knee.level is not None and not knee.confirmed:
        notes.append(f"knee {knee.certainty}")
    headline = _headline(rows, knee.level, best, slo is not None, unit, confirmed=knee.confirmed,
                         why=why_best, lead=said)
    return conclude(
        kind=kind,
        label=label,
        steps=rows,
        params=params,
        headline=headline + (f"; rates chosen around {caveat}" if caveat else ""),
        slo=slo,
        failing=bad.failure_text if bad is not None else (
            f"does not meet the SLOs at {level_text(unit, decided.level)}, by failed requests alone: "
            f"{decided.slo_by_failures}" if decided is not None else ""),
        bound=bound,
        judged=judged,
        findings=CapacityFindings(knee=knee, max_slo_level=best, max_slo_reason=why_best,
                                  stopped_early=stopped or None,
                                  unit=UNIT_WORDS.get(unit, unit)),
        explanations=explain(rows, knee.level, unit=unit),
        telemetry=telemetry_of(sampler),
        notes=notes,
    )


def _decided_by_failures(rows: list[CapacityStep], min_level: float | None) -> CapacityStep | None:
    """The first level the scenario must meet (the first, or each up to min_level) whose SLO failed
    by failed requests alone; None when there is none."""
    if not rows:
        return None
    top = min_level if min_level is not None else rows[0].level
    return next((r for r in rows if r.level <= top and r.slo_by_failures), None)


def _headline(
    rows: list[CapacityStep],
    knee: float | None,
    best: float | None,
    judged: bool,
    unit: str,
    *,
    confirmed: bool = True,
    why: str = "",
    lead: str = "",
) -> str:
    parts = []
    # Levels that passed on their own (the client keeping up), though the count up from the first
    # stopped below them.
    passed = [level_text(unit, r.level) for r in rows if r.slo_status == "pass" and not r.client_bound]
    if judged and lead:
        parts.append(lead)
    elif judged:
        parts.append(
            f"meets the SLOs up to {level_text(unit, best)}"
            if best is not None
            else f"no level counts as meeting the SLOs ({why}), although {', '.join(passed)} "
                 f"{'passes' if len(passed) == 1 else 'pass'} on {'its' if len(passed) == 1 else 'their'} own"
            if passed
            else f"does not meet the SLOs even at {level_text(unit, rows[0].level)}"
            if rows and rows[0].slo_status == "fail"
            else f"no level judged against the SLOs ({why})"
            if rows
            else "meets the SLOs at no level measured"
        )
    beyond = sum(1 for r in rows if knee is not None and r.level > knee)
    parts.append(
        f"knee at {level_text(unit, knee)}"
        + ("" if confirmed else f" (not confirmed: only {beyond} level{'' if beyond == 1 else 's'} above it)")
        if knee is not None
        else f"no knee up to {level_text(unit, rows[-1].level)}"
        if rows
        else "no levels measured"
    )
    above = next((r for r in rows if best is not None and r.level > best), None) if judged else None
    if above is not None:
        parts.append(
            f"at {level_text(unit, above.level)} TTFT p95 is {ms(above.ttft_p95)}"
            + (f" and {above.error_rate:.0%} fail" if above.error_rate else "")
        )
    elif knee is not None:
        over = next((r for r in rows if r.level > knee), None)
        if over is not None:
            parts.append(f"at {level_text(unit, over.level)} latency p95 is {ms(latency_of(over))}")
    return "; ".join(parts)
