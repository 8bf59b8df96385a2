"""How prompt and answer length move latency: one bounded closed-loop step per length bucket.

Input buckets (short, medium, long, very long) are measured with short answers, output buckets
with short prompts, each capped by the context window; a bucket beyond the window, or whose
window is unknown, is not run and says so. Informational (docs/capacity.md). Nothing here imports
pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pytest_inferaccept.capacity.effects import client_limited, fresh_seed, measured_ok, pct, usable_input
from pytest_inferaccept.capacity.scenarios import (
    CapacityResult,
    Judgement,
    Measure,
    Say,
    conclude,
    error_statuses,
    judged_with,
    ms,
    not_measured,
    quiet,
    step_row,
    telemetry_of,
)
from pytest_inferaccept.load.workloads import Fixed, SyntheticWorkload, Uniform, bucket
from pytest_inferaccept.model import CapacityFindings, CapacityParams, LengthNotRun, LengthStep

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.run.load import LoadResult

Direction = Literal["input", "output"]

BUCKET_BOUNDS: dict[str, tuple[int, int | None]] = {
    "short": (1, 127),
    "medium": (128, 1023),
    "long": (1024, 8192),
    "very_long": (8193, None),
}
"""Token bounds of each length bucket (as `load.workloads.bucket` draws them)."""

INPUT_LENGTHS: dict[str, tuple[int, int]] = {
    "short": (32, 96),
    "medium": (256, 768),
    "long": (1536, 6144),
    "very_long": (12288, 24576),
}
"""Representative prompt lengths inside each bucket (drawn uniformly), before the window caps them."""

OUTPUT_LENGTHS: dict[str, tuple[int, int]] = {
    "short": (16, 64),
    "medium": (256, 512),
    "long": (1024, 1536),
    "very_long": (9000, 12000),
}
"""Representative max_tokens inside each bucket (drawn uniformly), before the window caps them."""


def bucket_range(name: str, direction: Direction, cap: int | None) -> tuple[int, int] | str:
    """The (lo, hi) tokens to draw for a bucket, capped at `cap`; or why it is not run."""
    lo, hi = (INPUT_LENGTHS if direction == "input" else OUTPUT_LENGTHS)[name]
    floor = BUCKET_BOUNDS[name][0]
    if cap is None:
        return (lo, hi)
    if cap < floor:
        return "beyond"
    hi = min(hi, cap)
    return (max(floor, min(lo, hi)), hi)


def _length_row(result: LoadResult, direction: Direction, name: str, span: tuple[int, int],
                peaks: dict[str, float]) -> LengthStep:
    row = step_row((span[0] + span[1]) // 2, result, peaks, into=LengthStep)
    ok = measured_ok(result)
    prompt = pct([r.prompt_tokens for r in ok], 0.5)
    output = pct([r.completion_tokens for r in ok], 0.5)
    counted = prompt if direction == "input" else output
    realised = bucket(round(counted)) if counted is not None else None
    row.direction, row.bucket, row.asked_tokens, row.not_run = direction, name, list(span), None
    row.prompt_tokens_p50, row.output_tokens_p50 = prompt, output
    row.realised_bucket, row.confirmed = realised, None if realised is None else realised == name
    row.succeeded = len(ok)
    return row


def _not_run_row(direction: Direction, name: str, why: str) -> LengthNotRun:
    return LengthNotRun(direction=direction, bucket=name, level=BUCKET_BOUNDS[name][0], label=None,
                        not_run=why, measured=0, failed=0, succeeded=0, asked_tokens=None,
                        prompt_tokens_p50=None, output_tokens_p50=None, realised_bucket=None, confirmed=None,
                        throughput_tokens_per_s=None, request_rate_per_s=None, error_rate=None,
                        client_bound=[], client_warnings=[], ttft_p50=None, ttft_p95=None, ttft_p99=None,
                        e2e_p50=None, e2e_p95=None, e2e_p99=None, itl_p50=None, itl_p95=None, itl_p99=None)


def lengths(
    measure: Measure,
    sampler: Sampler,
    *,
    context_window: int | None,
    input_buckets: Sequence[str] = ("short", "medium", "long", "very_long"),
    output_buckets: Sequence[str] = ("short", "medium", "long"),
    requests: int = 16,
    concurrency: int = 2,
    duration: float,
    short_input: int = 64,
    short_output: int = 32,
    seed: int | None = None,
    label: str,
    say: Say = quiet,
) -> CapacityResult:
    """Latency per input length bucket (answers of `short_output` tokens) and per output length
    bucket (prompts of `short_input` tokens): one bounded closed-loop step per bucket."""
    for name in (*input_buckets, *output_buckets):
        if name not in BUCKET_BOUNDS:
            raise ValueError(f"unknown length bucket {name!r}; use {', '.join(BUCKET_BOUNDS)}")
    base = fresh_seed(seed)
    rows: list[LengthStep | LengthNotRun] = []
    results: list[LoadResult] = []
    plan: list[tuple[Direction, str, tuple[int, int] | str]] = []
    in_cap = usable_input(context_window, short_output)
    out_cap = usable_input(context_window, short_input)
    for name in input_buckets:
        span = bucket_range(name, "input", in_cap)
        if context_window is None and name == "very_long":
            span = "unknown"
        plan.append(("input", name, span))
    for name in output_buckets:
        span = bucket_range(name, "output", out_cap)
        if context_window is None and name == "very_long":
            span = "unknown"
        plan.append(("output", name, span))
    with sampler:
        for i, (direction, name, span) in enumerate(plan):
            if isinstance(span, str):
                why = (f"not run: beyond the context window ({context_window})" if span == "beyond"
                       else "not run: the context window is unknown (give --context-window)")
                rows.append(_not_run_row(direction, name, why))
                say(f"inferaccept: length {direction} {name}: {why}")
                continue
            n_in: Fixed | Uniform = Uniform(*span) if direction == "input" else Fixed(short_input)
            n_out: Fixed | Uniform = Uniform(*span) if direction == "output" else Fixed(short_output)
            t0 = sampler.now()
            result = measure(
                f"{direction} {name}",
                concurrency=concurrency,
                requests=max(requests, 2 * concurrency),
                duration=duration,
                warmup=concurrency,
                workload=SyntheticWorkload(input=n_in, output=n_out, seed=base + i),
            )
            results.append(result)
            row = _length_row(result, direction, name, span, sampler.peaks(t0, sampler.now()))
            rows.append(row)
            size = row.prompt_tokens_p50 if direction == "input" else row.output_tokens_p50
            say(
                f"inferaccept: length {direction} {name} ({span[0]}-{span[1]} tokens asked, "
                f"{'n/a' if size is None else f'{size:.0f}'} counted): {row.succeeded} answered, "
                f"{row.failed} failed, TTFT p50 {ms(row.ttft_p50)}, e2e p95 {ms(row.e2e_p95)}"
            )
    run = [r for r in rows if isinstance(r, LengthStep)]
    skipped = [r for r in rows if isinstance(r, LengthNotRun)]
    notes: list[str] = []
    for r in run:
        if r.confirmed is False:
            counted = "prompt" if r.direction == "input" else "output"
            size = r.prompt_tokens_p50 if r.direction == "input" else r.output_tokens_p50
            lo, hi = r.asked_tokens or (None, None)
            notes.append(
                f"{r.direction} {r.bucket}: {lo}-{hi} tokens asked, "
                f"the server counted {size:.0f} {counted} tokens (p50), in the {r.realised_bucket} bucket"
                + (": it ended its answers before max_tokens" if r.direction == "output" else "")
            )
        elif r.confirmed is None and r.succeeded:
            notes.append(f"{r.direction} {r.bucket}: the server reported no usage; the bucket "
                         "is the one asked for, not confirmed")
    notes += [f"{r.direction} {r.bucket}: {r.not_run}" for r in skipped]
    notes += not_measured(sampler)
    notes += [f"{r.direction} {r.bucket}: {r.failed} of {r.measured} failed{error_statuses(r)}"
              + ("; the context window is unknown: give --context-window to keep the buckets inside it"
                 if context_window is None else "") for r in run if r.failed]
    by_in = {r.bucket: r for r in run if r.direction == "input"}
    by_out = {r.bucket: r for r in run if r.direction == "output"}
    failed = [r for r in run if not r.succeeded]
    judged: list[Judgement] = []
    if not run:
        judged.append(("invalid", "no length bucket could be run"))
    elif len(failed) == len(run):
        judged.append(("fail", "every length bucket failed: " + "; ".join(
            f"{r.direction} {r.bucket}: {r.failed} failed" for r in failed)))
    parts = []
    if by_in:
        parts.append("TTFT p50 by input length: " + ", ".join(
            _bucket_text(k, r, r.ttft_p50) for k, r in by_in.items()))
    if by_out:
        parts.append("e2e p95 by output length: " + ", ".join(
            _bucket_text(k, r, r.e2e_p95) for k, r in by_out.items()))
    parts += [f"{r.direction} {r.bucket} {r.not_run}" for r in skipped]
    return conclude(
        kind="length",
        label=label,
        steps=rows,
        params=CapacityParams(context_window=context_window, input_buckets=list(input_buckets),
                              output_buckets=list(output_buckets), requests_per_bucket=requests,
                              concurrency=concurrency, max_seconds_per_bucket=duration,
                              input_tokens_for_output_buckets=short_input,
                              output_tokens_for_input_buckets=short_output, seed=base),
        headline="; ".join(parts) or "no length bucket was run",
        slo=judged_with(results),
        bound=client_limited(run),
        judged=judged,
        findings=CapacityFindings(
            ttft_p50_by_input={k: r.ttft_p50 for k, r in by_in.items()},
            ttft_p95_by_input={k: r.ttft_p95 for k, r in by_in.items()},
            e2e_p95_by_output={k: r.e2e_p95 for k, r in by_out.items()},
            itl_p50_by_output={k: r.itl_p50 for k, r in by_out.items()},
            not_run={f"{r.direction} {r.bucket}": r.not_run for r in skipped},
            context_window=context_window),
        telemetry=telemetry_of(sampler),
        notes=notes,
    )


def _bucket_text(name: str, row: LengthStep, value: float | None) -> str:
    """'long 870 ms', 'long 870 ms (3 of 16 failed)' or 'long failed (HTTP 400 ×16)'."""
    if not row.succeeded:
        return f"{name} failed{error_statuses(row)}"
    failed = f" ({row.failed} of {row.measured} failed)" if row.failed else ""
    return f"{name} {ms(value)}{failed}"
