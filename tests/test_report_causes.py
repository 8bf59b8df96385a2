"""Causes before symptoms: a server that stops mid-run is one finding, and what failed after it is grouped."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import pytest
from aiohttp import web

from pytest_inferaccept.evidence import Exchange
from pytest_inferaccept.model import CheckResult, load
from pytest_inferaccept.outage import Cause, connection_failure
from pytest_inferaccept.verdict import decide
from tests._processes import FAKE_CMD
from tests._report_runs import Page

CHATS = "import pytest\n" + "\n".join(f'''
@pytest.mark.capability("chat")
def test_chat_{i}(http_client, model):
    r = http_client.post("/v1/chat/completions", json={{
        "model": model, "max_tokens": 2, "messages": [{{"role": "user", "content": "hi"}}]}})
    assert r.status_code == 200
''' for i in range(1, 5)) + '''

@pytest.mark.capability("metrics")
def test_metrics(http_client):
    assert http_client.get("/metrics").status_code == 200
'''


@dataclass
class _Crashing:
    """Where the crashing server listens, and the handle that stops it."""

    url: str = ""
    chats: int = 0
    loop: asyncio.AbstractEventLoop | None = None
    stop: asyncio.Event | None = None
    listeners: list[Any] = field(default_factory=list)


def _crashing_app(state: _Crashing) -> web.Application:
    """Health, models, and a chat endpoint whose first request takes the whole server down."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "crashy", "object": "model"}]})

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def chat(request: web.Request) -> web.Response:
        state.chats += 1
        for listener in state.listeners:
            listener.close()  # no new connection is accepted from now on, as after a crash
        assert request.transport is not None
        request.transport.close()  # and this request gets no answer at all
        raise web.HTTPInternalServerError()

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


@pytest.fixture
def crashing_server() -> Iterator[_Crashing]:
    """A server in a background thread that stops accepting connections at its first chat request."""
    state = _Crashing()
    ready = threading.Event()

    async def serve() -> None:
        runner = web.AppRunner(_crashing_app(state), access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        listener = site._server
        assert listener is not None
        state.listeners.append(listener)
        state.url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"  # type: ignore[attr-defined]
        state.loop, state.stop = asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        await state.stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield state
    assert state.loop is not None and state.stop is not None
    state.loop.call_soon_threadsafe(state.stop.set)
    thread.join(5)


def test_a_server_that_stops_answering_is_one_cause_and_the_later_failures_its_consequences(
        pytester: pytest.Pytester, crashing_server: _Crashing) -> None:
    pytester.makepyfile(test_crash=CHATS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--server-url", crashing_server.url,
                                          "--capabilities", "chat,metrics", "--inferaccept-json", "r.json",
                                          "--inferaccept-html", "r.html")
    out = result.stdout.str()
    assert result.ret == 1
    assert crashing_server.chats == 1
    # The dropped request reads as a disconnect or a reset, as the race between close and read goes.
    first = "the server stopped answering during test test_crash.py::test_chat_1 (last request: " \
            "POST /v1/chat/completions: "
    # Said once as it happens, and once in the verdict with the count; no per-test reason besides.
    assert out.count(f"inferaccept: {first}") == 1
    assert f"  - {first}" in out and "the 4 later failures are consequences" in out
    summary = out[out.index("VERDICT: NO-GO"):]
    assert summary.count("  - ") == 1
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1 and outcomes.get("errors") == 4  # outcomes stay what they were

    document = json.loads((pytester.path / "r.json").read_text())
    run = load(document)
    [cause] = run.causes
    assert cause.kind == "stopped answering" and cause.server == crashing_server.url
    assert cause.during == "test_crash.py::test_chat_1"
    assert cause.consequences == [f"test_crash.py::test_chat_{i}" for i in (2, 3, 4)] + [
        "test_crash.py::test_metrics"]
    assert "ConnectError" in cause.reason
    assert run.verdict.reasons == [cause.summary]
    assert all(t.caused_by == 0 for t in run.tests)
    later = [t for t in run.tests if t.nodeid in cause.consequences]
    assert all(t.outcome == "error" and t.message.startswith("not run: the server stopped answering")
               for t in later)
    # The chat request the server died on is a finding about chat; a check that never ran is not
    # one about its capability.
    assert run.capabilities["chat"].status == "broken"
    assert run.capabilities["metrics"].status == "not exercised"

    page = Page((pytester.path / "r.html").read_text(encoding="utf-8"))
    assert "cause-1" in page.ids
    assert " ".join(page.text_of["cause-1"].split()).startswith("server stopped " + first)
    # One finding with evidence (the check that was running), not five.
    findings = [a for t, a in page.elements if t == "section" and "finding" in (a.get("class") or "")]
    assert len(findings) == 2 and "cause" in (findings[0].get("class") or "")
    assert len([h for h in page.links_in["cause-1"] if h.startswith("#check-")]) == 5
    assert "#cause-1" in page.links_in["verdict"]
    assert "(4 of them only because the server had stopped answering), 1 distinct finding" in \
           " ".join(page.text_of["answer"].split())
    assert "4 checks were not judged" in page.text_of["limitations"]


def test_a_failure_while_the_server_still_answers_stays_the_tests_own_finding(
        pytester: pytest.Pytester) -> None:
    from pytest_inferaccept.fake import FakeServer

    pytester.makepyfile("""
        import httpx
        def test_elsewhere(http_client):
            httpx.get("http://127.0.0.1:9/health")
        def test_chat(http_client):
            assert http_client.get("/health").status_code == 200
    """)
    with FakeServer() as server:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--server-url", server.url,
                                              "--inferaccept-json", "r.json")
    document = json.loads((pytester.path / "r.json").read_text())
    assert result.ret == 1
    assert document["causes"] == []
    assert document["verdict"]["reasons"][0].startswith("test_a_failure_while_the_server_still_answers")
    assert "stopped answering" not in result.stdout.str()


def test_a_launched_server_that_exits_groups_the_later_failures_under_its_exit(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_exits=CHATS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--server-cmd",
                                          f"{FAKE_CMD} --exit-after 1", "--inferaccept-json", "r.json")
    out = result.stdout.str()
    assert result.ret == 1
    run = load(json.loads((pytester.path / "r.json").read_text()))
    [cause] = run.causes
    assert cause.kind == "exited" and cause.reason == "exit code 3"
    assert cause.during == "test_exits.py::test_chat_2"
    assert len(cause.consequences) == 3
    assert run.verdict.reasons == [cause.summary]
    assert "the launched server exited (exit code 3) during test test_exits.py::test_chat_2; " \
           "the 3 later failures are consequences" in out
    assert "fake server listening" in cause.detail  # the end of its log travels with the cause


# --- the pieces -------------------------------------------------------------------------------


def test_a_refused_connection_is_found_inside_the_sdks_wrapper_with_its_request() -> None:
    request = httpx.Request("POST", "http://h:1/v1/chat/completions")
    try:
        try:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        except httpx.ConnectError as inner:
            raise openai.APIConnectionError(request=request) from inner  # type: ignore[arg-type]
    except openai.APIConnectionError as exc:
        found = connection_failure(exc)
    assert found is not None
    assert found.describe() == "POST /v1/chat/completions: ConnectError: [Errno 111] Connection refused"
    assert found.origin == "http://h:1"


def test_a_timeout_or_an_assertion_is_not_a_lost_connection() -> None:
    assert connection_failure(httpx.ReadTimeout("slow")) is None
    assert connection_failure(AssertionError("500 != 200")) is None


def test_a_test_that_caught_the_error_is_judged_by_its_last_exchange() -> None:
    lost = Exchange(method="GET", url="http://h:1/health", error="ReadError: [Errno 104] Connection reset")
    answered = Exchange(method="GET", url="http://h:1/health", status=200)
    found = connection_failure(AssertionError("the server died"), [answered, lost])
    assert found is not None and found.describe() == "GET /health: ReadError: [Errno 104] Connection reset"
    assert connection_failure(AssertionError("x"), [lost, answered]) is None


@pytest.mark.parametrize(("later", "words"), [
    (0, "no later check failed because of it"), (1, "the 1 later failure is a consequence"),
    (7, "the 7 later failures are consequences")])
def test_a_cause_reads_as_one_sentence_with_its_count(later: int, words: str) -> None:
    cause = Cause(kind="stopped answering", server="http://h:1", reason="GET /health: ConnectError",
                  during="t.py::test_a", last_request="POST /v1/chat/completions: ConnectError: refused",
                  consequences=[f"t.py::test_{i}" for i in range(later)])
    assert cause.sentence() == ("the server stopped answering during test t.py::test_a (last request: "
                                f"POST /v1/chat/completions: ConnectError: refused); {words}")


def test_the_verdict_gives_each_cause_one_reason_ahead_of_the_other_failures() -> None:
    outcomes = [CheckResult(nodeid="t::own", outcome="failed", message="wrong"),
                *(CheckResult(nodeid=f"t::{i}", outcome="error", message="gone", caused_by=0)
                  for i in range(3))]
    verdict = decide(outcomes, causes=["the server stopped answering during test t::0; ..."])
    assert verdict.status == "NO-GO"
    assert verdict.reasons == ["the server stopped answering during test t::0; ...", "t::own failed: wrong"]
    assert verdict.counts == {"failed": 1, "error": 3}
