"""The soak's checks in production terms: memory and latency drift as rates, projected and judged.

Each check takes one series (memory samples, or per-request latencies) and says what it does
per request and per hour at the soak's traffic, where it leads over the horizon the team states
(`--soak-horizon`) with its interval, when it would reach its limit (a share of the memory the
server has, the SLO's latency limit), and whether it fills and levels off (a cache) rather than
growing steadily (a leak). The maths is in stats/projection.py; this module words it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import median
from typing import TYPE_CHECKING

from pytest_inferaccept.model import (
    DriftCheck,
    DriftProjection,
    DriftRate,
    GrowthShape,
    Horizon,
    MemoryBudget,
    SoakPlan,
    SoakSlope,
)
from pytest_inferaccept.stats.projection import (
    Horizon as HorizonSpec,
)
from pytest_inferaccept.stats.projection import (
    Projection,
    Shape,
    Slope,
    bytes_words,
    count_words,
    duration_words,
    horizon_view,
    projection_view,
    shape_of,
    shape_view,
    slope_of,
    slope_view,
    soak_needed,
)
from pytest_inferaccept.stats.trend import MIN_POINTS, trend, trend_view, windows

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler

Points = Sequence[tuple[float, float]]
Words = Callable[[float], str]


@dataclass(frozen=True, kw_only=True)
class Capacity:
    """The memory a series may grow into: its size, the share growth may use, and where it came from."""

    total: float
    share: float
    source: str

    @property
    def budget(self) -> float:
        """The level growth must not reach."""
        return self.total * self.share

    def words(self) -> str:
        """'90% of its 24 GiB (--memory-limit)'."""
        whole = "all" if self.share >= 1 else f"{self.share:.0%}"
        return f"{whole} of its {bytes_words(self.total)} ({self.source})"

    def budget_of(self) -> MemoryBudget:
        """The budget as the soak's memory check keeps it."""
        return MemoryBudget(total=self.total, share=self.share, source=self.source, budget=self.budget)


@dataclass(frozen=True, kw_only=True)
class Traffic:
    """What the soak's projections are carried over: its request rate, its length, the horizon."""

    request_rate: float | None
    duration_s: float
    horizon: HorizonSpec
    alpha: float = 0.01

    @property
    def horizon_s(self) -> float | None:
        """The horizon in seconds of traffic at the soak's rate."""
        return self.horizon.seconds_at(self.request_rate)

    def horizon_words(self) -> str:
        """'24 h of this traffic (1.3 M requests at 15.2 requests/s)'."""
        return self.horizon.describe(self.request_rate)


def _signed_bytes(value: float) -> str:
    return bytes_words(value, sign=True)


def _ms(seconds: float, *, sign: bool = False) -> str:
    prefix = ("+" if seconds > 0 else "-" if seconds < 0 else "±") if sign else ("-" if seconds < 0 else "")
    size = abs(seconds)
    if size >= 1:
        return f"{prefix}{size:.3g} s" if size < 1000 else f"{prefix}{size:.0f} s"
    return f"{prefix}{size * 1000:.3g} ms"


def _signed_ms(seconds: float) -> str:
    return _ms(seconds, sign=True)


def _ci(low: float, high: float, fmt: Words, confidence: float) -> str:
    return f"{confidence:.0%} CI {fmt(low)} to {fmt(high)}"


def _growth(p: Projection, fmt: Words, horizon: str) -> str:
    """'+2.6 GiB (95% CI +2.4 GiB to +2.8 GiB) in 24 h of this traffic': the growth over the horizon.

    A falling series is not projected (a latency or a memory cannot fall for ever): only the
    upper end of its interval is given, as the most it may grow.
    """
    s = p.slope
    if s.per_s < 0:
        top = p.growth(s.high)
        return (f"no growth to project in {horizon}" if top <= 0 else
                f"at most {fmt(top)} in {horizon} (the upper end of its {s.confidence:.0%} CI)")
    interval = _ci(p.growth(s.low), p.growth(s.high), fmt, s.confidence)
    return f"{fmt(p.growth(s.per_s))} ({interval}) in {horizon}"


def _verb(slope: Slope, rising: str) -> str:
    """`rising` when even the judging bound grows, 'falls' when the whole interval falls, else 'stable'."""
    return rising if slope.floor > 0 else "falls" if slope.high < 0 else "stable"


def _time_ci(p: Projection) -> str:
    """The interval of the time to the limit: a faster rate gets there sooner."""
    s = p.slope
    return (f"{s.confidence:.0%} CI {duration_words(p.time_to_limit(s.high))} to "
            f"{duration_words(p.time_to_limit(s.low))}")


def _not_surely(p: Projection, traffic: Traffic, fmt: Words, owner: str) -> str:
    """Why a projection that would reach its limit is no finding: its judging bound would not."""
    return (f"not surely within the horizon: at the low end of {owner} {1 - traffic.alpha:.0%} interval "
            f"({fmt(p.growth(p.slope.floor))} over the horizon) it would not")


def _never(seconds: float | None) -> float:
    return float("inf") if seconds is None else seconds


def _thirds(shape: Shape, fmt: Words) -> str:
    """'+10.8 MiB/s over its first 5 s, ±0 B/s (95% CI ...) over its last third'."""
    assert shape.first is not None and shape.last is not None
    last = shape.last
    a, b = shape.first_span or (0.0, 0.0)
    early = (f"its first {duration_words(b)}" if a == 0
             else f"{duration_words(a)} to {duration_words(b)} into it")
    return (f"{fmt(shape.first.per_s)} over {early}, {fmt(last.per_s)} "
            f"({_ci(last.low, last.high, fmt, last.confidence)}) over its last third")


def _chosen(whole: Slope, shape: Shape) -> Slope:
    """The rate to project: the last third's when the growth slowed, else the whole soak's."""
    return shape.last if shape.kind != "steady" and shape.last is not None else whole


def slope_of_soak(slope: Slope) -> SoakSlope:
    """A fitted slope as the soak's checks keep it."""
    return slope_view(slope)


def shape_kept(shape: Shape) -> GrowthShape:
    """How a series grew, as the soak's checks keep it."""
    return shape_view(shape)


def _rate(chosen: Slope, whole: Slope, per: float | None, by_request: Slope | None) -> DriftRate:
    """The projected rate per second, per hour and per request: fitted against the requests finished
    (`by_request`) when they were counted, else the rate per second over the request rate `per`."""
    basis = "whole_soak" if chosen is whole else "last_third"
    rate = DriftRate(slope=slope_of_soak(chosen), basis=basis, per_hour=chosen.per_s * 3600,
                     per_hour_low=chosen.low * 3600, per_hour_high=chosen.high * 3600)
    if by_request is not None:
        rate = rate.model_copy(update={"per_request": by_request.per_s, "per_request_low": by_request.low,
                                       "per_request_high": by_request.high,
                                       "per_request_basis": "finished_requests"})
    elif per:
        rate = rate.model_copy(update={"per_request": chosen.per_s / per, "per_request_low": chosen.low / per,
                                       "per_request_high": chosen.high / per,
                                       "per_request_basis": "request_rate"})
    return rate


def _projection(p: Projection, limit_words: str) -> DriftProjection:
    """Where the drift leads over the horizon, with its limit in words."""
    return projection_view(p, limit_words)


def _horizon(traffic: Traffic) -> Horizon:
    return horizon_view(traffic.horizon)


Counted = list[tuple[float, float, float]]
"""(seconds, requests finished by then, value) per point, in time order."""


def _counted(points: Points, finished: Sequence[int] | None) -> Counted | None:
    """The points with the requests finished at each; None when those were not counted."""
    if finished is None or len(finished) != len(points):
        return None
    return sorted((t, float(n), v) for (t, v), n in zip(points, finished, strict=True))


def _memory_shape(points: Points, counted: Counted | None, alpha: float) -> Shape:
    """How memory grew over the soak; growth that slowed only because the traffic slowed is steady.

    With the requests finished counted at each point, the slowing must show against them too: a
    leak of so much per request grows more slowly per second whenever fewer requests finish (a
    loaded client, a server that slows), which is no cache filling up."""
    shape = shape_of(points, alpha=alpha)
    if shape.kind == "steady" or counted is None:
        return shape
    if shape_of([(n, v) for _, n, v in counted], alpha=alpha).kind != "steady":
        return shape
    return shape.steady()


def _by_request(counted: Counted | None, chosen: Slope, whole: Slope, window_s: float,
                rate: float | None, alpha: float, slack: int = 0) -> Slope | None:
    """Growth per request: the memory against the requests finished at each sample, over the part of
    the soak `chosen` covers (the whole, or its last third); None when they were not counted.

    Dividing the rate per second by the soak's mean request rate assumes the two were measured over
    the same span at a steady rate; a rate that varies (a loaded client, a server that slows) skews
    that quotient beyond its interval, while the fit against counts holds.

    The count at a sample is known only to within `slack` requests (those in flight: the server may
    have finished them before the client saw their last byte, and the scrape took time), so the
    interval widens by what an error of that many requests across the fitted span can do to the
    slope (without it, a leak of exactly 4 KiB a request was once placed 0.03% outside a narrow
    interval on a loaded machine)."""
    if counted is None or not rate:
        return None
    if chosen is not whole:
        t0, t1 = counted[0][0], counted[-1][0]
        counted = [c for c in counted if c[0] >= t1 - (t1 - t0) / 3]
    fitted = slope_of([(n, v) for _, n, v in counted], window_s=window_s * rate, alpha=alpha)
    span = counted[-1][1] - counted[0][1] if counted else 0.0
    if fitted is None or slack <= 0 or span <= 0:
        return fitted
    widen = abs(fitted.per_s) * slack / span
    return replace(fitted, low=fitted.low - widen, high=fitted.high + widen)


def _not_judged(what: str, n: int, base: DriftCheck) -> DriftCheck:
    return base.model_copy(update={"status": "not_enough_data",
                                   "text": f"{what}: not enough windows to judge drift ({n})",
                                   "answer": f"{what} not judged (too few windows)"})


def judge_memory(points: Points, *, what: str, window_s: float, traffic: Traffic,
                 capacity: Capacity | None, tolerance: float, source: str,
                 name: str = "memory", finished: Sequence[int] | None = None,
                 in_flight: int = 0) -> DriftCheck:
    """The memory check: growth per request and per hour, projected to the horizon, against the budget.

    `what` names the series in the check's text, `name` in its short answer. `finished`, one per
    point, counts the requests the server had finished by then: growth per request is fitted
    against it (see `_by_request`), each count known to within `in_flight` requests.

    Without a known capacity, the limit is the memory at the start of the soak × (1 + tolerance)
    (tolerance 1.0: it would double within the horizon).
    """
    tr = trend(points, window_s=window_s)
    base = DriftCheck(status="not_enough_data", source=source, trend=trend_view(tr),
                      tolerance=tolerance, alpha=traffic.alpha, horizon=_horizon(traffic),
                      capacity=capacity.budget_of() if capacity is not None else None)
    whole = slope_of(points, window_s=window_s, alpha=traffic.alpha)
    horizon_s = traffic.horizon_s
    if whole is None or horizon_s is None:
        return _not_judged(what, tr.n, base)
    counted = _counted(points, finished)
    shape = _memory_shape(points, counted, traffic.alpha)
    chosen = _chosen(whole, shape)
    if capacity is not None:
        limit, limit_words = capacity.budget, capacity.words()
    else:
        limit = whole.start * (1 + tolerance)
        limit_words = (f"{1 + tolerance:g}× its {bytes_words(whole.start)} at the start of the soak "
                       "(no memory budget known: give --memory-limit)")
    p = Projection(slope=chosen, horizon_s=horizon_s, level=chosen.end, limit=limit)
    rate = traffic.request_rate
    by_request = _by_request(counted, chosen, whole, window_s, rate, traffic.alpha, in_flight)

    def per_request(v: float) -> str:
        return _signed_bytes(v / rate) if rate else "n/a"

    def per_s(v: float) -> str:
        return f"{_signed_bytes(v)}/s"

    if by_request is not None:
        each = _signed_bytes(by_request.per_s)
        interval = _ci(by_request.low, by_request.high, _signed_bytes, by_request.confidence)
    else:
        each = per_request(chosen.per_s)
        interval = _ci(chosen.low, chosen.high, per_request, chosen.confidence)
    rates = (f"{each} per request ({interval}), "
             f"{_signed_bytes(chosen.per_s * 3600)}/h" + (f" at {rate:.3g} requests/s" if rate else ""))
    growth = _growth(p, _signed_bytes, traffic.horizon_words())
    reach = p.time_to_limit(chosen.per_s)
    requests = f"; {count_words(reach * rate)} requests" if reach is not None and rate else ""
    reaches = (f"reaches {limit_words} after about {duration_words(reach)} of this traffic "
               f"({_time_ci(p)}{requests})")
    which = "this rate" if chosen is whole else "the last third's rate"
    room = p.headroom or 0.0
    shape_words = ""
    if shape.kind == "levels_off":
        first = min(whole.start, shape.first.start) if shape.first is not None else whole.start
        shape_words = (f"fills to about {bytes_words(chosen.end)} ({_signed_bytes(chosen.end - first)}) and "
                       f"levels off ({_thirds(shape, per_s)}): as a cache fills, not as a leak grows")
    elif shape.kind == "slowing":
        shape_words = (f"grows more slowly as the soak goes on ({_thirds(shape, per_s)}): a cache still "
                       "filling, or a leak that slows")
    rising = chosen.floor > 0
    if p.crosses:
        status = "fail"
        text = (f"{what} {shape_words + '; ' if shape_words else 'grows '}{rates}: {growth}; at {which} the "
                f"server {reaches}, within the horizon even at the low end of the growth's "
                f"{1 - traffic.alpha:.0%} interval ({_signed_bytes(p.growth(chosen.floor))})")
        if shape.kind == "steady":
            # The soak cannot see a cap it has not reached: say so, and what would show it.
            text += (f"; still growing at the end of the {duration_words(traffic.duration_s)} soak: a leak, "
                     "or a cache that fills beyond what this soak saw (a cache with a cap under the budget "
                     "would level off in a longer soak, and pass)")
        answer = f"at {which} the server {reaches}"
    elif shape.kind == "levels_off":
        status = "pass"
        text = f"{what} {shape_words}; {rates}: {growth}"
        answer = f"{name} fills to about {bytes_words(chosen.end)} and levels off"
    else:
        status = "pass"
        verb = shape_words or _verb(chosen, "grows steadily")
        unsure = _not_surely(p, traffic, _signed_bytes, "the growth's")
        beyond = (f"at {which} it {reaches}; {unsure}"
                  if reach is not None and room > 0 else f"within {limit_words}")
        text = f"{what} {verb}: {rates}: {growth}; {beyond}"
        if rising and shape.kind == "steady" and room > 0 and reach is not None:
            text += (f"; still growing at the end of the {duration_words(traffic.duration_s)} soak: a leak, "
                     f"or a cache still filling (one that fits in the budget levels off within "
                     f"{_signed_bytes(room)}, which at this rate takes about {duration_words(reach)}: a soak "
                     "that long would tell)")
        answer = f"{name} {_verb(chosen, 'grows')}: {growth}"
        if reach is not None and room > 0:
            answer += f"; at {which} it {reaches}"
    return base.model_copy(update={"status": status, "text": text, "answer": answer,
                                   "shape": shape_kept(shape),
                                   "rate": _rate(chosen, whole, rate, by_request),
                                   "projection": _projection(p, limit_words),
                                   "plan": _plan(whole, shape, p, traffic)})


def judge_latency(points: Points, *, what: str, metric: str, window_s: float, traffic: Traffic,
                  limits: Sequence[tuple[str, float, float]], tolerance: float) -> DriftCheck:
    """A latency check: drift in ms per hour and over the soak, projected; when would it cross the SLO?

    `limits` are the SLO's limits on this metric as (key, limit s, the soak's value of that
    statistic s). The statistic is projected by the drift of the window medians (the whole
    distribution shifts). Without one, the limit is the start × (1 + tolerance).
    """
    tr = trend(points, window_s=window_s)
    base = DriftCheck(status="not_enough_data", trend=trend_view(tr), tolerance=tolerance,
                      alpha=traffic.alpha, horizon=_horizon(traffic))
    whole = slope_of(points, window_s=window_s, alpha=traffic.alpha)
    horizon_s = traffic.horizon_s
    if whole is None or horizon_s is None:
        return _not_judged(what, tr.n, base)
    shape = shape_of(points, alpha=traffic.alpha)
    chosen = _chosen(whole, shape)
    centre = median(v for _, v in windows(points, window_s))
    candidates: list[tuple[str, Projection]] = [
        # The soak-wide statistic stands for the middle of the soak: carry it to the end.
        (f"{what} {key.rsplit('_', 1)[-1]} would cross its SLO of {_ms(limit)}",
         Projection(slope=chosen, horizon_s=horizon_s, level=value + chosen.end - centre, limit=limit))
        for key, limit, value in limits]
    if not candidates:
        relative = whole.start * (1 + tolerance)
        candidates.append((f"{what} would reach {1 + tolerance:g}× its start ({_ms(relative)}; no SLO on it)",
                           Projection(slope=chosen, horizon_s=horizon_s, level=chosen.end, limit=relative)))
    # The limit reached first decides, a crossing one before any other.
    label, p = min(candidates, key=lambda c: (not c[1].crosses, _never(c[1].time_to_limit(chosen.per_s))))
    start = whole.start if whole.start > 0 else None
    moved = _moved(chosen, whole, start)

    def hourly(v: float) -> str:
        return f"{_signed_ms(v * 3600)}/h"

    interval = _ci(chosen.low, chosen.high, hourly, chosen.confidence)
    rates = f"{moved}, {_per_hour(chosen, start)}, {interval}"
    growth = _growth(p, _signed_ms, traffic.horizon_words())
    reach = p.time_to_limit(chosen.per_s)
    when = f"{label} after about {duration_words(reach)} of this traffic ({_time_ci(p)})"
    which = "this rate" if chosen is whole else "the last third's rate"
    shape_words = ""
    if shape.kind == "levels_off":
        shape_words = f"rises to about {_ms(chosen.end)} and levels off ({_thirds(shape, hourly)})"
    elif shape.kind == "slowing":
        shape_words = f"rises more slowly as the soak goes on ({_thirds(shape, hourly)})"
    if p.crosses:
        status = "fail"
        text = (f"{what} {shape_words + '; ' if shape_words else 'drifts '}{rates}: {growth}; at {which}, "
                f"{when}, within the horizon even at the low end of its {1 - traffic.alpha:.0%} interval")
        answer = f"at {which}, {when}"
    else:
        status = "pass"
        verb = shape_words or _verb(chosen, "drifts")
        tail = (f"; at {which}, {when}; {_not_surely(p, traffic, _signed_ms, 'its')}"
                if reach is not None and (p.headroom or 0) > 0 else "")
        text = f"{what} {verb}: {rates}: {growth}{tail}"
        short = "levels off" if shape.kind == "levels_off" else _verb(chosen, "drifts")
        answer = f"{what} {short} ({moved}; {interval})"
    change = chosen.per_s * chosen.span_s
    rate = _rate(chosen, whole, None, None).model_copy(update={
        "change": change, "relative_change": change / start if start else None,
        # A relative rate per hour from a shorter span is an extrapolation of a ratio: kept only when
        # the span it was measured over is at least the hour it speaks of.
        "relative_per_hour": (chosen.per_s * 3600 / start
                              if start and chosen.span_s >= RELATIVE_RATE_MIN_SPAN_S else None)})
    # Planning needs a limit the team set: the SLO (the relative fallback is no budget to plan for).
    plan = _plan(whole, shape, p, traffic) if limits else None
    return base.model_copy(update={"status": status, "text": text, "answer": answer,
                                   "shape": shape_kept(shape),
                                   "rate": rate, "projection": _projection(p, label), "plan": plan})


def judge_tail(points: Points, *, what: str, window_s: float, level: float, least: int, traffic: Traffic,
               limits: Sequence[tuple[str, float, float]], tolerance: float) -> DriftCheck:
    """The drift of a latency's tail against its median: each window's p95 (or p90) over its median.

    A tail can triple while the median stays put (a queue some requests wait in, a batch that
    stalls the unlucky), which the window medians cannot see. The tail is read against the median
    of the same window: load that swings slowly moves both together, and the ratio leaves that
    shared wander out (on the absolute p95, those swings made a stable tail drift about 1% of the
    time; docs/capacity.md has the simulation). A shift of the whole distribution is the median
    check's. `limits` are the SLO's tail limits on the metric as (key, limit s, the soak's value of
    that statistic s): the ratio at which that statistic would reach its limit is the ratio's
    limit. Without one, the ratio's start × (1 + tolerance). Windows with fewer than `least`
    answers are left out.
    """
    stat = f"p{level * 100:.0f}"
    tails = windows(points, window_s, level=level, least=least)
    medians = dict(windows(points, window_s, least=least))
    series = [(t, v / medians[t]) for t, v in tails if medians.get(t, 0.0) > 0]
    name = f"{what} {stat} over its median per {window_s:g} s window"
    tr = trend(series)
    base = DriftCheck(status="not_enough_data", trend=trend_view(tr), tolerance=tolerance,
                      alpha=traffic.alpha, horizon=_horizon(traffic), level=level, window_s=window_s,
                      basis="ratio_to_median")
    whole = slope_of(series, alpha=traffic.alpha)
    horizon_s = traffic.horizon_s
    if whole is None or horizon_s is None:
        return _not_judged(f"{what} tail", tr.n, base)
    shape = shape_of(series, alpha=traffic.alpha)
    chosen = _chosen(whole, shape)
    centre = median(v for _, v in series)
    candidates: list[tuple[str, Projection]] = [
        # The soak-wide statistic stands for the middle of the soak, at the ratio the windows had then.
        (f"{what} {key.rsplit('_', 1)[-1]} would cross its SLO of {_ms(limit)}",
         Projection(slope=chosen, horizon_s=horizon_s, level=chosen.end, limit=centre * limit / value))
        for key, limit, value in limits if value > 0]
    if not candidates:
        relative = whole.start * (1 + tolerance)
        candidates.append((f"{what} {stat} would reach {relative:.3g}× its median ({1 + tolerance:g}× its "
                           f"start; no SLO on it)",
                           Projection(slope=chosen, horizon_s=horizon_s, level=chosen.end, limit=relative)))
    label, p = min(candidates, key=lambda c: (not c[1].crosses, _never(c[1].time_to_limit(chosen.per_s))))

    def times(v: float) -> str:
        return f"{v:+.3g}×"

    span = chosen.span_s
    over = "the soak's" if chosen is whole else "its last third's"
    start = chosen.start
    moved = f"from {start:.3g}× to {chosen.end:.3g}× its median over {over} {duration_words(span)}"
    share = f"{(chosen.end - start) / start:+.0%}; " if start > 0 else ""
    interval = f"{share}change {_ci(chosen.low * span, chosen.high * span, times, chosen.confidence)}"
    reach = p.time_to_limit(chosen.per_s)
    when = (f"{label}: already so at the end of the soak" if reach == 0 else
            f"{label} after about {duration_words(reach)} of this traffic ({_time_ci(p)})")
    which = "this rate" if chosen is whole else "the last third's rate"
    if p.crosses:
        status = "fail"
        text = (f"{name} rises {moved} ({interval}); at {which}, {when}, within the horizon even at the low "
                f"end of its {1 - traffic.alpha:.0%} interval")
        answer = f"{what} tail: at {which}, {when}"
    else:
        status = "pass"
        unsure = (f"; at {which}, {when}; not surely within the horizon: at the low end of its "
                  f"{1 - traffic.alpha:.0%} interval it would not"
                  if reach is not None and (p.headroom or 0) > 0 else "")
        text = f"{name} {_verb(chosen, 'rises')}: {moved} ({interval}){unsure}"
        answer = f"{what} tail ({stat}) {_verb(chosen, 'rises')} against its median ({moved})"
    change = chosen.per_s * span
    rate = _rate(chosen, whole, None, None).model_copy(update={
        "change": change, "relative_change": change / start if start > 0 else None})
    plan = _plan(whole, shape, p, traffic) if limits else None
    return base.model_copy(update={"status": status, "text": text, "answer": answer,
                                   "shape": shape_kept(shape),
                                   "rate": rate, "projection": _projection(p, label), "plan": plan})


TAIL_LEAST = 10
"""Fewer answers than this in a tail window on average and the tail is not judged: a window's p90
needs a few values above it to be more than its largest."""


def tail_windows(answers: int, duration_s: float, window_s: float) -> tuple[float, float, int] | None:
    """(window width s, level, least answers a window) for the tail drift; None with too few answers.

    The tail is each window's p95 when the windows hold 40 answers or more on average, else its p90;
    with fewer than 20 answers a window, the soak is cut into fewer, wider windows (8 at least, the
    trend test's minimum) so that each holds about 20. Windows with under half the average (the
    soak's last, part-filled one) are left out: their quantile is their largest value.
    """
    count = min(max(1, round(duration_s / window_s)), max(MIN_POINTS, answers // 20))
    per = answers / count
    if per < TAIL_LEAST:
        return None
    return duration_s / count, (0.95 if per >= 40 else 0.9), max(TAIL_LEAST // 2, int(per / 2))


RELATIVE_RATE_MIN_SPAN_S = 3600.0
"""A drift's rate is said relative to its start per hour only when measured over at least an hour;
from a shorter soak the change over what was observed is said instead (a 1-minute wobble of -5%
reads -310%/h as a rate per hour, which says nothing)."""


def _moved(chosen: Slope, whole: Slope, start: float | None) -> str:
    """'-2.9 ms over the soak's 57 s, -3.1% of its start': the fitted change over what was observed."""
    change = chosen.per_s * chosen.span_s
    over = "the soak's" if chosen is whole else "its last third's"
    share = f", {change / start:+.1%} of its start" if start else ""
    return f"{_signed_ms(change)} over {over} {duration_words(chosen.span_s)}{share}"


def _per_hour(chosen: Slope, start: float | None) -> str:
    """'+120 ms/h', with the relative rate only when the span observed reaches an hour."""
    absolute = f"{_signed_ms(chosen.per_s * 3600)}/h"
    if start and chosen.span_s >= RELATIVE_RATE_MIN_SPAN_S:
        return f"{absolute} ({chosen.per_s * 3600 / start:+.1%}/h)"
    return absolute


def gpu_memory_check(sampler: Sampler, t0: float, t1: float, *, window_s: float, traffic: Traffic,
                     tolerance: float) -> DriftCheck | None:
    """GPU memory growth against the GPU's whole memory (frameworks reserve most of it up front by design).

    None without GPU memory telemetry; with several GPUs, the one that fails (else grows fastest).
    """
    found: list[DriftCheck] = []
    for name, used in sampler.series.items():
        if not (name.startswith("gpu") and name.endswith("_memory_bytes")) or name.endswith("_total_bytes"):
            continue
        index = name[3:-len("_memory_bytes")]
        total = sampler.series.get(f"gpu{index}_memory_total_bytes")
        pts = [(t - t0, v) for t, v in used.points if t0 <= t <= t1 + 1]
        if total is None or not total.points or len(pts) < 2:
            continue
        capacity = Capacity(total=max(v for _, v in total.points), share=1.0, source="the GPU's total")
        check = judge_memory(pts, what=f"GPU {index} memory ({used.source})", window_s=window_s,
                             traffic=traffic, capacity=capacity, tolerance=tolerance, source=used.source,
                             name=f"GPU {index} memory")
        found.append(check.model_copy(update={"gpu": index}))
    if not found:
        return None

    def rank(check: DriftCheck) -> tuple[bool, float]:
        return check.status == "fail", float(check.rate.slope.per_s if check.rate is not None else 0.0)

    return max(found, key=rank)


def _plan(whole: Slope, shape: Shape, p: Projection, traffic: Traffic) -> SoakPlan | None:
    """How long a soak finds growth that uses the headroom within half the horizon (95% of the time).

    The noise to plan with is the whole soak's; when growth levelled off or slowed, the larger of
    its middle and last thirds' (around a line through the whole soak, the bend itself would count
    as noise; the last third alone is chosen for being flat, so it understates the noise).
    """
    room = p.headroom
    if room is None or room <= 0:
        return None
    parts = [(whole, traffic.duration_s)]
    if shape.kind != "steady" and shape.last is not None and shape.middle is not None:
        parts = [(shape.last, traffic.duration_s / 3), (shape.middle, traffic.duration_s / 3)]
    needs = [soak_needed(noise, headroom=room, horizon_s=p.horizon_s, duration_s=length)
             for noise, length in parts]
    needed = max((n for n in needs if n is not None), default=None)
    if needed is None:
        return None
    return SoakPlan(soak_needed_s=needed, duration_s=traffic.duration_s, short=traffic.duration_s < needed)
