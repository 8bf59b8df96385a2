"""The /metrics checks on hand-made exposition texts: parsing, counters, operator profiles, renames."""

from __future__ import annotations

import pytest

from pytest_inferaccept.checks import CheckFailed
from pytest_inferaccept.checks.metrics import (
    PROFILES,
    RENAMED_METRICS,
    Scrape,
    check_counters_monotonic,
    check_old_names_count_along,
    check_operator_metrics,
    detect_profile,
    known_rename,
    operator_metrics_table,
    parse_metrics,
    rename_findings,
    renamed_metrics,
    stale_old_names,
)
from pytest_inferaccept.fake.metrics import MetricsState, vllm_names

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
    names = parse_metrics(text).names
    table = operator_metrics_table("vllm", names)
    row = next(r for r in table if r["concern"] == "kv_cache")
    assert row["status"] == "renamed" and row["served"] == "vllm:gpu_cache_usage_perc"
    assert check_operator_metrics(table, "vllm") == []  # a known rename: said by rename_findings
    notes, warnings = rename_findings(renamed_metrics("vllm", names))
    assert warnings == ["vllm:gpu_cache_usage_perc is the old name of vllm:kv_cache_usage_perc (deprecated "
                        "in vLLM 0.10, hidden from 0.11 unless the server is started with "
                        "--show-hidden-metrics-for-version=0.10, removed in 0.12): a dashboard reading "
                        "vllm:kv_cache_usage_perc shows nothing here, and one reading "
                        "vllm:gpu_cache_usage_perc goes blank on upgrade"]
    assert notes == ["renamed in vLLM 0.11: vllm:time_per_output_token_seconds is now "
                     "vllm:inter_token_latency_seconds (a dashboard reading the old name shows nothing)"]


def test_a_rename_the_table_does_not_know_still_warns_as_renamed() -> None:
    text = _vllm().replace("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
    table = [{"concern": "itl", "status": "renamed", "expected": "vllm:itl_seconds",
              "served": "vllm:time_per_output_token_seconds", "essential": False, "note": ""}]
    assert parse_metrics(text).names  # the text stays valid
    warnings = check_operator_metrics(table, "vllm")
    assert len(warnings) == 1 and "not under the current name vllm:itl_seconds" in warnings[0]


@pytest.mark.parametrize(("names", "served"), [("new", "new"), ("old", "old"), ("both", "both")])
def test_each_naming_of_the_fake_is_recognised_by_the_rename_table(names: str, served: str) -> None:
    state = MetricsState()
    state.request_finished(5, 7, ttft=0.01, e2e=0.1)
    state.prefix_lookup(5, hit=True)
    text = vllm_names(state.render("m", prefix_cache=True), names)
    scrape = parse_metrics(text)
    rows = renamed_metrics("vllm", scrape.names)
    assert [(r["old"], r["served"]) for r in rows] == [(r.old, served) for r in RENAMED_METRICS]
    table = operator_metrics_table("vllm", scrape.names)
    assert {r["status"] for r in table} == ({"present", "renamed"} if names == "old" else {"present"})
    assert check_operator_metrics(table, "vllm") == []
    notes, warnings = rename_findings(rows)
    assert (len(notes), len(warnings)) == ((0, 4) if names == "old" else (4, 0))
    if names == "both":
        assert "move dashboards to vllm:kv_cache_usage_perc before upgrading" in notes[0]
    if names == "new":
        assert notes[0] == ("renamed in vLLM 0.10: vllm:gpu_cache_usage_perc is now vllm:kv_cache_usage_perc "
                            "(a dashboard reading the old name shows nothing)")


def test_a_metric_absent_under_both_names_is_still_missing() -> None:
    text = "".join(line + "\n" for line in _vllm().splitlines() if "kv_cache_usage_perc" not in line)
    names = parse_metrics(text).names
    assert not [r for r in renamed_metrics("vllm", names) if "cache_usage" in r["new"]]
    table = operator_metrics_table("vllm", names)
    assert next(r for r in table if r["concern"] == "kv_cache")["status"] == "missing"
    assert check_operator_metrics(table, "vllm") == [
        "vllm: no kv_cache metric (vllm:kv_cache_usage_perc, nor its old name vllm:gpu_cache_usage_perc)"]


def test_every_rename_of_a_profile_concern_is_listed_among_its_names() -> None:
    for rename in RENAMED_METRICS:
        assert rename.server in PROFILES, rename
        for metric in PROFILES[rename.server]:
            if metric.names[0] == rename.new:
                assert rename.old in metric.names, (metric.concern, rename.old)
        assert known_rename(rename.old + "_total", rename.new) is rename
        assert known_rename(rename.new, rename.old) is rename
    assert known_rename("vllm:num_requests_waiting", "vllm:queue_length") is None


def _both(state: MetricsState, *, frozen: bool) -> Scrape:
    return parse_metrics(vllm_names(state.render("m", prefix_cache=True), "both", frozen_old=frozen))


@pytest.mark.parametrize("frozen", [False, True])
def test_old_names_beside_new_ones_must_count_along(frozen: bool) -> None:
    state = MetricsState()
    state.request_finished(5, 7, ttft=0.01, e2e=0.1)
    before = _both(state, frozen=frozen)
    rows = renamed_metrics("vllm", before.names)
    state.request_finished(4, 3, ttft=0.01, e2e=0.1)
    state.prefix_lookup(4, hit=False)
    stale = stale_old_names(before, _both(state, frozen=frozen), rows)
    if not frozen:
        assert stale == []
        check_old_names_count_along(stale)
        return
    # the ITL histogram's count and sum, and the prefix-cache queries counter
    assert 'vllm:time_per_output_token_seconds_count{model_name="m"} stayed at 0 while ' \
           'vllm:inter_token_latency_seconds_count{model_name="m"} grew 1 -> 2' in stale
    assert any(s.startswith("vllm:gpu_prefix_cache_queries_total") for s in stale)
    assert len(stale) == 3, stale
    assert not any("gpu_cache_usage_perc" in s for s in stale)  # a gauge is not judged
    with pytest.raises(CheckFailed, match="series of deprecated metric names stood still"):
        check_old_names_count_along(stale)


def test_missing_essential_metric_fails() -> None:
    text = _vllm().replace("vllm:num_requests_waiting", "vllm:queue_len")
    table = operator_metrics_table("vllm", parse_metrics(text).names)
    with pytest.raises(CheckFailed, match=r"waiting \(vllm:num_requests_waiting\)"):
        check_operator_metrics(table, "vllm")


def test_every_profile_has_at_least_one_essential_metric() -> None:
    for server, metrics in PROFILES.items():
        assert any(m.essential for m in metrics), server
