"""Judge a LoadSummary against the limits of an `slo` marker, one row per limit.

A limit passes only when the whole confidence interval is on its good side, fails when the
whole interval is on its bad side, and otherwise has not enough data (docs/statistics.md).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pytest_inferaccept.stats.clustered import clustered_min_answers, clustered_quantile_estimate
from pytest_inferaccept.stats.percentiles import (
    MEAN_MIN_SAMPLES,
    PERCENTILE_LEVELS,
    Estimate,
    min_sample_size,
    proportion_estimate,
    quantile_estimate,
    samples_to_settle_mean,
    samples_to_settle_proportion,
    samples_to_settle_quantile,
)
from pytest_inferaccept.stats.plan import point_floor as point_floor
from pytest_inferaccept.stats.plan import proportion_point_floor as proportion_point_floor
from pytest_inferaccept.stats.plan import requests_to_pass as requests_to_pass
from pytest_inferaccept.stats.summary import censored_answer_mean, censored_mean, meets, per_request_limits

if TYPE_CHECKING:
    from pytest_inferaccept import model
    from pytest_inferaccept.markers import LatencyLimit, SloSpec
    from pytest_inferaccept.stats.summary import LoadSummary

Status = Literal["pass", "fail", "not_enough_data"]
CLIENT_CLOCKED: tuple[str, ...] = ("timeout", "stall", "cancelled")
"""Failure classes the client's own clock decides (its watchdog, the run's own end): a client that ran
late itself can cause them, so they are never the server's conclusive failures then
(docs/statistics.md, "The verdict")."""
Basis = Literal["interval", "point_estimate"]


@dataclass(frozen=True, kw_only=True)
class SloRow:
    """The verdict on one limit, with the evidence behind it."""

    key: str
    limit: float
    measured: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    """Samples behind the estimate: latency values (ITL: gaps), else measured requests."""
    margin: float | None
    """Headroom as a fraction of the limit: positive on the good side, negative on the bad."""
    status: Status
    basis: Basis
    method: str
    needed_n: int | None
    """With not_enough_data: about how many measured requests would settle the row (None: unknown)."""
    min_n: int | None
    """Latency rows: the statistic's own minimum sample (percentile table, 100 for a mean, 1 for a max),
    reported even where the SLO's min_samples replaces it."""
    message: str
    by_failures: bool = False
    """A failing row that failed requests alone decide: the interval's near end is a failure (or
    the row is an error rate). No client limit can explain it away: failures are the server's."""
    early_stopping: str = ""
    """Tail percentiles (p90 and up): the same sample under MLPerf's early-stopping rule."""

def overall(statuses: Sequence[Status]) -> Status:
    """fail if anything failed, else not_enough_data if anything lacked data, else pass."""
    if "fail" in statuses:
        return "fail"
    return "not_enough_data" if "not_enough_data" in statuses else "pass"


@dataclass(frozen=True, kw_only=True)
class SloEvaluation:
    """Every limit of one SLO judged against one load run."""

    status: Status
    rows: tuple[SloRow, ...]
    confidence: float
    point_estimate: bool

    def messages(self, status: Status = "fail") -> list[str]:
        """The messages of the rows with this status."""
        return [row.message for row in self.rows if row.status == status]

def judgement_view(evaluation: SloEvaluation) -> model.SloJudgement:
    """What the results document writes of an evaluation: its status and every row, in the run model."""
    from pytest_inferaccept import model

    return model.SloJudgement(
        status=evaluation.status, confidence=evaluation.confidence, point_estimate=evaluation.point_estimate,
        rows=[model.SloRow(key=r.key, limit=r.limit, measured=r.measured, ci_low=r.ci_low, ci_high=r.ci_high,
                           n=r.n, margin=r.margin, status=r.status, basis=r.basis, method=r.method,
                           needed_n=r.needed_n, min_n=r.min_n, message=r.message, by_failures=r.by_failures,
                           early_stopping=r.early_stopping)
              for r in evaluation.rows])


@dataclass(frozen=True, kw_only=True)
class RunsEvaluation:
    """One SLO judged against every load run of a test; the worst run decides."""

    status: Status
    runs: tuple[SloEvaluation, ...]

    def messages(self, status: Status = "fail") -> list[str]:
        """The messages of the rows with this status, prefixed with their run when there are several."""
        if not self.runs:
            return ["the test ran no load, so none of its SLO limits could be judged"] \
                if status == "not_enough_data" else []
        many = len(self.runs) > 1
        return [f"run {i} of {len(self.runs)}: {m}" if many else m
                for i, run in enumerate(self.runs, 1) for m in run.messages(status)]


# ---------------------------------------------------------------------------------- formatting

@dataclass(frozen=True)
class _Unit:
    scale: float
    decimals: int
    suffix: str
    ci_suffix: str = ""


_SECONDS = _Unit(1.0, 2, " s")
_MILLISECONDS = _Unit(1000.0, 1, " ms")  # below 0.1 s two decimals of a second say too little
_PERCENT = _Unit(100.0, 1, "%", "%")
_TOKENS = _Unit(1.0, 1, " tokens/s")
_REQUESTS = _Unit(1.0, 2, " requests/s")


def _latency_unit(limit: float, measured: float | None = None) -> _Unit:
    # milliseconds when either side is small: "2.6 ms <= 500.0 ms", never "0.00 s <= 0.50 s"
    smallest = limit if measured is None else min(limit, measured)
    return _MILLISECONDS if smallest < 0.1 else _SECONDS


def _decimals(unit: _Unit, limit: float, values: Sequence[float | None]) -> int:
    # show the limit exactly as written, and never let a value on either side of the limit
    # print equal to it (a reader would see "0.50 s > 0.50 s")
    d, most = unit.decimals, unit.decimals + 4
    scaled = limit * unit.scale
    while d < most and not math.isclose(round(scaled, d), scaled, rel_tol=1e-9, abs_tol=1e-12):
        d += 1
    for value in values:
        if value is not None and value != limit:
            while d < most and f"{value * unit.scale:.{d}f}" == f"{scaled:.{d}f}":
                d += 1
    return d


@dataclass(frozen=True, kw_only=True)
class _Evidence:
    key: str
    limit: float
    unit: _Unit
    estimate: Estimate | None
    n: int
    confidence: float
    minimum: bool  # a *_min key: bigger is better
    show_interval: bool = True
    note: str = ""

    def message(self, status: Status, tail: str = "") -> str:
        est, unit = self.estimate, self.unit
        d = _decimals(unit, self.limit, () if est is None else
                      tuple(v for v in (est.value, est.low, est.high) if v is None or math.isfinite(v)))

        def num(x: float | None, missing: str) -> str:
            if x is not None and math.isinf(x):
                return "∞"
            return missing if x is None else f"{x * unit.scale:.{d}f}"

        limit = f"{num(self.limit, '')}{unit.suffix}"
        parts = []
        if est is not None and self.show_interval and not (est.low is not None and math.isinf(est.low)):
            if est.low is None and est.high is None:
                parts.append(f"no {self.confidence * 100:g}% CI at this n")
            else:
                parts.append(f"{self.confidence * 100:g}% CI {num(est.low, '0')}–{num(est.high, '∞')}"
                             f"{unit.ci_suffix}")
        parts.append(f"n={self.n}" + (f"; {self.note}" if self.note else ""))
        head = (f"{self.key}: no samples" if est is None
                else f"{self.key} = ∞" if math.isinf(est.value)
                else f"{self.key} = {num(est.value, '')}{unit.suffix}")
        head += f" ({', '.join(parts)})"
        if status == "not_enough_data":
            return f"{head} vs limit {limit}: not enough data{tail}"
        ops = {("fail", False): ">", ("fail", True): "<", ("pass", False): "≤", ("pass", True): "≥"}
        return f"{head} {ops[status, self.minimum]} {limit}{tail}"

    def row(self, status: Status, *, basis: Basis, method: str, needed_n: int | None = None,
            min_n: int | None = None, tail: str = "") -> SloRow:
        est = self.estimate
        margin = None
        if est is not None and self.limit != 0 and math.isfinite(est.value):
            margin = (est.value - self.limit if self.minimum else self.limit - est.value) / self.limit
        by_failures = status == "fail" and est is not None and (
            self.unit is _PERCENT or (est.low is not None and math.isinf(est.low)))
        return SloRow(key=self.key, limit=self.limit, measured=None if est is None else _finite(est.value),
                      by_failures=by_failures and not self.minimum,
                      ci_low=None if est is None else _finite(est.low),
                      ci_high=None if est is None else _finite(est.high),
                      n=self.n, margin=margin, status=status, basis=basis, method=method,
                      needed_n=needed_n, min_n=min_n, message=self.message(status, tail))


def _finite(x: float | None) -> float | None:
    # an infinite figure (failed requests, slower than any limit) travels as null; the message
    # and the row's status say what it means
    return None if x is None or math.isinf(x) else x


# ----------------------------------------------------------------------------------- judging

def _judge(est: Estimate, limit: float, *, minimum: bool, on_point: bool) -> Status:
    if on_point:
        good = est.value >= limit if minimum else est.value <= limit
        return "pass" if good else "fail"
    return judge_interval(est.low, est.high, limit, minimum=minimum)


def judge_interval(low: float | None, high: float | None, limit: float, *, minimum: bool) -> Status:
    """An interval against a limit: pass when it lies wholly on the good side, fail when wholly on
    the bad side, else not enough data (a missing end settles nothing on its side). `minimum`: the
    limit is a floor (bigger is better)."""
    if minimum:
        if low is not None and low >= limit:
            return "pass"
        return "fail" if high is not None and high < limit else "not_enough_data"
    if high is not None and high <= limit:
        return "pass"
    return "fail" if low is not None and low > limit else "not_enough_data"


def _requests_for(samples: int, n: int, measured: int) -> int:
    # samples per measured request as observed (ITL gives many, failures give none)
    return samples if n == 0 or measured == 0 else math.ceil(samples * measured / n)


def _needed_tail(needed: int | None, measured: int, why: str) -> tuple[int | None, str]:
    if needed is None:
        return None, f", {why}; the estimate sits at the limit, so more requests may not settle it"
    needed = max(needed, measured + 1)
    return needed, f", {why}; about {needed} measured requests would settle it (now {measured})"


def _latency_row(summary: LoadSummary, lim: LatencyLimit, slo: SloSpec, conf: float,
                 on_point: bool) -> SloRow:
    data = summary.samples.metrics[lim.metric]
    n, measured = len(data), summary.counts.measured
    censored = n - bisect_left(data, math.inf)
    answers = [own for own in summary.samples.answers_itl if own] if lim.metric == "itl" else []
    what = ("answers with two tokens or more" if lim.metric in ("itl", "tpot") else "measured requests")
    if lim.stat == "max":
        est = Estimate(value=data[-1], low=data[-1], high=None, n=n) if n else None
        gate, method = 1, "observed maximum (more requests can only raise it, so it has no upper bound)"
    elif lim.metric == "itl":
        # the answer is the unit: its gaps share its pace (docs/statistics.md)
        if lim.stat == "mean":
            # a mean is taken over the answers that finished: a failed one has no finite gap
            answers = [own for own in answers if all(math.isfinite(gap) for gap in own)]
            data = sorted(gap for own in answers for gap in own)
        n = len(answers)
        if lim.stat == "mean":
            est = censored_answer_mean(answers, conf) if n else None
            gate, method = MEAN_MIN_SAMPLES, "skew-corrected interval of the mean gap, answers as the unit"
        else:
            est = clustered_quantile_estimate(answers, PERCENTILE_LEVELS[lim.stat], conf) if n else None
            gate = clustered_min_answers(PERCENTILE_LEVELS[lim.stat], conf)
            method = "order-statistic interval at the answers' effective sample size"
    elif lim.stat == "mean":
        data = _successful_values(summary, lim.metric)
        n = len(data)
        censored = n - bisect_left(data, math.inf)  # answers whose content never came (ttft)
        est = censored_mean(data, conf) if n else None
        gate, method = MEAN_MIN_SAMPLES, "skew-corrected (Hall) interval of the mean"
    else:
        est = quantile_estimate(data, PERCENTILE_LEVELS[lim.stat], conf) if n else None
        gate = min_sample_size(PERCENTILE_LEVELS[lim.stat], conf)
        method = "distribution-free order-statistic interval"
    if on_point and lim.stat != "max":
        gate = point_floor(lim.stat)
    on_point = on_point or lim.stat == "max"
    notes = []
    failed = summary.counts.failed
    # An answer without content is not a failed request: it is counted apart, in its own words.
    empty = summary.counts.no_content if lim.metric == "ttft" else 0
    if lim.stat == "mean" and failed:
        judged = " and judged by error_rate" if slo.error_rate is not None else ""
        notes.append(f"over the {n} {'answers' if lim.metric == 'itl' else 'requests'} that succeeded; "
                     f"{failed} failed, left out here{judged}")
    elif censored - empty:
        notes.append(f"{censored - empty} failed, counted as slower than any limit")
    if empty:
        notes.append(f"{empty} answered without content, counted as slower than any limit "
                     f"(ttft_any_* counts their first token of any kind)")
    if lim.stat == "max":
        notes.append("judged on the observed value")
    elif on_point:
        notes.append("judged on the point estimate")
    unit = _latency_unit(lim.limit, None if est is None or math.isinf(est.value) else est.value)
    ev = _Evidence(key=lim.key, limit=lim.limit, unit=unit, estimate=est, n=n,
                   confidence=conf, minimum=False, show_interval=lim.stat != "max", note="; ".join(notes))
    basis: Basis = "point_estimate" if on_point else "interval"
    # Failing needs only the far end: an interval whose lower end is beyond the limit fails on
    # any sample size (300 answers at 2 s fail a 0.5 s p99 without the 368 a pass needs).
    if est is not None and est.low is not None and est.low > lim.limit and not on_point:
        return ev.row("fail", basis=basis, method=method, min_n=gate)
    if est is not None and lim.stat == "mean" and math.isinf(est.value):
        return ev.row("fail", basis=basis, method=method, min_n=gate,
                      tail=" (an answer whose content never came is slower than any limit, so no finite "
                           "mean holds it)")
    if lim.stat == "mean" and failed and slo.error_rate is None:
        # A mean over the successful requests says nothing of the failed ones, and this SLO names
        # no error rate to judge them by: the row cannot be decided (docs/statistics.md, "Means").
        return ev.row("not_enough_data", basis=basis, method=method, min_n=gate,
                      tail=f", {failed} of {measured} measured requests failed, and a mean is judged over "
                           f"the successful ones only beside an error_rate limit, which this SLO does not "
                           f"name: add error_rate to it to judge the failures")
    if slo.min_samples is not None:
        enough, gate_requests = measured >= slo.min_samples and n > 0, slo.min_samples
        why = f"the SLO asks for at least {slo.min_samples} measured requests"
        if not on_point and gate > 1:
            why += f" (a {conf * 100:g}% interval for {lim.stat} alone needs {gate} {what})"
    else:
        enough, gate_requests = n >= gate, _requests_for(gate, n, measured)
        why = (f"a {conf * 100:g}% interval for {lim.stat} needs at least {gate} {what}"
               if not on_point else
               f"a point estimate of {lim.stat} needs at least {gate} {what}" if gate > 1
               else f"there are no {what}")
    if est is None or not enough:
        plan = _plan_latency(data, lim, conf, n, measured) if est is not None and not on_point else None
        least = max(gate_requests, plan or 0)
        return ev.row("not_enough_data", basis=basis, method=method, min_n=gate, needed_n=least,
                      tail=f", {why}; run about {least} measured requests (now {measured})")
    status = _judge(est, lim.limit, minimum=False, on_point=on_point)
    if status != "not_enough_data":
        return ev.row(status, basis=basis, method=method, min_n=gate)
    if est.high is None:  # min_samples let the row in below the sample size an upper end needs
        wanted = max(_requests_for(gate, n, measured), _plan_latency(data, lim, conf, n, measured) or 0)
        return ev.row(status, basis=basis, method=method, min_n=gate, needed_n=wanted,
                      tail=f", the interval has no upper end below {gate} {what}; run about {wanted} "
                           f"measured requests (now {measured})")
    needed, tail = _needed_tail(_plan_latency(data, lim, conf, n, measured), measured,
                                "the interval straddles the limit")
    return ev.row(status, basis=basis, method=method, min_n=gate, needed_n=needed, tail=tail)


_REQUEST_VALUE = {"ttft": "ttft", "ttft_any": "ttft_any", "tpot": "tpot", "e2e": "e2e"}
"""The RequestLatency attribute that holds each metric a mean can be judged on (ITL aside)."""


def _successful_values(summary: LoadSummary, metric: str) -> list[float]:
    """A metric's values over the requests that succeeded, sorted; an answer without content has
    an infinite (content) TTFT, since its content never came."""
    values = []
    for request in summary.samples.requests:
        if not request.ok:
            continue
        value = getattr(request, _REQUEST_VALUE[metric])
        if value is None and metric in ("ttft", "ttft_any"):
            value = math.inf
        if value is not None:
            values.append(value)
    return sorted(values)


def _plan_latency(data: list[float], lim: LatencyLimit, conf: float, n: int, measured: int) -> int | None:
    """About how many measured requests would settle the row, if the distribution holds.

    n is the row's unit count (values, or answers for ITL): the plan is made in that unit and
    converted to requests at the observed units per request. For ITL it assumes independent
    answers with the pooled gaps' shape, so it is a lower bound when answers differ in pace.
    """
    size = len(data)
    if lim.stat == "mean":
        if data and math.isinf(data[-1]):
            return None  # failures make the mean infinite: more requests will not settle it
        mean = math.fsum(data) / size
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in data) / (size - 1)) if size > 1 else 0.0
        samples = samples_to_settle_mean(mean, sd, lim.limit, conf)
    else:
        below = bisect_right(data, lim.limit) / size
        samples = samples_to_settle_quantile(PERCENTILE_LEVELS[lim.stat], below, conf)
    return None if samples is None else _requests_for(samples, n, measured)


def room_beyond(stat: str) -> float:
    """The share of requests a latency statistic leaves room for beyond its limit: (100 - N)% for
    a percentile pN, none for a maximum (a statistic not listed: none)."""
    return 0.0 if stat == "max" else round(1.0 - PERCENTILE_LEVELS.get(stat, 1.0), 12)


def failure_tolerance(slo: SloSpec) -> tuple[float, str]:
    """The share of failed requests an SLO without `error_rate` tolerates, and why, in words.

    A failed request is beyond every limit, whenever it failed: a percentile pN leaves room for
    (100 - N)% of the requests beyond its limit (ttft_p95: 5%), a maximum for none. A mean, judged
    over the successful requests, names no share; and no run passes with more than half of its
    requests failed. The tightest of these applies (docs/statistics.md, "The verdict").
    """
    floor, key = 0.5, ""
    for lim in slo.latency:
        if lim.stat == "mean":
            continue
        share = room_beyond(lim.stat)
        if share < floor:
            floor, key = share, lim.key
    if not key:
        return floor, "the SLO names no error_rate, and no run passes with more than half its requests failed"
    room = "none" if floor == 0 else f"{floor:.1%}".replace(".0%", "%")
    return floor, (f"the SLO names no error_rate: a failed request is beyond every limit, and {key} "
                   f"leaves room for {room} of the requests beyond its own")


def _failures_decide_goodput(row: SloRow, summary: LoadSummary, conf: float) -> SloRow:
    """A failing goodput row that the failed requests alone hold below its limit is decided by
    failures: even were every successful request good, the fraction would stay below the limit."""
    counts = summary.counts
    if row.status != "fail" or not counts.failed or not counts.measured:
        return row
    if row.basis == "point_estimate":
        alone = counts.ok / counts.measured < row.limit
    else:
        high = proportion_estimate(counts.ok, counts.measured, conf).high
        alone = high is not None and high < row.limit
    if not alone:
        return row
    from dataclasses import replace

    return replace(row, by_failures=True, message=(
        f"{row.message} ({counts.failed} of {counts.measured} failed: were every successful request "
        f"good, goodput would still be below the limit)"))


def _proportion_row(key: str, limit: float, k: int, n: int, *, minimum: bool, slo: SloSpec,
                    conf: float, on_point: bool, why: str = "") -> SloRow:
    est = proportion_estimate(k, n, conf) if n else None
    # a limit at the end of the scale (no failure at all, every request good) is never inside
    # an interval from a finite sample: it can only be judged on the count
    at_edge = limit == (1.0 if minimum else 0.0)
    on_point = on_point or at_edge
    note = ("a limit of 100% is judged on the count" if at_edge and minimum
            else "a limit of 0 is judged on the count" if at_edge
            else "judged on the point estimate" if on_point else "")
    note = "; ".join(part for part in (why, note) if part)
    ev = _Evidence(key=key, limit=limit, unit=_PERCENT, estimate=est, n=n, confidence=conf,
                   minimum=minimum, note=note)
    basis: Basis = "point_estimate" if on_point else "interval"
    method = "observed count" if at_edge else "Clopper–Pearson interval"
    # Failing needs only the far end: an interval wholly on the bad side fails at any n.
    if est is not None and not on_point and _judge(est, limit, minimum=minimum, on_point=False) == "fail":
        return ev.row("fail", basis=basis, method=method)
    if est is None or (slo.min_samples is not None and n < slo.min_samples):
        return ev.row("not_enough_data", basis=basis, method=method, needed_n=slo.min_samples or 1,
                      tail=_short_tail(slo, n))
    floor = proportion_point_floor(limit, minimum=minimum) if on_point and not at_edge else 0
    if n < floor:
        return ev.row("not_enough_data", basis=basis, method=method, needed_n=floor,
                      tail=f", a point estimate against a limit of {limit:.2%} needs at least {floor} "
                           f"measured requests; run about {floor} (now {n})")
    status = _judge(est, limit, minimum=minimum, on_point=on_point)
    if status != "not_enough_data":
        return ev.row(status, basis=basis, method=method)
    needed, tail = _needed_tail(samples_to_settle_proportion(est.value, limit, conf), n,
                                "the interval straddles the limit")
    return ev.row(status, basis=basis, method=method, needed_n=needed, tail=tail)


def _rate_row(key: str, limit: float, value: float | None, unit: _Unit, summary: LoadSummary,
              slo: SloSpec, conf: float) -> SloRow:
    measured = summary.counts.measured
    est = None if value is None else Estimate(value=value, low=None, high=None, n=measured)
    duration = summary.duration_s or 0.0
    ev = _Evidence(key=key, limit=limit, unit=unit, estimate=est, n=measured, confidence=conf,
                   minimum=True, show_interval=False,
                   note=f"point estimate over a {duration:.1f} s window")
    # a rate is a total over one window, not a sample of independent draws: without repeated
    # runs there is no honest interval, so it is judged on the measured value
    method = "point estimate (a total over the window; no interval without repeated runs)"
    if est is None or (slo.min_samples is not None and measured < slo.min_samples):
        return ev.row("not_enough_data", basis="point_estimate", method=method,
                      needed_n=slo.min_samples or 1, tail=_short_tail(slo, measured))
    return ev.row(_judge(est, limit, minimum=True, on_point=True), basis="point_estimate", method=method)


def _short_tail(slo: SloSpec, measured: int) -> str:
    if slo.min_samples is not None and measured < slo.min_samples:
        return f", the SLO asks for at least {slo.min_samples} measured requests (now {measured})"
    return ", there were no measured requests in a window longer than 0 s"


def _min_samples_row(summary: LoadSummary, min_samples: int) -> SloRow:
    n = summary.counts.measured
    status: Status = "pass" if n >= min_samples else "not_enough_data"
    text = f"min_samples = {n} measured requests"
    message = (f"{text} ≥ {min_samples}" if status == "pass"
               else f"{text} vs limit {min_samples}: not enough data; run at least {min_samples}")
    return SloRow(key="min_samples", limit=float(min_samples), measured=float(n), ci_low=None,
                  ci_high=None, n=n, margin=(n - min_samples) / min_samples, status=status,
                  basis="point_estimate", method="count of measured requests",
                  needed_n=None if status == "pass" else min_samples, min_n=None, message=message)


def _with_early_stopping(row: SloRow, summary: LoadSummary, lim: LatencyLimit, slo: SloSpec) -> SloRow:
    """The row with MLPerf's early-stopping reading of the same sample, for p90 and up (ITL aside).

    Under an MLPerf-named profile that reading decides the row (`_early_stopping_row`); under any
    other SLO it is shown for reference beside the SLO's own rule.
    """
    from pytest_inferaccept.stats.plan import EARLY_STOPPING_TAILS

    if lim.stat not in EARLY_STOPPING_TAILS or lim.metric == "itl" or not summary.samples.metrics[lim.metric]:
        return row
    from dataclasses import replace

    from pytest_inferaccept.slo_profile import judged_by_early_stopping

    if judged_by_early_stopping(slo):
        return _early_stopping_row(row, summary, lim, slo)
    return replace(row, early_stopping=_early_stopping_reading(summary.samples.metrics[lim.metric], lim))


def _early_stopping_reading(data: list[float], lim: LatencyLimit) -> str:
    """MLPerf's reading of a tail row's sample in a line: claimed, or how many it would need."""
    from pytest_inferaccept.stats.early_stopping import early_stopping_min_queries
    from pytest_inferaccept.stats.plan import over_limit

    over = over_limit(data, lim.limit)
    needed = early_stopping_min_queries(PERCENTILE_LEVELS[lim.stat], over)
    return (f"MLPerf early stopping: {over} of {len(data)} over the limit, "
            + (f"{lim.stat} claimed" if len(data) >= needed else
               f"{lim.stat} not claimed (with {over} over it needs {needed} requests)"))


def _early_stopping_row(row: SloRow, summary: LoadSummary, lim: LatencyLimit, slo: SloSpec) -> SloRow:
    """The row judged by MLPerf's early-stopping rule, one-sided at 99% both ways.

    The percentile is claimed (pass) when a server just missing it would show this few values
    over the limit in at most 1% of runs, and refused (fail) when a server just meeting it would
    show this many in at most 1%; between the two there is not enough data.
    """
    from dataclasses import replace

    from pytest_inferaccept.stats.early_stopping import MLPERF_CONFIDENCE, early_stopping_min_queries
    from pytest_inferaccept.stats.percentiles import binom_sf, quantile
    from pytest_inferaccept.stats.plan import CountRule, over_limit, samples_to_claim

    data = summary.samples.metrics[lim.metric]
    p, n, measured = PERCENTILE_LEVELS[lim.stat], len(data), summary.counts.measured
    over, failed = over_limit(data, lim.limit), len(data) - bisect_left(data, math.inf)
    tail, least = 1.0 - MLPERF_CONFIDENCE, early_stopping_min_queries(p, 0)
    needed = early_stopping_min_queries(p, over)
    short = slo.min_samples is not None and measured < slo.min_samples
    refused = over > 0 and binom_sf(over, n, 1.0 - p) <= tail
    status: Status = "fail" if refused else "pass" if n >= needed and not short else "not_enough_data"
    rule = "MLPerf's early stopping (one-sided 99%"
    needed_n: int | None = None
    if status == "pass":
        words = f" by {rule}: with {over} over, {lim.stat} is claimed from {needed})"
    elif status == "fail":
        words = (f" by {rule}: a server meeting {lim.stat} shows {over} or more of {n} over the limit "
                 f"in under 1% of runs)")
    else:
        samples = samples_to_claim(CountRule(allowed=1.0 - p, tail=tail, least=least), over / n)
        if samples is not None:
            needed_n = max(_requests_for(samples, n, measured), measured + 1, slo.min_samples or 0)
        elif short:
            needed_n = slo.min_samples
        what = "answers with two tokens or more" if lim.metric == "tpot" else "measured requests"
        asks = f" the SLO asks for at least {slo.min_samples} measured requests;" if short else ""
        settle = (f"run about {needed_n} measured requests (now {measured})" if needed_n is not None
                  else "the share over the limit is at or above what it allows, so more requests may not "
                       "settle it")
        words = (f" by {rule}):{asks} with {over} of {n} over the limit {lim.stat} is claimed from {needed} "
                 f"{what}; {settle}")
    value = quantile(data, p)
    unit = _latency_unit(lim.limit, value if math.isfinite(value) else None)
    ev = _Evidence(key=lim.key, limit=lim.limit, unit=unit,
                   estimate=Estimate(value=value, low=None, high=None, n=n), n=n, minimum=False,
                   confidence=MLPERF_CONFIDENCE, show_interval=False,
                   note=f"{over} of {n} over the limit" + (f", {failed} of them failed" if failed else ""))
    return replace(row, status=status, basis="interval", needed_n=needed_n, min_n=least,
                   method="MLPerf early stopping: one-sided 99% binomial test of the count over the limit",
                   by_failures=status == "fail" and binom_sf(failed, n, 1.0 - p) <= tail,
                   early_stopping=_early_stopping_reading(data, lim),
                   message=ev.message(status, words))


def evaluate(summary: LoadSummary, slo: SloSpec, *, confidence: float = 0.95,
             point_estimate: bool = False) -> SloEvaluation:
    """Judge every limit of the SLO against one run's summary."""
    rows = [_with_early_stopping(_latency_row(summary, lim, slo, confidence, point_estimate), summary, lim,
                                 slo)
            for lim in slo.latency]
    counts = summary.counts
    if slo.error_rate is not None:
        rows.append(_proportion_row("error_rate", slo.error_rate, counts.failed, counts.measured,
                                    minimum=False, slo=slo, conf=confidence, on_point=point_estimate))
    if slo.throughput_min is not None:
        rows.append(_rate_row("throughput_min", slo.throughput_min, summary.throughput_tokens_per_s,
                              _TOKENS, summary, slo, confidence))
    if slo.request_rate_min is not None:
        rows.append(_rate_row("request_rate_min", slo.request_rate_min, summary.request_rate_per_s,
                              _REQUESTS, summary, slo, confidence))
    if slo.goodput_min is not None:
        limits = per_request_limits(slo)
        good = sum(1 for r in summary.samples.requests if meets(r, limits))
        rows.append(_failures_decide_goodput(
            _proportion_row("goodput_min", slo.goodput_min, good, len(summary.samples.requests),
                            minimum=True, slo=slo, conf=confidence, on_point=point_estimate),
            summary, confidence))
    if slo.error_rate is None and counts.failed:
        floor, why = failure_tolerance(slo)
        implicit = _proportion_row("error_rate", floor, counts.failed, counts.measured, minimum=False,
                                   slo=slo, conf=confidence, on_point=point_estimate, why=why)
        if implicit.status == "fail":  # a floor that can only fail: it asks no run size of its own
            rows.append(implicit)
    if slo.min_samples is not None:
        rows.append(_min_samples_row(summary, slo.min_samples))
    return SloEvaluation(status=overall([row.status for row in rows]), rows=tuple(rows),
                         confidence=confidence, point_estimate=point_estimate)


def evaluate_runs(summaries: Sequence[LoadSummary], slo: SloSpec, *, confidence: float = 0.95,
                  point_estimate: bool = False) -> RunsEvaluation:
    """Judge every run of a test against the SLO; any failing run fails, no run means no data."""
    runs = tuple(evaluate(s, slo, confidence=confidence, point_estimate=point_estimate)
                 for s in summaries)
    status = overall([run.status for run in runs]) if runs else "not_enough_data"
    return RunsEvaluation(status=status, runs=runs)
