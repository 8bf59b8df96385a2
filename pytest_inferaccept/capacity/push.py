"""Push to failure: raise concurrency until the breaker, then see how the server failed there.

Graceful shedding (429 or 503, fast, and the server answers afterwards), queueing without
errors, or falling over (docs/capacity.md). Nothing here imports pytest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capacity.analysis import breaker, latency_of
from pytest_inferaccept.capacity.failures import classify, incomplete_text
from pytest_inferaccept.capacity.scenarios import (
    Alive,
    CapacityResult,
    Judgement,
    Measure,
    Say,
    conclude,
    failure_kinds,
    judged_with,
    ms,
    quiet,
    step_row,
)
from pytest_inferaccept.model import (
    CapacityBoundary,
    CapacityExplanation,
    CapacityFindings,
    CapacityParams,
    CapacityStep,
    ExplanationEvidence,
)

if TYPE_CHECKING:
    from pytest_inferaccept.run.load import LoadResult


def push(
    measure: Measure,
    alive: Alive,
    *,
    levels: Sequence[int],
    requests: int,
    duration: float,
    breaker_errors: float,
    breaker_latency_s: float,
    request_timeout: float,
    label: str,
    workload: Any = None,
    say: Say = quiet,
) -> CapacityResult:
    """Raise concurrency until errors or latency cross the breaker; how did the server fail there?

    Incomplete answers (HTTP 200 with nothing generated or no finish_reason) end the climb at
    the first level that has one, and the push fails naming them: never "queues rather than
    rejecting".
    """
    rows: list[CapacityStep] = []
    results: list[LoadResult] = []
    boundary: CapacityBoundary | None = None
    note = ""
    for c in levels:
        result = measure(
            f"push c={c}",
            concurrency=c,
            requests=max(requests, 2 * c),
            duration=duration,
            warmup=0,
            workload=workload,
        )
        results.append(result)
        row = step_row(c, result)
        after = alive()
        row.alive_after = after[0]
        rows.append(row)
        latency = latency_of(row)
        p95 = "beyond any limit (failed requests count as infinite)" if latency == math.inf else ms(latency)
        say(
            f"inferaccept: push c={c}: {row.measured} measured, {row.failed} failed"
            f"{failure_kinds(row)}, latency p95 {p95}; "
            f"{'answers afterwards' if after[0] else 'NO ANSWER afterwards'}"
        )
        # An empty 200 is a broken answer, not load shed: one is a boundary whatever the breaker says,
        # and it is named first (the breaker would only see its error rate, or an infinite latency).
        kinds = row.failures.kinds if row.failures is not None else {}
        why = (incomplete_text(kinds, row.measured)
               or breaker(row, max_error_rate=breaker_errors, max_latency_s=breaker_latency_s)
               or (row.failure_text if row.failing else None))
        if not after[0]:
            why = f"the server did not answer afterwards ({after[1]})"
        if why:
            boundary = classify(result, after, request_timeout)
            boundary.level, boundary.why = c, why
            break
        if row.client_bound:
            note = f"the client could not push past c={c}: " + "; ".join(row.client_bound)
            break
    headline, judged, explanations = _at_boundary(boundary, rows, note)
    return conclude(
        kind="push",
        label=label,
        steps=rows,
        params=CapacityParams(levels=list(levels), requests_per_level=requests,
                              max_seconds_per_level=duration, breaker_error_rate=breaker_errors,
                              breaker_latency_s=breaker_latency_s),
        headline=headline,
        slo=judged_with(results),
        # A client that could not push past the first level leaves nothing pushed.
        bound=note if boundary is None and len(rows) <= 1 else "",
        judged=judged,
        findings=CapacityFindings(boundary=boundary),
        explanations=explanations,
        notes=[note] if note else [],
    )


def _at_boundary(boundary: CapacityBoundary | None, rows: list[CapacityStep],
                 note: str) -> tuple[str, list[Judgement], list[CapacityExplanation]]:
    """The headline, the judgement and the explanations of what happened at the boundary."""
    if boundary is None:
        top = rows[-1].level if rows else 0
        headline = (f"did not break up to c={top:g}" + (f" ({note})" if note else "")
                    + ": the boundary is above what was pushed")
        return headline, [], []
    c = boundary.level
    judged: list[Judgement] = []
    explanations: list[CapacityExplanation] = []
    if boundary.graceful and boundary.failed:
        headline = (
            f"sheds load gracefully at c={c}: {boundary.shed} rejected with "
            f"{', '.join('HTTP ' + s for s in boundary.statuses)} "
            f"({boundary.retry_after} with Retry-After), median rejection "
            f"{ms(boundary.rejection_median_s)}, and it answers afterwards"
        )
    elif boundary.graceful:
        headline = (
            f"at c={c} {boundary.why} without errors: the server queues rather than "
            "rejecting, and it answers afterwards"
        )
        explanations.append(CapacityExplanation(kind="queueing", level=c, text=headline,
                                                evidence=ExplanationEvidence()))
    else:
        headline = f"falls over at c={c} instead of shedding load: " + "; ".join(boundary.problems)
        judged.append(("fail", headline))
    explanations.append(CapacityExplanation(
        kind="boundary", level=c, text=headline,
        evidence=ExplanationEvidence.model_validate(boundary.model_dump(exclude_unset=True))))
    return headline, judged, explanations
