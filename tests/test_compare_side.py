"""The side-by-side view: a row per distinct finding grouped by area, and a page that is safe to open."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.compare.__main__ import main
from pytest_inferaccept.compare.side import table
from pytest_inferaccept.compare.side_findings import LABEL_MAX, finding_rows
from pytest_inferaccept.model import load
from tests._report_runs import Page
from tests.test_report_schema import _minimal

API_KEY = "sk-side-by-side-4c1e8a7f0b"
SCRIPT = "<script>alert('side')</script>"
IMG = "<img src=x onerror=alert('side')>"
ROBUSTNESS = "test_robustness.py::test_request_is_answered_by_the_status_policy_and_the_server_survives"
CASES = [f"case_{i:02d}_with_a_long_descriptive_name" for i in range(20)]
TOOLS = "test_tools.py::test_tool_choice_required_forces_a_valid_call"


def _test(nodeid: str, outcome: str, message: str = "",
          capabilities: list[str] | None = None) -> dict[str, Any]:
    return {"nodeid": nodeid, "outcome": outcome, "duration_s": 0.1, "message": message,
            "file": nodeid.split("::", 1)[0], "capabilities": capabilities or []}


def _run(failing: set[str], message: str = "answered 200 to an invalid request") -> dict[str, Any]:
    """A run of 20 robustness cases, 3 tool checks and one plain check; `failing` names what fails."""
    document = copy.deepcopy(_minimal())
    tests = [_test(f"{ROBUSTNESS}[{case}]", "failed" if "robustness" in failing and i % 2 == 0 else "passed",
                   f"{message} ({case})") for i, case in enumerate(CASES)]
    tests += [_test(f"{TOOLS}[{mode}]", "failed" if "tools" in failing else "passed", "no tool call",
                    ["tool_choice_required", "tools"]) for mode in ("stream", "non-stream", "parallel")]
    tests.append(_test("test_chat.py::test_unknown_model_is_refused_with_404", "passed"))
    bad = [t for t in tests if t["outcome"] == "failed"]
    document["tests"] = tests
    reasons = [f"{t['nodeid']} failed: {t['message']}" for t in bad] or ["checks passed"]
    document["verdict"] = {"status": "NO-GO" if bad else "GO", "warnings": [], "reasons": reasons,
                           "counts": {"failed": len(bad), "passed": len(tests) - len(bad)}}
    return document


def test_the_rows_are_a_finding_each_grouped_by_area_with_case_counts_per_run() -> None:
    docs = [load(_run(set())), load(_run({"robustness", "tools"})), load(_run({"tools"}))]
    lines = table(["vllm.json", "sglang.json", "llama.json"], docs).splitlines()
    header, *rows = lines
    assert header.split() == ["vllm.json", "sglang.json", "llama.json"]
    start = next(i for i, r in enumerate(rows) if r.startswith("findings (failed of the checks run)"))
    shown = [" ".join(r.split()) for r in rows[start:]]
    assert shown == [
        "findings (failed of the checks run)",
        "robustness",
        "request_is_answered_by_the_status_policy_an… 20 passed 10 of 20 failed 20 passed",
        "tools",
        "tool_choice_required 3 passed 3 of 3 failed 3 of 3 failed",
    ]
    assert rows[start + 1].startswith("  robustness") and rows[start + 2].startswith("    request_is")
    # Before: a row per failed case, labelled with its test id (113 characters here), 13 such rows.
    labels = [r[:len(header) - len(header.lstrip())].rstrip() for r in rows]
    assert max(len(label) for label in labels) <= LABEL_MAX + 4
    assert not any("[" in r or "::" in r for r in rows)


def test_each_row_carries_what_the_report_calls_one_finding_and_its_cases() -> None:
    docs = [load(_run(set())), load(_run({"robustness"}, message="answered 500"))]
    [robustness] = finding_rows(docs)
    assert robustness.area == "robustness" and robustness.failed == (0, 10)
    assert robustness.title == "test_request_is_answered_by_the_status_policy_and_the_server_survives"
    assert robustness.seen == ("", f"answered 500 ({CASES[0]})")
    assert [name for name, _ in robustness.cases] == [f"{ROBUSTNESS.split('::')[1]}[{c}]" for c in CASES[::2]]
    assert {outcomes for _, outcomes in robustness.cases} == {("passed", "failed")}


def test_without_a_failure_in_any_run_the_findings_row_says_none() -> None:
    rows = table(["a.json", "b.json"], [load(_run(set())), load(_run(set()))]).splitlines()
    assert [" ".join(r.split()) for r in rows if r.startswith("findings")] == ["findings none none"]


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_the_html_page_shows_server_text_as_text_and_prints_no_api_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    said = f"{SCRIPT} {IMG} key {API_KEY} Authorization: Bearer {API_KEY}"
    hostile = _run({"robustness", "tools"}, message=said)
    hostile["conditions"]["settings"]["model"] = 'm"><script>alert("model")</script>'
    hostile["conditions"]["declared"] = {"note": SCRIPT, "launch": f"vllm serve --api-key {API_KEY}"}
    files = [_write(tmp_path / "clean.json", _run(set())), _write(tmp_path / "hostile.json", hostile)]
    page_path = tmp_path / "out" / "side.html"
    monkeypatch.setenv("INFERACCEPT_API_KEY", API_KEY)
    assert main([*map(str, files), "--html", str(page_path)]) == 0  # --html implies the side-by-side
    printed = capsys.readouterr().out
    assert f"side-by-side page written to {page_path}" in printed
    text = page_path.read_text(encoding="utf-8")
    page = Page(text)
    # Nothing the server sent became markup: no script, no image, no handler, no link off the page.
    assert not page.tags("script") and not page.tags("img") and "<script" not in text and "<img" not in text
    assert [(t, n) for t, attrs in page.elements for n in attrs if n.lower().startswith("on")] == []
    assert all(str(a.get("href", "#")).startswith("#") for a in page.tags("a"))
    assert "default-src 'none'" in text
    seen = " ".join(" ".join(page.text_of.values()).split())
    assert SCRIPT in seen and IMG in seen  # shown, escaped, as the server sent it
    assert "10 of 20 failed" in seen and "3 of 3 failed" in seen
    assert 'm"><script>alert("model")</script>' in seen
    # The key is nowhere, bare, after Bearer or after --api-key, in the page or on the terminal.
    assert API_KEY not in text and API_KEY[:8] not in text
    assert API_KEY not in printed
    assert "Bearer ***" in seen and "--api-key ***" in seen


def test_the_page_lists_each_runs_verdict_findings_and_capabilities(tmp_path: Path) -> None:
    from pytest_inferaccept.compare.side_html import render

    page = Page(render(["clean.json", "broken.json"], [load(_run(set())), load(_run({"tools"}))]))
    runs = " ".join(page.text_of["runs"].split())
    assert "clean.json broken.json" in runs and "GO" in runs and "NO-GO" in runs
    assert "0 distinct findings" in runs and "1 distinct finding" in runs
    findings = " ".join(page.text_of["findings"].split())
    assert ("tools tool_choice_required (tool_choice='required' forces a tool call) 3 passed 3 of 3 failed "
            "no tool call") in findings
    assert "3 checks that failed in some run, one by one" in findings
    assert [h for h in (str(a["href"]) for a in page.tags("a")) if h[1:] not in page.ids] == []


def _graded(correct: int, flips: int, source: str = "bundled") -> dict[str, Any]:
    """A run whose correctness suite graded `correct` of 200 known answers."""
    document = _run(set())
    document["tests"][-1]["correctness"] = {
        "set": source, "accuracy": {"correct": correct, "n": 200, "unanswered": 3, "low": 0.3, "high": 0.5,
                                    "confidence": 0.95},
        "self_flips": flips, "self_flip_rate": flips / 200, "tolerance": 0.05, "logprobs": True}
    return document


def test_each_framework_gets_an_accuracy_row_above_the_performance_rows(tmp_path: Path) -> None:
    runs = [load(_graded(92, 0)), load(_graded(93, 8, source="team.jsonl")), load(_run(set()))]
    text = table(["llama", "vllm", "plain"], runs)
    lines = text.splitlines()
    heading = next(i for i, line in enumerate(lines) if line.startswith("correctness (known-answer set)"))
    assert lines[heading + 1].startswith("≠ set") and "bundled (200 items)" in lines[heading + 1]
    accuracy = lines[heading + 2]
    assert accuracy.split()[:4] == ["accuracy", "92/200", "46.0%", "[30.0%,"] and "93/200 46.5%" in accuracy
    assert accuracy.rstrip().endswith("-")
    assert "4.0% (8)" in lines[heading + 4]
    paths = []
    for name, doc in (("a.json", _graded(92, 0)), ("b.json", _run(set()))):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(doc), encoding="utf-8")
    page = tmp_path / "side.html"
    assert main([*map(str, paths), "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert "correctness (known-answer set)" in html and "92/200 46.0% [30.0%, 50.0%]" in html
