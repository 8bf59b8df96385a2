"""Sampling honesty: diversity figures, and whether sampled tokens follow the server's own probabilities.

The frequency test compares the first token of many temperature-1 samples with the distribution
the server reports for that position (the top_logprobs of its greedy answer): a chi-square
goodness-of-fit test over the reported tokens, with rare tokens and the unreported rest pooled into
one bin so that every bin expects at least MIN_EXPECTED samples.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_inferaccept.stats.percentiles import binom_sf

ALPHA = 0.001
"""A frequency test fails below this p-value: one false alarm in a thousand runs of a correct server."""
MIN_EXPECTED = 5.0
"""Smallest expected count of a bin (the usual condition for the chi-square approximation)."""
OTHER = "<other>"
"""The bin of the tokens the server did not report (and of reported ones too rare to stand alone)."""


# --- diversity ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Diversity:
    """How varied N answers to one prompt are."""

    answers: int
    distinct: int
    """Distinct answer texts."""
    bigrams: int
    distinct_bigrams: int

    @property
    def bigram_share(self) -> float:
        """Distinct word 2-grams over all word 2-grams of the answers (nan: no 2-gram)."""
        return self.distinct_bigrams / self.bigrams if self.bigrams else math.nan

    def describe(self) -> str:
        """One line with the figures."""
        share = "no 2-grams" if not self.bigrams else \
            f"{self.distinct_bigrams} of {self.bigrams} word 2-grams distinct ({self.bigram_share:.0%})"
        return f"{self.distinct} of {self.answers} answers distinct, {share}"

    def to_json(self) -> dict[str, object]:
        """The figures for the results."""
        return {"answers": self.answers, "distinct": self.distinct, "bigrams": self.bigrams,
                "distinct_bigrams": self.distinct_bigrams,
                "bigram_share": None if not self.bigrams else round(self.bigram_share, 4)}


def diversity(texts: Sequence[str]) -> Diversity:
    """Distinct answers and distinct word 2-grams of a set of answers to one prompt."""
    grams: list[tuple[str, str]] = []
    for text in texts:
        words = text.split()
        grams += list(itertools.pairwise(words))
    return Diversity(answers=len(texts), distinct=len(set(texts)), bigrams=len(grams),
                     distinct_bigrams=len(set(grams)))


# --- chi-square -----------------------------------------------------------------------------------


def _upper_gamma_regularized(a: float, x: float) -> float:
    """Q(a, x) = Γ(a, x) / Γ(a): a series below a + 1, a continued fraction above (both converge fast)."""
    if x <= 0:
        return 1.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-15:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1.0 - total * math.exp(log_front))
    # Lentz's method on the continued fraction of Γ(a, x).
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        step = d * c
        h *= step
        if abs(step - 1) < 1e-15:
            break
    return min(1.0, math.exp(log_front) * h)


def chi2_sf(statistic: float, df: int) -> float:
    """P(X ≥ statistic) for a chi-square variable with df degrees of freedom."""
    if df <= 0:
        return 1.0
    if math.isinf(statistic):
        return 0.0
    return _upper_gamma_regularized(df / 2, statistic / 2)


# --- first-token frequencies ------------------------------------------------------------------------


@dataclass(frozen=True)
class FrequencyTest:
    """Sampled first tokens against the server's reported probabilities."""

    samples: int
    bins: tuple[tuple[str, int, float], ...]
    """(token or OTHER, observed count, expected count), most likely first."""
    statistic: float
    df: int
    p_value: float
    reported_mass: float
    """The summed probability of the reported tokens (the rest is the unreported tail)."""
    top_token: str
    top_probability: float

    @property
    def fails(self) -> bool:
        """The samples contradict the reported probabilities (p below ALPHA)."""
        return self.p_value < ALPHA

    def describe(self) -> str:
        """One line: the test's figures and the largest bins."""
        shown = ", ".join(f"{tok!r} {obs} vs {exp:.1f} expected" for tok, obs, exp in self.bins[:5])
        return (f"{self.samples} sampled first tokens against the reported probabilities: chi-square "
                f"{self.statistic:.1f} on {self.df} df, p = {self.p_value:.2g} (fails below {ALPHA}); "
                f"{shown}")

    def to_json(self) -> dict[str, object]:
        """The figures for the results."""
        return {"samples": self.samples, "chi_square": round(self.statistic, 3)
                if math.isfinite(self.statistic) else None, "df": self.df, "p_value": self.p_value,
                "alpha": ALPHA, "reported_mass": round(self.reported_mass, 4),
                "most_likely": self.top_token, "most_likely_probability": round(self.top_probability, 4),
                "bins": [[tok, obs, round(exp, 2)] for tok, obs, exp in self.bins]}


def reported_probabilities(top_logprobs: Sequence[Mapping[str, object]]) -> dict[str, float]:
    """Token → probability from one position's top_logprobs (a token listed twice counts once)."""
    out: dict[str, float] = {}
    for entry in top_logprobs:
        token, logprob = entry.get("token"), entry.get("logprob")
        if isinstance(token, str) and isinstance(logprob, int | float) and token not in out:
            out[token] = math.exp(float(logprob)) if math.isfinite(float(logprob)) else 0.0
    return out


def frequency_test(reported: Mapping[str, float], sampled: Sequence[str],
                   min_expected: float = MIN_EXPECTED) -> FrequencyTest:
    """Chi-square goodness of fit of the sampled tokens to the reported probabilities.

    Reported probabilities summing above 1 (rounding) are scaled down to 1; the unreported rest
    of the mass is the OTHER bin, with every reported token whose expected count is below
    `min_expected`. An OTHER bin still below it joins the smallest remaining bin, and its own count
    is judged by the exact binomial tail (the smaller p-value of the two, doubled, is the result).
    """
    n = len(sampled)
    mass = sum(reported.values())
    scale = 1 / mass if mass > 1 else 1.0
    probs = sorted(((tok, p * scale) for tok, p in reported.items()), key=lambda kv: -kv[1])
    counts = Counter(sampled)
    kept = [(tok, counts.get(tok, 0), n * p) for tok, p in probs if n * p >= min_expected]
    other_obs = n - sum(obs for _, obs, _ in kept)
    other_exp = max(0.0, n - sum(exp for _, _, exp in kept))
    bins = list(kept)
    tail_p = 1.0
    if other_obs or other_exp > 1e-9:
        if other_exp < min_expected and bins:
            # Too rare for a chi-square bin of its own: pooled with the smallest bin, and tested on its
            # own by the exact binomial tail (a server sampling the unreported rest far too often).
            tok, obs, exp = bins.pop()
            bins.append((f"{tok}+{OTHER}", obs + other_obs, exp + other_exp))
            tail_p = binom_sf(other_obs, n, other_exp / n) if other_obs > other_exp else 1.0
        else:
            bins.append((OTHER, other_obs, other_exp))
    statistic = 0.0
    for _, obs, exp in bins:
        if exp > 0:
            statistic += (obs - exp) ** 2 / exp
        elif obs:
            statistic = math.inf  # a token the server gives no probability at all was sampled
    df = len(bins) - 1
    top_token, top_p = probs[0] if probs else ("", 0.0)
    p_value = chi2_sf(statistic, df)
    if tail_p < 1.0:
        p_value = min(1.0, 2 * min(p_value, tail_p))  # two tests of one sample: Bonferroni
    return FrequencyTest(samples=n, bins=tuple(bins), statistic=statistic, df=df,
                         p_value=p_value, reported_mass=min(mass, 1.0),
                         top_token=top_token, top_probability=top_p)


def detects_greedy(reported: Mapping[str, float], samples: int) -> bool:
    """Whether `samples` first tokens that are all the most likely one would fail the test: without
    this power a server that ignores temperature could pass."""
    if not reported:
        return False
    top = max(reported, key=lambda t: reported[t])
    return frequency_test(reported, [top] * samples).fails
