"""The soak against its SLO: over the whole soak, window by window, and its error rate by its interval.

A soak that drifts nowhere can still miss its SLO from the start, or for a minute in the middle.
So the soak is held to the SLO three ways (docs/capacity.md, "What fails a soak"):

- over the whole soak, by the step's own SLO evaluation (stats/slo.py: every limit, its
  interval, failures counted as slower than any limit);
- window by window, for the limits a window's requests can speak to (percentiles of TTFT,
  TPOT and end-to-end latency, and the error rate): a window fails only when the share of its
  requests beyond a limit is conclusively above what the limit allows. Windows are not
  independent of each other, and twenty of them give twenty chances to be unlucky, so each is
  judged at 1 - 0.05 / m (Bonferroni over the m window-limit pairs, which holds whatever the
  dependence between windows): a server exactly at its limit throughout fails a window at most
  2.5% of the time, as it fails the whole-soak row. A window never passes on its own (a few
  requests cannot show a p95 met); the whole-soak row does that;
- its error rate by its Clopper–Pearson interval, like every error rate: above the limit even at
  the interval's low end fails, within it even at the high end passes, else not enough data.

Nothing here imports pytest.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_inferaccept.model import ErrorsCheck, SloCheck, SloWindowsCheck, WindowMiss
from pytest_inferaccept.stats.percentiles import (
    PERCENTILE_LEVELS,
    proportion_interval,
    samples_to_settle_proportion,
)
from pytest_inferaccept.stats.slo import judgement_view

if TYPE_CHECKING:
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.stats.slo import SloEvaluation

ERROR_LIMIT = 0.01
"""The error rate a soak is held to when its SLO names no `error_rate` (or it has no SLO). Only a
rate conclusively above it fails the soak: a limit nobody set asks no soak length of its own, so
an undecided one is said (with the requests that would settle it), not made INVALID."""

WINDOW_ALPHA = 0.025
"""One-sided, over all of a soak's window-limit pairs together (Bonferroni)."""

WINDOW_METRICS = ("ttft", "ttft_any", "tpot", "e2e")
"""Per-request metrics a window's share beyond a limit is counted on (ITL's unit is the answer,
a mean needs a hundred values, a maximum is the whole soak's)."""


def percent(x: float) -> str:
    """'1%', '0.5%', '2.4%'."""
    return f"{x * 100:.2g}%" if x * 100 < 10 else f"{x * 100:.0f}%"


def _seconds(x: float) -> str:
    return f"{x * 1000:.3g} ms" if x < 1 else f"{x:.3g} s"


# ---------------------------------------------------------------------------------------------
# The whole soak

def judge_slo(evaluation: SloEvaluation | None) -> SloCheck | None:
    """The step's own SLO evaluation over the whole soak as a soak check; None without an SLO."""
    if evaluation is None:
        return None
    status = evaluation.status
    failing = [row for row in evaluation.rows if row.status == "fail"]
    lead = {"pass": "met", "fail": "not met", "not_enough_data": "not judged (not enough data)"}[status]
    shown = evaluation.messages(status)
    text = f"the SLO over the whole soak: {lead}: {'; '.join(shown)}"
    answer = (f"the SLO is met over the whole soak ({', '.join(r.key for r in evaluation.rows)})"
              if status == "pass" else f"the SLO over the whole soak is {lead}: {shown[0]}" if shown
              else f"the SLO over the whole soak is {lead}")
    return SloCheck(status=status, text=text, answer=answer,
                    evaluation=judgement_view(evaluation),
                    # A failure that failed requests alone decide stands even when the client limited the run.
                    by_failures=any(row.by_failures for row in failing))


# ---------------------------------------------------------------------------------------------
# Window by window

@dataclass(frozen=True, kw_only=True)
class Window:
    """One soak window's requests: sorted values per metric (a failure as infinite), and counts."""

    start_s: float
    end_s: float
    values: Mapping[str, Sequence[float]]
    measured: int
    failed: int


@dataclass(frozen=True)
class _Limit:
    key: str
    metric: str | None
    """None: the error rate."""
    limit: float
    allowed: float
    """The share of a window's requests the limit lets beyond it."""

    def words(self) -> str:
        return percent(self.limit) if self.metric is None else _seconds(self.limit)


def _window_limits(slo: SloSpec) -> list[_Limit]:
    out = [_Limit(lim.key, lim.metric, lim.limit, round(1.0 - PERCENTILE_LEVELS[lim.stat], 12))
           for lim in slo.latency if lim.metric in WINDOW_METRICS and lim.stat in PERCENTILE_LEVELS]
    if slo.error_rate is not None and 0 < slo.error_rate < 1:
        out.append(_Limit("error_rate", None, slo.error_rate, slo.error_rate))
    return out


def _beyond(window: Window, lim: _Limit) -> tuple[int, int]:
    """(requests beyond the limit, requests judged) in one window."""
    if lim.metric is None:
        return window.failed, window.measured
    data = window.values.get(lim.metric) or ()
    return len(data) - bisect.bisect_right(data, lim.limit), len(data)


def judge_windows(windows: Sequence[Window], slo: SloSpec | None, *,
                  width_s: float) -> SloWindowsCheck | None:
    """Did any window conclusively miss the SLO? None when no limit of the SLO can be judged per window."""
    limits = _window_limits(slo) if slo is not None else []
    pairs = [(w, lim, *_beyond(w, lim)) for w in windows for lim in limits]
    pairs = [(w, lim, over, n) for w, lim, over, n in pairs if n > 0]
    if not pairs:
        return None
    each = 1.0 - 2 * WINDOW_ALPHA / len(pairs)  # two-sided confidence whose lower tail is alpha / m
    found: list[WindowMiss] = []
    worst: tuple[float, WindowMiss] | None = None
    for w, lim, over, n in pairs:
        low = proportion_interval(over, n, each)[0]
        entry = WindowMiss(start_s=round(w.start_s, 3), end_s=round(w.end_s, 3), key=lim.key, limit=lim.limit,
                           beyond=over, n=n, allowed=lim.allowed, share_low=low,
                           words=(f"{w.start_s:.0f}–{w.end_s:.0f} s: {lim.key} {over} of {n} "
                                  f"{'failed' if lim.metric is None else 'beyond ' + lim.words()} "
                                  f"({percent(over / n)}; the limit allows {percent(lim.allowed)}, "
                                  f"the share's low end is {percent(low)})"))
        if low > lim.allowed:
            found.append(entry)
        excess = over / n - lim.allowed
        if worst is None or excess > worst[0]:
            worst = (excess, entry)
    counts = sorted(w.measured for w in windows)
    typical = counts[len(counts) // 2] if counts else 0
    rule = (f"a window fails when the share of its requests beyond a limit is above what the limit allows "
            f"at {each * 100:.4g}% confidence (one-sided {WINDOW_ALPHA:.1%} over all {len(pairs)} "
            f"window-limit pairs, Bonferroni: neighbouring windows are not independent)")
    bad_windows = sorted({(e.start_s, e.end_s) for e in found})
    if found:
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        listed = "; ".join(e.words for e in found[:3]) + more
        text = (f"the SLO was conclusively missed in {len(bad_windows)} of {len(windows)} windows of "
                f"{width_s:g} s: {listed} ({rule})")
        answer = f"the SLO was missed in {len(bad_windows)} of {len(windows)} windows ({found[0].words})"
    else:
        seen = f"; the worst: {worst[1].words}" if worst is not None and worst[1].beyond else ""
        text = (f"no {width_s:g} s window conclusively missed the SLO ({len(windows)} windows of about "
                f"{typical} requests; {rule}){seen}")
        answer = f"no window conclusively missed the SLO ({len(windows)} windows of {width_s:g} s)"
    return SloWindowsCheck(status="fail" if found else "pass", text=text, answer=answer, windows=len(windows),
                           window_s=width_s, pairs=len(pairs), confidence_each=each, failing=found,
                           worst=worst[1] if worst is not None else None,
                           by_failures=any(e.key == "error_rate" for e in found))


# ---------------------------------------------------------------------------------------------
# The error rate

def judge_errors(failed_at: Sequence[float], measured: int, *, slo_limit: float | None, first: str = "",
                 confidence: float = 0.95) -> ErrorsCheck:
    """The soak's error rate by its Clopper–Pearson interval, against the SLO's error_rate or ERROR_LIMIT.

    `failed_at` holds the seconds into the soak of each failed request, `first` what the first one
    was. The check's `decides` says whether "not enough data" stands in the verdict (a limit the
    SLO set) or is only said (ERROR_LIMIT, which only fails).
    """
    given = slo_limit is not None
    limit = slo_limit if slo_limit is not None else ERROR_LIMIT
    k = len(failed_at)
    onset = min(failed_at) if failed_at else None
    source = ("the SLO's error_rate" if given
              else "the soak's default error limit (the SLO names no error_rate)")
    base = ErrorsCheck(status="not_enough_data", error_rate=k / measured if measured else None, limit=limit,
                       limit_source="slo" if given else "default", failed=k, measured=measured, onset_s=onset,
                       confidence=confidence, decides=given)
    if not measured:
        return base.model_copy(update={"text": "errors not judged: no measured request",
                                       "answer": "errors not judged (no measured request)", "ci_low": None,
                                       "ci_high": None})
    low, high = proportion_interval(k, measured, confidence)
    status = "fail" if low > limit else "pass" if high <= limit else "not_enough_data"
    counted = (f"{k} of {measured} failed ({percent(k / measured)}; {confidence:.0%} CI "
               f"{percent(low)}–{percent(high)})") if k else (
               f"no request failed (0 of {measured}; {confidence:.0%} CI 0–{percent(high)})")
    needed = None
    if status == "fail":
        judged = f"above {source} of {percent(limit)} even at the low end of its interval"
    elif status == "pass":
        judged = f"within {source} of {percent(limit)} even at the high end of its interval"
    else:
        needed = samples_to_settle_proportion(k / measured, limit, confidence)
        settle = (f"about {max(needed, measured + 1)} measured requests would settle it" if needed is not None
                  else "the rate sits at the limit, so more requests may not settle it")
        judged = f"not enough data against {source} of {percent(limit)}: the interval straddles it; {settle}"
        if not given:
            judged += " (a limit the SLO did not set fails the soak only when conclusively exceeded)"
    when = f"; the first {onset:.1f} s into the soak ({first})" if onset is not None and first else ""
    said = {"pass": f"within {percent(limit)}", "fail": f"above {percent(limit)}",
            "not_enough_data": f"not shown within {percent(limit)}"}[status]
    answer = (f"no request failed (0 of {measured}; {confidence:.0%} CI up to {percent(high)}: {said})"
              if not k else f"errors {percent(k / measured)} of {measured} "
                            f"({confidence:.0%} CI {percent(low)}–{percent(high)}: {said})")
    return base.model_copy(update={"status": status, "text": f"{counted}: {judged}{when}", "answer": answer,
                                   "ci_low": low, "ci_high": high, "needed_n": needed})
