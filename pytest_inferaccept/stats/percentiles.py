"""Percentiles, means and proportions, each with a confidence interval (docs/statistics.md).

Point estimates of percentiles interpolate linearly between order statistics (Hyndman & Fan
type 7, the default of most tools, so numbers agree with what teams compute themselves).
Their intervals are distribution-free: a pair of order statistics chosen with exact binomial
sums so that each tail holds at most (1 - confidence) / 2. Proportions get Clopper–Pearson
intervals from the same sums; means a Student t interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_inferaccept import model

PERCENTILE_LEVELS: dict[str, float] = {
    "p50": 0.50, "p75": 0.75, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p999": 0.999,
}
"""Every percentile the statistics report, by the name the slo marker uses."""

MEAN_MIN_SAMPLES = 100
"""Fewest samples on which a mean limit is judged. Latency is skewed: at 30 samples even a
skew-corrected interval passes a limit at the true mean 4–6% of the time against a nominal 2.5%
(tests/test_stats_coverage.py); at 100 it holds (docs/statistics.md)."""

_RELATIVE_EPS = 1e-17  # a binomial tail term this small next to the running sum changes nothing
_BISECT_STEPS = 60  # halvings of [0, 1]: far below any difference a report can show


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate with its confidence interval; a bound is None when n cannot give it."""

    value: float
    low: float | None
    high: float | None
    n: int

    @property
    def censored(self) -> bool:
        """True when the estimate is a failed request, counted as slower than any limit (infinite)."""
        return self.value == math.inf


def estimate_view(est: Estimate | None) -> model.Estimate | None:
    """An estimate as the results document writes it: an infinite end (a failed request) as null.

    A censored estimate (`value` infinite: the statistic falls on failed requests) carries
    `censored: true`, so a reader never takes its null value for "not measured".
    """
    if est is None:
        return None
    from pytest_inferaccept import model

    ends = {"value": _finite(est.value), "low": _finite(est.low), "high": _finite(est.high), "n": est.n}
    return model.Estimate.model_validate({**ends, "censored": True} if est.censored else ends)


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isinf(x) else x


def _check_confidence(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    return (1.0 - confidence) / 2.0


def quantile(sorted_values: Sequence[float], p: float) -> float:
    """The p-quantile of sorted values, interpolating linearly between order statistics."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("quantile of an empty sample")
    h = (n - 1) * p
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    a, b = sorted_values[lo], sorted_values[hi]
    if b == math.inf:  # a failed request counted as slower than any limit: no interpolating to it
        return a if h == lo else math.inf
    return a + (h - lo) * (b - a)


# Binomial tails. Each sum starts at its boundary term (one lgamma evaluation) and walks away
# from the mean with the ratio of neighbouring terms, stopping when the terms no longer count.
# Away from the mean the terms shrink at least geometrically, so the walk is a few standard
# deviations long at most: exact sums stay cheap and stable for n in the millions.

def _log_pmf(k: int, n: int, p: float) -> float:
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(p) + (n - k) * math.log1p(-p))


def _sum_down(k: int, n: int, p: float) -> float:
    """P(B <= k) for k below the mean."""
    term = math.exp(_log_pmf(k, n, p))
    odds = (1.0 - p) / p
    total = 0.0
    j = k
    while j >= 0 and term > 0.0:
        total += term
        if term < total * _RELATIVE_EPS:
            break
        term *= j / (n - j + 1) * odds
        j -= 1
    return total


def _sum_up(k: int, n: int, p: float) -> float:
    """P(B >= k) for k above the mean."""
    term = math.exp(_log_pmf(k, n, p))
    odds = p / (1.0 - p)
    total = 0.0
    j = k
    while j <= n and term > 0.0:
        total += term
        if term < total * _RELATIVE_EPS:
            break
        term *= (n - j) / (j + 1) * odds
        j += 1
    return total


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(B <= k) for B ~ Binomial(n, p), by exact summation."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    if k < n * p:
        return min(1.0, _sum_down(k, n, p))
    return max(0.0, 1.0 - _sum_up(k + 1, n, p))


def binom_sf(k: int, n: int, p: float) -> float:
    """P(B >= k) for B ~ Binomial(n, p), by exact summation."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    if k > n * p:
        return min(1.0, _sum_up(k, n, p))
    return max(0.0, 1.0 - _sum_down(k - 1, n, p))


@lru_cache(maxsize=2048)
def order_statistic_ranks(n: int, p: float, confidence: float = 0.95) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) with P(x_(l) <= p-quantile <= x_(u)) >= confidence; None: no such rank.

    l is the largest rank with P(B <= l - 1) <= a and u the smallest with P(B >= u) <= a, where
    B ~ Binomial(n, p) counts the samples at or below the true quantile and a = (1 - c) / 2.
    """
    a = _check_confidence(confidence)
    lo, hi = -1, n  # invariant: cdf(lo) <= a < cdf(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if binom_cdf(mid, n, p) <= a:
            lo = mid
        else:
            hi = mid
    lower = lo + 1
    lo, hi = 0, n + 1  # invariant: sf(lo) > a >= sf(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if binom_sf(mid, n, p) <= a:
            hi = mid
        else:
            lo = mid
    return (lower if lower >= 1 else None), (hi if hi <= n else None)


def _smallest_n(base: float, a: float) -> int:
    """Smallest n with base**n <= a (0 < base < 1), checked exactly around the closed form."""
    n = max(1, math.ceil(math.log(a) / math.log(base)))
    while n > 1 and base ** (n - 1) <= a:
        n -= 1
    while base**n > a:
        n += 1
    return n


def min_sample_size(p: float, confidence: float = 0.95) -> int:
    """Fewest samples for which both ends of the two-sided interval of the p-quantile exist.

    The upper end exists once P(all n samples fall below the quantile) = p**n <= a, the lower
    once (1 - p)**n <= a; below that n the interval is open on one side.
    """
    a = _check_confidence(confidence)
    return max(_smallest_n(p, a), _smallest_n(1.0 - p, a))


def quantile_estimate(sorted_values: Sequence[float], p: float, confidence: float = 0.95) -> Estimate:
    """The p-quantile of sorted values with its distribution-free order-statistic interval."""
    n = len(sorted_values)
    lower, upper = order_statistic_ranks(n, p, confidence)
    return Estimate(
        value=quantile(sorted_values, p),
        low=None if lower is None else sorted_values[lower - 1],
        high=None if upper is None else sorted_values[upper - 1],
        n=n,
    )


def _z(q: float) -> float:
    # statistics pulls in random, fractions and decimal: load it only when an interval needs it
    from statistics import NormalDist

    return NormalDist().inv_cdf(q)


def t_quantile(q: float, df: int) -> float:
    """Student t quantile: exact for 1 and 2 degrees of freedom, else a Cornish–Fisher series.

    The series (Abramowitz & Stegun 26.7.5, four terms) is within 0.2% at df=3 and far closer
    beyond; at the df where a mean limit is judged (29 and up) the error is below 1e-6.
    """
    if df < 1:
        raise ValueError("t quantile needs at least one degree of freedom")
    if df == 1:
        return math.tan(math.pi * (q - 0.5))
    if df == 2:
        return (2 * q - 1) / math.sqrt(2 * q * (1 - q))
    z = _z(q)
    z3, z5, z7, z9 = z**3, z**5, z**7, z**9
    return (z + (z3 + z) / (4 * df) + (5 * z5 + 16 * z3 + 3 * z) / (96 * df**2)
            + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * df**3)
            + (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / (92160 * df**4))


def mean_estimate(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """The mean with a Student t interval (no interval for fewer than two values)."""
    a = _check_confidence(confidence)
    n = len(values)
    if n == 0:
        raise ValueError("mean of an empty sample")
    mean = math.fsum(values) / n
    if n < 2:
        return Estimate(value=mean, low=None, high=None, n=n)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1))
    half = t_quantile(1.0 - a, n - 1) * sd / math.sqrt(n)
    return Estimate(value=mean, low=mean - half, high=mean + half, n=n)


def _bisect_p(k: int, n: int, a: float, *, upper: bool) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(_BISECT_STEPS):
        mid = (lo + hi) / 2
        # the upper bound solves P(B <= k) = a, which falls as p grows; the lower bound solves
        # P(B >= k) = a, which rises as p grows
        too_low = binom_cdf(k, n, mid) > a if upper else binom_sf(k, n, mid) < a
        if too_low:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def proportion_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper–Pearson interval for k successes in n trials (exact, each tail <= (1 - c) / 2)."""
    a = _check_confidence(confidence)
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    # the ends at k = 0 and k = n have closed forms; they are also the common case (no errors)
    low = 0.0 if k == 0 else a ** (1 / n) if k == n else _bisect_p(k, n, a, upper=False)
    high = 1.0 if k == n else 1 - a ** (1 / n) if k == 0 else _bisect_p(k, n, a, upper=True)
    return low, high


def proportion_estimate(k: int, n: int, confidence: float = 0.95) -> Estimate:
    """The fraction k / n with its Clopper–Pearson interval."""
    low, high = proportion_interval(k, n, confidence)
    return Estimate(value=k / n, low=low, high=high, n=n)


def first_true(holds: Callable[[int], bool], low: int, high: int) -> int:
    """The smallest integer in (low, high] where `holds` is true, for a condition false at `low`,
    true at `high` and monotone between them (bisection)."""
    while high - low > 1:
        mid = (low + high) // 2
        if holds(mid):
            high = mid
        else:
            low = mid
    return high


def smallest_settling(settles: Callable[[int], bool], start: int, ceiling: int) -> int | None:
    """The smallest n >= start/2 for which `settles(n)` holds (doubling from `start`, then
    bisecting), or None past `ceiling`. The condition is monotone up to rank rounding."""
    n = start
    while not settles(n):
        if n > ceiling:
            return None
        n *= 2
    return first_true(settles, n // 2, n)


def samples_to_settle_quantile(p: float, q: float, confidence: float = 0.95,
                               ceiling: int = 100_000_000) -> int | None:
    """About how many samples put the p-quantile's interval clear of a limit.

    q is the fraction of samples at or below the limit; the answer assumes the distribution
    stays as measured. None when q == p (the estimate sits on the limit) or past `ceiling`.
    """
    if q == p:
        return None

    def settles(n: int) -> bool:
        lower, upper = order_statistic_ranks(n, p, confidence)
        expected_below = n * q
        if q > p:
            return upper is not None and upper <= expected_below
        return lower is not None and lower > expected_below

    return smallest_settling(settles, min_sample_size(p, confidence), ceiling)


def samples_to_settle_proportion(rate: float, limit: float, confidence: float = 0.95,
                                 ceiling: int = 100_000_000) -> int | None:
    """About how many trials put a proportion's Clopper–Pearson interval clear of a limit.

    Assumes the observed rate holds. The interval clears the limit from below exactly when
    P(B <= k; n, limit) <= a, and from above when P(B >= k; n, limit) <= a, so each candidate n
    costs one binomial tail. None when the rate equals the limit or past `ceiling`.
    """
    a = _check_confidence(confidence)
    if rate == limit:
        return None

    def settles(n: int) -> bool:
        k = round(rate * n)
        return binom_cdf(k, n, limit) <= a if rate < limit else binom_sf(k, n, limit) <= a

    return smallest_settling(settles, 1, ceiling)


def samples_to_settle_mean(mean: float, sd: float, limit: float, confidence: float = 0.95) -> int | None:
    """About how many samples put a mean's interval clear of a limit, if mean and sd hold."""
    a = _check_confidence(confidence)
    if mean == limit:
        return None
    z = _z(1.0 - a)
    return max(MEAN_MIN_SAMPLES, math.ceil((z * sd / (limit - mean)) ** 2))
