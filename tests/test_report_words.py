"""The page's sentences come from the data: the answer, the limitations, the SLO table, the charts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pytest_inferaccept.model import load
from pytest_inferaccept.report import charts
from pytest_inferaccept.report.html import render
from pytest_inferaccept.report.units import fmt_limit, fmt_value, spec_label
from pytest_inferaccept.report.words import NO_LOAD, answer, failures, limitations
from tests._report_runs import Page
from tests.test_report_schema import _minimal


def _row(key: str, limit: float, measured: float, status: str, n: int = 300, **extra: Any) -> dict[str, Any]:
    return {"key": key, "limit": limit, "measured": measured, "ci_low": measured * 0.9,
            "ci_high": measured * 1.1, "n": n, "margin": (limit - measured) / limit, "status": status,
            "basis": "interval", "needed_n": None, "message": "", **extra}


def _estimate(value: float, n: int = 300) -> dict[str, Any]:
    return {"value": value, "low": value * 0.9, "high": value * 1.1, "n": n}


def _summary(concurrency: int, ttft: float) -> dict[str, Any]:
    """A summary as the results write it, in the shape docs/statistics.md gives."""
    ttft_stats = {"unit": "s", "n": 300, "p50": _estimate(ttft / 2), "p95": _estimate(ttft)}
    return {"confidence": 0.95, "counts": {"sent": 300, "warmup": 0, "measured": 300, "ok": 300, "failed": 0},
            "error_rate": _estimate(0.0), "metrics": {"ttft": ttft_stats},
            "throughput_tokens_per_s": 100.0 * min(concurrency, 8), "request_rate_per_s": 2.0,
            "usage": {"with_usage": 300, "without_usage": 0, "source": "usage", "note": ""},
            "prompt_tokens": {"n": 300, "mean": 100.0, "p50": 96, "p90": 180, "p99": 240, "max": 250}}


def _ladder() -> dict[str, Any]:
    document = copy.deepcopy(_minimal())
    levels = [(1, 0.12, "pass"), (4, 0.31, "pass"), (8, 0.47, "pass"), (16, 2.3, "fail")]
    document["tests"][0]["slo"] = {"ttft_p95": 0.5, "error_rate": 0.01}
    document["tests"][0]["load"] = [
        {"spec": {"concurrency": c, "requests": 300}, "summary": _summary(c, ttft),
         "slo": {"status": status, "confidence": 0.95, "point_estimate": False,
                 "rows": [_row("ttft_p95", 0.5, ttft, status), _row("error_rate", 0.01, 0.0, "pass")]},
         "selfcheck": {"mode": "closed", "total": {"asked_concurrency": c, "achieved_concurrency": c * 0.99,
                                                   "loop_lag_s": {"p50": 0.001, "p99": 0.004, "max": 0.01}},
                       "workers": []}}
        for c, ttft, status in levels]
    return document


def test_units_follow_the_key() -> None:
    assert fmt_value("ttft_p95", 0.84) == "840 ms"
    assert fmt_value("e2e_p99", 2.5) == "2.5 s"
    assert fmt_value("error_rate", 0.01) == "1 %"
    assert fmt_limit("throughput_min", 20) == "≥ 20 tokens/s"
    assert fmt_limit("ttft_p95", 0.5) == "≤ 500 ms"
    assert fmt_value("ttft_p95", 0.19, signed=True) == "+190 ms"
    assert spec_label({"concurrency": 8, "requests": 200}) == "concurrency 8, 200 requests"


def test_without_load_the_answer_says_so_rather_than_guessing() -> None:
    run = load(_minimal())
    assert answer(run) == ["Passed every acceptance check that ran (1 checks).", NO_LOAD]
    assert NO_LOAD in limitations(run)


def test_a_ladder_is_answered_with_the_highest_level_within_the_slos_and_what_happens_above() -> None:
    document = _ladder()
    sentences = answer(load(document))
    assert sentences[1] == (
        "Serves concurrency up to 8 within the SLOs (ttft_p95 ≤ 500 ms, error_rate ≤ 1 %) in test_a; "
        "at concurrency 16: ttft_p95 2.3 s, 95% CI 2.07 s–2.53 s, n=300 against ≤ 500 ms.")
    assert NO_LOAD not in sentences
    document["tests"][0]["load"][3]["slo"]["rows"][0]["message"] = \
        "ttft_p95 = 2.30 s (95% CI 2.07–2.53, n=300) > 0.50 s"
    assert answer(load(document))[1].endswith("at concurrency 16: ttft_p95 = 2.30 s (95% CI 2.07–2.53, "
                                              "n=300) > 0.50 s.")


def test_a_single_load_run_is_answered_with_its_own_figures() -> None:
    document = _ladder()
    document["tests"][0]["load"] = document["tests"][0]["load"][3:]
    assert answer(load(document))[1] == (
        "Misses the SLOs at concurrency 16, 300 requests (test_a): ttft_p95 2.3 s, 95% CI 2.07 s–2.53 s, "
        "n=300 against ≤ 500 ms.")


def test_limitations_name_small_samples_a_client_bound_run_and_missing_usage() -> None:
    document = _ladder()
    run = document["tests"][0]["load"][3]
    run["slo"]["rows"].append(_row("ttft_p99", 0.8, 0.7, "not enough data", n=40, needed_n=300))
    run["selfcheck"]["client_bound"] = ["event-loop lag p99 40 ms > 20 ms"]  # as run/load.py writes it
    run["summary"]["usage"].update(without_usage=300, note="no answer carried usage; tokens were counted "
                                                            "from content events")
    run["slo"]["point_estimate"] = True
    document["tests"].append({"nodeid": "t.py::test_tools", "outcome": "skipped",
                              "message": "unsupported: tools: HTTP 400: no tools"})
    document["deselected"] = {"count": 7, "examples": ["t.py::test_x"]}
    found = " | ".join(limitations(load(document)))
    assert "Sample too small for ttft_p99 in test_a at concurrency 16, 300 requests: n=40, about 300 needed" \
        in found
    assert "Client-bound in test_a at concurrency 16, 300 requests: event-loop lag p99 40 ms > 20 ms. " \
        "Those numbers describe the client" in found
    assert "The server sent no usage for 300 requests in test_a at concurrency 16, 300 requests: no answer " \
        "carried usage" in found
    assert "judged on the point estimate" in found
    assert "1 checks were skipped because the server lacks a capability they need (tools (unsupported): 1)" \
        in found
    assert "7 acceptance checks were deselected (-k, -m or --deselect) and did not run, so the verdict " \
        "covers a subset (deselected: test_x and 6 more)" in found
    assert "The server did not say which version" not in found  # no server section: nothing to say


def test_failures_read_as_one_finding_per_capability() -> None:
    document = _minimal()
    document["verdict"]["status"] = "NO-GO"
    document["tests"] = [
        {"nodeid": f"t.py::test_{i}", "outcome": "failed", "capabilities": ["tool_choice_required", "stream"],
         "message": "no tool call although tool_choice is 'required'\ndetail"} for i in range(3)]
    assert failures(load(document)) == [
        "tool_choice_required (tool_choice='required' forces a tool call): no tool call although "
        "tool_choice is 'required' (3 checks)"]


def test_the_page_always_has_the_slo_table_and_the_load_tables() -> None:
    page = Page(render(_ladder()))
    load_text = " ".join(page.text_of["load"].split())
    assert "test_a concurrency 16, 300 requests ttft_p95 ≤ 500 ms 2.3 s 2.07 s – 2.53 s 300 -360 % fail" \
        in load_text
    # Two tables that fit a page: what the server did, then how the figures were made.
    assert ("what the server did load requests failed error rate TTFT p50 TTFT p95 output tokens/s "
            "requests/s concurrency 1, 300 requests") in load_text
    assert "concurrency 8, 300 requests 300 0 0 % 235 ms 470 ms 800 2 concurrency 16" in load_text
    assert ("load token counts from prompt tokens p50 / p90 / p99 achieved load loop lag p99 "
            "concurrency 1, 300 requests") in load_text
    assert "concurrency 8, 300 requests usage 96 / 180 / 240 7.92 of 8 4 ms" in load_text
    assert [h for h in (str(a["href"]) for a in page.tags("a")) if h[1:] not in page.ids] == []


@pytest.mark.skipif(not charts.available(), reason="matplotlib is not installed (charts are optional)")
def test_with_matplotlib_the_ladder_is_drawn_as_inline_svg() -> None:
    html = render(_ladder())
    page = Page(html)
    assert len(page.tags("svg")) == 2 and not page.tags("script") and not page.tags("img")
    assert "highest level within SLOs: 8" in html
    assert render(_ladder()) == html  # the same data draws the same SVG


def test_the_cases_of_one_parametrized_check_read_as_one_finding() -> None:
    document = _minimal()
    document["verdict"]["status"] = "NO-GO"
    document["tests"] = [
        {"nodeid": f"t.py::test_bad_input_is_refused[{case}]", "outcome": "failed",
         "message": f"answered 200 to invalid input ({case})"}
        for case in ("model_missing", "role_unknown", "top_p_above_range", "stop_five", "seed_big", "n_zero")
    ] + [{"nodeid": "t.py::test_unknown_model", "outcome": "failed", "message": "answered 200"}]
    assert failures(load(document)) == [
        "test_bad_input_is_refused: fails for 6 cases (model_missing, role_unknown, top_p_above_range, "
        "stop_five, seed_big and 1 more); the first: answered 200 to invalid input (model_missing)",
        "test_unknown_model: answered 200"]


def test_a_workload_described_as_a_mapping_reads_as_its_kind_and_lengths() -> None:
    spec = {"concurrency": 4, "requests": 100,
            "workload": {"type": "synthetic", "input": "fixed(64)", "output": "fixed(32)", "seed": 0}}
    assert spec_label(spec) == ("concurrency 4, 100 requests, synthetic workload "
                                "(input fixed(64), output fixed(32))")


def test_a_deeply_nested_request_body_is_shown_as_sent() -> None:
    document = _minimal()
    body = "[" * 1000 + "]" * 1000  # a robustness check's body: deeper than json.loads goes
    document["tests"] = [{"nodeid": "t.py::test_deep", "outcome": "failed", "message": "answered 500",
                          "evidence": {"exchanges": [{"method": "POST", "url": "http://h/v1/chat/completions",
                                                      "request_body": body, "status": 500}]}}]
    assert body in render(document)
