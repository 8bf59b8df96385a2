"""The prefix cache: the same requests with one shared long prefix and with unique prompts.

Both steps send prompts of the same length; TTFT is compared beside the server's own
prefix-cache counters, read from /metrics around each step and never invented (docs/capacity.md).
Nothing here imports pytest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_inferaccept.capacity.effects import (
    PREFIX_HITS,
    PREFIX_QUERIES,
    client_limited,
    fresh_seed,
    measured_ok,
    pct,
    prefix_counters,
    ratio,
)
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
from pytest_inferaccept.load.workloads import Fixed, SyntheticWorkload
from pytest_inferaccept.model import (
    CapacityExplanation,
    CapacityFindings,
    CapacityParams,
    ExplanationEvidence,
    PrefixCounters,
    PrefixStep,
)

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.run.load import LoadResult


def prefix_cache(
    measure: Measure,
    sampler: Sampler,
    *,
    concurrency: int = 2,
    requests: int = 24,
    duration: float,
    prefix_tokens: int,
    suffix_tokens: int = 64,
    output_tokens: int = 16,
    seed: int | None = None,
    label: str,
    say: Say = quiet,
) -> CapacityResult:
    """The same number of requests with unique prompts, then with one shared `prefix_tokens` prefix.

    Both steps send prompts of the same length; in the shared one every prompt begins with the same
    text (then `Request <uid>:` and its own words), in the unique one the first words differ.
    """
    base = fresh_seed(seed)
    total = prefix_tokens + suffix_tokens
    steps = [("unique", 0), ("shared", prefix_tokens)]
    rows: list[PrefixStep] = []
    results: list[LoadResult] = []
    with sampler:
        for i, (name, shared) in enumerate(steps):
            t0 = sampler.now()
            result = measure(
                f"prefix {name}",
                concurrency=concurrency,
                requests=max(requests, 2 * concurrency),
                duration=duration,
                warmup=concurrency,
                workload=SyntheticWorkload(input=Fixed(total), output=Fixed(output_tokens), seed=base + i,
                                           shared_prefix=shared),
            )
            results.append(result)
            row = step_row(concurrency, result, sampler.peaks(t0, sampler.now()), into=PrefixStep)
            cache = prefix_counters(result)
            row.step, row.shared_prefix_tokens, row.prompt_tokens = name, shared, total
            row.prompt_tokens_p50 = pct([r.prompt_tokens for r in measured_ok(result)], 0.5)
            row.succeeded, row.prefix_cache = len(measured_ok(result)), cache
            rows.append(row)
            say(f"inferaccept: prefix {name}: TTFT p50 {ms(row.ttft_p50)}, p95 {ms(row.ttft_p95)}; "
                f"prefix cache {cache.text}")
    unique, shared_row = rows
    unique_cache, shared_cache = _counters(unique), _counters(shared_row)
    r50 = ratio(shared_row.ttft_p50, unique.ttft_p50)
    r95 = ratio(shared_row.ttft_p95, unique.ttft_p95)
    exposed = unique_cache.exposed and shared_cache.exposed
    hit_unique = unique_cache.hit_rate
    hit_shared = shared_cache.hit_rate
    empty = [r for r in rows if not r.succeeded]
    judged: list[Judgement] = []
    if empty:
        judged.append(("fail", f"no request was answered in the {' and '.join(r.step for r in empty)} step"
                               + "".join(error_statuses(r) for r in empty)))
    if r50 is None or r95 is None:
        headline = (f"TTFT with a shared {prefix_tokens}-token prefix could not be compared with unique "
                    "prompts")
    else:
        headline = (
            f"with a shared {prefix_tokens}-token prefix TTFT p50 is {ms(shared_row.ttft_p50)} vs "
            f"{ms(unique.ttft_p50)} for unique prompts of {total} tokens (×{r50:.2f}; p95 ×{r95:.2f})"
        )
    if exposed and hit_shared is not None and hit_unique is not None:
        headline += f"; prefix-cache hit rate {hit_shared:.0%} shared vs {hit_unique:.0%} unique"
    elif exposed:
        headline += f"; prefix cache: {shared_cache.text} (shared), {unique_cache.text} (unique)"
    else:
        headline += "; prefix-cache counters not exposed"
    return conclude(
        kind="prefix",
        label=label,
        steps=rows,
        params=CapacityParams(concurrency=concurrency, requests_per_step=requests,
                              prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens,
                              output_tokens=output_tokens, max_seconds_per_step=duration, seed=base),
        headline=headline,
        slo=judged_with(results),
        bound=client_limited(rows),
        judged=judged,
        findings=CapacityFindings(
            ttft_p50_unique=unique.ttft_p50, ttft_p50_shared=shared_row.ttft_p50,
            ttft_p95_unique=unique.ttft_p95, ttft_p95_shared=shared_row.ttft_p95,
            ratio_p50=r50, ratio_p95=r95, hit_rate_unique=hit_unique, hit_rate_shared=hit_shared,
            counters="exposed" if exposed else "not exposed"),
        explanations=[CapacityExplanation(
            kind="prefix_cache", level=concurrency,
            text=f"a shared {prefix_tokens}-token prefix lowers TTFT p50 ×{r50:.2f}",
            evidence=ExplanationEvidence(ratio_p50=r50, ratio_p95=r95, hit_rate_shared=hit_shared))
        ] if r50 is not None and r50 < 0.8 else [],
        telemetry=telemetry_of(sampler),
        notes=["prefix-cache counters: read by the engine from /metrics right before and after each step's "
               f"measured window ({PREFIX_QUERIES}, {PREFIX_HITS}); warm-up excluded",
               *not_measured(sampler)],
    )


def _counters(row: PrefixStep) -> PrefixCounters:
    """The step's prefix-cache counters (every step this scenario measures has them)."""
    assert row.prefix_cache is not None
    return row.prefix_cache
