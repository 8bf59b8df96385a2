"""Interference: short prompts' TTFT alone, then with a share of long prompts mixed in.

A server that prefills long prompts in one piece makes the short ones behind them wait; the p95
ratio (mixed / alone) comes with an exact interval, judged only against a `max_ratio` the test
gives (docs/capacity.md). Nothing here imports pytest.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capacity.effects import client_limited, fresh_seed, measured_ok, pct, ratio, ttft
from pytest_inferaccept.capacity.scenarios import (
    CapacityResult,
    Judgement,
    Measure,
    Say,
    conclude,
    error_statuses,
    ms,
    not_measured,
    quiet,
    step_row,
)
from pytest_inferaccept.load.compound import MixedWorkload
from pytest_inferaccept.load.workloads import Fixed, SyntheticWorkload

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler


def interference(
    measure: Measure,
    sampler: Sampler,
    *,
    concurrency: int = 4,
    requests: int = 32,
    duration: float,
    short_tokens: int = 64,
    long_tokens: int,
    long_share: float = 0.25,
    output_tokens: int = 32,
    threshold: float = 2.0,
    max_ratio: float | None = None,
    seed: int | None = None,
    label: str,
    say: Say = quiet,
) -> CapacityResult:
    """Short prompts' TTFT on a closed loop alone, then with `long_share` of long prompts mixed in.

    The p95 ratio (mixed / alone) comes with an exact bootstrap interval (`stats.quantile_ratio`):
    with `max_ratio` the scenario fails only when the interval's low end is above it, passes when
    its high end is at or below it, and is INVALID ("not enough data") when it straddles it.
    """
    from pytest_inferaccept.stats.quantile_ratio import quantile_ratio

    base = fresh_seed(seed)
    long_wl = SyntheticWorkload(input=Fixed(long_tokens), output=Fixed(output_tokens), seed=base + 1)
    steps = [
        ("alone", 0.0, requests),
        ("mixed", long_share, math.ceil(requests / (1.0 - long_share))),
    ]
    rows: list[dict[str, Any]] = []
    short_ttfts: list[list[float]] = []
    with sampler:
        for i, (name, share, n) in enumerate(steps):
            # Each step its own prompts: the mixed step must not be served from the alone step's cache.
            short_wl = SyntheticWorkload(input=Fixed(short_tokens), output=Fixed(output_tokens),
                                         seed=base + 2 + i)
            t0 = sampler.now()
            result = measure(
                f"interference {name}",
                concurrency=concurrency,
                requests=max(n, 2 * concurrency),
                duration=duration,
                warmup=concurrency,
                workload=MixedWorkload(short=short_wl, long=long_wl, long_share=share),
            )
            row = step_row(concurrency, result, sampler.peaks(t0, sampler.now()))
            short = measured_ok(result, "short")
            short_ttfts.append([r.ttft for r in short if r.ttft is not None])
            longs = [r for r in result.records if not r.warmup and "long" in r.tags]
            row.update({
                "step": name, "long_share": share, "short_answered": len(short),
                "short_ttft_p50": ttft(short, 0.5), "short_ttft_p95": ttft(short, 0.95),
                "long_sent": len(longs), "long_failed": sum(1 for r in longs if not r.ok),
                "long_ttft_p50": ttft([r for r in longs if r.ok], 0.5),
                "long_prompt_tokens_p50": pct([r.prompt_tokens for r in longs if r.ok], 0.5),
            })
            rows.append(row)
            say(
                f"inferaccept: interference {name} (c={concurrency}, {share:.0%} long): "
                f"short TTFT p50 {ms(row['short_ttft_p50'])}, p95 {ms(row['short_ttft_p95'])}"
                + (f"; long TTFT p50 {ms(row['long_ttft_p50'])}" if longs else "")
            )
    alone, mixed = rows
    r50 = ratio(mixed["short_ttft_p50"], alone["short_ttft_p50"])
    r95 = ratio(mixed["short_ttft_p95"], alone["short_ttft_p95"])
    interval = quantile_ratio(short_ttfts[1], short_ttfts[0], p=0.95, confidence=0.95)
    lo, hi = interval.low, interval.high
    between = (f"95% interval ×{lo:.2f}–×{hi:.2f}" if lo is not None and hi is not None
               else f"95% interval from ×{lo:.2f}, no upper end" if lo is not None else "no interval")
    mix = f"{long_share:.0%} long prompts ({long_tokens} tokens)"
    notes = []
    if mixed["long_failed"]:
        notes.append(f"{mixed['long_failed']} of {mixed['long_sent']} long prompts ({long_tokens} tokens) "
                     "failed: the mix did not load the server as asked" + error_statuses(mixed))
    explanations = [{"kind": "interference", "level": concurrency,
                     "text": f"long prompts delay short ones: TTFT p95 ×{r95:.1f}",
                     "evidence": {"ratio_p95": r95, "ratio_p50": r50, "threshold": threshold}}
                    ] if r95 is not None and r95 > threshold else []
    all_long_failed = bool(mixed["long_sent"]) and mixed["long_failed"] == mixed["long_sent"]
    judged: list[Judgement] = []
    if all_long_failed:
        judged.append(("invalid", f"every long prompt ({long_tokens} tokens) failed{error_statuses(mixed)}, "
                                  "so the mix never loaded the server: lower long_tokens or give "
                                  "--context-window"))
    elif r95 is None or r50 is None:
        empty = [r["step"] for r in rows if not r["short_answered"]]
        judged.append(("fail", f"no short request was answered in the {' and '.join(empty)} step"
                               + "".join(error_statuses(r) for r in rows if not r["short_answered"])))
    elif max_ratio is not None:
        verdict = interval.judge(max_ratio)
        measured = (f"({ms(alone['short_ttft_p95'])} alone over {interval.n_denominator} short requests, "
                    f"{ms(mixed['short_ttft_p95'])} with {mix} over {interval.n_numerator})")
        if verdict == "fail":
            judged.append(("fail", f"long prompts raise short prompts' TTFT p95 ×{r95:.1f} ({between}), all "
                                   f"of it above the ×{max_ratio:g} allowed {measured}"))
        elif verdict == "not_enough_data":
            judged.append(("invalid", f"not enough data: short prompts' TTFT p95 ratio ×{r95:.2f} "
                                      f"({between}) straddles the ×{max_ratio:g} allowed {measured}; more "
                                      f"requests per step (now {requests}) narrow the interval"))
    if r95 is None or r50 is None:
        headline = f"short prompts' TTFT could not be compared alone and with {mix} at c={concurrency}"
    else:
        said = (f"long prompts delay short ones: TTFT p95 ×{r95:.1f} ({between})" if r95 > threshold
                else f"TTFT p95 ×{r95:.1f} ({between}): below the ×{threshold:g} that counts as "
                     "interference")
        headline = (
            f"short prompts' TTFT p95 {ms(alone['short_ttft_p95'])} alone, {ms(mixed['short_ttft_p95'])} "
            f"with {mix} at c={concurrency} (p50 {ms(alone['short_ttft_p50'])} → "
            f"{ms(mixed['short_ttft_p50'])}, ×{r50:.1f}); {said}"
        )
    if all_long_failed:
        headline += f"; but every long prompt failed{error_statuses(mixed)}"
    return conclude(
        kind="interference",
        label=label,
        steps=rows,
        params={"concurrency": concurrency, "requests_alone": requests, "short_tokens": short_tokens,
                "long_tokens": long_tokens, "long_share": long_share, "output_tokens": output_tokens,
                "threshold": threshold, "max_ratio": max_ratio, "max_seconds_per_step": duration,
                "seed": base},
        headline=headline,
        bound=client_limited(rows),
        judged=judged,
        findings={
            "short_ttft_p50_alone": alone["short_ttft_p50"], "short_ttft_p95_alone": alone["short_ttft_p95"],
            "short_ttft_p50_mixed": mixed["short_ttft_p50"], "short_ttft_p95_mixed": mixed["short_ttft_p95"],
            "ratio_p50": r50, "ratio_p95": r95, "ratio_p95_low": lo, "ratio_p95_high": hi,
            "ratio_p95_interval": interval.to_json(),
        },
        explanations=explanations,
        telemetry=sampler.to_json(),
        notes=[*notes, *not_measured(sampler)],
    )
