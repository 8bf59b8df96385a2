"""A NO-GO page's first box: its distinct findings with their counts; the failed checks one click away."""

from __future__ import annotations

import copy
from typing import Any

from pytest_inferaccept.model import load
from pytest_inferaccept.report.html import render
from pytest_inferaccept.report.view import anchor, build_page
from pytest_inferaccept.report.words import failures, findings
from tests._report_runs import Page
from tests.test_report_schema import _minimal

ROBUSTNESS = "test_robustness.py::test_request_is_answered_by_the_status_policy_and_the_server_survives"
CASES = ("model_missing", "model_not_string", "model_unknown", "messages_empty", "role_unknown",
         "role_missing", "max_tokens_zero", "max_tokens_huge", "temperature_below_range",
         "temperature_above_range",
         "top_p_below_range", "top_p_above_range", "stop_five_entries", "top_logprobs_above_range",
         "top_logprobs_negative", "seed_int64_overflow", "tool_missing_name", "tool_choice_absent_tool",
         "embeddings_empty_string", "stream_not_boolean")
SESSION_FINDING = "the server answered without the required API key: auth is not enforced"


def _failed(nodeid: str, message: str, capabilities: list[str] | None = None) -> dict[str, Any]:
    return {"nodeid": nodeid, "outcome": "failed", "duration_s": 0.1, "message": message,
            "file": nodeid.split("::", 1)[0], "capabilities": capabilities or []}


def _no_go() -> dict[str, Any]:
    """A NO-GO like llama.cpp's: 20 robustness cases, 3 tool checks, 2 checks of their own, 1 pass."""
    document = copy.deepcopy(_minimal())
    tests = [_failed(f"{ROBUSTNESS}[{case}]", f"answered 200 to an invalid request ({case}) <b>bold</b>")
             for case in CASES]
    tests += [_failed(f"test_tools.py::test_tool_choice_required_forces_a_valid_call[{mode}]",
                      "no tool call although tool_choice is 'required'", ["tool_choice_required", "tools"])
              for mode in ("stream", "non-stream", "parallel")]
    tests += [_failed("test_chat.py::test_unknown_model_is_refused_with_404", "answered 200 to model 'nope'"),
              _failed("test_fuzz.py::test_generated_requests_never_break_the_server", "answered 500")]
    tests.append({"nodeid": "test_chat.py::test_chat_answers", "outcome": "passed", "duration_s": 0.1})
    document["tests"] = tests
    document["verdict"] = {
        "status": "NO-GO", "warnings": [], "counts": {"failed": 25, "passed": 1},
        "reasons": [SESSION_FINDING] + [f"{t['nodeid']} failed: {t['message']}" for t in tests[:-1]]}
    return document


def _box_items(page: Page, html: str) -> list[str]:
    """The text of each line of the verdict box's own list (not the failed checks behind it)."""
    start = html.index('<section id="verdict"')
    box = html[start:html.index("</section>", start)].split('<details class="failed-ids"', 1)[0]
    items = (f'<div id="x">{chunk.split("</li>", 1)[0]}</div>' for chunk in box.split("<li>")[1:])
    return [" ".join(Page(item).text_of.get("x", "").split()) for item in items]


def test_the_box_of_a_no_go_with_many_cases_lists_its_findings_with_counts_not_test_ids() -> None:
    document = _no_go()
    html = render(document)
    page = Page(html)
    items = _box_items(page, html)
    assert items[0] == f"{SESSION_FINDING} evidence"  # the session's own finding keeps its place, first
    assert items[1].startswith("20 cases test_request_is_answered_by_the_status_policy_and_the_server_"
                               "survives: answered 200 to an invalid request (model_missing) <b>bold</b>")
    assert items[2].startswith("3 checks tool_choice_required (tool_choice='required' forces a tool call): "
                               "no tool call")
    assert items[3].startswith("1 check test_unknown_model_is_refused_with_404: answered 200")
    assert items[4].startswith("1 check test_generated_requests_never_break_the_server: answered 500")
    assert len(items) == 5  # before: 12 of 26 reasons, one per test id, and "… and 14 more"
    assert not any("[" in item for item in items)  # no case id in the box
    assert "… and" not in " ".join(page.text_of["verdict"].split()).split("one by one")[0]
    # Each finding links to the evidence of its first failed check.
    links = page.links_in["verdict"]
    one_by_one = page.links_in["failed-checks"]
    firsts = (f"{ROBUSTNESS}[model_missing]",
              "test_tools.py::test_tool_choice_required_forces_a_valid_call[stream]",
              "test_chat.py::test_unknown_model_is_refused_with_404",
              "test_fuzz.py::test_generated_requests_never_break_the_server")
    assert links[1:5] == [f"#{anchor(n)}" for n in firsts]
    # Every failed check is one click away, by its id, linked to its own evidence.
    assert one_by_one == [f"#{anchor(t['nodeid'])}" for t in document["tests"] if t["outcome"] == "failed"]
    summary = " ".join(page.text_of["failed-checks"].split())
    assert summary.startswith("The 25 failed checks one by one")
    assert "the_server_survives[stream_not_boolean] failed: answered 200" in summary
    assert [h for h in links if h[1:] not in page.ids] == []
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html  # server text stays text


def test_the_box_and_the_answer_tell_the_same_findings() -> None:
    run = load(_no_go())
    page = build_page(run)
    found = findings(run)
    assert [f.line for f in found] == failures(run) == list(page.fails)
    assert [r.count for r in page.reasons[1:]] == [f.count_words() for f in found] == [
        "20 cases", "3 checks", "1 check", "1 check"]
    assert f"{len(found)} distinct findings" in page.answer[0]


def test_a_server_that_stopped_is_one_finding_in_the_box_with_the_checks_it_explains() -> None:
    document = _no_go()
    document["tests"] = document["tests"][:3] + document["tests"][-1:]
    for test in document["tests"][1:3]:
        test["caused_by"] = 0
    summary = "server stopped answering during test_x; 1 later check failed because of it"
    document["causes"] = [{"kind": "stopped answering", "server": "http://127.0.0.1:1", "reason": "refused",
                           "during": document["tests"][1]["nodeid"], "summary": summary,
                           "consequences": [document["tests"][2]["nodeid"]]}]
    first = document["tests"][0]
    document["verdict"]["reasons"] = [summary, f"{first['nodeid']} failed: {first['message']}"]
    page = build_page(load(document))
    assert [(r.count, r.text, r.href) for r in page.reasons] == [
        ("2 checks", summary, "#cause-1"),
        ("1 case", f"{first['nodeid'].split('::')[1]}: {first['message']}", f"#{anchor(first['nodeid'])}")]
    assert [link.href for link in page.failed_checks] == [f"#{anchor(first['nodeid'])}"]


def test_a_go_and_an_invalid_box_keep_their_reasons_and_have_nothing_behind_them() -> None:
    go = build_page(load(_minimal()))
    assert [(r.text, r.count) for r in go.reasons] == [("1 checks passed", "")] and go.failed_checks == ()
    invalid = copy.deepcopy(_no_go())
    invalid["verdict"] = {"status": "INVALID", "reasons": ["server unreachable at http://127.0.0.1:9"],
                          "warnings": [], "counts": {}}
    page = build_page(load(invalid))
    assert [(r.text, r.href, r.count) for r in page.reasons] == [
        ("server unreachable at http://127.0.0.1:9", "#problems", "")]
    assert page.failed_checks == ()
    assert 'id="failed-checks"' not in render(invalid)
