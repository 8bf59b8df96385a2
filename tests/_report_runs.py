"""Inner acceptance runs that write the report, shared by the report tests (each run once)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.fake import FakeServer

API_KEY = "sk-inferaccept-test-7f3a9c2e1b"
PAYLOADS = ("<script>alert('content')</script>", "<img src=x onerror=alert('img')>")
HOSTILE_TESTS = '''
def test_content_is_plain_text(http_client, model, inferaccept_evidence):
    r = http_client.post("/v1/chat/completions", json={
        "model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
    content = r.json()["choices"][0]["message"]["content"]
    inferaccept_evidence.note("the model said " + content)
    inferaccept_evidence.warn("markup in content: " + content)
    assert "<" not in content, content


def test_empty_messages_are_refused_with_200(http_client, model):
    r = http_client.post("/v1/chat/completions", json={"model": model, "messages": []})
    assert r.status_code == 200, r.text
'''
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class ReportRun:
    """One inner run: exit status, terminal output, the page and the results document."""

    ret: int
    output: str
    html: str
    document: dict[str, Any]
    html_path: Path
    json_path: Path


class Page(HTMLParser):
    """The page parsed: every element with its attributes, the ids, and the text under each id."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.ids: set[str] = set()
        self.text_of: dict[str, str] = {}
        self.links_in: dict[str, list[str]] = {}
        self._open: list[str | None] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.elements.append((tag, found))
        ident = found.get("id")
        if ident:
            self.ids.add(ident)
            self.text_of.setdefault(ident, "")
        if tag == "a" and found.get("href"):
            for open_id in filter(None, self._open):
                self.links_in.setdefault(open_id, []).append(str(found["href"]))
        self.handle_data(" ")  # element boundaries separate words, as a browser shows them
        if tag not in VOID:
            self._open.append(ident)

    def handle_endtag(self, tag: str) -> None:
        if tag not in VOID and self._open:
            self._open.pop()
        self.handle_data(" ")

    def handle_data(self, data: str) -> None:
        for open_id in filter(None, self._open):
            self.text_of[open_id] += data

    def tags(self, name: str) -> list[dict[str, str | None]]:
        """The attributes of every element with this tag name."""
        return [attrs for tag, attrs in self.elements if tag == name]


_RUNS: dict[str, ReportRun] = {}


@contextmanager
def hostile_server() -> Iterator[str]:
    """A server whose content, error messages, headers, model name and version carry markup."""
    from tests._hostile_server import HostileServer

    with HostileServer(api_key=API_KEY) as server:
        yield server.url


def _run(pytester: pytest.Pytester, out: Path, url: str | None, extra: list[str]) -> ReportRun:
    html_path, json_path = out / "report.html", out / "results.json"
    argv = ["-p", "no:cacheprovider", "--inferaccept-html", str(html_path),
            "--inferaccept-json", str(json_path), *extra]
    if url:
        argv += ["--server-url", url]
    result = pytester.runpytest_inprocess(*argv)
    return ReportRun(ret=int(result.ret), output=str(result.stdout) + str(result.stderr),
                     html=html_path.read_text(encoding="utf-8"),
                     document=json.loads(json_path.read_text(encoding="utf-8")),
                     html_path=html_path, json_path=json_path)


def report_run(name: str, pytester: pytest.Pytester, factory: pytest.TempPathFactory) -> ReportRun:
    """The run called `name` (go, nogo, invalid, hostile), made on first use."""
    if name in _RUNS:
        return _RUNS[name]
    out = factory.mktemp(f"report-{name}")
    key = ["--api-key", API_KEY]
    if name == "go":
        with FakeServer(api_key=API_KEY) as server:
            run = _run(pytester, out, server.url, [
                *key, "--capabilities", "chat,metrics", "--embedding-model", "fake-embed",
                "--condition", "gpu=H100x2", "--condition", "tp=2",
                "--pyargs", "pytest_inferaccept.suites.test_service",
                "pytest_inferaccept.suites.test_metrics"])
    elif name == "nogo":
        with FakeServer(api_key=API_KEY, faults=["tool_required_ignored"]) as server:
            run = _run(pytester, out, server.url, [
                *key, "--capabilities", "chat", "--pyargs", "pytest_inferaccept.suites.test_tools"])
    elif name == "invalid":
        pytester.makepyfile(test_one=HOSTILE_TESTS)
        run = _run(pytester, out, "http://127.0.0.1:9", key)
    elif name == "hostile":
        pytester.makepyfile(test_hostile=HOSTILE_TESTS)
        with hostile_server() as url:
            run = _run(pytester, out, url, [*key, "--condition", "note=<script>alert('declared')</script>"])
    else:
        raise KeyError(name)
    _RUNS[name] = run
    return run
