"""Expectation files pin per-check outcomes; any change is reported."""

from __future__ import annotations

from pytest_inferaccept.expectations import check_id, compare, record

RESULTS = {"server": {"launched": "preset llama-cpp", "model": "m"}, "tests": [
    {"nodeid": "pytest_inferaccept/suites/test_chat.py::test_a", "outcome": "passed"},
    {"nodeid": "../x/suites/test_tools.py::test_b", "outcome": "skipped",
     "message": "unsupported: tools: HTTP 400: tools need --jinja"},
    {"nodeid": "pytest_inferaccept/suites/test_chat.py::test_c", "outcome": "failed"},
]}


def test_node_ids_lose_the_invocation_dependent_path() -> None:
    assert check_id("a/b/suites/test_x.py::test_y[1]") == "test_x.py::test_y[1]"


def test_a_recorded_run_matches_itself_and_keeps_explanations() -> None:
    doc = record(RESULTS, {"checks": {"test_chat.py::test_c": {"outcome": "failed", "why": "see docs"}}})
    assert compare(RESULTS, doc) == []
    assert doc["checks"]["test_chat.py::test_c"]["why"] == "see docs"
    assert doc["checks"]["test_tools.py::test_b"]["skip"] == "unsupported: tools"


def test_changed_missing_and_new_checks_are_all_reported() -> None:
    doc = record(RESULTS, None)
    doc["checks"]["test_chat.py::test_a"]["outcome"] = "failed"
    doc["checks"]["test_gone.py::test_z"] = {"outcome": "passed"}
    del doc["checks"]["test_chat.py::test_c"]
    diffs = compare(RESULTS, doc)
    assert "test_chat.py::test_a: expected failed, got passed" in diffs
    assert "test_gone.py::test_z: expected passed, but it did not run" in diffs
    assert any(d.startswith("test_chat.py::test_c: ran (failed) but has no expectation") for d in diffs)


def test_a_documented_either_way_outcome_accepts_both_and_survives_recording() -> None:
    doc = record(RESULTS, None)
    doc["checks"]["test_chat.py::test_c"] = {"outcome": ["passed", "failed"], "why": "timing"}
    assert compare(RESULTS, doc) == []
    again = record(RESULTS, doc)
    assert again["checks"]["test_chat.py::test_c"] == {"outcome": ["passed", "failed"], "why": "timing"}


def test_recording_again_keeps_the_stages_deselected_checks_and_their_reasons() -> None:
    deselected = {"test_responses.py::test_text_format_json_schema_is_enforced": "answers are grammar-shaped"}
    doc = record(RESULTS, {"checks": {}, "deselected": deselected})
    assert doc["deselected"] == deselected and compare(RESULTS, doc) == []
