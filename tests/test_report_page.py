"""The go/no-go page: drawn from the run's data, linked to its evidence, and safe to open."""

from __future__ import annotations

import re

import pytest

from pytest_inferaccept.model import load
from pytest_inferaccept.report.view import anchor
from pytest_inferaccept.report.words import findings as findings_of
from tests._report_runs import API_KEY, Page, ReportRun, report_run


@pytest.fixture
def run(request: pytest.FixtureRequest, pytester: pytest.Pytester,
        tmp_path_factory: pytest.TempPathFactory) -> ReportRun:
    """The inner run named by the test's parameter."""
    return report_run(request.param, pytester, tmp_path_factory)


def _banner(page: Page) -> str:
    return " ".join(page.text_of["verdict"].split())


def _assert_safe(page: Page, html: str) -> None:
    assert not page.tags("script")
    assert not page.tags("img") and not page.tags("iframe") and not page.tags("object")
    handlers = [(tag, name) for tag, attrs in page.elements for name in attrs
                if name.lower().startswith("on")]
    assert handlers == []
    for tag, attrs in page.elements:
        for name in ("href", "src", "action"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), f"<{tag} {name}={value!r}> leaves the page"
    assert "javascript:" not in html.lower()
    assert API_KEY not in html


@pytest.mark.parametrize(("run", "status", "code"), [("go", "GO", 0), ("nogo", "NO-GO", 1),
                                                     ("invalid", "INVALID", 6)], indirect=["run"])
def test_the_banner_shows_the_verdict_of_the_run(run: ReportRun, status: str, code: int) -> None:
    page = Page(run.html)
    assert run.ret == code, run.output[-2000:]
    assert _banner(page).startswith(status + " ") or _banner(page).startswith(status)
    assert run.document["verdict"]["status"] == status
    assert page.tags("title")
    assert f"VERDICT: {status}" in run.output


@pytest.mark.parametrize("run", ["go", "nogo", "invalid", "hostile"], indirect=True)
def test_every_link_on_the_page_points_at_an_anchor_that_exists(run: ReportRun) -> None:
    page = Page(run.html)
    hrefs = [str(attrs["href"]) for attrs in page.tags("a") if attrs.get("href")]
    assert hrefs
    assert [h for h in hrefs if h[1:] not in page.ids] == []


@pytest.mark.parametrize("run", ["nogo", "hostile"], indirect=True)
def test_each_reason_of_a_no_go_links_to_the_evidence_of_its_failed_check(run: ReportRun) -> None:
    page = Page(run.html)
    one_by_one = page.links_in["failed-checks"]
    findings = page.links_in["verdict"][:-len(one_by_one)]
    failed = [t for t in run.document["tests"] if t["outcome"] == "failed"]
    # The box names each distinct finding once; every failed check is one click away under it.
    assert len(findings) == len(findings_of(load(run.document))) <= len(failed)
    assert sorted(one_by_one) == sorted(f"#{anchor(t['nodeid'])}" for t in failed)
    for href in findings + one_by_one:
        assert href.startswith("#check-")
        finding = " ".join(page.text_of[href[1:]].split())
        assert "failed" in finding and "reproduce with curl" in finding


def test_a_no_go_page_says_what_fails_and_that_no_load_ran(pytester: pytest.Pytester,
                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    run = report_run("nogo", pytester, tmp_path_factory)
    page = Page(run.html)
    answer = " ".join(page.text_of["answer"].split())
    assert "Not ready:" in answer
    said = "tool_choice_required (tool_choice='required' forces a tool call): tool_choice 'required' "
    assert said in answer, answer
    assert "No load test ran" in answer
    matrix = " ".join(page.text_of["capabilities"].split())
    assert "tool_choice_required tool_choice='required' forces a tool call broken" in matrix
    assert "limitations" in page.ids and "No load test ran" in page.text_of["limitations"]


def test_a_failure_shows_its_request_status_headers_body_timing_and_a_curl_without_the_key(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> None:
    run = report_run("nogo", pytester, tmp_path_factory)
    page = Page(run.html)
    href = page.links_in["verdict"][0]
    text = " ".join(page.text_of[href[1:]].split())
    assert "POST http://127.0.0.1:" in text and "/v1/chat/completions" in text
    assert re.search(r"\b200 POST", text) and re.search(r"\d+ ms", text)
    assert "content-type application/json" in text
    assert '"finish_reason"' in text  # the response body excerpt
    assert 'Authorization: Bearer $INFERACCEPT_API_KEY' in text
    assert "curl -sS -i -X POST" in text and "--data-binary" in text


def test_the_go_page_records_the_conditions_declared_and_measured(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> None:
    run = report_run("go", pytester, tmp_path_factory)
    page = Page(run.html)
    conditions = " ".join(page.text_of["conditions"].split())
    assert run.document["conditions"]["declared"] == {"gpu": "H100x2", "tp": "2"}
    assert "gpu=H100x2" in _banner(page) and "tp=2" in _banner(page)
    for label in ("server URL", "server version", "how launched", "capabilities required", "SLO profile",
                  "pytest-inferaccept", "Python", "client host", "client CPUs", "started", "finished"):
        assert label in run.html
    assert "Test conditions" in conditions
    assert "/version: " in run.html  # what the fake server says about itself
    assert "Passed every acceptance check that ran" in " ".join(page.text_of["answer"].split())


def test_an_invalid_run_says_it_cannot_decide_and_why(pytester: pytest.Pytester,
                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    run = report_run("invalid", pytester, tmp_path_factory)
    page = Page(run.html)
    assert "server unreachable at http://127.0.0.1:9" in _banner(page)
    assert page.links_in["verdict"] == ["#problems"]
    assert "This run cannot decide" in " ".join(page.text_of["answer"].split())


@pytest.mark.parametrize("run", ["go", "nogo", "invalid", "hostile"], indirect=True)
def test_no_server_text_adds_markup_and_the_key_is_nowhere(run: ReportRun) -> None:
    _assert_safe(Page(run.html), run.html)
    assert API_KEY not in run.json_path.read_text(encoding="utf-8")
    assert API_KEY not in run.output


def test_markup_from_content_errors_headers_model_and_version_is_shown_as_text(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> None:
    run = report_run("hostile", pytester, tmp_path_factory)
    page = Page(run.html)
    text = " ".join(" ".join(page.text_of.values()).split())
    # Shown, escaped: the reader sees what the server sent.
    for shown in ("<script>alert('content')</script>", "<img src=x onerror=alert('img')>",
                  "<img src=x onerror=alert('error')>", "<script>alert('server')</script>",
                  "<img src=x onerror=alert('header')>", "<script>alert('declared')</script>"):
        assert shown in text, shown
    assert "&lt;script&gt;alert(&#39;version&#39;)&lt;/script&gt;" in run.html
    assert "m&#34;&gt;&lt;script&gt;" in run.html  # the model name, in the title too
    assert run.html.count("<script") == 0 and run.html.count("<img") == 0
