"""Is a series drifting? Theil-Sen slope with a Mann-Kendall test, on window medians.

A soak asks whether latency or memory grows over time. Comparing the first minute with the
last is one noisy pair of points; a least-squares fit over every request is pulled by outliers
and, in a closed loop, its samples are not independent (one slow request delays the next one
on the same slot). So the series is first reduced to one median per time window, and then:

- the slope is the Theil-Sen estimator: the median of the slopes between every pair of points,
  robust to up to ~29% outliers;
- its significance is the Mann-Kendall trend test: S counts rising minus falling pairs; under
  "no trend" S is about normal with variance n(n-1)(2n+5)/18 (less a correction for ties), so
  z = (S - sign(S)) / sqrt(var) and the two-sided p-value is erfc(|z| / sqrt(2)). The normal
  approximation is usual from n >= 8 windows; below that the test says it cannot decide.

A drift is a finding only when it is both significant (p < alpha) and large: the slope times
the series' duration exceeds a tolerance relative to the series' starting level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

MIN_POINTS = 8
"""Fewer windows than this and the Mann-Kendall normal approximation is not trusted."""


@dataclass(frozen=True, kw_only=True)
class Trend:
    """The drift of one series: slope per second, its significance, and the verdict inputs."""

    n: int
    slope_per_s: float | None
    """Theil-Sen slope in the series' unit per second (None with fewer than 2 points)."""
    p_value: float | None
    """Two-sided Mann-Kendall p-value (None with fewer than MIN_POINTS points)."""
    start: float | None
    """The fitted level at the first point (Theil-Sen intercept), the base for relative growth."""
    span_s: float
    """Seconds from the first to the last point."""

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

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "n": self.n,
            "slope_per_s": self.slope_per_s,
            "p_value": self.p_value,
            "start": self.start,
            "span_s": self.span_s,
            "change": self.change,
            "relative_change": self.relative_change,
        }


def windows(points: Sequence[tuple[float, float]], width_s: float) -> list[tuple[float, float]]:
    """(window centre, median value) per window of `width_s` seconds; empty windows are skipped."""
    if not points:
        return []
    t0 = min(t for t, _ in points)
    groups: dict[int, list[float]] = {}
    for t, v in points:
        groups.setdefault(int((t - t0) // width_s), []).append(v)
    return [(t0 + (k + 0.5) * width_s, median(vs)) for k, vs in sorted(groups.items())]


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
    """Two-sided p-value of the Mann-Kendall trend test (values in time order); None if n < MIN_POINTS."""
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


def trend(points: Sequence[tuple[float, float]], *, window_s: float | None = None) -> Trend:
    """The drift of (time s, value) points, reduced to window medians first when `window_s` is given."""
    series = windows(points, window_s) if window_s else sorted(points)
    span = (series[-1][0] - series[0][0]) if len(series) > 1 else 0.0
    fit = theil_sen(series)
    if fit is None:
        return Trend(n=len(series), slope_per_s=None, p_value=None, start=None, span_s=span)
    slope, intercept = fit
    return Trend(
        n=len(series),
        slope_per_s=slope,
        p_value=mann_kendall([v for _, v in series]),
        start=intercept,
        span_s=span,
    )
