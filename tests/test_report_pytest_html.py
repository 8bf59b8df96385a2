"""With pytest-html installed, its report carries the verdict, two columns and each test's evidence."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import pytest

from tests._report_runs import API_KEY, HOSTILE_TESTS, Page, hostile_server

pytest.importorskip("pytest_html")


class _Blob(HTMLParser):
    """pytest-html keeps its test data as JSON in one attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, Any] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "data-jsonblob" and value:
                self.data = json.loads(value)


def _fragment_of(html: str, start: str) -> str:
    begin = html.index(start)
    return html[begin:html.index("</div>", begin) + len("</div>")]  # the fragment nests no <div>


def test_pytest_html_shows_the_verdict_columns_and_escaped_evidence(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hostile=HOSTILE_TESTS)
    with hostile_server() as url:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--server-url", url, "--api-key",
                                              API_KEY, "--html", "report.html", "--self-contained-html")
    assert result.ret == 1
    html = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert API_KEY not in html
    summary = _fragment_of(html, '<div class="inferaccept">')
    assert '<span class="status nogo">NO-GO</span>' in summary
    assert "Not ready: 2 of 2 checks that ran to a result failed" in html
    assert not Page(summary).tags("script") and not Page(summary).tags("img")
    assert "Capability" in html and "Acceptance" in html
    blob = _Blob()
    blob.feed(html)
    tests = [t for runs in blob.data["tests"].values() for t in runs]
    assert {t["result"] for t in tests} == {"Failed"}
    for test in tests:
        row = test["resultsTableRow"]
        assert any("col-inferaccept-outcome" in cell and ">failed<" in cell for cell in row)
        extras = [e for e in test["extras"] if e["format_type"] == "html"]
        assert len(extras) == 1
        fragment = Page(extras[0]["content"])
        assert not fragment.tags("script") and not fragment.tags("img")
        assert [n for _, attrs in fragment.elements for n in attrs if n.startswith("on")] == []
        assert "reproduce with curl" in extras[0]["content"]
        assert API_KEY not in extras[0]["content"]


def test_without_html_the_integration_stays_out_of_the_way(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        def pytest_sessionfinish(session):
            print("registered:", session.config.pluginmanager.has_plugin("inferaccept-pytest-html"))
    """)
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-s")
    result.stdout.fnmatch_lines(["*registered: False*"])
