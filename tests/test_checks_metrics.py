"""The /metrics checks on hand-made exposition texts: parsing, counters, operator profiles."""

from __future__ import annotations

import pytest

from pytest_inferaccept.checks import CheckFailed
from pytest_inferaccept.checks.metrics import (
    PROFILES,
    check_counters_monotonic,
    check_operator_metrics,
    detect_profile,
    operator_metrics_table,
    parse_metrics,
)
from pytest_inferaccept.fake.metrics import MetricsState

LLAMA_CPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 6886
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 3469
# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s.
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 42.1
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
"""


def _vllm(**observed: int) -> str:
    state = MetricsState()
    for _ in range(observed.get("requests", 0)):
        state.request_finished(5, 7, ttft=0.01, e2e=0.1)
    return state.render("m")


def test_valid_text_parses_and_invalid_text_fails() -> None:
    scrape = parse_metrics(_vllm(requests=1))
    assert scrape.samples[("vllm:generation_tokens_total", (("model_name", "m"),))] == 7
    assert "vllm:generation_tokens_total" in scrape.names
    with pytest.raises(CheckFailed, match="not valid Prometheus"):
        parse_metrics("vllm:num_requests_running{ 1 oops\n")
    with pytest.raises(CheckFailed, match="no samples"):
        parse_metrics("# just a comment\n")


def test_counters_that_grow_pass_and_counters_that_shrink_fail() -> None:
    before, after = parse_metrics(_vllm(requests=1)), parse_metrics(_vllm(requests=2))
    grew = check_counters_monotonic(before, after)
    assert any(name.startswith("vllm:generation_tokens_total") for name in grew)
    with pytest.raises(CheckFailed, match="decreased"):
        check_counters_monotonic(after, before)


def test_gauges_may_go_down() -> None:
    up = parse_metrics("# TYPE g gauge\ng 5\n")
    down = parse_metrics("# TYPE g gauge\ng 1\n")
    assert check_counters_monotonic(up, down) == []


def test_profile_is_detected_from_names_then_from_version_endpoints() -> None:
    assert detect_profile(parse_metrics(_vllm()).names, {}) == "vllm"
    assert detect_profile(parse_metrics(LLAMA_CPP).names, {}) == "llama.cpp"
    assert detect_profile({"process_cpu_seconds_total"}, {"/props": {}}) == "llama.cpp"
    assert detect_profile({"process_cpu_seconds_total"}, {}) is None


def test_every_profile_row_is_reported_present_on_the_correct_fake() -> None:
    table = operator_metrics_table("vllm", parse_metrics(_vllm()).names)
    assert {row["status"] for row in table} == {"present"}
    assert check_operator_metrics(table, "vllm") == []


def test_llama_cpp_without_its_removed_kv_gauge_only_warns() -> None:
    table = operator_metrics_table("llama.cpp", parse_metrics(LLAMA_CPP).names)
    warnings = check_operator_metrics(table, "llama.cpp")
    assert [row["concern"] for row in table if row["status"] == "missing"] == ["kv_cache"]
    assert len(warnings) == 1 and "kv_cache" in warnings[0]


def test_old_names_are_reported_renamed_with_a_warning() -> None:
    text = _vllm().replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    table = operator_metrics_table("vllm", parse_metrics(text).names)
    row = next(r for r in table if r["concern"] == "kv_cache")
    assert row["status"] == "renamed" and row["served"] == "vllm:gpu_cache_usage_perc"
    warnings = check_operator_metrics(table, "vllm")
    assert any("vllm:gpu_cache_usage_perc" in w for w in warnings)


def test_missing_essential_metric_fails() -> None:
    text = _vllm().replace("vllm:num_requests_waiting", "vllm:queue_len")
    table = operator_metrics_table("vllm", parse_metrics(text).names)
    with pytest.raises(CheckFailed, match=r"waiting \(vllm:num_requests_waiting\)"):
        check_operator_metrics(table, "vllm")


def test_every_profile_has_at_least_one_essential_metric() -> None:
    for server, metrics in PROFILES.items():
        assert any(m.essential for m in metrics), server
