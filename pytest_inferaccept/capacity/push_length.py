"""The prompt-length boundary: prompts of growing length up to and past the context window.

Past the window a server should refuse with a clean 4xx and go on answering; within it, it
should answer (docs/capacity.md). Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_inferaccept.capacity.failures import classify
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
from pytest_inferaccept.model import CapacityBoundary, CapacityFindings, CapacityParams, CapacityStep

if TYPE_CHECKING:
    from pytest_inferaccept.run.load import LoadResult


def push_length(
    measure: Measure,
    alive: Alive,
    *,
    lengths: Sequence[int],
    context_window: int | None,
    requests: int,
    duration: float,
    request_timeout: float,
    label: str,
    say: Say = quiet,
) -> CapacityResult:
    """Prompts of growing length up to (and past) the context window: a clean 4xx beyond it, or not?"""
    from pytest_inferaccept.load.workloads import Fixed, SyntheticWorkload

    rows: list[CapacityStep] = []
    results: list[LoadResult] = []
    boundary: CapacityBoundary | None = None
    for n in lengths:
        result = measure(
            f"prompt {n} tokens",
            concurrency=1,
            requests=requests,
            duration=duration,
            warmup=0,
            workload=SyntheticWorkload(input=Fixed(n), output=Fixed(8), seed=n),
        )
        results.append(result)
        row = step_row(n, result)
        after = alive()
        row.alive_after = after[0]
        rows.append(row)
        say(
            f"inferaccept: prompt length {n}: {row.failed} of {row.measured} failed"
            f"{failure_kinds(row)}, TTFT p95 {ms(row.ttft_p95)}"
        )
        if row.failed or not after[0]:
            boundary = classify(result, after, request_timeout)
            statuses = {int(s) for s in boundary.statuses}
            clean = (
                all(400 <= s < 500 for s in statuses)
                and bool(boundary.alive_after)
                and not any(boundary.error_classes.get(k) for k in ("timeout", "stall", "connect"))
            )
            boundary.length, boundary.graceful = n, clean
            break
    headline, judged = _at_boundary(boundary, lengths, context_window)
    return conclude(
        kind="push_length",
        label=label,
        steps=rows,
        params=CapacityParams(lengths=list(lengths), context_window=context_window,
                              requests_per_length=requests),
        headline=headline,
        slo=judged_with(results),
        judged=judged,
        findings=CapacityFindings(boundary=boundary, context_window=context_window),
    )


def _at_boundary(boundary: CapacityBoundary | None, lengths: Sequence[int],
                 context_window: int | None) -> tuple[str, list[Judgement]]:
    """The headline and the judgement of the first length that failed (or of none)."""
    if boundary is None:
        return f"every prompt length up to {lengths[-1] if lengths else 0} tokens was answered", []
    n = boundary.length
    if not boundary.graceful:
        problems = boundary.problems or ["errors other than a clean 4xx"]
        headline = (f"prompts of {n} tokens break the server instead of a clean refusal: "
                    + "; ".join(problems))
        return headline, [("fail", headline)]
    headline = (
        f"prompts of {n} tokens are refused cleanly ("
        + ", ".join(f"HTTP {s}" for s in boundary.statuses)
        + ") and the server answers "
        "afterwards" + (f"; the context window is {context_window}" if context_window else "")
    )
    if context_window is not None and n is not None and n <= context_window * 0.9:
        return headline, [("fail", f"prompts of {n} tokens are refused although the context window is "
                                   f"{context_window} tokens")]
    return headline, []
