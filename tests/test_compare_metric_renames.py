"""The upgrade gate on metric renames: a known rename is named as one, a removed metric stays a regression."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_inferaccept.baseline.diff import compare, warnings
from pytest_inferaccept.baseline.extras import RENAME_STATUS, operator_metrics
from pytest_inferaccept.gate_settings import GateSettings
from pytest_inferaccept.model import SCHEMA_ID, RunDocument, load

COMMON = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:generation_tokens"]
KV_OLD, KV_NEW = "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"
HITS_OLD, HITS_NEW = "vllm:gpu_prefix_cache_hits", "vllm:prefix_cache_hits"
CONDITIONS = {"plugin_version": "1.0", "python": "3.11", "client_host": "ci", "client_platform": "Linux",
              "cpu_count": 8, "started_at": "2026-01-01T00:00:00+00:00",
              "finished_at": "2026-01-01T00:01:00+00:00", "settings": {"server_url": "http://gpu-box:8000"}}


def _run(names: list[str] | None, kv_served: str | None = None) -> RunDocument:
    """A run whose metrics checks recorded these metric names (None: not recorded) and KV concern."""
    tests: list[dict[str, Any]] = []
    if names is not None:
        tests.append({"nodeid": "suites/test_metrics.py::test_metrics_is_valid_prometheus_text",
                      "outcome": "passed", "evidence": {"values": {"metric_names": sorted(names)}}})
    if kv_served is not None:
        table = {"profile": "vllm", "metrics": [{"concern": "kv_cache", "status": "present",
                                                 "expected": KV_NEW, "served": kv_served}]}
        tests.append({"nodeid": "suites/test_metrics.py::test_metrics_expose_what_operators_rely_on",
                      "outcome": "passed", "evidence": {"values": {"operator_metrics": table}}})
    return load({"schema": SCHEMA_ID, "verdict": {"status": "GO", "reasons": [], "warnings": []},
                 "conditions": CONDITIONS, "tests": tests})


def _details(old: RunDocument, new: RunDocument) -> dict[str, tuple[str, str]]:
    return {c.item: (c.status, c.detail) for c in operator_metrics(old, new)}


def test_a_renamed_metric_is_named_as_a_rename_not_as_a_removed_one() -> None:
    old = _run([*COMMON, KV_OLD, HITS_OLD], kv_served=KV_OLD)
    new = _run([*COMMON, KV_NEW, HITS_NEW], kv_served=KV_NEW)
    changes = _details(old, new)
    assert changes == {
        KV_NEW: (RENAME_STATUS, f"renamed in this version: {KV_OLD} is now {KV_NEW} "
                                "(a dashboard reading the old name shows nothing)"),
        HITS_NEW: (RENAME_STATUS, f"renamed in this version: {HITS_OLD} is now {HITS_NEW} "
                                  "(a dashboard reading the old name shows nothing)"),
    }
    # a change a dashboard owner must act on, warned about in its own words; not a regression: the
    # figures are still served, under their new names
    assert RENAME_STATUS == "changed"
    comparison = compare(old, new, GateSettings())
    assert comparison.regressions == [] and comparison.status == "no regression"
    warned = warnings(comparison)
    assert any(changes[KV_NEW][1] in w for w in warned) and any(changes[HITS_NEW][1] in w for w in warned)


def test_a_metric_removed_under_both_names_is_still_a_metric_that_disappeared() -> None:
    changes = _details(_run([*COMMON, KV_OLD, HITS_OLD]), _run([*COMMON, HITS_NEW]))
    assert changes["metric names"] == ("regression", f"1 metric name(s) disappeared from /metrics: {KV_OLD}")
    assert changes[HITS_NEW][0] == RENAME_STATUS


@pytest.mark.parametrize(("before", "after", "status", "words"), [
    ([KV_OLD], [KV_OLD, KV_NEW], "changed",
     f"deprecated in this version: {KV_OLD} is still served beside its new name {KV_NEW}; vLLM hides "
     "it from 0.11 unless the server is started with --show-hidden-metrics-for-version=0.10, and "
     f"removes it in 0.12: move dashboards to {KV_NEW}"),
    ([KV_OLD, KV_NEW], [KV_NEW], RENAME_STATUS,
     f"hidden or removed in this version: {KV_OLD}, the deprecated name of {KV_NEW}, is no longer "
     "served (a dashboard still reading the old name shows nothing)"),
    ([KV_NEW], [KV_OLD], "regression",
     f"back to the old name in this version: {KV_NEW} is {KV_OLD} again (a dashboard reading {KV_NEW} "
     "shows nothing)"),
    ([KV_OLD, KV_NEW], [KV_OLD], "regression",
     f"{KV_NEW} is no longer served, only its old name {KV_OLD} (a dashboard reading {KV_NEW} "
     "shows nothing)"),
    ([KV_NEW], [KV_OLD, KV_NEW], "changed",
     f"{KV_OLD}, the deprecated name of {KV_NEW}, is served again beside it"),
])
def test_each_step_of_deprecate_hide_remove_is_named(before: list[str], after: list[str], status: str,
                                                     words: str) -> None:
    changes = _details(_run([*COMMON, *before]), _run([*COMMON, *after]))
    assert changes == {KV_NEW: (status, words)}


def test_without_recorded_names_the_operator_table_still_names_the_rename() -> None:
    changes = _details(_run(None, kv_served=KV_OLD), _run(None, kv_served=KV_NEW))
    assert changes == {"kv_cache": (RENAME_STATUS, f"renamed in this version: {KV_OLD} is now {KV_NEW} "
                                                   "(a dashboard reading the old name shows nothing)")}


def test_an_unknown_rename_keeps_the_existing_words() -> None:
    old = _run(None, kv_served="vllm:kv_usage")
    changes = _details(old, _run(None, kv_served=KV_NEW))
    assert changes["kv_cache"] == ("regression", f"operator metric for kv_cache renamed: vllm:kv_usage → "
                                                 f"{KV_NEW} (dashboards on the old name go blank)")
    assert _details(_run([*COMMON, KV_NEW]), _run([*COMMON, KV_NEW])) == {}
