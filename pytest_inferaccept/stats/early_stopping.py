"""MLPerf's early-stopping rule for tail-latency percentiles, as pure functions.

MLPerf Inference (rules, appendix "Early Stopping Criterion"; loadgen `early_stopping.cc`) asks
how many queries a run needs before a tail percentile may be claimed, given how many of them
were over the latency limit. It is a one-sided binomial test: a *minimally failing* system,
one whose queries meet the limit with probability p − d, must have at most a 1 − c chance of
showing a result this good (t or fewer of n queries over the limit). MLPerf uses confidence
c = 0.99 and tolerance d = 0. At p99 that is 459 queries with none over the limit, 662 with
one, 2,010 with ten.

Unlike the two-sided order-statistic interval the SLO verdict uses, this counts requests over
a limit directly; it needs no latency values, only the count over the limit. An SLO that comes
from an MLPerf-named profile (`EarlyStoppingSlo`, from slo_profile) has its tail percentiles
judged by this rule.
"""

from __future__ import annotations

import math

from pytest_inferaccept.stats.percentiles import first_true

MLPERF_CONFIDENCE = 0.99
"""c: one minus the chance a minimally failing system is let through (MLPerf's value)."""
MLPERF_TOLERANCE = 0.0
"""d: how far below the percentile the minimally failing system sits (MLPerf's value)."""


def overlatency_odds(under: int, over: int, percentile: float, tolerance: float = MLPERF_TOLERANCE) -> float:
    """The chance a minimally failing system shows at most `over` of under + over queries over the limit.

    That system meets the limit with probability q = percentile − tolerance, so the count over
    the limit is Binomial(under + over, 1 − q) and this is its CDF at `over` (MLPerf writes it
    as the regularised incomplete beta function I(q; under, over + 1)).
    """
    q = _check(percentile, tolerance)
    if under < 0 or over < 0:
        raise ValueError(f"query counts are never negative, got under={under}, over={over}")
    n = under + over
    log_q, log_miss = math.log(q), math.log1p(-q)
    # Summed in logs: at n in the tens of thousands the binomial terms underflow a float.
    terms = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
             + k * log_miss + (n - k) * log_q for k in range(over + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def early_stopping_min_queries(percentile: float, overlatency: int, *,
                               confidence: float = MLPERF_CONFIDENCE,
                               tolerance: float = MLPERF_TOLERANCE) -> int:
    """The fewest queries for which `overlatency` of them over the limit still let the percentile be claimed.

    It is h + overlatency for the smallest h (queries under the limit) with
    overlatency_odds(h, overlatency) ≤ 1 − confidence; the odds fall as h grows, so a
    doubling search then a bisection finds it.
    """
    _check(percentile, tolerance)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence is a fraction in (0, 1), got {confidence!r}")
    if overlatency < 0:
        raise ValueError(f"overlatency is a count, never negative, got {overlatency!r}")
    alpha = 1 - confidence

    def passes(under: int) -> bool:
        return overlatency_odds(under, overlatency, percentile, tolerance) <= alpha

    high = max(1, overlatency)
    while not passes(high):
        high *= 2
    # 0 never passes: with no query under the limit the odds are 1
    return first_true(passes, 0, high) + overlatency


def early_stopping_passes(percentile: float, n: int, overlatency: int, *,
                          confidence: float = MLPERF_CONFIDENCE,
                          tolerance: float = MLPERF_TOLERANCE) -> bool:
    """True when n queries with `overlatency` of them over the limit let the percentile be claimed."""
    if not 0 <= overlatency <= n:
        raise ValueError(f"overlatency must be between 0 and n={n}, got {overlatency!r}")
    return n >= early_stopping_min_queries(percentile, overlatency, confidence=confidence,
                                           tolerance=tolerance)


def early_stopping_max_overlatency(percentile: float, n: int, *,
                                   confidence: float = MLPERF_CONFIDENCE,
                                   tolerance: float = MLPERF_TOLERANCE) -> int | None:
    """The most of n queries that may be over the limit with the claim still made; None when n is too few."""
    if n < 0:
        raise ValueError(f"n is a count, never negative, got {n!r}")

    def fits(over: int) -> bool:
        return early_stopping_min_queries(percentile, over, confidence=confidence, tolerance=tolerance) <= n

    if not fits(0):
        return None
    # The fewest queries needed grows with every query over the limit, so a bisection finds the
    # answer. It lies below n; and below n(1 − q) + 1 at any confidence over one half, as
    # a binomial count falls at or below its rounded-up mean at least half the time.
    q = percentile - tolerance
    high = n if confidence <= 0.5 else min(n, math.ceil(n * (1 - q)) + 1)
    if fits(high):
        return high
    return first_true(lambda over: not fits(over), 0, high) - 1


def _check(percentile: float, tolerance: float) -> float:
    if not 0 < percentile < 1:
        raise ValueError(f"percentile is a fraction in (0, 1) such as 0.99, got {percentile!r}")
    q = percentile - tolerance
    if not 0 < q < 1 or tolerance < 0:
        raise ValueError(f"tolerance must be in [0, percentile), got {tolerance!r}")
    return q
