"""SLO limits are judged on confidence intervals: pass, fail or not enough data, with the evidence."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.markers import parse_slo
from pytest_inferaccept.stats import LoadSummary, evaluate, evaluate_runs, summarize
from pytest_inferaccept.stats.slo import judgement_view, overall

DOCS = Path(__file__).resolve().parent.parent / "docs" / "statistics.md"


def run(ttfts: list[float], *, failures: int = 0, gap: float = 0.02, tokens: int = 5) -> LoadSummary:
    """A run with one successful request per TTFT (one every 10 ms) and some failed requests."""
    records = []
    for i, ttft in enumerate(ttfts):
        send = i * 0.01
        times = [send + ttft + k * gap for k in range(tokens)]
        records.append(RequestRecord(index=i, send=send, first_content=times[0], first_byte=send,
                                     first_token_any=times[0], end=times[-1], content_times=times,
                                     content_events=tokens, completion_tokens=tokens))
    for j in range(failures):
        records.append(RequestRecord(index=len(ttfts) + j, send=j * 0.01, end=j * 0.01 + 0.1,
                                     error="http_5xx", status=503))
    return summarize(records, (0.0, 100.0))


def judge(summary: LoadSummary, **limits: Any) -> Any:
    """Evaluate the summary against an slo marker with these keys; return the first row."""
    return evaluate(summary, parse_slo((), limits)).rows[0]


def grid(n: int) -> list[float]:
    """n evenly spread values in (0, 1): the p-quantile is about p."""
    return [(i + 0.5) / n for i in range(n)]


def test_a_failed_percentile_reads_like_an_assertion_with_its_interval() -> None:
    # ranks 570 and 593 bound p95 at n=612; the point estimate sits between ranks 581 and 582
    ttfts = [0.5] * 569 + [0.80] + [0.84] * 22 + [0.88] + [0.95] * 19
    row = judge(run(ttfts), ttft_p95=0.5)
    assert row.message == "ttft_p95 = 0.84 s (95% CI 0.80–0.88, n=612) > 0.50 s"
    assert row.status == "fail"
    assert (row.measured, row.ci_low, row.ci_high, row.n) == pytest.approx((0.84, 0.80, 0.88, 612))
    assert row.margin == pytest.approx((0.5 - 0.84) / 0.5)
    assert row.needed_n is None


def test_an_error_rate_message_is_written_in_percent() -> None:
    row = judge(run([0.1] * 593, failures=19), error_rate=0.01)
    assert row.message == "error_rate = 3.1% (95% CI 1.9–4.8%, n=612) > 1.0%"
    assert row.status == "fail"


def test_a_percentile_passes_only_when_its_upper_bound_is_within_the_limit() -> None:
    summary = run(grid(1000))
    passing = judge(summary, ttft_p95=0.97)
    assert passing.status == "pass"
    assert passing.ci_high <= 0.97 < passing.ci_high + 0.01
    assert passing.message.startswith("ttft_p95 = 0.95 s (95% CI 0.94–0.96, n=1000) ≤ 0.97 s")
    assert judge(summary, ttft_p95=0.93).status == "fail"


def test_an_interval_straddling_the_limit_has_not_enough_data_and_says_how_many_requests_would_do() -> None:
    row = judge(run(grid(1000)), ttft_p95=0.955)
    assert row.status == "not_enough_data"
    assert row.ci_low < 0.955 < row.ci_high
    assert row.needed_n is not None and row.needed_n > 1000
    assert "the interval straddles the limit" in row.message
    assert f"about {row.needed_n} measured requests would settle it (now 1000)" in row.message


def test_below_the_minimum_sample_a_percentile_has_not_enough_data_and_needs_the_minimum() -> None:
    row = judge(run([0.1] * 50), ttft_p95=1.0)
    assert row.status == "not_enough_data"
    assert row.needed_n == 72
    assert row.message == ("ttft_p95 = 0.10 s (95% CI 0.10–∞, n=50) vs limit 1.00 s: not enough data, "
                           "a 95% interval for p95 needs at least 72 measured requests; run about 72 "
                           "measured requests (now 50)")
    p99 = judge(run([0.1] * 300), ttft_p99=1.0)
    assert (p99.status, p99.needed_n) == ("not_enough_data", 368)


def test_failed_requests_count_as_slower_than_any_limit_so_half_failing_fails_a_p95() -> None:
    row = judge(run([0.1] * 50, failures=50), ttft_p95=1.0)
    assert row.status == "fail"
    assert row.n == 100  # every measured request is in the figure, not only the 50 that answered
    assert row.message == "ttft_p95 = ∞ (n=100; 50 failed, counted as slower than any limit) > 1.00 s"


def test_a_shorter_timeout_can_never_improve_a_latency_verdict() -> None:
    # 3,000 requests, 7% of them with a 5 s first token. A long timeout measures the slow tail;
    # a short one turns it into failures. Both must fail a 0.5 s p95.
    fast = [0.2 + (i % 100) / 1000 for i in range(2790)]
    measured = evaluate(run(fast + [5.0] * 210), parse_slo((), {"ttft_p95": 0.5, "error_rate": 0.10}))
    timed_out = evaluate(run(fast, failures=210), parse_slo((), {"ttft_p95": 0.5, "error_rate": 0.10}))
    assert measured.rows[0].status == timed_out.rows[0].status == "fail"
    assert timed_out.rows[1].status == "pass"  # the error rate alone would have let it through


def test_a_clear_failure_needs_only_the_intervals_lower_end_not_the_sample_a_pass_needs() -> None:
    # 300 answers at 2 s against a 0.5 s p99: a pass would need 368, a failure needs none of that
    row = judge(run([2.0] * 300), ttft_p99=0.5)
    assert row.status == "fail"
    assert row.ci_low == pytest.approx(2.0)


def test_a_lower_min_samples_lets_a_clear_failure_show_early() -> None:
    slow = run([2.0] * 20)
    assert judge(slow, ttft_p95=0.5).status == "fail"
    early = evaluate(slow, parse_slo((), {"ttft_p95": 0.5, "min_samples": 10}))
    assert [r.status for r in early.rows] == ["fail", "pass"]
    assert early.rows[1].message == "min_samples = 20 measured requests ≥ 10"
    fast = evaluate(run([0.1] * 20), parse_slo((), {"ttft_p95": 0.5, "min_samples": 10}))
    assert fast.rows[0].status == "not_enough_data"  # a pass still needs the interval's upper end
    assert "no upper end below 72 measured requests" in fast.rows[0].message


def test_a_higher_min_samples_holds_back_every_verdict_until_it_is_reached() -> None:
    ev = evaluate(run(grid(200)), parse_slo((), {"ttft_p50": 0.9, "error_rate": 0.5, "min_samples": 500}))
    assert [r.status for r in ev.rows] == ["not_enough_data"] * 3
    assert [r.needed_n for r in ev.rows] == [500, 500, 500]
    assert ev.rows[0].min_n == 6  # the per-percentile minimum is still reported
    assert ("the SLO asks for at least 500 measured requests (a 95% interval for p50 alone needs 6 "
            "measured requests); run about 500 measured requests (now 200)") in ev.rows[0].message
    assert ev.rows[2].message == ("min_samples = 200 measured requests vs limit 500: not enough data; "
                                  "run at least 500")


def test_a_max_limit_fails_on_one_observation_over_it_and_otherwise_passes_on_the_observed_value() -> None:
    over = judge(run([0.1] * 99 + [0.995]), ttft_max=0.99)
    assert over.status == "fail"
    assert over.message == "ttft_max = 0.995 s (n=100; judged on the observed value) > 0.990 s"
    under = judge(run([0.1] * 3), ttft_max=0.99)
    assert (under.status, under.basis, under.ci_high) == ("pass", "point_estimate", None)


def test_a_mean_limit_uses_the_skew_corrected_interval_once_there_are_100_samples() -> None:
    summary = run(grid(120))
    assert judge(summary, ttft_mean=0.6).status == "pass"
    assert judge(summary, ttft_mean=0.3).status == "fail"
    assert judge(summary, ttft_mean=0.52).status == "not_enough_data"
    few = judge(run(grid(40)), ttft_mean=0.7)
    assert (few.status, few.needed_n) == ("not_enough_data", 100)
    # a clear failure needs no minimum: the interval's lower end is far beyond the limit
    assert judge(run(grid(40)), ttft_mean=0.1).status == "fail"


def test_an_error_rate_passes_only_when_its_upper_bound_is_within_the_limit() -> None:
    assert judge(run([0.1] * 400), error_rate=0.01).status == "pass"
    short = judge(run([0.1] * 300), error_rate=0.01)
    assert (short.status, short.needed_n) == ("not_enough_data", 368)
    assert judge(run([0.1] * 990, failures=10), error_rate=0.05).status == "pass"


def test_an_error_rate_limit_of_zero_is_judged_on_the_count() -> None:
    clean = judge(run([0.1] * 10), error_rate=0.0)
    assert (clean.status, clean.basis) == ("pass", "point_estimate")
    assert "a limit of 0 is judged on the count" in clean.message
    assert judge(run([0.1] * 1000, failures=1), error_rate=0.0).status == "fail"


def test_throughput_and_request_rate_are_judged_on_the_point_estimate_and_say_so() -> None:
    summary = run([0.1] * 100)  # 500 tokens and 100 requests over 0.99 + 0.18 s
    assert summary.duration_s == pytest.approx(1.17)
    row = judge(summary, throughput_min=400)
    assert (row.status, row.basis) == ("pass", "point_estimate")
    assert "no interval" in row.method
    assert row.message == ("throughput_min = 427.4 tokens/s (n=100; point estimate over a 1.2 s window) "
                           "≥ 400.0 tokens/s")
    assert row.margin == pytest.approx((500 / 1.17 - 400) / 400)
    assert judge(summary, request_rate_min=90).status == "fail"


def test_goodput_min_is_judged_on_a_clopper_pearson_interval() -> None:
    fast = run([0.1] * 100)
    ev = evaluate(fast, parse_slo((), {"ttft_p99": 0.5, "goodput_min": 0.9}))
    good = ev.rows[1]
    assert (good.key, good.status, good.measured) == ("goodput_min", "pass", 1.0)
    assert good.ci_low == pytest.approx(0.025 ** (1 / 100))
    assert evaluate(fast, parse_slo((), {"ttft_p99": 0.5, "goodput_min": 0.99})).rows[1].status \
        == "not_enough_data"
    mixed = run([0.1] * 50 + [0.9] * 50)
    assert evaluate(mixed, parse_slo((), {"ttft_p99": 0.5, "goodput_min": 0.9})).rows[1].status == "fail"


def test_failed_requests_never_count_as_good() -> None:
    ev = evaluate(run([0.1] * 80, failures=20), parse_slo((), {"e2e_p99": 5.0, "goodput_min": 0.5}))
    assert ev.rows[1].measured == pytest.approx(0.8)


def test_point_estimate_mode_judges_every_row_on_its_point_estimate_and_says_so() -> None:
    ev = evaluate(run([0.1] * 100), parse_slo((), {"ttft_p95": 0.5, "error_rate": 0.01}), point_estimate=True)
    assert [(r.status, r.basis) for r in ev.rows] == [("pass", "point_estimate")] * 2
    assert ev.rows[0].message == ("ttft_p95 = 0.10 s (95% CI 0.10–0.10, n=100; judged on the point "
                                  "estimate) ≤ 0.50 s")


def test_point_estimate_mode_keeps_a_minimum_sample() -> None:
    # three requests say nothing about a p99 or a 1% error rate, however they went
    ev = evaluate(run([0.1] * 3), parse_slo((), {"ttft_p99": 0.5, "error_rate": 0.01}), point_estimate=True)
    assert [r.status for r in ev.rows] == ["not_enough_data"] * 2
    assert [r.needed_n for r in ev.rows] == [100, 100]
    assert "a point estimate of p99 needs at least 100 measured requests" in ev.rows[0].message
    assert judgement_view(ev).point_estimate is True


def test_the_overall_status_is_fail_then_not_enough_data_then_pass() -> None:
    assert overall(["pass", "not_enough_data", "fail"]) == "fail"
    assert overall(["pass", "not_enough_data"]) == "not_enough_data"
    assert overall(["pass", "pass"]) == "pass"
    ev = evaluate(run([0.1] * 100), parse_slo((), {"ttft_p95": 0.5, "ttft_p999": 0.5}))
    assert ev.status == "not_enough_data"
    assert ev.messages("not_enough_data")[0].startswith("ttft_p999")


def test_every_run_of_a_test_is_judged_and_the_worst_decides() -> None:
    slo = parse_slo((), {"ttft_p95": 0.5})
    result = evaluate_runs([run([0.1] * 100), run([0.9] * 100)], slo)
    assert result.status == "fail"
    assert [r.status for r in result.runs] == ["pass", "fail"]
    assert result.messages() == ["run 2 of 2: ttft_p95 = 0.90 s (95% CI 0.90–0.90, n=100) > 0.50 s"]
    assert evaluate_runs([run([0.1] * 100)], slo).messages("pass")[0].startswith("ttft_p95 = 0.10 s")


def test_a_test_that_ran_no_load_has_not_enough_data() -> None:
    result = evaluate_runs([], parse_slo((), {"ttft_p95": 0.5}))
    assert result.status == "not_enough_data"
    assert result.messages("not_enough_data") == [
        "the test ran no load, so none of its SLO limits could be judged"]


def test_limits_under_a_tenth_of_a_second_are_written_in_milliseconds() -> None:
    row = judge(run([0.1] * 100, gap=0.04), itl_p95=0.05)
    assert row.message == "itl_p95 = 40.0 ms (95% CI 40.0–40.0, n=100) ≤ 50.0 ms"  # n: answers


def test_an_interval_at_another_confidence_is_labelled_with_it() -> None:
    ev = evaluate(run([0.9] * 100), parse_slo((), {"ttft_p90": 0.5}), confidence=0.99)
    assert "(99% CI 0.90–0.90, n=100)" in ev.rows[0].message


def test_a_run_where_every_request_failed_fails() -> None:
    ev = evaluate(run([], failures=3), parse_slo((), {"ttft_p95": 0.5, "throughput_min": 1.0}))
    assert ev.rows[0].status == "fail"
    assert ev.rows[0].message == "ttft_p95 = ∞ (n=3; 3 failed, counted as slower than any limit) > 0.50 s"
    assert ev.rows[1].status == "fail"  # three requests, no tokens: the window produced nothing


def test_a_run_without_requests_has_not_enough_data() -> None:
    ev = evaluate(run([]), parse_slo((), {"ttft_p95": 0.5}))
    assert ev.rows[0].status == "not_enough_data"
    assert ev.rows[0].message.startswith("ttft_p95: no samples (n=0) vs limit 0.50 s: not enough data")


def test_the_evaluation_json_is_strict_json() -> None:
    ev = evaluate_runs([run(grid(100), failures=2)], parse_slo((), {
        "ttft_p95": 0.5, "ttft_p999": 1.0, "itl_max": 0.1, "error_rate": 0.05, "throughput_min": 10.0,
        "request_rate_min": 1.0, "goodput_min": 0.2, "min_samples": 50}))
    runs = [judgement_view(r).model_dump(exclude_unset=True) for r in ev.runs]
    data = json.loads(json.dumps({"runs": runs}, allow_nan=False))
    assert list(data["runs"][0]["rows"][0]) == [
        "key", "limit", "measured", "ci_low", "ci_high", "n", "margin", "status", "basis", "method",
        "needed_n", "min_n", "message", "by_failures", "early_stopping"]
    assert [r["key"] for r in data["runs"][0]["rows"]] == [
        "ttft_p95", "ttft_p999", "itl_max", "error_rate", "throughput_min", "request_rate_min",
        "goodput_min", "min_samples"]


def test_the_docs_example_runs_as_written() -> None:
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(r"<!-- example -->\n```python\n(.*?)```", text, re.DOTALL)
    assert match, "docs/statistics.md lost its example block"
    exec(compile(match.group(1), str(DOCS), "exec"), {})


def test_a_tail_row_says_how_mlperfs_early_stopping_reads_the_same_sample() -> None:
    met = judge(run([0.1] * 459), ttft_p99=0.5)
    assert met.early_stopping == "MLPerf early stopping: 0 of 459 over the limit, p99 claimed"
    short = judge(run([0.1] * 600 + [0.9]), ttft_p99=0.5)
    assert short.status == "pass"  # our interval passes, MLPerf's rule wants more with one over
    assert short.early_stopping == ("MLPerf early stopping: 1 of 601 over the limit, p99 not claimed "
                                    "(with 1 over it needs 662 requests)")
    assert judge(run([0.1] * 100), ttft_p50=0.5).early_stopping == ""  # not a tail


def test_an_slo_may_judge_the_first_token_of_any_kind_instead_of_the_first_content() -> None:
    # a reasoning model: its first thought after 0.1 s, its first content token after 0.3 s
    records = [RequestRecord(index=i, send=0.0, first_token_any=0.1, first_content=0.3, end=0.5,
                             content_times=[0.3, 0.4, 0.5], content_events=3, completion_tokens=10)
               for i in range(100)]
    slo = parse_slo((), {"ttft_p95": 0.2, "ttft_any_p95": 0.2, "goodput_min": 0.9})
    rows = evaluate(summarize(records, (0.0, 1.0), slo=slo), slo).rows
    assert [(r.key, r.status) for r in rows] == [("ttft_p95", "fail"), ("ttft_any_p95", "pass"),
                                                 ("goodput_min", "fail")]


def test_an_itl_percentile_counts_answers_not_gaps() -> None:
    # 50 answers of 20 tokens: 950 gaps, but gaps within an answer share its pace; a p95 needs
    # 72 answers before its interval has an upper end
    row = judge(run(grid(50), tokens=20), itl_p95=0.05)
    assert (row.status, row.n, row.min_n) == ("not_enough_data", 50, 72)
    assert "needs at least 72 answers with two tokens or more" in row.message
    assert judge(run(grid(80), tokens=20), itl_p95=0.05).status == "pass"
