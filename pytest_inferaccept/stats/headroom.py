"""How many times the recorded traffic a server holds within its SLOs, with a 95% interval.

The headroom scenario replays a trace at a few speed factors (0.5, 1, 1.5, 2, ...). The true
headroom h is the factor at which the first SLO limit is crossed, supposing that every limited
figure only gets worse as the traffic speeds up (latency and failures grow, throughput per
request does not). Each step's SLO rows carry their own 95% intervals, and the interval on h is
read from them without a model of the curve between the steps:

- its low end is the highest factor, counting up from the first, at which every row is
  conclusively within its limit (the row's whole interval on the good side); no such factor:
  0 (the headroom may be below the first factor tried);
- its high end is the lowest factor at which some row is conclusively beyond its limit (the
  whole interval on the bad side); none: open (the headroom may lie above the highest factor).

It misses h only when a step's row interval misses its truth on the side that matters: a step
above h read as conclusively within, or one below h read as conclusively beyond, each at most
2.5% for one row and one step near the crossing (steps far from it almost never). The seeded
simulation in tests/test_headroom_interval.py shows the coverage at or above 95% over several
curve shapes and crossings, including one on a step.

The point estimate interpolates linearly, for each row, between the last step on the good side
and the first on the bad side of its limit, and takes the lowest such crossing: a figure, not a
bound, clipped into the interval. The steps' spacing is the interval's resolution: more factors
near the crossing narrow it. Nothing here imports pytest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from pytest_inferaccept.stats.slo import judge_interval

if TYPE_CHECKING:
    from pytest_inferaccept import model


class Row(Protocol):
    """What the interval reads of one SLO row (stats.slo.SloRow has it)."""

    @property
    def key(self) -> str: ...
    @property
    def limit(self) -> float: ...
    @property
    def measured(self) -> float | None: ...
    @property
    def ci_low(self) -> float | None: ...
    @property
    def ci_high(self) -> float | None: ...
    @property
    def status(self) -> str: ...


Reading = Literal["within", "beyond", "unsure"]


@dataclass(frozen=True, kw_only=True)
class Step:
    """One speed factor's SLO rows; `usable` False for a step whose figures do not speak for the
    server (the client could not drive it): read as unsure."""

    level: float
    rows: Sequence[Row]
    usable: bool = True


@dataclass(frozen=True, kw_only=True)
class Headroom:
    """The headroom's point estimate and its interval, in factors of the recorded traffic."""

    point: float | None
    """Interpolated crossing of the first limit; None when no step's figure crossed one (above
    the highest factor) or the first already had (below the lowest)."""
    low: float
    """Conclusively held up to here (0: not even the first factor)."""
    high: float | None
    """Conclusively broken at this factor (None: no step was, the interval is open above)."""
    key: str | None
    """The SLO row whose crossing gives the point estimate (None without one)."""
    below_first: bool
    """The first factor's figures were already beyond a limit."""
    confidence: float = 0.95
    lowest: float | None = None
    """The lowest factor measured (said when the headroom lies below it)."""

    def view(self) -> model.HeadroomEstimate:
        from pytest_inferaccept import model

        return model.HeadroomEstimate(point=self.point, low=self.low, high=self.high, key=self.key,
                                      below_first=self.below_first, confidence=self.confidence,
                                      text=self.words())

    def words(self) -> str:
        """'holds 1.6× of the recorded traffic (95% interval 1.5× to 2×)' and its kin."""
        pct = f"{self.confidence:.0%}"
        if self.high is None:
            span = f"{pct} interval: at least {_x(self.low)}, no upper end measured" if self.low > 0 else \
                f"{pct} interval: not bounded by the factors measured"
        else:
            span = f"{pct} interval {_x(self.low)} to {_x(self.high)}" if self.low > 0 else \
                f"{pct} interval: below {_x(self.high)}"
        if self.point is not None:
            return f"holds {_x(self.point)} of the recorded traffic ({span})"
        if self.below_first:
            slowest = f", {_x(self.lowest)}" if self.lowest is not None else ""
            return f"holds less than the slowest factor measured{slowest} ({span})"
        return f"holds at least the fastest factor measured, {_x(self.low)} ({span})" if self.low > 0 else \
            f"headroom not settled by the factors measured ({span})"


def _x(factor: float) -> str:
    return f"{factor:.3g}×" if factor < 10 else f"{factor:.0f}×"


def _minimum(row: Row) -> bool:
    # throughput_min, request_rate_min, goodput_min: the limit is a floor
    return row.key.endswith("_min")


def read_row(row: Row) -> Reading:
    """One row against its limit: its whole interval on the good side, on the bad side, or neither."""
    if row.key == "min_samples":  # a property of the run, not of the server: only settles or does not
        return "within" if row.status == "pass" else "unsure"
    status = judge_interval(row.ci_low, row.ci_high, row.limit, minimum=_minimum(row))
    return "within" if status == "pass" else "beyond" if status == "fail" else "unsure"


def read_step(step: Step) -> Reading:
    """A step: beyond if any row is conclusively beyond; within if every row is within; else unsure."""
    if not step.usable or not step.rows:
        return "unsure"
    readings = [read_row(r) for r in step.rows]
    if "beyond" in readings:
        return "beyond"
    return "within" if all(r == "within" for r in readings) else "unsure"


def _bad_side(row: Row) -> bool | None:
    if row.measured is None or not math.isfinite(row.measured) or row.key == "min_samples":
        return None
    return row.measured < row.limit if _minimum(row) else row.measured > row.limit


def _crossings(steps: Sequence[Step]) -> tuple[float | None, str | None, bool]:
    """The lowest interpolated crossing over the rows, its key, and whether the first step was over."""
    keys = dict.fromkeys(r.key for s in steps for r in s.rows if r.key != "min_samples")
    best: tuple[float, str] | None = None
    below = False
    for key in keys:
        seen = [(s.level, r) for s in steps if s.usable for r in s.rows if r.key == key]
        previous: tuple[float, Row] | None = None
        for level, row in seen:  # in the steps' order
            bad = _bad_side(row)
            if bad is None:
                continue
            if bad:
                if previous is None:
                    below = True
                    break
                at = _between(previous, (level, row))
                if best is None or at < best[0]:
                    best = (at, key)
                break
            previous = (level, row)
    if below:
        return None, None, True
    return (best[0], best[1], False) if best is not None else (None, None, False)


def _between(good: tuple[float, Row], bad: tuple[float, Row]) -> float:
    (a, ra), (b, rb) = good, bad
    va, vb = float(ra.measured or 0.0), float(rb.measured or 0.0)
    if vb == va:
        return b
    return a + (b - a) * (ra.limit - va) / (vb - va)


def headroom(steps: Sequence[Step], *, confidence: float = 0.95) -> Headroom:
    """The headroom over factors measured in increasing order (see the module's docstring)."""
    ordered = sorted(steps, key=lambda s: s.level)
    readings = [(s.level, read_step(s)) for s in ordered]
    low = 0.0
    for level, reading in readings:
        if reading != "within":
            break
        low = level
    high = next((level for level, reading in readings if reading == "beyond" and level > low), None)
    point, key, below = _crossings(ordered)
    if point is not None:
        point = max(point, low)
        if high is not None:
            point = min(point, high)
    return Headroom(point=point, low=low, high=high, key=key, below_first=below, confidence=confidence,
                    lowest=ordered[0].level if ordered else None)
