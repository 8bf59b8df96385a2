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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pytest_inferaccept.stats.percentiles import binom_sf, quantile

NEGLIGIBLE = 1e-12
"""Bootstrap probabilities below this are dropped (they cannot move an interval's end)."""

Judgement = Literal["pass", "fail", "not_enough_data"]


@dataclass(frozen=True, kw_only=True)
class QuantileRatio:
    """numerator's p-quantile / denominator's p-quantile, with its bootstrap interval."""

    value: float | None
    low: float | None
    high: float | None
    p: float
    confidence: float
    n_numerator: int
    n_denominator: int

    def judge(self, max_ratio: float) -> Judgement:
        """fail: wholly above `max_ratio`; pass: wholly at or below it; else not enough data."""
        if self.low is None or self.high is None:
            return "not_enough_data"
        if self.low > max_ratio:
            return "fail"
        if self.high <= max_ratio:
            return "pass"
        return "not_enough_data"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "p": self.p,
            "confidence": self.confidence,
            "n_numerator": self.n_numerator,
            "n_denominator": self.n_denominator,
            "method": "exact percentile bootstrap of each quantile (independent samples)",
        }


def bootstrap_quantile(values: Sequence[float], p: float) -> list[tuple[float, float]]:
    """(value, probability) of the bootstrap distribution of the type-7 p-quantile, in value order."""
    data = sorted(values)
    n = len(data)
    if n == 0:
        return []
    h = (n - 1) * p
    lo = math.floor(h)
    frac = h - lo
    mass: dict[float, float] = {}
    for k, weight in ((lo, 1.0 - frac), (min(lo + 1, n - 1), frac)):
        if weight <= 0:
            continue
        below = 0.0  # P(k-th order statistic of a resample <= data[j - 1])
        for j in range(n):
            at_most = binom_sf(k + 1, n, (j + 1) / n) if j < n - 1 else 1.0
            if at_most - below > 0:
                mass[data[j]] = mass.get(data[j], 0.0) + weight * (at_most - below)
            below = at_most
    return sorted((v, q) for v, q in mass.items() if q > NEGLIGIBLE)


def quantile_ratio(
    numerator: Sequence[float], denominator: Sequence[float], *, p: float = 0.95, confidence: float = 0.95
) -> QuantileRatio:
    """The ratio of the two samples' p-quantiles with its exact bootstrap interval (positive values)."""
    top, bottom = bootstrap_quantile(numerator, p), bootstrap_quantile(denominator, p)
    empty = QuantileRatio(value=None, low=None, high=None, p=p, confidence=confidence,
                          n_numerator=len(numerator), n_denominator=len(denominator))
    if not top or not bottom:
        return empty
    base = quantile(sorted(denominator), p)
    if base <= 0:
        return empty
    pairs = sorted(
        (a / b if b > 0 else math.inf, qa * qb) for a, qa in top for b, qb in bottom if qa * qb > NEGLIGIBLE
    )
    total = sum(w for _, w in pairs)
    tail = (1.0 - confidence) / 2.0
    low = high = None
    seen = 0.0
    for ratio, w in pairs:
        seen += w / total
        if low is None and seen >= tail:
            low = ratio
        if seen >= 1.0 - tail:
            high = ratio
            break
    if high is None:
        high = pairs[-1][0]
    return QuantileRatio(
        value=quantile(sorted(numerator), p) / base,
        low=low,
        high=high if math.isfinite(high) else None,
        p=p,
        confidence=confidence,
        n_numerator=len(numerator),
        n_denominator=len(denominator),
    )
