"""One load run's records reduced to counts, rates and latency statistics (docs/statistics.md)."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pytest_inferaccept.stats.clustered import (
    clustered_mean_estimate,
    clustered_quantile_estimate,
    skew_mean_estimate,
)
from pytest_inferaccept.stats.percentiles import (
    PERCENTILE_LEVELS,
    Estimate,
    estimate_view,
    proportion_estimate,
    quantile,
    quantile_estimate,
)

if TYPE_CHECKING:
    from pytest_inferaccept import model
    from pytest_inferaccept.load.records import RequestRecord
    from pytest_inferaccept.markers import SloSpec

METRICS: tuple[str, ...] = ("ttft", "ttft_first_byte", "ttft_any_token", "itl", "tpot", "e2e")
"""Latency metrics summarised, in seconds, over every measured request (docs/statistics.md).

A request that failed before the moment a metric needs counts as slower than any limit (an
infinite, right-censored value): TTFT and TTFT-any-token when it failed before that token, e2e
and TPOT whenever it failed, ITL with one unfinished gap when it failed mid-answer. A successful
answer with no content at all counts so in TTFT (the content never came) but not in
TTFT-any-token. `ttft_first_byte` is descriptive, over successful requests only.
"""
CENSORED = math.inf
"""The value a failed request takes in a judged latency figure: later than any limit."""


def content_never_came(metric: str, failed: int | None, no_content: int | None) -> bool:
    """Is an infinite figure of `metric` so only because answers carried no content (only reasoning or
    tool calls), with no request failed? TTFT waits for content; every other metric counts them."""
    return metric == "ttft" and bool(no_content) and not failed

TokenSource = Literal["usage", "content_events", "mixed", "none"]


@dataclass(frozen=True, kw_only=True)
class MetricSummary:
    """Sample size, mean, percentiles and maximum of one latency metric (seconds)."""

    n: int
    mean: Estimate | None = None
    percentiles: dict[str, Estimate] = field(default_factory=dict)
    max: Estimate | None = None
    """The observed maximum; `low` is the observation itself and there is no upper bound."""
    censored: int = 0
    """Values that are failed requests, counted as slower than any limit (infinite)."""

    def stat(self, name: str) -> Estimate | None:
        """The estimate named like the slo marker's statistic: p50 … p999, mean or max."""
        if name == "mean":
            return self.mean
        if name == "max":
            return self.max
        return self.percentiles.get(name)

@dataclass(frozen=True, kw_only=True)
class Counts:
    """How many requests were sent, measured, succeeded and failed (by error class)."""

    sent: int
    """Every record, warm-up included."""
    warmup: int
    measured: int
    """Records that count in statistics: all but warm-up, failures included."""
    ok: int
    failed: int
    errors: dict[str, int]
    """Failed measured requests per error class, every known class listed, in report order."""
    no_content: int = 0
    """Successful answers with no content at all (only reasoning or tool calls): they have a
    TTFT to the first token of any kind, and count as slower than any limit in content TTFT."""
    client_errors: int = 0
    """Requests the client itself failed (a fault in its own code): not measured, never counted
    against the server, and they make the run INVALID."""

@dataclass(frozen=True, kw_only=True)
class Spread:
    """Point percentiles of a quantity without intervals (token counts, schedule lag)."""

    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread | None:
        """Describe the values; None when there are none."""
        data = sorted(values)
        if not data:
            return None
        return cls(n=len(data), mean=math.fsum(data) / len(data), p50=quantile(data, 0.5),
                   p90=quantile(data, 0.9), p99=quantile(data, 0.99), max=data[-1])

@dataclass(frozen=True, kw_only=True)
class UsageSummary:
    """Where output token counts came from, and how far the server's count and the client's agree."""

    with_usage: int
    """Successful measured requests whose answer carried usage.completion_tokens."""
    without_usage: int
    source: TokenSource
    note: str
    """A plain sentence when some or all requests were counted by content events, else ''."""
    mismatched: int
    """Requests with usage whose completion_tokens differ from the content events counted."""
    mean_ratio: float | None
    """Mean of completion_tokens / content_events over requests with usage and events."""
    tpot_basis: dict[str, int] = field(default_factory=dict)
    """Successful requests with a TPOT, per count it divides by: `usage`, `usage_streamed` (usage less
    the reasoning tokens the server reported but never streamed) or `content_events`."""
    hidden_reasoning: int = 0
    """Successful requests whose usage reported reasoning tokens the stream never carried."""

@dataclass(frozen=True, slots=True)
class RequestLatency:
    """The per-request values goodput judges: success, TTFT, TPOT, e2e and the largest ITL gap."""

    ok: bool
    ttft: float | None
    tpot: float | None
    e2e: float
    max_itl: float | None
    ttft_any: float | None = None


@dataclass(frozen=True, kw_only=True)
class Goodput:
    """Measured requests that met every per-request latency limit, as a fraction and per second."""

    good: int
    measured: int
    fraction: Estimate | None
    per_s: float | None
    limits: dict[str, float]
    """The per-request limit applied to each metric, in seconds: the goodput_*_ms keys where the SLO
    gives any, else the smallest limit the SLO sets on each metric."""
    source: Literal["goodput_keys", "latency_limits"] = "latency_limits"
    """Where the limits came from: vLLM-style goodput_*_ms keys, or the SLO's latency limits."""

@dataclass(frozen=True, kw_only=True)
class Samples:
    """Raw material kept for SLO evaluation at any confidence; not part of the JSON."""

    metrics: dict[str, list[float]]
    """Sorted values per metric name, failures included as infinite values (`CENSORED`);
    `ttft_any` is TTFT to the first generated token of any kind (the slo key ttft_any_*)."""
    requests: tuple[RequestLatency, ...]
    """One entry per measured request, failures included."""
    answers_itl: tuple[tuple[float, ...], ...] = ()
    """ITL gaps per answer (the answer is the unit of an ITL interval), failures' unfinished
    gap included as an infinite value."""
    failures: tuple[str, ...] = ()
    """One line per error class that failed measured requests, with its count and one detail."""


@dataclass(frozen=True, kw_only=True)
class LoadSummary:
    """Everything the statistics say about one load run; `document_view` is what the results write."""

    confidence: float
    window: tuple[float, float]
    """The window the load engine reported (start, end)."""
    measured_window: tuple[float, float] | None
    """First send to last end of the measured requests: the denominator of every rate."""
    counts: Counts
    error_rate: Estimate | None
    metrics: dict[str, MetricSummary]
    output_tokens: int
    """Output tokens of successful measured requests (usage where sent, else content events)."""
    throughput_tokens_per_s: float | None
    request_rate_per_s: float | None
    """Successful measured requests per second of the measured window."""
    goodput: Goodput | None
    usage: UsageSummary
    coalesced_fraction: float | None
    """Share of SSE events that arrived in one network read with the event before them."""
    prompt_tokens: Spread | None
    output_tokens_per_request: Spread | None
    schedule_lag: Spread | None
    """send - scheduled in seconds, where the schedule set `scheduled` (open loop)."""
    samples: Samples = field(repr=False, compare=False)
    metrics_successful: dict[str, MetricSummary] = field(default_factory=dict)
    """Descriptive figures over successful requests only (failures left out): never judged."""

    @property
    def duration_s(self) -> float | None:
        """Length of the measured window in seconds."""
        if self.measured_window is None:
            return None
        return self.measured_window[1] - self.measured_window[0]


def document_view(summary: LoadSummary) -> model.LoadSummary:
    """What the results document writes of a summary (docs/statistics.md), in the run model's types.

    Every key is set, None where not measured, so a reader tells "not measured" from "absent";
    an infinite end of an interval (a failed request) is written as null, with `censored`.
    """
    from pytest_inferaccept import model

    def latency(m: MetricSummary) -> model.LatencySummary:
        stats = {name: estimate_view(m.stat(name)) for name in ("mean", *PERCENTILE_LEVELS, "max")}
        return model.LatencySummary.model_validate({"unit": "s", "n": m.n, "censored": m.censored, **stats})

    def spread(x: Spread | None) -> model.Spread | None:
        return None if x is None else model.Spread(n=x.n, mean=x.mean, p50=x.p50, p90=x.p90, p99=x.p99,
                                                   max=x.max)

    c, u, g, mw = summary.counts, summary.usage, summary.goodput, summary.measured_window
    return model.LoadSummary(
        confidence=summary.confidence,
        window=model.TimeWindow(start=summary.window[0], end=summary.window[1]),
        measured_window=None if mw is None else model.TimeWindow(start=mw[0], end=mw[1],
                                                                 duration_s=summary.duration_s),
        counts=model.RequestCounts(sent=c.sent, warmup=c.warmup, measured=c.measured, ok=c.ok,
                                   failed=c.failed, errors=dict(c.errors), no_content=c.no_content,
                                   client_errors=c.client_errors),
        error_rate=estimate_view(summary.error_rate),
        metrics={name: latency(m) for name, m in summary.metrics.items()},
        metrics_successful={name: latency(m) for name, m in summary.metrics_successful.items()},
        output_tokens=summary.output_tokens,
        throughput_tokens_per_s=summary.throughput_tokens_per_s,
        request_rate_per_s=summary.request_rate_per_s,
        goodput=None if g is None else model.Goodput(good=g.good, measured=g.measured,
                                                     fraction=estimate_view(g.fraction), per_s=g.per_s,
                                                     limits=dict(g.limits), source=g.source),
        usage=model.TokenUsage(with_usage=u.with_usage, without_usage=u.without_usage, source=u.source,
                               note=u.note, mismatched=u.mismatched, mean_ratio=u.mean_ratio,
                               tpot_basis=dict(u.tpot_basis), hidden_reasoning=u.hidden_reasoning),
        coalesced_fraction=summary.coalesced_fraction,
        prompt_tokens=spread(summary.prompt_tokens),
        output_tokens_per_request=spread(summary.output_tokens_per_request),
        schedule_lag_s=spread(summary.schedule_lag),
    )


def censored_mean(data: Sequence[float], confidence: float = 0.95) -> Estimate:
    """The mean with its skew-corrected interval; with a failed request among the values it is infinite.

    A failure counts as slower than any limit, so no finite mean holds it: the estimate is
    infinite with no interval (a `*_mean` limit is judged over the successful requests instead,
    beside an error rate; docs/statistics.md).
    """
    if data and data[-1] == CENSORED:
        return Estimate(value=CENSORED, low=CENSORED, high=None, n=len(data))
    return skew_mean_estimate(data, confidence)


def censored_answer_mean(answers: Sequence[Sequence[float]], confidence: float = 0.95) -> Estimate:
    """The mean gap with the answer as the unit; infinite when an answer failed mid-stream."""
    if any(gap == CENSORED for own in answers for gap in own):
        return Estimate(value=CENSORED, low=CENSORED, high=None, n=sum(1 for own in answers if own))
    return clustered_mean_estimate(answers, confidence)


def summarize_answers(answers: Sequence[Sequence[float]], confidence: float = 0.95) -> MetricSummary:
    """ITL: percentiles and mean of the pooled gaps, with intervals that take the answer as the unit.

    Gaps within one answer share its pace, so they are not independent draws: the intervals
    come from `clustered_quantile_estimate` and `clustered_mean_estimate` (n = answers).
    """
    data = sorted(gap for own in answers for gap in own)
    if not data:
        return MetricSummary(n=0)
    return MetricSummary(
        n=len(data),
        mean=censored_answer_mean(answers, confidence),
        percentiles={name: clustered_quantile_estimate(answers, p, confidence)
                     for name, p in PERCENTILE_LEVELS.items()},
        max=Estimate(value=data[-1], low=data[-1], high=None, n=len(data)),
        censored=len(data) - bisect_left(data, CENSORED),
    )


def summarize_metric(values: Iterable[float], confidence: float = 0.95) -> MetricSummary:
    """Mean, percentiles with intervals and maximum of one latency metric (failures infinite)."""
    data = sorted(values)
    if not data:
        return MetricSummary(n=0)
    return MetricSummary(
        n=len(data),
        mean=censored_mean(data, confidence),
        percentiles={name: quantile_estimate(data, p, confidence) for name, p in PERCENTILE_LEVELS.items()},
        max=Estimate(value=data[-1], low=data[-1], high=None, n=len(data)),
        censored=len(data) - bisect_left(data, CENSORED),
    )


def per_request_limits(slo: SloSpec) -> dict[str, float]:
    """The per-request limit goodput applies per metric, in seconds: the goodput_*_ms keys (vLLM's
    --goodput ttft/tpot/e2el) when the SLO gives any, else the smallest limit it sets on each metric."""
    given = slo.goodput_limits()
    if given:
        return given
    limits: dict[str, float] = {}
    for lim in slo.latency:
        limits[lim.metric] = min(lim.limit, limits.get(lim.metric, math.inf))
    return limits


def meets(request: RequestLatency, limits: Mapping[str, float]) -> bool:
    """True when a request succeeded and met every per-request latency limit.

    A request with no content has no TTFT and fails a TTFT limit; one with fewer than two
    tokens has no TPOT or ITL gap, so those limits have nothing to object to.
    """
    if not request.ok:
        return False
    values = {"ttft": request.ttft, "ttft_any": request.ttft_any, "tpot": request.tpot, "e2e": request.e2e,
              "itl": request.max_itl}
    for metric, limit in limits.items():
        value = values[metric]
        if value is None:
            if metric in ("ttft", "ttft_any", "e2e"):
                return False
            continue
        if value > limit:
            return False
    return True


def goodput(requests: tuple[RequestLatency, ...], slo: SloSpec, duration_s: float | None,
            confidence: float = 0.95) -> Goodput:
    """Count measured requests meeting every per-request limit of the SLO; failures never do."""
    limits = per_request_limits(slo)
    good = sum(1 for r in requests if meets(r, limits))
    n = len(requests)
    return Goodput(
        good=good, measured=n,
        fraction=proportion_estimate(good, n, confidence) if n else None,
        per_s=good / duration_s if duration_s else None,
        limits=limits,
        source="goodput_keys" if slo.goodput_limits() else "latency_limits",
    )


def _usage(ok: list[RequestRecord]) -> UsageSummary:
    with_usage = [r for r in ok if r.completion_tokens is not None]
    without = len(ok) - len(with_usage)
    source: TokenSource = ("none" if not ok else "usage" if not without
                           else "content_events" if not with_usage else "mixed")
    note = ""
    if without:
        note = (f"the server sent no usage for {without} of {len(ok)} successful requests; their "
                "output tokens are the content events the client counted (an event may carry "
                "more than one token, so counts and TPOT may be off for those requests)")
    hidden = [r for r in with_usage if r.hidden_reasoning_tokens]
    if hidden:
        spent = sum(r.hidden_reasoning_tokens for r in hidden)
        note = "; ".join(filter(None, (note, (
            f"{len(hidden)} of {len(ok)} successful requests reported {spent} reasoning tokens in all "
            "(usage.completion_tokens_details.reasoning_tokens) that the stream never carried; their "
            "TPOT divides the streamed span by the streamed tokens only (usage less those reasoning "
            "tokens), and their reasoning time is in the time to the first token"))))
    basis: dict[str, int] = {}
    for r in ok:
        b = r.tpot_basis()
        if b is not None:
            basis[b] = basis.get(b, 0) + 1
    mismatched = sum(1 for r in with_usage if r.completion_tokens != r.content_events)
    ratios = [r.completion_tokens / r.content_events for r in with_usage
              if r.completion_tokens is not None and r.content_events > 0]
    return UsageSummary(with_usage=len(with_usage), without_usage=without, source=source, note=note,
                        mismatched=mismatched,
                        mean_ratio=math.fsum(ratios) / len(ratios) if ratios else None,
                        tpot_basis=basis, hidden_reasoning=len(hidden))


def _latency(r: RequestRecord, gaps: list[float]) -> RequestLatency:
    return RequestLatency(ok=r.ok, ttft=r.ttft, tpot=r.tpot(), e2e=r.e2e,
                          max_itl=max(gaps) if gaps else None,
                          ttft_any=None if r.first_token_any is None else r.first_token_any - r.send)


def _since_send(records: list[RequestRecord], attr: str, *, censor: bool = False) -> list[float]:
    """Seconds from send to the moment `attr`; where it never came (failed or empty), CENSORED
    with `censor`, else nothing."""
    out = []
    for r in records:
        t = getattr(r, attr)
        if t is not None:
            out.append(t - r.send)
        elif censor:
            out.append(CENSORED)
    return out


def _censored_tpot(measured: list[RequestRecord]) -> list[float]:
    """TPOT of each answer with two tokens or more; a failed request never finished: CENSORED."""
    out = []
    for r in measured:
        if not r.ok:
            out.append(CENSORED)
        elif (t := r.tpot()) is not None:
            out.append(t)
    return out


def _answer_gaps(r: RequestRecord, gaps: list[float]) -> tuple[float, ...]:
    """An answer's ITL gaps; one that failed after its first content adds the gap never closed."""
    if not r.ok and r.first_content is not None:
        return (*gaps, CENSORED)
    return tuple(gaps)


def _failure_lines(measured: list[RequestRecord]) -> tuple[str, ...]:
    """Per error class: how many measured requests failed so, with the first one's detail."""
    first: dict[str, RequestRecord] = {}
    count: dict[str, int] = {}
    for r in measured:
        if r.error is not None:
            count[r.error] = count.get(r.error, 0) + 1
            first.setdefault(r.error, r)
    out = []
    for cls, k in sorted(count.items(), key=lambda kv: -kv[1]):
        detail = first[cls].error_detail.strip().splitlines()[0][:160] if first[cls].error_detail else ""
        out.append(f"{k} {cls}" + (f": {detail}" if detail else ""))
    return tuple(out)


def summarize(records: Iterable[RequestRecord], window: tuple[float, float], *,
              slo: SloSpec | None = None, confidence: float = 0.95) -> LoadSummary:
    """Reduce a run's records to a LoadSummary; warm-up excluded, failures kept in every count."""
    # imported here: the load package may bring its HTTP client along, and only a run needs it
    from pytest_inferaccept.load.records import ERROR_CLASSES

    everything = list(records)
    after_warmup = [r for r in everything if not r.warmup]
    # A request the client failed itself says nothing about the server: not measured at all.
    measured = [r for r in after_warmup if not r.harness_error]
    ok = [r for r in measured if r.ok]
    errors = dict.fromkeys(ERROR_CLASSES, 0)
    for r in measured:
        if r.error is not None:
            errors[r.error] = errors.get(r.error, 0) + 1  # an unknown class is kept, never dropped
    counts = Counts(sent=len(everything), warmup=len(everything) - len(after_warmup),
                    measured=len(measured), ok=len(ok), failed=len(measured) - len(ok), errors=errors,
                    no_content=sum(1 for r in ok if r.first_content is None),
                    client_errors=len(after_warmup) - len(measured))

    mw = (min(r.send for r in measured), max(r.end for r in measured)) if measured else None
    duration = mw[1] - mw[0] if mw is not None and mw[1] > mw[0] else None

    gaps = [r.itls() for r in measured]  # computed once: ITL and goodput both need them
    answers_itl = tuple(_answer_gaps(r, own) for r, own in zip(measured, gaps, strict=True)
                        if r.ok or r.first_content is not None)
    # Judged figures: every measured request, a failure as slower than any limit.
    values: dict[str, list[float]] = {
        "ttft": _since_send(measured, "first_content", censor=True),
        "ttft_first_byte": _since_send(ok, "first_byte"),
        "ttft_any_token": _since_send(measured, "first_token_any", censor=True),
        "itl": [gap for own in answers_itl for gap in own],
        "tpot": _censored_tpot(measured),
        "e2e": [r.e2e if r.ok else CENSORED for r in measured],
    }
    for data in values.values():
        data.sort()
    successful: dict[str, list[float]] = {
        "ttft": _since_send(ok, "first_content"),
        "ttft_any_token": _since_send(ok, "first_token_any"),
        "tpot": [t for r in ok if (t := r.tpot()) is not None],
        "e2e": [r.e2e for r in ok],
    }
    for data in successful.values():
        data.sort()
    ok_answers = [own for r, own in zip(measured, gaps, strict=True) if r.ok]
    requests = tuple(_latency(r, own) for r, own in zip(measured, gaps, strict=True))
    output_tokens = sum(r.output_tokens for r in ok)
    chunks = sum(r.chunks for r in ok)
    lags = [r.send - r.scheduled for r in measured if r.scheduled is not None]

    return LoadSummary(
        confidence=confidence,
        window=(window[0], window[1]),
        measured_window=mw,
        counts=counts,
        error_rate=proportion_estimate(counts.failed, counts.measured, confidence) if measured else None,
        metrics={name: summarize_answers(answers_itl, confidence) if name == "itl"
                 else summarize_metric(data, confidence) for name, data in values.items()},
        metrics_successful={
            name: summarize_answers(ok_answers, confidence) if name == "itl"
            else summarize_metric(successful[name], confidence)
            for name in ("ttft", "ttft_any_token", "itl", "tpot", "e2e")},
        output_tokens=output_tokens,
        throughput_tokens_per_s=output_tokens / duration if duration else None,
        request_rate_per_s=len(ok) / duration if duration else None,
        goodput=None if slo is None else goodput(requests, slo, duration, confidence),
        usage=_usage(ok),
        coalesced_fraction=sum(r.coalesced for r in ok) / chunks if chunks else None,
        prompt_tokens=Spread.of(r.prompt_tokens for r in ok if r.prompt_tokens is not None),
        output_tokens_per_request=Spread.of(r.output_tokens for r in ok),
        schedule_lag=Spread.of(lags),
        samples=Samples(metrics={**values, "ttft_any": values["ttft_any_token"]}, requests=requests,
                        answers_itl=answers_itl, failures=_failure_lines(measured)),
    )
