"""The logprob tier's verdict: drift against the baseline, judged against the server's own drift.

Each prompt gives a score: the mean |Δ logprob| of the chosen tokens up to where two greedy answers
part (0 when they agree token for token), or "real change" when they part at a non-tie. Every run
scores its own second pass against its first (the self-drift: batching and kernel noise of the
unchanged server), and the comparison scores the candidate's first pass against the baseline's.

Drift is **found** when both hold:

* **matched drift**: over the prompts that part at no real change on either side, the candidate's
  |Δ| against the baseline exceeds the second pass's against the first more often than not (a
  one-sided exact sign test at α/2), and its mean excess is beyond the tolerance (nats); or
* **parted paths**: more prompts part from the baseline at a real change than part from their own
  first pass (exact McNemar on the prompts where only one does, one-sided at α/2), by at least
  REAL_EXCESS of the prompts.

On a server whose two passes are alike, the candidate's and the second pass's scores are
exchangeable, so each test fires at most α/2 of the time and the tier at most α (α = 1%).

A deterministic server (llama-server at temperature 0) has a self-drift of exactly 0, so any
numeric change shows; a server with batch-dependent numerics (vLLM CPU) has its own, and only
drift beyond it counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_inferaccept.correctness.ties import TIE_NATS, TokenLogprobs, classify, first_difference
from pytest_inferaccept.stats.percentiles import binom_sf

ALPHA = 0.01
"""The sign test's one-sided level."""
DEFAULT_TOLERANCE = 0.02
"""Nats of mean |Δ logprob| beyond the self-drift that count as drift (--correctness-drift-tolerance)."""
REAL_EXCESS = 0.02
"""The share of prompts by which real-change divergences must exceed the self-drift's."""
EPS = 1e-6
"""Scores closer than this are equal: logprobs travel as JSON floats, rounded by some servers."""

DriftStatus = Literal["found", "not_found", "not_measured"]


@dataclass(frozen=True)
class Score:
    """One prompt's distance between two greedy answers."""

    real_change: bool
    mean_abs_delta: float
    """Over the matched tokens before the answers part (0.0 when none matched)."""


def score(a: TokenLogprobs | None, b: TokenLogprobs | None, *, nats: float = TIE_NATS) -> Score | None:
    """How far apart two greedy answers' logprobs are (None: no logprobs on one side)."""
    if not a or not b:
        return None
    i = first_difference(a, b)
    stop = min(len(a), len(b)) if i is None else i
    deltas = [abs(float(a[j]["logprob"]) - float(b[j]["logprob"])) for j in range(stop)]
    real = i is not None and classify(a, b, nats=nats).kind == "real_change"
    return Score(real_change=real, mean_abs_delta=math.fsum(deltas) / len(deltas) if deltas else 0.0)


def _farther(x: Score, y: Score) -> int:
    """+1 when x's matched drift is larger than y's, -1 when smaller, 0 when alike."""
    d = x.mean_abs_delta - y.mean_abs_delta
    return 0 if abs(d) <= EPS else (1 if d > 0 else -1)


@dataclass(frozen=True)
class DriftVerdict:
    """The drift tier's verdict with every figure it used."""

    status: DriftStatus
    message: str
    prompts: int
    """Prompts scored on both sides (against the baseline, and in the run's own second pass)."""
    farther: int
    nearer: int
    p_value: float | None
    mean_excess: float | None
    """Mean |Δ| against the baseline minus the self-drift's, over the prompts matched on both sides."""
    real_excess: int
    """Prompts diverging at a real change against the baseline, minus those in the second pass."""
    tolerance: float | None


def judge_drift(cross: Sequence[Score | None], own: Sequence[Score | None], *,
                tolerance: float | None = DEFAULT_TOLERANCE, alpha: float = ALPHA) -> DriftVerdict:
    """Judge the drift against the baseline (`cross`) against the run's own (`own`), prompt by prompt."""
    pairs = [(x, y) for x, y in zip(cross, own, strict=True) if x is not None and y is not None]
    n = len(pairs)
    if tolerance is None:
        return DriftVerdict("not_measured", "logprob drift not judged (--correctness-drift-tolerance off)",
                            n, 0, 0, None, None, 0, None)
    if n == 0:
        why = ("the server returned no logprobs" if not any(cross) else
               "this run kept no logprobs of its second pass")
        return DriftVerdict("not_measured", f"logprob drift not judged: {why}", 0, 0, 0, None, None, 0,
                            tolerance)
    matched = [(x, y) for x, y in pairs if not x.real_change and not y.real_change]
    signs = [_farther(x, y) for x, y in matched]
    farther, nearer = signs.count(1), signs.count(-1)
    p_matched = binom_sf(farther, farther + nearer, 0.5) if farther + nearer else 1.0
    excess = (math.fsum(x.mean_abs_delta - y.mean_abs_delta for x, y in matched) / len(matched)
              if matched else None)
    only_cross = sum(x.real_change and not y.real_change for x, y in pairs)
    only_own = sum(y.real_change and not x.real_change for x, y in pairs)
    p_real = binom_sf(only_cross, only_cross + only_own, 0.5) if only_cross + only_own else 1.0
    real_excess = only_cross - only_own
    # Two ways to drift, each tested at alpha / 2 so that the tier's false-alarm rate stays within alpha.
    drifted = p_matched < alpha / 2 and excess is not None and excess > tolerance
    parted = p_real < alpha / 2 and real_excess >= max(1, math.ceil(REAL_EXCESS * n))
    p = min(p_matched, p_real)
    matched_words = ("no prompt matched on both sides" if excess is None else
                     f"mean |Δ logprob| {excess:+.4f} nats beyond the server's own drift (tolerance "
                     f"{tolerance:g}): {farther} of {len(matched)} prompts matched on both sides sit farther "
                     f"from the baseline than the second pass from the first, {nearer} nearer (sign test p = "
                     f"{p_matched:.2g})")
    figures = (f"{matched_words}; {only_cross} prompts part from the baseline at a non-tie where the second "
               f"pass did not, {only_own} the other way (p = {p_real:.2g})")
    if drifted or parted:
        return DriftVerdict("found", f"logprob drift found: {figures}. The greedy answers moved beyond the "
                            "server's own noise (a quantization, kernel, tokenizer or chat-template change), "
                            "even where the accuracy did not", n, farther, nearer, p, excess, real_excess,
                            tolerance)
    why = "within the server's own noise" if p >= alpha / 2 else "significant but within the tolerance"
    return DriftVerdict("not_found", f"no logprob drift beyond the tolerance ({why}): {figures}", n, farther,
                        nearer, p, excess, real_excess, tolerance)
