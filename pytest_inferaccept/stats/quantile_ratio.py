"""The ratio of two samples' percentiles, with an interval: is B's p95 really k times A's?

A p95 of ~32 samples sits between the 30th and 31st order statistics, so two of them drawn
from the same distribution often differ by half: comparing the point ratio with a limit fails
servers that are not affected at all. The interval here is the percentile bootstrap of the
ratio, computed exactly rather than by resampling, so it needs no seed and no time:

- a resample's k-th order statistic is at most the j-th smallest value exactly when at least
  k+1 of the n resampled values are, and that count is Binomial(n, (j+1)/n); so the bootstrap
  distribution of each order statistic is a difference of binomial tails;
- the type-7 percentile interpolates between two neighbouring order statistics with weights
  (1 - f, f); its bootstrap distribution is taken as the mixture of theirs with those weights
  (same centre, a little wider than the interpolation itself: on the safe side);
- the two samples are independent, so the ratio's distribution is the product of the two, and
  the interval is its (1 - confidence) / 2 and (1 + confidence) / 2 points.

A limit is judged on the interval: beyond it only when the low end is above the limit, within
it only when the high end is at or below it, and "not enough data" when the interval straddles
it. Claimed error rates are shown by the seeded simulations in tests/test_capacity_coverage.py.

A failed request is a value of `math.inf` (censored: slower than any limit, as in every latency
figure), never dropped: a server whose slow requests time out must not look faster than one that
answers them late. Each end takes the reading that cannot flatter the server:

- where the interpolated p-quantile touches a failed value it is infinite, so the bootstrap mass
  at infinity is that of the upper order statistic, the shortfall taken from the largest finite
  values (the plain mixture would give it less);
- a numerator on failed requests makes the ratio infinite (above any limit); a denominator on
  failed requests leaves the ratio unknown, read as 0 for the low end and infinite for the high
  end, so neither a fail nor a pass can rest on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pytest_inferaccept.stats.percentiles import binom_sf, quantile

if TYPE_CHECKING:
    from pytest_inferaccept import model

NEGLIGIBLE = 1e-12
"""Bootstrap probabilities below this are dropped (they cannot move an interval's end)."""

Judgement = Literal["pass", "fail", "not_enough_data"]


@dataclass(frozen=True, kw_only=True)
class QuantileRatio:
    """numerator's p-quantile / denominator's p-quantile, with its bootstrap interval.

    `value` and `low` are infinite when they fall on the numerator's failed requests; `value`
    is None when the denominator's quantile does (the ratio is unknown), `high` None when the
    interval has no upper end.
    """

    value: float | None
    low: float | None
    high: float | None
    p: float
    confidence: float
    n_numerator: int
    n_denominator: int
    censored_numerator: int = 0
    """Failed requests in the numerator's sample, counted as slower than any limit."""
    censored_denominator: int = 0
    """Failed requests in the denominator's sample, counted as slower than any limit."""

    def judge(self, max_ratio: float) -> Judgement:
        """fail: wholly above `max_ratio`; pass: wholly at or below it; else not enough data.

        Failing needs only the low end: an interval with no upper end (failed requests) still fails.
        """
        if self.low is not None and self.low > max_ratio:
            return "fail"
        if self.low is None or self.high is None:
            return "not_enough_data"
        if self.high <= max_ratio:
            return "pass"
        return "not_enough_data"

def ratio_view(ratio: QuantileRatio) -> model.RatioInterval:
    """What the results document writes of a ratio: an infinite figure as null beside a flag saying so."""
    from pytest_inferaccept import model

    data: dict[str, Any] = {
        "value": _finite(ratio.value), "low": _finite(ratio.low), "high": _finite(ratio.high), "p": ratio.p,
        "confidence": ratio.confidence, "n_numerator": ratio.n_numerator,
        "n_denominator": ratio.n_denominator,
        "censored_numerator": ratio.censored_numerator, "censored_denominator": ratio.censored_denominator,
        "method": "exact percentile bootstrap of each quantile (independent samples); failed requests "
                  "counted as slower than any limit"}
    if ratio.value == math.inf:
        data["value_above_any_limit"] = True
    if ratio.low == math.inf:
        data["low_above_any_limit"] = True
    return model.RatioInterval.model_validate(data)


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isinf(x) else x


def _order_statistic(data: Sequence[float], k: int) -> dict[float, float]:
    """value -> probability of the bootstrap distribution of the k-th (0-based) order statistic."""
    n = len(data)
    mass: dict[float, float] = {}
    below = 0.0  # P(k-th order statistic of a resample <= data[j - 1])
    for j in range(n):
        at_most = binom_sf(k + 1, n, (j + 1) / n) if j < n - 1 else 1.0
        if at_most - below > 0:
            mass[data[j]] = mass.get(data[j], 0.0) + (at_most - below)
        below = at_most
    return mass


def bootstrap_quantile(values: Sequence[float], p: float, *,
                       exact_censored: bool = False) -> list[tuple[float, float]]:
    """(value, probability) of the bootstrap distribution of the type-7 p-quantile, in value order.

    The mixture of the two neighbouring order statistics' distributions; with `exact_censored`,
    the mass at infinity (failed requests) is the interpolation's own, the upper order
    statistic's, and the shortfall comes off the largest finite values.
    """
    data = sorted(values)
    n = len(data)
    if n == 0:
        return []
    h = (n - 1) * p
    lo = math.floor(h)
    frac = h - lo
    parts = [(weight, _order_statistic(data, k))
             for k, weight in ((lo, 1.0 - frac), (min(lo + 1, n - 1), frac)) if weight > 0]
    mass: dict[float, float] = {}
    for weight, own in parts:
        for v, q in own.items():
            mass[v] = mass.get(v, 0.0) + weight * q
    if exact_censored and frac > 0 and data[-1] == math.inf:
        # a + f * (inf - a) is infinite whenever the upper order statistic is
        short = parts[-1][1].get(math.inf, 0.0) - mass.get(math.inf, 0.0)
        if short > 0:
            mass[math.inf] = mass.get(math.inf, 0.0) + short
            for v in sorted((v for v in mass if v != math.inf), reverse=True):
                taken = min(short, mass[v])
                mass[v] -= taken
                short -= taken
                if short <= 0:
                    break
    return sorted((v, q) for v, q in mass.items() if q > NEGLIGIBLE)


def _ratio(a: float, b: float, unknown: float) -> float:
    """a / b, with a failed numerator above any limit and a failed denominator `unknown`."""
    if b == math.inf:
        return unknown
    if a == math.inf or b <= 0:
        return math.inf
    return a / b


def _point(pairs: list[tuple[float, float]], share: float) -> float:
    """The first ratio whose cumulative probability reaches `share` of the pairs' total."""
    total = sum(w for _, w in pairs)
    seen = 0.0
    for ratio, w in pairs:
        seen += w / total
        if seen >= share:
            return ratio
    return pairs[-1][0]


def quantile_ratio(
    numerator: Sequence[float], denominator: Sequence[float], *, p: float = 0.95, confidence: float = 0.95
) -> QuantileRatio:
    """The ratio of the two samples' p-quantiles with its exact bootstrap interval (positive values;
    a failed request is `math.inf`, counted as slower than any limit)."""
    censored = {"censored_numerator": sum(1 for v in numerator if v == math.inf),
                "censored_denominator": sum(1 for v in denominator if v == math.inf)}
    empty = QuantileRatio(value=None, low=None, high=None, p=p, confidence=confidence,
                          n_numerator=len(numerator), n_denominator=len(denominator), **censored)
    # The low end reads the numerator's plain mixture (less mass above any limit) and the
    # denominator's exact censored mass (more unknown ratios, read as 0); the high end both exact.
    top_low = bootstrap_quantile(numerator, p)
    top_high = bootstrap_quantile(numerator, p, exact_censored=True)
    bottom = bootstrap_quantile(denominator, p, exact_censored=True)
    if not top_low or not bottom:
        return empty
    base = quantile(sorted(denominator), p)
    if base <= 0:
        return empty
    tail = (1.0 - confidence) / 2.0

    def pairs(top: list[tuple[float, float]], unknown: float) -> list[tuple[float, float]]:
        return sorted((_ratio(a, b, unknown), qa * qb) for a, qa in top for b, qb in bottom
                      if qa * qb > NEGLIGIBLE)

    low = _point(pairs(top_low, 0.0), tail)
    high = _point(pairs(top_high, math.inf), 1.0 - tail)
    top_value = quantile(sorted(numerator), p)
    return QuantileRatio(
        value=None if base == math.inf else math.inf if top_value == math.inf else top_value / base,
        low=low,
        high=high if math.isfinite(high) else None,
        p=p,
        confidence=confidence,
        n_numerator=len(numerator),
        n_denominator=len(denominator),
        **censored,
    )
