"""Is a series drifting? A Theil-Sen slope, tested against the slow swings its windows share.

A soak asks whether latency or memory grows over time. Comparing the first minute with the
last is one noisy pair of points; a least-squares fit over every request is pulled by outliers
and, in a closed loop, its samples are not independent (one slow request delays the next one
on the same slot). So the series is first reduced to one median per time window, and then:

- the slope is the Theil-Sen estimator: the median of the slopes between every pair of points,
  robust to up to ~29% outliers;
- its significance and its interval allow for correlation between neighbouring windows. Load
  swings slowly (another tenant, a cache filling and emptying, thermal limits), so window
  medians follow an AR(1)-like wander: with 20 windows and a lag-one correlation phi = 0.9 the
  wander lasts about half the soak and looks like a trend. The plain Mann-Kendall test treats
  the windows as independent and calls such a wander "drift" far more often than alpha says.

The test. The statistic is the slope studentized by the spread of the points around the fitted
line, t = slope * sqrt(Sxx) / s. Under independent windows it would be about Student t; under
correlated ones its spread grows with the correlation, and its distribution under "no trend"
is taken by simulation (seeded, so the same series always gets the same answer) of AR(1)
series of the same length. Which correlation? The lag-one autocorrelation r1 of the detrended
windows says little at 20 points (its standard deviation is about 0.2, and at phi = 0.9 its
mean is only about 0.47 because the fitted line absorbs much of the wander), so the test takes
the largest phi that r1 does not rule out: the highest phi on a grid under which r1 is at least
the lower 10% point of its own simulated distribution (an upper 90% bound for phi). The p-value
and the slope's interval (`slope_low`, `slope_high`) both come from the simulated distribution
at that phi. With independent windows phi usually comes out small, though not always: the test
gives up some power there (docs/capacity.md has the simulated rates).

Why not the usual corrections: Hamed and Rao's variance inflation and Yue-Pilon pre-whitening
both estimate the correlation from the same 20 points and under-correct (in a seeded simulation
of trend-free phi = 0.9 wanders they found p < 0.01 in 28% and 52% of series, plain
Mann-Kendall in 39%, this test in 3%); and a correctly inflated Mann-Kendall cannot reach
p < 0.01 at all with 20 windows and phi = 0.9, because S is bounded by n(n-1)/2 and ignores how
large the rise is. A moving-block bootstrap needs blocks longer than the correlation, of which
20 windows hold two.

A drift is a finding only when it is both significant (p < alpha) and large: the slope times
the series' duration exceeds a tolerance relative to the series' starting level. Fewer than
MIN_POINTS windows and the test says it cannot decide.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from statistics import median
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_inferaccept import model

MIN_POINTS = 8
"""Fewer windows than this and the trend test is not trusted."""

MAX_POINTS = 32
"""Longer series are first reduced to this many block medians (the test simulates series of
the same length, at a cost that grows with the square of it)."""

CORRELATION_GRID = tuple(round(0.05 * i, 2) for i in range(20))
"""The lag-one correlations the test may assume: 0 to 0.95."""

CORRELATION_QUANTILE = 0.1
"""The assumed correlation is the largest grid value under which the observed r1 is at least
this quantile of r1's own distribution (an upper 90% bound for phi)."""

NULL_SERIES = 2000
"""Simulated trend-free series per (length, correlation): p-values resolve to 1 / 2001."""

LAG1_SERIES = 800
"""Simulated series per (length, correlation) for the distribution of r1."""

METHOD = (
    "Theil-Sen slope studentized by the residual spread; p-value and interval from seeded AR(1) "
    "simulations at the largest lag-one correlation the detrended windows do not rule out"
)


@dataclass(frozen=True, kw_only=True)
class Trend:
    """The drift of one series: slope per second with its interval, its significance, the verdict inputs."""

    n: int
    slope_per_s: float | None
    """Theil-Sen slope in the series' unit per second (None with fewer than 2 points)."""
    p_value: float | None
    """Two-sided p-value of "no trend", allowing for correlated windows (None below MIN_POINTS)."""
    start: float | None
    """The fitted level at the first point (Theil-Sen intercept), the base for relative growth."""
    span_s: float
    """Seconds from the first to the last point."""
    slope_low: float | None = None
    """Low end of the slope's interval, per second (None below MIN_POINTS)."""
    slope_high: float | None = None
    """High end of the slope's interval, per second (None below MIN_POINTS)."""
    confidence: float = 0.95
    """The confidence of [slope_low, slope_high]."""
    lag1: float | None = None
    """Lag-one autocorrelation of the detrended points, as observed."""
    correlation: float | None = None
    """The lag-one correlation the test assumed (the largest that lag1 does not rule out)."""

    @property
    def change(self) -> float | None:
        """The fitted change over the whole span, in the series' unit."""
        return None if self.slope_per_s is None else self.slope_per_s * self.span_s

    @property
    def relative_change(self) -> float | None:
        """`change` as a fraction of the starting level (None when that level is not positive)."""
        if self.change is None or self.start is None or self.start <= 0:
            return None
        return self.change / self.start

    def drifts(self, *, tolerance: float, alpha: float = 0.01, rising_only: bool = True) -> bool | None:
        """True: significant and beyond tolerance; False: no such drift; None: too few points."""
        if self.p_value is None or self.relative_change is None:
            return None
        size = self.relative_change if rising_only else abs(self.relative_change)
        return self.p_value < alpha and size > tolerance

def trend_view(fitted: Trend) -> model.Trend:
    """What the results document writes of a trend, in the run model's type."""
    from pytest_inferaccept import model

    return model.Trend(n=fitted.n, slope_per_s=fitted.slope_per_s, p_value=fitted.p_value, start=fitted.start,
                       span_s=fitted.span_s, change=fitted.change, relative_change=fitted.relative_change,
                       slope_low=fitted.slope_low, slope_high=fitted.slope_high, confidence=fitted.confidence,
                       lag1=fitted.lag1, assumed_correlation=fitted.correlation, method=METHOD)


def windows(points: Sequence[tuple[float, float]], width_s: float, *, level: float = 0.5,
            least: int = 1) -> list[tuple[float, float]]:
    """(window centre, median value) per window of `width_s` seconds; windows with fewer than `least`
    points are skipped (empty ones always).

    With `level` other than 0.5, the window's `level`-quantile instead of its median (the tail of a
    latency: 0.95 gives each window's p95, interpolated between its order statistics)."""
    if not points:
        return []
    t0 = min(t for t, _ in points)
    groups: dict[int, list[float]] = {}
    for t, v in points:
        groups.setdefault(int((t - t0) // width_s), []).append(v)
    kept = [(k, vs) for k, vs in sorted(groups.items()) if len(vs) >= least]
    if level == 0.5:
        return [(t0 + (k + 0.5) * width_s, median(vs)) for k, vs in kept]
    return [(t0 + (k + 0.5) * width_s, _quantile(sorted(vs), level)) for k, vs in kept]


def _quantile(ordered: Sequence[float], level: float) -> float:
    """The `level`-quantile of sorted values, linear between order statistics (as the percentiles are)."""
    h = (len(ordered) - 1) * level
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def blocks(points: Sequence[tuple[float, float]], count: int) -> list[tuple[float, float]]:
    """(median time, median value) of `count` consecutive blocks of about equal size, in time order."""
    ordered = sorted(points)
    n = len(ordered)
    if n <= count:
        return ordered
    edges = [round(i * n / count) for i in range(count + 1)]
    return [
        (median(t for t, _ in ordered[a:b]), median(v for _, v in ordered[a:b]))
        for a, b in pairwise(edges)
    ]


def theil_sen(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """(slope, intercept at the first x) by Theil-Sen; None with fewer than two distinct x."""
    slopes = [
        (y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1 :] if x2 != x1
    ]
    if not slopes:
        return None
    slope = median(slopes)
    x0 = min(x for x, _ in points)
    intercept = median(y - slope * (x - x0) for x, y in points)
    return slope, intercept


def mann_kendall(values: Sequence[float]) -> float | None:
    """Two-sided p-value of the plain Mann-Kendall test (independent values); None if n < MIN_POINTS.

    Kept for reference and comparison: `trend` does not use it, because neighbouring soak
    windows are not independent (see the module's docstring).
    """
    n = len(values)
    if n < MIN_POINTS:
        return None
    s = 0
    for i in range(n - 1):
        for j in range(i + 1, n):
            diff = values[j] - values[i]
            s += (diff > 0) - (diff < 0)
    ties: dict[float, int] = {}
    for v in values:
        ties[v] = ties.get(v, 0) + 1
    var = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties.values())) / 18
    if var <= 0:
        return 1.0  # every value equal: no trend at all
    z = (s - (1 if s > 0 else -1 if s < 0 else 0)) / math.sqrt(var)
    return math.erfc(abs(z) / math.sqrt(2))


def lag1_autocorrelation(values: Sequence[float]) -> float:
    """Lag-one autocorrelation of the residuals of a least-squares line through evenly spaced values."""
    n = len(values)
    mid = (n - 1) / 2
    mean = sum(values) / n
    sxx = sum((i - mid) ** 2 for i in range(n))
    slope = sum((i - mid) * (v - mean) for i, v in enumerate(values)) / sxx if sxx else 0.0
    res = [v - mean - slope * (i - mid) for i, v in enumerate(values)]
    total = sum(e * e for e in res)
    return sum(res[i] * res[i + 1] for i in range(n - 1)) / total if total > 0 else 0.0


def _studentized(points: Sequence[tuple[float, float]]) -> tuple[float, float, float, float]:
    """(Theil-Sen slope, intercept at the first x, residual spread s, sqrt(Sxx)) of at least 3 points."""
    fit = theil_sen(points)
    slope, intercept = fit if fit is not None else (0.0, 0.0)
    x0 = min(x for x, _ in points)
    res = [y - intercept - slope * (x - x0) for x, y in points]
    mean_res = sum(res) / len(res)
    spread = math.sqrt(sum((e - mean_res) ** 2 for e in res) / (len(res) - 2))
    mean_x = sum(x for x, _ in points) / len(points)
    root_sxx = math.sqrt(sum((x - mean_x) ** 2 for x, _ in points))
    return slope, intercept, spread, root_sxx


def _ar1(rng: random.Random, n: int, phi: float) -> list[float]:
    """A stationary AR(1) series of unit variance."""
    x = rng.gauss(0.0, 1.0)
    out = [x]
    shock = math.sqrt(1.0 - phi * phi)
    for _ in range(n - 1):
        x = phi * x + shock * rng.gauss(0.0, 1.0)
        out.append(x)
    return out


@cache
def _lag1_floor(n: int, phi: float) -> float:
    """The CORRELATION_QUANTILE point of r1 over simulated AR(phi) series of length n."""
    rng = random.Random(f"lag1:{n}:{phi}")
    values = sorted(lag1_autocorrelation(_ar1(rng, n, phi)) for _ in range(LAG1_SERIES))
    return values[int(CORRELATION_QUANTILE * (LAG1_SERIES - 1))]


@cache
def _null_t(n: int, phi: float) -> tuple[float, ...]:
    """Sorted |t| of the studentized Theil-Sen slope over simulated trend-free AR(phi) series."""
    rng = random.Random(f"null:{n}:{phi}")
    out = []
    for _ in range(NULL_SERIES):
        series = list(enumerate(_ar1(rng, n, phi)))
        slope, _, spread, root_sxx = _studentized(series)
        out.append(abs(slope) * root_sxx / spread if spread > 0 else 0.0)
    return tuple(sorted(out))


def assumed_correlation(values: Sequence[float]) -> float:
    """The largest grid correlation under which the observed lag-one autocorrelation is not unusually low."""
    observed = lag1_autocorrelation(values)
    n = len(values)
    chosen = CORRELATION_GRID[0]
    for phi in CORRELATION_GRID:
        if _lag1_floor(n, phi) <= observed:
            chosen = phi
    return chosen


def trend(
    points: Sequence[tuple[float, float]], *, window_s: float | None = None, confidence: float = 0.95
) -> Trend:
    """The drift of (time s, value) points, reduced to window medians first when `window_s` is given."""
    series = windows(points, window_s) if window_s else sorted(points)
    if len(series) > MAX_POINTS:
        series = blocks(series, MAX_POINTS)
    n = len(series)
    span = (series[-1][0] - series[0][0]) if n > 1 else 0.0
    fit = theil_sen(series)
    if fit is None:
        return Trend(n=n, slope_per_s=None, p_value=None, start=None, span_s=span, confidence=confidence)
    slope, intercept = fit
    if n < MIN_POINTS:
        return Trend(n=n, slope_per_s=slope, p_value=None, start=intercept, span_s=span,
                     confidence=confidence)
    values = [v for _, v in series]
    lag1 = lag1_autocorrelation(values)
    phi = assumed_correlation(values)
    _, _, spread, root_sxx = _studentized(series)
    if spread <= 0:  # the points lie on the line: no wander to mistake for a trend
        p = 1.0 if slope == 0 else 1.0 / (NULL_SERIES + 1)
        low = high = slope
    else:
        null = _null_t(n, phi)
        t = abs(slope) * root_sxx / spread
        p = (len(null) - bisect.bisect_left(null, t) + 1) / (len(null) + 1)
        half = null[min(len(null) - 1, int(confidence * len(null)))] * spread / root_sxx
        low, high = slope - half, slope + half
    return Trend(
        n=n,
        slope_per_s=slope,
        p_value=min(1.0, p),
        start=intercept,
        span_s=span,
        slope_low=low,
        slope_high=high,
        confidence=confidence,
        lag1=lag1,
        correlation=phi,
    )
