"""A run's records become counts, rates and latency statistics by the measurement rules."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from pytest_inferaccept.load.records import ERROR_CLASSES, RequestRecord
from pytest_inferaccept.markers import parse_slo
from pytest_inferaccept.stats import summarize
from pytest_inferaccept.stats.summary import document_view


def record(i: int, *, send: float = 0.0, ttft: float = 0.5, gaps: tuple[float, ...] = (0.1, 0.1),
           usage: int | None = -1, **kw: Any) -> RequestRecord:
    """A successful streamed request: first content at send + ttft, then one event per gap."""
    times = [send + ttft]
    for gap in gaps:
        times.append(times[-1] + gap)
    return RequestRecord(
        index=i, send=send, first_byte=send + 0.01, first_event=send + 0.02,
        first_token_any=send + ttft - 0.05, first_content=send + ttft, end=times[-1],
        content_times=times, content_events=len(times), chunks=len(times) + 1,
        completion_tokens=len(times) if usage == -1 else usage, prompt_tokens=100, **kw)


def failed(i: int, *, send: float = 0.0, error: Any = "http_5xx", end: float = 0.2) -> RequestRecord:
    """A request that failed before any content."""
    return RequestRecord(index=i, send=send, end=send + end, status=500, error=error)


def test_warm_up_requests_count_as_sent_but_stay_out_of_every_statistic() -> None:
    records = [record(0, ttft=9.0, warmup=True), record(1, ttft=0.5, send=1.0), record(2, ttft=0.7, send=1.0)]
    s = summarize(records, (0.0, 3.0))
    assert (s.counts.sent, s.counts.warmup, s.counts.measured, s.counts.ok) == (3, 1, 2, 2)
    assert s.metrics["ttft"].n == 2
    assert s.metrics["ttft"].max is not None and s.metrics["ttft"].max.value == pytest.approx(0.7)
    assert s.measured_window == pytest.approx((1.0, 1.9))


def test_failures_count_in_the_error_rate_and_as_slower_than_any_limit_in_latency() -> None:
    records = [record(i, send=i * 0.1) for i in range(8)] + [failed(8), failed(9, error="timeout", end=30.0)]
    s = summarize(records, (0.0, 30.0))
    assert (s.counts.measured, s.counts.ok, s.counts.failed) == (10, 8, 2)
    assert s.error_rate is not None and s.error_rate.value == pytest.approx(0.2)
    assert s.error_rate.n == 10
    e2e = s.metrics["e2e"]
    assert (e2e.n, e2e.censored) == (10, 2)
    assert e2e.max is not None and e2e.max.value == math.inf
    assert e2e.percentiles["p50"].value == pytest.approx(0.7)
    # the successful requests alone stay available, named as such, never judged
    ok = s.metrics_successful["e2e"]
    assert ok.n == 8 and ok.max is not None and ok.max.value == pytest.approx(0.7)
    assert s.measured_window == (0.0, 30.0)  # a failed request still occupies the window


def test_errors_are_listed_by_class_in_a_fixed_order_with_zeros_kept() -> None:
    s = summarize([failed(0, error="timeout"), failed(1, error="connect"), failed(2, error="timeout")],
                  (0.0, 1.0))
    assert list(s.counts.errors) == list(ERROR_CLASSES)
    assert s.counts.errors["timeout"] == 2
    assert s.counts.errors["connect"] == 1
    assert s.counts.errors["http_5xx"] == 0


def test_ttft_is_taken_at_the_first_content_event_with_the_alternatives_beside_it() -> None:
    s = summarize([record(0, send=2.0, ttft=0.4)], (0.0, 3.0))
    assert s.metrics["ttft"].percentiles["p50"].value == pytest.approx(0.4)
    assert s.metrics["ttft_first_byte"].percentiles["p50"].value == pytest.approx(0.01)
    assert s.metrics["ttft_any_token"].percentiles["p50"].value == pytest.approx(0.35)


def test_itl_pools_every_gap_of_every_successful_request() -> None:
    s = summarize([record(0, gaps=(0.1, 0.2)), record(1, gaps=(0.3,)), record(2, gaps=())], (0.0, 1.0))
    itl = s.metrics["itl"]
    assert itl.n == 3
    assert itl.mean is not None and itl.mean.value == pytest.approx(0.2)
    assert itl.max is not None and itl.max.value == pytest.approx(0.3)


def test_tpot_is_e2e_minus_ttft_over_output_tokens_minus_one_using_server_usage() -> None:
    # ttft 0.5 s, then 4 gaps of 0.5 s: e2e 2.5 s; the server says 11 tokens (events carried several)
    # the usage count includes every generated token, so the clock starts at the first token of
    # any kind (0.05 s before the first content here), not at the first content token
    s = summarize([record(0, ttft=0.5, gaps=(0.5,) * 4, usage=11)], (0.0, 3.0))
    assert s.metrics["tpot"].percentiles["p50"].value == pytest.approx((2.5 - 0.45) / (11 - 1))
    assert s.usage.source == "usage"
    assert s.usage.note == ""
    assert s.output_tokens == 11


def test_without_usage_tpot_counts_content_events_and_the_summary_says_so() -> None:
    s = summarize([record(0, ttft=0.5, gaps=(0.5,) * 4, usage=None), record(1, usage=3)], (0.0, 3.0))
    tpot = sorted(e for e in s.samples.metrics["tpot"])
    assert tpot[-1] == pytest.approx((2.5 - 0.5) / (5 - 1))  # 5 content events counted
    assert s.usage.source == "mixed"
    assert (s.usage.with_usage, s.usage.without_usage) == (1, 1)
    assert "no usage for 1 of 2 successful requests" in s.usage.note
    assert "content events" in s.usage.note
    none = summarize([record(0, usage=None)], (0.0, 1.0))
    assert none.usage.source == "content_events"


def test_a_single_token_answer_has_no_tpot() -> None:
    s = summarize([record(0, gaps=(), usage=1)], (0.0, 1.0))
    assert s.metrics["tpot"].n == 0
    assert document_view(s).metrics["tpot"].p95 is None  # type: ignore[union-attr]


def test_throughput_is_output_tokens_over_first_send_to_last_end() -> None:
    records = [record(0, send=0.0, gaps=(0.1,) * 9), record(1, send=1.0, gaps=(0.1,) * 9),
               failed(2, send=3.0)]
    s = summarize(records, (0.0, 10.0))
    # ends at 1.4 and 2.4; the failure ends at 3.2: window 0.0 .. 3.2, 20 tokens of the two answers
    assert s.duration_s == pytest.approx(3.2)
    assert s.output_tokens == 20
    assert s.throughput_tokens_per_s == pytest.approx(20 / 3.2)
    assert s.request_rate_per_s == pytest.approx(2 / 3.2)


def test_goodput_counts_requests_meeting_every_per_request_limit_and_never_failures() -> None:
    slo = parse_slo((), {"ttft_p95": 0.6, "ttft_p50": 0.5, "e2e_p99": 2.0})
    records = [record(0, ttft=0.4), record(1, ttft=0.55), record(2, ttft=0.3, gaps=(1.0, 1.0)), failed(3),
               record(4, ttft=0.2, send=1.0)]
    s = summarize(records, (0.0, 2.0), slo=slo)
    assert s.goodput is not None
    assert s.goodput.limits == {"ttft": 0.5, "e2e": 2.0}  # the strictest ttft limit applies per request
    assert (s.goodput.good, s.goodput.measured) == (2, 5)
    assert s.goodput.fraction is not None and s.goodput.fraction.value == pytest.approx(0.4)
    assert s.duration_s is not None and s.goodput.per_s == pytest.approx(2 / s.duration_s)


def test_goodput_judges_itl_limits_on_each_requests_largest_gap() -> None:
    slo = parse_slo((), {"itl_p99": 0.15, "tpot_p95": 0.2})
    records = [record(0, gaps=(0.1, 0.1, 0.1)), record(1, gaps=(0.05, 0.3, 0.05)), record(2, gaps=())]
    s = summarize(records, (0.0, 1.0), slo=slo)
    assert s.goodput is not None and s.goodput.good == 2  # one token: no gap and no TPOT to object to


def test_usage_that_differs_from_the_content_events_is_counted_with_the_mean_ratio() -> None:
    s = summarize([record(0, usage=3), record(1, usage=6), record(2)], (0.0, 1.0))
    assert s.usage.mismatched == 1
    assert s.usage.mean_ratio == pytest.approx((1 + 2 + 1) / 3)


def test_coalesced_chunks_are_reported_as_a_fraction_of_events() -> None:
    s = summarize([record(0, coalesced=2), record(1, coalesced=0)], (0.0, 1.0))
    assert s.coalesced_fraction == pytest.approx(2 / 8)


def test_realised_prompt_and_output_lengths_are_reported() -> None:
    records = [record(i, usage=10 * (i + 1)) for i in range(10)]
    s = summarize(records, (0.0, 1.0))
    assert s.prompt_tokens is not None and s.prompt_tokens.p50 == 100
    assert s.output_tokens_per_request is not None
    assert s.output_tokens_per_request.p50 == pytest.approx(55.0)
    assert s.output_tokens_per_request.p90 == pytest.approx(91.0)


def test_schedule_lag_is_reported_when_the_schedule_set_send_times() -> None:
    s = summarize([record(0, send=1.003, scheduled=1.0), record(1, send=2.001, scheduled=2.0)], (0.0, 3.0))
    assert s.schedule_lag is not None
    assert s.schedule_lag.max == pytest.approx(0.003)
    assert summarize([record(0)], (0.0, 1.0)).schedule_lag is None


def test_the_summary_json_is_strict_json() -> None:
    slo = parse_slo((), {"ttft_p95": 0.6})
    s = summarize([record(i, send=i * 0.01, ttft=0.3 + i / 1000) for i in range(100)] + [failed(100)],
                  (0.0, 2.0), slo=slo)
    data = json.loads(json.dumps(document_view(s).model_dump(exclude_unset=True), allow_nan=False))
    assert data["counts"]["failed"] == 1
    assert set(data["metrics"]) == {"ttft", "ttft_first_byte", "ttft_any_token", "itl", "tpot", "e2e"}
    assert list(data["metrics"]["ttft"]) == ["unit", "n", "censored", "mean", "p50", "p75", "p90", "p95",
                                             "p99", "p999", "max"]
    assert data["metrics"]["ttft"]["p999"]["high"] is None
    assert data["goodput"]["limits"] == {"ttft": 0.6}


def test_a_run_without_measured_requests_summarises_to_empty_figures() -> None:
    s = summarize([record(0, warmup=True)], (0.0, 1.0))
    assert s.counts.measured == 0
    assert s.error_rate is None
    assert s.throughput_tokens_per_s is None
    assert s.metrics["ttft"].n == 0
    json.dumps(document_view(s).model_dump(exclude_unset=True), allow_nan=False)
