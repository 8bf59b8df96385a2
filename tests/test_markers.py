"""Markers are parsed into typed objects; unknown keys and names are errors."""

from __future__ import annotations

import pytest

from pytest_inferaccept.markers import MarkerError, parse_capabilities, parse_slo


def test_slo_keys_become_typed_limits() -> None:
    spec = parse_slo((), {"ttft_p95": 0.8, "tpot_p95": 0.06, "e2e_p99": 4, "error_rate": 0.01,
                          "throughput_min": 100, "min_samples": 200})
    assert {(lim.metric, lim.stat, lim.limit) for lim in spec.latency} == {
        ("ttft", "p95", 0.8), ("tpot", "p95", 0.06), ("e2e", "p99", 4.0)}
    assert spec.error_rate == 0.01
    assert spec.throughput_min == 100.0
    assert spec.min_samples == 200
    assert spec.to_json()["ttft_p95"] == 0.8


def test_an_unknown_slo_key_names_the_allowed_keys() -> None:
    with pytest.raises(MarkerError, match=r"unknown key\(s\) ttft_p96; allowed: ttft_p50"):
        parse_slo((), {"ttft_p96": 1.0})


@pytest.mark.parametrize(("key", "value"), [
    ("ttft_p95", -1), ("ttft_p95", "fast"), ("error_rate", 1.5), ("goodput_min", -0.1),
    ("min_samples", 0), ("ttft_p95", float("nan")), ("itl_p99", True),
])
def test_slo_values_out_of_range_are_rejected(key: str, value: object) -> None:
    with pytest.raises(MarkerError, match=key):
        parse_slo((), {key: value})


def test_slo_takes_keywords_only_and_at_least_one() -> None:
    with pytest.raises(MarkerError, match="keyword"):
        parse_slo((0.5,), {})
    with pytest.raises(MarkerError, match="at least one"):
        parse_slo((), {})


def test_capability_markers_merge_and_reject_unknown_names() -> None:
    spec = parse_capabilities([(("tools", "stream"), {}), (("tools",), {})])
    assert spec.names == ("tools", "stream")
    with pytest.raises(MarkerError, match="'telepathy' is unknown; allowed: chat"):
        parse_capabilities([(("telepathy",), {})])
    with pytest.raises(MarkerError, match="keyword"):
        parse_capabilities([(("tools",), {"strict": True})])
