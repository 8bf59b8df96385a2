"""The page's "Changed since the baseline" section: drawn from the comparison, linked, and escaped."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.baseline.diff import compare, verdict_reasons, warnings
from pytest_inferaccept.baseline.gate import unusable
from pytest_inferaccept.gate_settings import GateSettings
from pytest_inferaccept.model import SCHEMA_ID, load
from pytest_inferaccept.report.html import render
from tests._report_runs import Page

SCRIPT = "<script>alert('answer')</script>"
IMG = "<img src=x onerror=alert('img')>"
LOAD_TEST = "tests/test_load.py::test_chat_traffic"
TOOLS_TEST = "tests/test_tools.py::test_our_booking_tool"


def _load(ttft: tuple[float, float, float], throughput: float) -> dict[str, Any]:
    value, low, high = ttft
    return {"spec": {"concurrency": 4, "requests": 200},
            "summary": {"metrics": {"ttft": {"p95": {"value": value, "low": low, "high": high, "n": 200}}},
                        "throughput_tokens_per_s": throughput},
            "selfcheck": {"client_bound": False}}


def _document(*, host: str, started: str, tools: str, booking: str, ttft: tuple[float, float, float],
              throughput: float, answers: list[tuple[str, str]]) -> dict[str, Any]:
    """A results document of one run: a tool check, a load run and the fixed prompts' answers."""
    return {
        "schema": SCHEMA_ID,
        "verdict": {"status": "GO", "reasons": [], "warnings": [], "counts": {"passed": 3}},
        "conditions": {"plugin_version": "1.0", "python": "3.11", "client_host": host,
                       "client_platform": "Linux", "cpu_count": 8, "started_at": started,
                       "finished_at": started, "settings": {"server_url": "http://gpu-box:8000"}},
        "server": {"base_url": "http://gpu-box:8000", "model": "my-model",
                   "version_info": {"/version": {"version": "0.6.0" if booking == "passed" else "0.7.0"}}},
        "capabilities": {"tools": {"required": False, "status": tools},
                         "json_schema": {"required": False,
                                         "status": "unsupported" if booking == "passed" else "supported"}},
        "tests": [
            {"nodeid": TOOLS_TEST, "outcome": booking, "capabilities": ["tools"],
             "message": "" if booking == "passed" else "no tool call in the answer"},
            {"nodeid": LOAD_TEST, "outcome": "passed", "load": [_load(ttft, throughput)]},
            {"nodeid": "tests/test_answers.py::test_fixed_prompts_are_answered_and_recorded",
             "outcome": "passed",
             "evidence": {"values": {"answers": [
                 {"id": pid, "prompt": f"Prompt {pid} {SCRIPT}", "text": text, "finish_reason": "length"}
                 for pid, text in answers]}}},
        ],
    }


def _with_baseline() -> dict[str, Any]:
    old = _document(host="ci-runner-1", started="2025-03-01T14:05:00+00:00", tools="supported",
                    booking="passed", ttft=(0.050, 0.048, 0.052), throughput=100.0,
                    answers=[("capital", "Canberra"), ("code", "def sq(x): return x * x"),
                             ("list", "red, blue, yellow")])
    new = _document(host="ci-runner-2", started="2025-04-01T09:30:00+00:00", tools="broken",
                    booking="failed", ttft=(0.080, 0.075, 0.085), throughput=150.0,
                    answers=[("capital", f"Canberra {SCRIPT}"), ("code", f"x ** 2 {IMG}"),
                             ("list", "red, blue, yellow")])
    comparison = compare(load(old), load(new), GateSettings(), path="accepted/results.json")
    new["baseline"] = comparison.model_dump(exclude_unset=True)
    new["verdict"] = {"status": "NO-GO", "counts": {"passed": 2, "failed": 1},
                      "reasons": [f"{TOOLS_TEST}: no tool call in the answer", *verdict_reasons(comparison)],
                      "warnings": warnings(comparison)}
    return new


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    """A NO-GO run compared with an accepted one: regressions, good news, a flagged host, drifted answers."""
    return _with_baseline()


@pytest.fixture(scope="module")
def html(document: dict[str, Any]) -> str:
    """The page of that run."""
    return render(document)


def _text(page: Page, ident: str) -> str:
    return " ".join(page.text_of[ident].split())


def _rows(text: str) -> list[list[str]]:
    """The cells of every row of the side-by-side answers table, as text."""
    from html.parser import HTMLParser

    class Rows(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.inside = False
            self.rows: list[list[str]] = []
            self.cell: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "table" and "sbs" in (dict(attrs).get("class") or ""):
                self.inside = True
            elif self.inside and tag == "tr":
                self.rows.append([])
            elif self.inside and tag == "td":
                self.cell = []
            elif self.cell is not None:
                self.cell.append(" ")  # <br> and inline elements separate words, as a browser shows them

        def handle_endtag(self, tag: str) -> None:
            if tag == "table":
                self.inside = False
            elif self.inside and tag == "td" and self.cell is not None:
                self.rows[-1].append(" ".join("".join(self.cell).split()))
                self.cell = None

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

    parser = Rows()
    parser.feed(text)
    return [row for row in parser.rows if row]


def test_the_section_names_the_baseline_and_puts_regressions_first(document: dict[str, Any],
                                                                    html: str) -> None:
    page = Page(html)
    section = _text(page, "baseline")
    assert section.startswith("Changed since the baseline")
    assert "accepted/results.json" in section and "2025-03-01 14:05 UTC" in section
    assert "verdict GO" in section
    regressions = _text(page, "baseline-regressions")
    assert regressions.startswith("Regressions (")
    worse = [li for li in page.text_of if li.startswith("baseline-regression-")]
    assert len(worse) == len(document["baseline"]["regressions"]) >= 3
    figure = next(_text(page, i) for i in worse if "ttft p95" in page.text_of[i])
    assert "0.05 s [0.048, 0.052]" in figure and "0.08 s [0.075, 0.085]" in figure
    assert "+60%" in figure and "tolerance 10%" in figure
    assert any("capability tools lost" in page.text_of[i] for i in worse)
    order = [section.index(h) for h in ("Regressions (", "Good news (", "Only flagged (",
                                        "Answers to the fixed prompts")]
    assert order == sorted(order)
    good = section[section.index("Good news ("):section.index("Only flagged (")]
    assert "capability json_schema now supported" in good and "throughput" in good
    flagged = section[section.index("Only flagged ("):section.index("Answers to the fixed prompts")]
    assert "client host: ci-runner-1 → ci-runner-2" in flagged
    assert "server /version.version: '0.6.0' → '0.7.0'" in flagged


def test_changed_answers_sit_side_by_side_with_prompt_and_similarity(html: str) -> None:
    rows = {row[0].split()[0]: row for row in _rows(html)}
    assert set(rows) == {"capital", "code"}  # the identical answer is not repeated
    capital = rows["capital"]
    assert len(capital) == 4
    assert capital[0] == f"capital Prompt capital {SCRIPT}"
    assert capital[1] == "Canberra" and capital[2] == f"Canberra {SCRIPT}"
    assert 0 < float(capital[3].split()[0]) < 1
    assert rows["code"][2] == f"x ** 2 {IMG}"
    assert "drifted" in rows["code"][3]
    assert "1 of 3 answers identical to the baseline's (33% exact match)" in _text(Page(html), "baseline")


def test_the_banner_links_each_regression_to_its_line_in_the_section(document: dict[str, Any],
                                                                      html: str) -> None:
    page = Page(html)
    banner = page.links_in["verdict"]
    since = [r for r in document["verdict"]["reasons"] if r.startswith("since the baseline: ")]
    assert since
    targets = [href for href in banner if href.startswith("#baseline")]
    assert len(targets) == len(since)
    for href, reason in zip(targets, since, strict=True):
        assert href.startswith("#baseline-regression-")
        assert reason.removeprefix("since the baseline: ") in _text(page, href[1:])
    hrefs = [str(a["href"]) for a in page.tags("a") if a.get("href")]
    assert [h for h in hrefs if h[1:] not in page.ids] == []
    assert "#baseline" in hrefs  # the table of contents


def test_the_plain_words_answer_counts_the_regressions(document: dict[str, Any], html: str) -> None:
    answer = _text(Page(html), "answer")
    count = len(document["baseline"]["regressions"])
    assert f"Compared with the run of 2025-03-01 14:05 UTC: {count} regressions: " in answer


def test_server_text_in_the_section_is_escaped(html: str) -> None:
    page = Page(html)
    assert not page.tags("script") and not page.tags("img")
    handlers = [(tag, name) for tag, attrs in page.elements
                for name in attrs if name.lower().startswith("on")]
    assert handlers == []
    assert SCRIPT not in html and IMG not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=" in html


def test_a_page_without_a_baseline_has_no_such_section() -> None:
    document = _with_baseline()
    document["baseline"] = None
    document["verdict"]["reasons"] = document["verdict"]["reasons"][:1]
    page = Page(render(document))
    assert "baseline" not in page.ids
    assert not [i for i in page.ids if i.startswith("baseline")]
    assert "Changed since the baseline" not in " ".join(page.text_of["answer"].split())
    assert "Compared with the run of" not in render(document)


def test_a_baseline_that_could_not_be_used_says_so_plainly(tmp_path: Path) -> None:
    document = copy.deepcopy(_with_baseline())
    error = f"{tmp_path}/base.json: truncated: the JSON ends at character 120 before the document is complete"
    section = unusable(tmp_path / "base.json", error, GateSettings())
    document["baseline"] = section.model_dump(exclude_unset=True)
    document["verdict"] = {"status": "INVALID", "counts": {"passed": 3},
                           "reasons": [f"the baseline could not be compared: {error}"]}
    page = Page(render(document))
    section = _text(page, "baseline")
    assert "The baseline could not be used: " + error in section
    assert "cannot say whether anything got worse" in section
    assert "Regressions (" not in section
    assert page.links_in["verdict"] == ["#baseline"]
    assert "could not be used" in _text(page, "answer")
