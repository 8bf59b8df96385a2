"""Interference: short prompts' TTFT alone, then with a share of long prompts mixed in.

A server that prefills long prompts in one piece makes the short ones behind them wait; the p95
ratio (mixed / alone) comes with an exact interval, judged only against a `max_ratio` the test
gives (docs/capacity.md). A short request that failed before its first token counts as slower
than any limit, as in every latency figure: a server whose delayed short requests time out must
not read better than one that answers them late. A failing step (most requests failed) fails the
scenario whatever the ratio. Nothing here imports pytest.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pytest_inferaccept.capacity.effects import client_limited, fresh_seed, measured_ok, pct, ratio, ttft
from pytest_inferaccept.capacity.failures import describe
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
from pytest_inferaccept.load.compound import MixedWorkload
from pytest_inferaccept.load.workloads import Fixed, SyntheticWorkload
from pytest_inferaccept.model import (
    CapacityExplanation,
    CapacityFindings,
    CapacityParams,
    ExplanationEvidence,
    InterferenceStep,
)
from pytest_inferaccept.stats.quantile_ratio import ratio_view
from pytest_inferaccept.stats.summary import CENSORED

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.load.records import RequestRecord
    from pytest_inferaccept.run.load import LoadResult
    from pytest_inferaccept.stats.quantile_ratio import QuantileRatio

ABOVE_ANY = "slower than any limit"
"""How a figure that falls on failed requests reads."""


def short_sample(result: LoadResult) -> tuple[list[RequestRecord], list[float]]:
    """A step's measured short requests and their TTFTs, one that never got its first token
    (failed or empty) as CENSORED; the client's own faults are no measurement of the server."""
    short = [r for r in result.records if not r.warmup and "short" in r.tags and not r.harness_error]
    return short, [CENSORED if r.ttft is None else r.ttft for r in short]


def _censored_pct(values: list[float], p: float) -> tuple[float | None, bool]:
    """The `p` quantile of a censored sample as (value, censored): (None, True) when it falls on a
    failed request, (None, False) without any value."""
    found = pct(values, p)
    return (None, True) if found == CENSORED else (found, False)


def _short(row: InterferenceStep, stat: str) -> tuple[float | None, bool]:
    """The step's short TTFT at `stat` (p50 or p95) and whether it falls on failed requests."""
    if stat == "p50":
        return row.short_ttft_p50, row.short_ttft_p50_censored
    return row.short_ttft_p95, row.short_ttft_p95_censored


def _seen(row: InterferenceStep, stat: str) -> str:
    """'120 ms', or what a censored figure means in words."""
    value, censored = _short(row, stat)
    return ABOVE_ANY if censored else ms(value)


def _times(value: float | None, *, digits: int = 1) -> str:
    """'×2.4'; '×∞' where the mixed figure falls on failed requests; 'unknown' without one."""
    if value == CENSORED:
        return "×∞"
    return f"×{value:.{digits}f}" if value is not None else "unknown"


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
    its high end is at or below it, and is INVALID ("not enough data") when it straddles it. A
    short request without a first token counts as slower than any limit in both; a step whose
    requests conclusively mostly failed fails the scenario (capacity/failures.py).
    """
    from pytest_inferaccept.stats.quantile_ratio import quantile_ratio

    base = fresh_seed(seed)
    long_wl = SyntheticWorkload(input=Fixed(long_tokens), output=Fixed(output_tokens), seed=base + 1)
    steps = [
        ("alone", 0.0, requests),
        ("mixed", long_share, math.ceil(requests / (1.0 - long_share))),
    ]
    rows: list[InterferenceStep] = []
    results: list[LoadResult] = []
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
            results.append(result)
            row = step_row(concurrency, result, sampler.peaks(t0, sampler.now()), into=InterferenceStep)
            sent, sample = short_sample(result)
            short = measured_ok(result, "short")
            short_ttfts.append(sample)
            p50, p50_censored = _censored_pct(sample, 0.5)
            p95, p95_censored = _censored_pct(sample, 0.95)
            # What the short requests without a first token were: failures by kind, or empty answers.
            missing = [r for r in sent if r.ttft is None]
            kinds = dict(describe(missing).kinds)
            if empty := sum(1 for r in missing if r.ok):
                kinds["answered without content"] = empty
            longs = [r for r in result.records if not r.warmup and "long" in r.tags]
            row.step, row.long_share, row.short_measured = name, share, len(sent)
            row.short_answered, row.short_failed, row.short_failure_kinds = len(short), len(missing), kinds
            # Judged: a short request without its first token is slower than any limit.
            row.short_ttft_p50, row.short_ttft_p50_censored = p50, p50_censored
            row.short_ttft_p95, row.short_ttft_p95_censored = p95, p95_censored
            # Descriptive, over the answered short requests only.
            row.short_ttft_p50_answered, row.short_ttft_p95_answered = ttft(short, 0.5), ttft(short, 0.95)
            row.long_sent, row.long_failed = len(longs), sum(1 for r in longs if not r.ok)
            row.long_ttft_p50 = ttft([r for r in longs if r.ok], 0.5)
            row.long_prompt_tokens_p50 = pct([r.prompt_tokens for r in longs if r.ok], 0.5)
            rows.append(row)
            say(
                f"inferaccept: interference {name} (c={concurrency}, {share:.0%} long): "
                f"short TTFT p50 {_seen(row, 'p50')}, p95 {_seen(row, 'p95')}"
                + (f" ({_failed_shorts(row)})" if row.short_failed else "")
                + (f"; long TTFT p50 {ms(row.long_ttft_p50)}" if longs else "")
            )
    alone, mixed = rows
    r50 = _censored_ratio(mixed, alone, "p50")
    r95 = _censored_ratio(mixed, alone, "p95")
    interval = quantile_ratio(short_ttfts[1], short_ttfts[0], p=0.95, confidence=0.95)
    lo, hi = interval.low, interval.high
    between = (f"95% interval ×{lo:.2f}–×{hi:.2f}" if lo is not None and hi is not None and lo != CENSORED
               else "95% interval wholly ×∞" if lo == CENSORED
               else f"95% interval from ×{lo:.2f}, no upper end" if lo is not None else "no interval")
    mix = f"{long_share:.0%} long prompts ({long_tokens} tokens)"
    notes = [f"{r.step} step: {_failed_shorts(r)}, each counted as {ABOVE_ANY}"
             for r in rows if r.short_failed]
    if mixed.long_failed:
        notes.append(f"{mixed.long_failed} of {mixed.long_sent} long prompts ({long_tokens} tokens) "
                     "failed: the mix did not load the server as asked" + error_statuses(mixed))
    explanations = [CapacityExplanation(
        kind="interference", level=concurrency,
        text=f"long prompts delay short ones: TTFT p95 {_times(r95)}"
             + (" (it falls on failed short requests)" if r95 == CENSORED else ""),
        evidence=ExplanationEvidence(ratio_p95=_finite(r95), ratio_p50=_finite(r50), threshold=threshold))
    ] if r95 is not None and r95 > threshold else []
    all_long_failed = bool(mixed.long_sent) and mixed.long_failed == mixed.long_sent
    unanswered = [r for r in rows if not r.short_answered]
    # A step whose requests mostly failed measured a broken server, not its interference.
    bad = next((r for r in rows if r.failing), None)
    failing = f"the {bad.step} step failed: {bad.failure_text}" if bad is not None else ""
    judged: list[Judgement] = []
    if all_long_failed:
        judged.append(("invalid", f"every long prompt ({long_tokens} tokens) failed{error_statuses(mixed)}, "
                                  "so the mix never loaded the server: lower long_tokens or give "
                                  "--context-window"))
    elif unanswered:
        judged.append(("fail", f"no short request was answered in the "
                               f"{' and '.join(r.step for r in unanswered)} step"
                               + "".join(f" ({_failed_shorts(r)})" for r in unanswered)))
    elif max_ratio is not None:
        judged += _judge_limit(interval, max_ratio, alone, mixed, r95=r95, between=between, mix=mix,
                               requests=requests)
    if unanswered or r95 is None or r50 is None:
        why = (f"the alone step's short TTFT p95 falls on failed requests ({_failed_shorts(alone)})"
               if alone.short_ttft_p95_censored else "")
        headline = (f"short prompts' TTFT could not be compared alone and with {mix} at c={concurrency}"
                    + (f": {why}" if why and not unanswered else ""))
    else:
        said = (f"long prompts delay short ones: TTFT p95 {_times(r95)} ({between})" if r95 > threshold
                else f"TTFT p95 ×{r95:.1f} ({between}): below the ×{threshold:g} that counts as "
                     "interference")
        headline = (
            f"short prompts' TTFT p95 {_seen(alone, 'p95')} alone, {_seen(mixed, 'p95')} "
            f"with {mix} at c={concurrency} (p50 {_seen(alone, 'p50')} → "
            f"{_seen(mixed, 'p50')}, {_times(r50)}); {said}"
            + (f"; {_failed_shorts(mixed)} with the long prompts mixed in" if mixed.short_failed else "")
        )
    if all_long_failed:
        headline += f"; but every long prompt failed{error_statuses(mixed)}"
    return conclude(
        kind="interference",
        label=label,
        steps=rows,
        params=CapacityParams(concurrency=concurrency, requests_alone=requests, short_tokens=short_tokens,
                              long_tokens=long_tokens, long_share=long_share, output_tokens=output_tokens,
                              threshold=threshold, max_ratio=max_ratio, max_seconds_per_step=duration,
                              seed=base),
        headline=headline,
        slo=judged_with(results),
        failing=failing,
        bound=client_limited(rows),
        judged=judged,
        findings=CapacityFindings(
            short_ttft_p50_alone=alone.short_ttft_p50, short_ttft_p95_alone=alone.short_ttft_p95,
            short_ttft_p50_mixed=mixed.short_ttft_p50, short_ttft_p95_mixed=mixed.short_ttft_p95,
            short_failed_alone=alone.short_failed, short_failed_mixed=mixed.short_failed,
            short_ttft_p95_mixed_censored=mixed.short_ttft_p95_censored,
            short_ttft_p95_alone_censored=alone.short_ttft_p95_censored,
            ratio_p50=_finite(r50), ratio_p95=_finite(r95), ratio_p95_above_any_limit=r95 == CENSORED,
            ratio_p95_low=_finite(lo), ratio_p95_high=hi,
            ratio_p95_interval=ratio_view(interval)),
        explanations=explanations,
        telemetry=telemetry_of(sampler),
        notes=[*notes, *not_measured(sampler)],
    )


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isinf(x) else x


def _failed_shorts(row: InterferenceStep) -> str:
    """'3 of 24 short requests never got their first token (timeout ×3)'."""
    kinds = ", ".join(f"{k} ×{n}" for k, n in row.short_failure_kinds.items())
    return (f"{row.short_failed} of {row.short_measured} short requests never got their first token"
            + (f" ({kinds})" if kinds else ""))


def _censored_ratio(mixed: InterferenceStep, alone: InterferenceStep, stat: str) -> float | None:
    """mixed / alone of one censored figure: infinite when only the mixed one falls on failed
    requests, None when the alone one does (unknown) or either is missing."""
    (alone_value, alone_censored), (mixed_value, mixed_censored) = _short(alone, stat), _short(mixed, stat)
    if alone_censored:
        return None
    if mixed_censored:
        return CENSORED if alone_value is not None else None
    return ratio(mixed_value, alone_value)


def _judge_limit(interval: QuantileRatio, max_ratio: float, alone: InterferenceStep,
                 mixed: InterferenceStep, *,
                 r95: float | None, between: str, mix: str, requests: int) -> list[Judgement]:
    """The p95 ratio against `max_ratio`, on its interval: a fail, an undecided, or nothing (a pass)."""
    verdict = interval.judge(max_ratio)
    measured = (f"({_seen(alone, 'p95')} alone over {interval.n_denominator} short requests, "
                f"{_seen(mixed, 'p95')} with {mix} over {interval.n_numerator})")
    failures = "; ".join(f"{_failed_shorts(r)} {r.step}" for r in (alone, mixed) if r.short_failed)
    if verdict == "fail" and r95 == CENSORED:
        return [("fail", f"long prompts raise short prompts' TTFT p95 {_times(r95)} ({between}), above the "
                         f"×{max_ratio:g} allowed: with {mix} it falls on failed requests "
                         f"({_failed_shorts(mixed)}, each counted as {ABOVE_ANY}), against "
                         f"{_seen(alone, 'p95')} alone over {interval.n_denominator} short requests")]
    if verdict == "fail":
        return [("fail", f"long prompts raise short prompts' TTFT p95 {_times(r95)} ({between}), all of it "
                         f"above the ×{max_ratio:g} allowed {measured}"
                         + (f"; {failures}" if failures else ""))]
    if verdict == "pass":
        return []
    if alone.short_ttft_p95_censored or interval.censored_denominator:
        return [("invalid", f"not enough data: short prompts' TTFT p95 alone is not known well enough to "
                            f"compare against the ×{max_ratio:g} allowed ({between}) {measured}: "
                            f"{_failed_shorts(alone)} without any long prompt, each counted as {ABOVE_ANY}")]
    shown = _times(r95, digits=2)
    return [("invalid", f"not enough data: short prompts' TTFT p95 ratio {shown} ({between}) straddles "
                        f"the ×{max_ratio:g} allowed {measured}; more requests per step (now {requests}) "
                        "narrow the interval" + (f"; {failures}" if failures else ""))]
