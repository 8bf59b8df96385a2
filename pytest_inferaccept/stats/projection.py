"""A soak's drift in production terms: a rate with its interval, projected to a horizon and a limit.

A soak measures minutes; the question it answers is about a day of traffic. So a drift is not
judged by how much it moved within the soak (that depends on how long the soak happened to be)
but by where it leads: the slope (from `trend`, whose interval allows for correlated windows)
times the horizon the team states, against the level that must not be reached (a share of the
memory the server has, the SLO's latency limit).

- A finding rests on the low end of the slope's 1 - alpha interval (`Slope.floor`; 99% at the
  soak's alpha = 0.01): growth is called only when even that low end reaches the limit within
  the horizon. One-sided, that is alpha / 2 nominal; the stricter side is on purpose: under
  slow swings (neighbouring windows correlated at about 0.9) the interval's tails are somewhat
  light, and a stable server must be called leaking at most alpha of the time, whatever the
  horizon (simulated in tests/test_soak_projection.py).
- Growth that slows down and levels off within the soak (a cache filling) is told from growth
  that does not (a leak) by comparing the growth early in the soak with the slope of its last
  third (`shape_of`); the projection then uses the last third's slope, the rate the server has
  now.
- How long to soak (`soak_needed`): the slope's interval narrows in proportion to the soak's
  length when the window count and the spread of the window values stay as they are (windows
  grow with the soak, so their medians are no noisier; assuming the same spread and correlation
  is conservative). From the soak's own noise that gives the length at which a leak that
  would use the headroom within half the horizon is found 95% of the time; the soak planned is
  PLAN_FACTOR times that, because a short soak's noise is itself an estimate from 20 windows.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pytest_inferaccept.stats.trend import trend

if TYPE_CHECKING:
    from pytest_inferaccept import model

BUDGET_SHARE = 0.9
"""The share of the memory the server has that its growth may use: the rest is for the OS, the
page cache and whatever else runs beside it."""

DETECT_WITHIN = 0.5
"""The soak planned by `soak_needed` finds a leak that uses the headroom within this share of
the horizon (a leak that only just reaches the limit at the horizon cannot be found reliably by
any soak: its lower bound is below the limit about half the time)."""

POWER = 0.95
"""How often the planned soak finds that leak."""

PLAN_FACTOR = 2.5
"""The planned soak is this many times the length the soak's own noise points to. That noise
is an estimate (20 windows, an assumed correlation that varies from soak to soak): in seeded
simulations (500 planned soaks each) a soak planned on it alone found the leak in only 81-83%
of cases, twice that length in 95.6-96.6%, 2.5 times in 96.4-97.6% (tests/test_soak_projection.py)."""

MIN_SOAK_S = 30.0
"""The shortest soak worth planning: 10 one-second memory samples in each third."""

DEFAULT_HORIZON_S = 24 * 3600.0


class ProjectionInputError(ValueError):
    """A horizon or a byte size that cannot be read; the message says what is accepted."""


# ---------------------------------------------------------------------------------------------
# Inputs: the horizon and a size in bytes

_TIME_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_REQUEST_UNITS = {"req", "request", "requests"}
_NUMBER = r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)"


@dataclass(frozen=True, kw_only=True)
class Horizon:
    """How far a soak's drift is projected: seconds of traffic at the soak's rate, or a request count."""

    seconds: float | None = None
    requests: float | None = None

    def seconds_at(self, request_rate: float | None) -> float | None:
        """The horizon in seconds of traffic at `request_rate` requests/s (None: a count and no rate)."""
        if self.seconds is not None:
            return self.seconds
        if self.requests is not None and request_rate:
            return self.requests / request_rate
        return None

    def requests_at(self, request_rate: float | None) -> float | None:
        """The horizon in requests at `request_rate` requests/s."""
        if self.requests is not None:
            return self.requests
        if self.seconds is not None and request_rate:
            return self.seconds * request_rate
        return None

    def describe(self, request_rate: float | None) -> str:
        """'24 h of this traffic (1.3 M requests at 15.2 requests/s)' or '2 M requests (36 h at ...)'."""
        rate = f" at {request_rate:.3g} requests/s" if request_rate else ""
        if self.seconds is not None:
            count = self.requests_at(request_rate)
            extra = f" ({count_words(count)} requests{rate})" if count is not None else ""
            return f"{duration_words(self.seconds)} of this traffic{extra}"
        seconds = self.seconds_at(request_rate)
        extra = f" ({duration_words(seconds)}{rate})" if seconds is not None else ""
        return f"{count_words(self.requests or 0)} requests{extra}"

def horizon_view(horizon: Horizon) -> model.Horizon:
    """What the results document writes of a horizon, in the run model's type."""
    from pytest_inferaccept import model

    return model.Horizon(seconds=horizon.seconds, requests=horizon.requests)


def parse_horizon(raw: str) -> Horizon:
    """'24h', '90m', '3600s', '1.5d', '2000000req' (or a bare number of seconds) as a Horizon."""
    text = raw.strip().lower().replace(" ", "").replace("_", "")
    match = re.fullmatch(_NUMBER + r"([a-z]*)", text)
    unit = match.group(2) if match else ""
    if match is None or (unit and unit not in _TIME_UNITS and unit not in _REQUEST_UNITS):
        raise ProjectionInputError(
            f"{raw!r}: expected a duration (24h, 90m, 3600s, 2d) or a request count (2000000req)")
    value = float(match.group(1))
    if not value > 0 or not math.isfinite(value):
        raise ProjectionInputError(f"{raw!r}: expected a positive horizon")
    if unit in _REQUEST_UNITS:
        return Horizon(requests=value)
    return Horizon(seconds=value * _TIME_UNITS.get(unit, 1.0))


_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
               "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def parse_bytes(raw: str) -> float:
    """'24GiB', '512MiB', '16GB', '8Gi' or a bare number of bytes, in bytes."""
    text = raw.strip().lower().replace(" ", "").replace("_", "")
    match = re.fullmatch(_NUMBER + r"([a-z]*)", text)
    if match is None or match.group(2) not in _BYTE_UNITS:
        raise ProjectionInputError(
            f"{raw!r}: expected a size such as 24GiB, 512MiB, 16GB or a number of bytes "
            "(K, M, G alone are ambiguous: say KiB or KB)")
    value = float(match.group(1)) * _BYTE_UNITS[match.group(2)]
    if not value > 0 or not math.isfinite(value):
        raise ProjectionInputError(f"{raw!r}: expected a positive size")
    return value


# ---------------------------------------------------------------------------------------------
# The slope, its shape, the projection

@dataclass(frozen=True, kw_only=True)
class Slope:
    """A Theil-Sen slope per second with its interval, its judging bound and its planning error."""

    per_s: float
    low: float
    high: float
    """The `confidence` interval (allowing for correlated windows), per second."""
    floor: float
    """The low end of the 1 - alpha interval: a finding rests on it."""
    error: float
    """One-sided POWER-quantile of the slope's error: how far below the truth an estimate may fall
    (5% of the time), for planning."""
    start: float
    """The fitted level at the first point."""
    span_s: float
    n: int
    p_value: float
    confidence: float = 0.95
    alpha: float = 0.01

    @property
    def end(self) -> float:
        """The fitted level at the last point."""
        return self.start + self.per_s * self.span_s

def slope_view(slope: Slope) -> model.SoakSlope:
    """What the results document writes of a slope, in the run model's type."""
    from pytest_inferaccept import model

    return model.SoakSlope(per_s=slope.per_s, low=slope.low, high=slope.high, floor=slope.floor,
                           error=slope.error, start=slope.start, end=slope.end, span_s=slope.span_s,
                           n=slope.n, p_value=slope.p_value, confidence=slope.confidence, alpha=slope.alpha)


def slope_of(points: Sequence[tuple[float, float]], *, window_s: float | None = None, alpha: float = 0.01,
             confidence: float = 0.95) -> Slope | None:
    """The slope of (time s, value) points with its intervals; None when `trend` cannot judge them."""
    main = trend(points, window_s=window_s, confidence=confidence)
    if main.slope_per_s is None or main.p_value is None or main.slope_low is None \
            or main.slope_high is None or main.start is None:
        return None
    judge = trend(points, window_s=window_s, confidence=1 - alpha)
    plan = trend(points, window_s=window_s, confidence=1 - 2 * (1 - POWER))
    assert judge.slope_low is not None and plan.slope_low is not None
    return Slope(per_s=main.slope_per_s, low=main.slope_low, high=main.slope_high, floor=judge.slope_low,
                 error=main.slope_per_s - plan.slope_low, start=main.start, span_s=main.span_s, n=main.n,
                 p_value=main.p_value, confidence=confidence, alpha=alpha)


ShapeKind = Literal["steady", "levels_off", "slowing"]

EARLY_PARTS = ((0.0, 1 / 6), (0.0, 1 / 3), (1 / 3, 2 / 3))
"""Where growth is looked for before the last third, as shares of the soak: its first sixth (a
cache that fills quickly), its first third, its second third."""


@dataclass(frozen=True, kw_only=True)
class Shape:
    """How the growth went over the soak: steady, slowing down, or levelling off."""

    kind: ShapeKind
    first: Slope | None = None
    """The fastest significant growth before the last third (None: none, or too few points)."""
    first_span: tuple[float, float] | None = None
    """Where `first` was measured, in seconds from the first point."""
    last: Slope | None = None
    """The slope over the soak's last third."""
    middle: Slope | None = None
    """The slope over its middle third (its noise, with the last third's, plans the next soak)."""

    def steady(self) -> Shape:
        """The same slopes, judged steady (what looked like slowing was not: see soak_judge)."""
        return replace(self, kind="steady")


def shape_view(shape: Shape) -> model.GrowthShape:
    """What the results document writes of a growth's shape, in the run model's type."""
    from pytest_inferaccept import model

    def slope(x: Slope | None) -> model.SoakSlope | None:
        return None if x is None else slope_view(x)

    return model.GrowthShape(kind=shape.kind, early=slope(shape.first),
                             early_span_s=list(shape.first_span) if shape.first_span else None,
                             middle_third=slope(shape.middle), last_third=slope(shape.last))


def shape_of(points: Sequence[tuple[float, float]], *, alpha: float = 0.01) -> Shape:
    """Steady, slowing or levelling off: growth early in the soak against the last third's slope.

    Early growth is the slope over the part of EARLY_PARTS whose interval lies highest above
    zero. Slowing: there is such growth and the last third's interval lies wholly below its
    interval; levelling off: slowing, and the last third's interval reaches zero. Two 95%
    intervals that do not overlap is a stricter test than p < 0.05, so a steady leak is rarely
    mistaken for a cache. Too few points in the last third: steady (cannot tell).
    """
    ordered = sorted(points)
    if len(ordered) < 2:
        return Shape(kind="steady")
    t0, t1 = ordered[0][0], ordered[-1][0]
    span = t1 - t0
    last = slope_of([p for p in ordered if p[0] >= t1 - span / 3], alpha=alpha)
    early: list[tuple[Slope, tuple[float, float]]] = []
    middle = None
    for a, b in EARLY_PARTS:
        found = slope_of([p for p in ordered if t0 + a * span <= p[0] <= t0 + b * span], alpha=alpha)
        if (a, b) == EARLY_PARTS[-1]:
            middle = found
        if found is not None and found.low > 0:
            early.append((found, (a * span, b * span)))
    first, where = max(early, key=lambda e: e[0].low) if early else (None, None)
    if first is None or last is None or not last.high < first.low:
        return Shape(kind="steady", first=first, first_span=where, last=last, middle=middle)
    return Shape(kind="levels_off" if last.low <= 0 else "slowing", first=first, first_span=where, last=last,
                 middle=middle)


@dataclass(frozen=True, kw_only=True)
class Projection:
    """A slope carried to a horizon, against the level that must not be reached."""

    slope: Slope
    horizon_s: float
    level: float
    """Where the series stands at the end of the soak."""
    limit: float | None = None
    """The level that must not be reached (None: no limit known, nothing to judge)."""

    def growth(self, rate: float) -> float:
        """The change over the horizon at `rate` per second."""
        return rate * self.horizon_s

    @property
    def headroom(self) -> float | None:
        """How far the series may still rise."""
        return None if self.limit is None else self.limit - self.level

    @property
    def crosses(self) -> bool | None:
        """True when even the slope's lower bound reaches the limit within the horizon."""
        room = self.headroom
        if room is None:
            return None
        return self.slope.floor > 0 and self.slope.floor * self.horizon_s >= room

    def time_to_limit(self, rate: float) -> float | None:
        """Seconds of traffic until the limit at `rate` per second (0: already there; None: never)."""
        room = self.headroom
        if room is None:
            return None
        if room <= 0:
            return 0.0 if rate > 0 else None
        return room / rate if rate > 0 else None

def projection_view(projection: Projection, limit_words: str | None = None) -> model.DriftProjection:
    """What the results document writes of a projection: growth over the horizon and time to the limit,
    each with its interval (and the limit in words, where the reader gives them)."""
    from pytest_inferaccept import model

    p, s = projection, projection.slope
    data: dict[str, Any] = {
        "horizon_s": p.horizon_s, "level": p.level, "limit": p.limit, "headroom": p.headroom,
        "growth": p.growth(s.per_s), "growth_low": p.growth(s.low), "growth_high": p.growth(s.high),
        "growth_floor": p.growth(s.floor), "time_to_limit_s": p.time_to_limit(s.per_s),
        # a faster rate reaches the limit sooner: the interval of the time runs the other way
        "time_to_limit_low_s": p.time_to_limit(s.high), "time_to_limit_high_s": p.time_to_limit(s.low)}
    if p.crosses is not None:  # without a limit nothing can be crossed: the key is left out
        data["crosses"] = p.crosses
    if limit_words is not None:
        data["limit_words"] = limit_words
    return model.DriftProjection.model_validate(data)


def soak_needed(slope: Slope, *, headroom: float, horizon_s: float, duration_s: float) -> float | None:
    """The shortest soak that finds (POWER of the time) growth using `headroom` within half the horizon.

    At the soak's length the estimate falls short of the truth by more than `slope.error` 5% of
    the time, and a finding needs the estimate `per_s - floor` above the limit's rate; a leak
    at twice that rate is then found 95% of the time when both together fit in the margin.
    Both shrink in proportion to the soak's length (see the module's docstring). None when the
    headroom is already used up (any soak that sees growth finds it).
    """
    if headroom <= 0 or horizon_s <= 0:
        return None
    edge = headroom / horizon_s
    margin = edge * (1 / DETECT_WITHIN - 1)
    noise = slope.error + (slope.per_s - slope.floor)
    return max(MIN_SOAK_S, PLAN_FACTOR * duration_s * noise / margin)


# ---------------------------------------------------------------------------------------------
# Words for the figures (shared by the soak's texts)

def duration_words(seconds: float | None) -> str:
    """'45 s', '12 min', '6.5 h', '3.2 days' (None: 'never')."""
    if seconds is None or math.isinf(seconds):
        return "never"
    if seconds < 0.5:
        return "under a second"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 72 * 3600:
        hours = seconds / 3600
        return f"{hours:.1f} h" if hours < 10 else f"{hours:.0f} h"
    return f"{seconds / 86400:.1f} days"


def count_words(count: float | None) -> str:
    """'850', '12 k', '1.3 M'."""
    if count is None:
        return "n/a"
    if count < 1e4:
        return f"{count:.0f}"
    if count < 1e6:
        return f"{count / 1e3:.0f} k"
    return f"{count / 1e6:.3g} M"


def bytes_words(value: float, *, sign: bool = False) -> str:
    """'512 KiB', '2.6 GiB', '+1.4 MiB' (binary units, three figures at most)."""
    prefix = ("+" if value > 0 else "-" if value < 0 else "±") if sign else ("-" if value < 0 else "")
    size = abs(value)
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            number = size / scale
            return f"{prefix}{number:.3g} {unit}" if number < 1000 else f"{prefix}{number:.0f} {unit}"
    return f"{prefix}{size:.0f} B"
