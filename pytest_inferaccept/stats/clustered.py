"""Intervals that stay honest on real latency: answers as units, skewed means (docs/statistics.md).

The gaps of one streamed answer share that answer's pace (its batch, its context length, its
place in the queue), so they are not independent draws: pooling every gap into one i.i.d.
sample makes an interval look many times narrower than it is. Here the answer is the unit.
The pooled figure is a ratio estimate, sum over answers / sum of their gap counts, and its
variance comes from how far each answer's own count strays from its share (the linearised,
cluster-robust variance of a ratio). Latency is also skewed to the right, which makes a plain
t interval of a mean pass limits it should not; Hall's transformation removes the skewness
from the t statistic before it is inverted.

Each claim in this module is shown by a seeded simulation in tests/test_stats_coverage.py.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from pytest_inferaccept.stats.percentiles import (
    Estimate,
    min_sample_size,
    order_statistic_ranks,
    quantile,
    t_quantile,
)

SKEW_MEAN_MIN_SAMPLES = 100
"""Fewest samples (or answers, for a clustered mean) on which a mean limit should be judged.

From 100 samples Hall's interval covers 94.4-95.0% at 95% and passes a limit set at the true
mean at most 3.3% of the time on gamma (shape >= 1) and lognormal (sigma <= 0.75) latency
(lognormal sigma 1: 93.7% and 4.2%); at 30 samples the wrong passes reach 4.5% (sigma 0.75) and
5.8% (sigma 1), against 8.3% and 11.4% for the plain t interval (simulated; docs/statistics.md
has the table)."""


def clustered_min_answers(p: float, confidence: float = 0.95) -> int:
    """Fewest answers for which the clustered interval of the pooled p-quantile has both ends.

    The i.i.d. table (`min_sample_size`) applied to answers instead of gaps: 6 answers for p50,
    72 for p95, 368 for p99 at 95%. When an answer's gaps all follow its pace, n answers carry
    the information of n samples, not of their gaps; and the variance of an extreme quantile
    rests on the few answers that reach beyond it. Below this count the simulated lower end of
    p99 was wrong in up to 36% of runs, so neither end is given.
    """
    return min_sample_size(p, confidence)


def _tail(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    return (1.0 - confidence) / 2.0


def _answers(answers: Sequence[Sequence[float]]) -> list[list[float]]:
    # an answer without a gap (one token or none) says nothing about ITL: it is no unit here
    kept = [sorted(a) for a in answers if len(a)]
    if not kept:
        raise ValueError("no answer has a gap")
    return kept


def clustered_quantile_estimate(answers: Sequence[Sequence[float]], p: float,
                                confidence: float = 0.95) -> Estimate:
    """The p-quantile of all gaps pooled, with an interval that treats the answer as the unit.

    `answers` holds the gaps of each answer. The point estimate is the same type-7 quantile
    of the pooled gaps that `quantile_estimate` gives. The interval is Korn and Graubard's
    effective-sample-size interval, inverted at the order statistics as Woodruff does:

    - F(x), the share of pooled gaps at or below x, is estimated at the point estimate as a
      ratio over answers, with its cluster-robust variance v;
    - the design effect v / (p(1 - p) / gaps) turns the gaps into an effective sample size,
      shrunk further by (z / t_df)^2 where df is one less than the number of answers on the
      quantile's far side (for p >= 0.5, the answers with a gap above it): the variance of
      an extreme quantile is known only from the answers that reach it;
    - the exact binomial ranks of `order_statistic_ranks` at that effective size, taken as
      shares of the pooled gaps, give the two ends.

    The effective size never exceeds the number of gaps, and the interval is never narrower
    than the i.i.d. one over the pooled gaps. `Estimate.n` is the number of answers with at
    least one gap; both ends are None below `clustered_min_answers(p, confidence)`.
    """
    a = _tail(confidence)
    if not 0 < p < 1:
        raise ValueError(f"p must lie strictly between 0 and 1, got {p!r}")
    kept = _answers(answers)
    pooled = sorted(g for own in kept for g in own)
    n, total = len(kept), len(pooled)
    value = quantile(pooled, p)
    if n < clustered_min_answers(p, confidence):
        return Estimate(value=value, low=None, high=None, n=n)
    share = bisect_right(pooled, value) / total
    squares = 0.0
    far_side = 0
    for own in kept:
        below = bisect_right(own, value)
        squares += (below - share * len(own)) ** 2
        # an answer reaches the quantile when it has a gap at or beyond it (ties included:
        # identical gaps all sit at the quantile)
        far_side += bisect_left(own, value) < len(own) if p >= 0.5 else below > 0
    variance = n / (n - 1) * squares / total**2
    effective = float(total) if variance == 0.0 else p * (1.0 - p) / variance
    df = max(1, min(n - 1, far_side - 1))
    # statistics pulls in random, fractions and decimal: load it only when an interval needs it
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1.0 - a)
    effective = min(float(total), effective * (z / t_quantile(1.0 - a, df)) ** 2)
    size = max(1, math.floor(effective))
    lower, upper = order_statistic_ranks(size, p, confidence)
    iid_lower, iid_upper = order_statistic_ranks(total, p, confidence)
    low = high = None
    if lower is not None and iid_lower is not None:
        low = pooled[min(max(1, -(-lower * total // size)), iid_lower) - 1]
    if upper is not None and iid_upper is not None:
        high = pooled[max(min(total, -(-upper * total // size)), iid_upper) - 1]
    return Estimate(value=value, low=low, high=high, n=n)


def _real_cbrt(x: float) -> float:
    return math.copysign(abs(x) ** (1.0 / 3.0), x)


def _hall_offsets(values: Sequence[float], centre: float, confidence: float) -> tuple[float, float]:
    """(lo, hi) such that estimate - truth lies in [lo, hi] with the asked confidence.

    Hall (1992) maps the studentised mean S = (mean - mu) / sd through
    g(S) = S + gS^2/3 + g^2 S^3/27 + g/(6n), g the sample skewness, which removes the skewness
    term of its Edgeworth expansion; g is monotone, so its inverse
    (3/g)((1 + g(u - g/(6n)))^(1/3) - 1) turns t quantiles into an asymmetric interval.
    """
    a = _tail(confidence)
    n = len(values)
    dev = [x - centre for x in values]
    m2 = math.fsum(d * d for d in dev) / n
    if m2 <= 0.0:
        return 0.0, 0.0
    sd = math.sqrt(m2 * n / (n - 1))
    skew = math.fsum(d**3 for d in dev) / n * n * n / ((n - 1) * (n - 2)) / sd**3
    t = t_quantile(1.0 - a, n - 1)

    def inverse(u: float) -> float:
        if skew == 0.0:
            return u
        y = skew * (u - skew / (6 * n))
        # cube root of 1 + y less 1, without cancellation when y is small
        root = math.expm1(math.log1p(y) / 3.0) if y > -1.0 else _real_cbrt(1.0 + y) - 1.0
        return 3.0 / skew * root

    return sd * inverse(-t / math.sqrt(n)), sd * inverse(t / math.sqrt(n))


def skew_mean_estimate(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """The mean with Hall's skewness-corrected t interval (no interval below three values).

    Right-skewed latency makes the plain t interval too short on the high side: samples that
    missed the slow tail have a small mean and a small sd together. Hall's transformation
    widens the high side by the sample skewness. Judge a limit on it from
    `SKEW_MEAN_MIN_SAMPLES` values.
    """
    n = len(values)
    if n == 0:
        raise ValueError("mean of an empty sample")
    mean = math.fsum(values) / n
    if n < 3:
        return Estimate(value=mean, low=None, high=None, n=n)
    lo, hi = _hall_offsets(values, mean, confidence)
    return Estimate(value=mean, low=mean - hi, high=mean - lo, n=n)


def clustered_mean_estimate(answers: Sequence[Sequence[float]], confidence: float = 0.95) -> Estimate:
    """The mean of all gaps pooled, with an interval that treats the answer as the unit.

    The pooled mean is the ratio r = sum of all gaps / number of gaps. Linearised, its error is
    the mean over answers of z_i = (sum_i - r m_i) / (gaps per answer on average), so Hall's
    skewness-corrected interval of that mean applies. `Estimate.n` is the number of answers
    with at least one gap; judge a limit on it from `SKEW_MEAN_MIN_SAMPLES` answers.
    """
    kept = _answers(answers)
    n = len(kept)
    total = sum(len(own) for own in kept)
    sums = [math.fsum(own) for own in kept]
    ratio = math.fsum(sums) / total
    if n < 3:
        return Estimate(value=ratio, low=None, high=None, n=n)
    per_answer = total / n
    z = [(s - ratio * len(own)) / per_answer for s, own in zip(sums, kept, strict=True)]
    lo, hi = _hall_offsets(z, 0.0, confidence)
    return Estimate(value=ratio, low=ratio - hi, high=ratio - lo, n=n)
