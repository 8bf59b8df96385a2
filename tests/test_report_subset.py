"""A run on a subset says so, everywhere; and the run ends by saying where its files went."""

from __future__ import annotations

import json

import pytest

from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.model import CheckResult, load
from pytest_inferaccept.report.words import limitations
from pytest_inferaccept.verdict import decide
from tests._report_runs import Page

CHECKS = """
def test_health(http_client):
    assert http_client.get("/health").status_code == 200

def test_models(http_client):
    assert http_client.get("/v1/models").status_code == 200

def test_metrics(http_client):
    assert http_client.get("/metrics").status_code == 200

def test_plain_arithmetic():
    assert 1 + 1 == 2
"""


def test_a_go_on_a_subset_says_it_was_a_subset_and_where_its_files_went(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_subset=CHECKS)
    with FakeServer() as server:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--server-url", server.url,
                                              "-k", "health or arithmetic", "--inferaccept-json",
                                              "out/r.json", "--inferaccept-html", "out/r.html")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "  - 1 checks passed (a subset: 2 acceptance checks were deselected)" in out
    assert ("  a subset: 2 acceptance checks were deselected (-k, -m or --deselect) and did not run: "
            "test_models, test_metrics") in out
    lines = out.splitlines()
    at = lines.index(f"inferaccept: results written to {pytester.path / 'out/r.json'}")
    assert lines[at + 1] == f"inferaccept: report written to {pytester.path / 'out/r.html'}"

    document = json.loads((pytester.path / "out/r.json").read_text())
    assert document["deselected"] == {"count": 2, "examples": ["test_subset.py::test_models",
                                                               "test_subset.py::test_metrics"]}
    page = Page((pytester.path / "out/r.html").read_text(encoding="utf-8"))
    assert "a subset: 2 acceptance checks were deselected" in page.text_of["verdict"]
    assert "2 acceptance checks were deselected (-k, -m or --deselect) and did not run" in \
           " ".join(page.text_of["limitations"].split())


def test_a_full_run_has_no_subset_note_and_counts_no_deselected_check(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_full=CHECKS)
    with FakeServer() as server:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--server-url", server.url,
                                              "-k", "not arithmetic", "--inferaccept-json", "r.json")
    assert result.ret == 0
    assert "a subset" not in result.stdout.str()
    assert json.loads((pytester.path / "r.json").read_text())["deselected"] == {"count": 0, "examples": []}
    assert "report written" not in result.stdout.str()  # no page was asked for


def test_the_limitations_name_the_first_deselected_checks_and_count_the_rest() -> None:
    doc = load({"schema": "pytest-inferaccept/results/1",
                "verdict": {"status": "GO", "reasons": ["1 checks passed"]},
                "conditions": {"plugin_version": "0", "python": "3", "client_host": "h",
                               "client_platform": "p", "started_at": "x", "finished_at": "y",
                               "settings": {}},
                "deselected": {"count": 12, "examples": [f"t.py::test_{i}" for i in range(10)]}})
    [line] = [s for s in limitations(doc) if "deselected" in s]
    assert line == ("12 acceptance checks were deselected (-k, -m or --deselect) and did not run, so "
                    "the verdict covers a subset (deselected: test_0, test_1, test_2, test_3, test_4 and "
                    "7 more).")


def test_the_verdict_says_nothing_of_a_subset_when_it_is_a_no_go() -> None:
    failed = decide([CheckResult(nodeid="t::a", outcome="failed", message="x")], deselected=3)
    assert failed.reasons == ["t::a failed: x"]
