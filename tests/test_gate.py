"""A gate that cannot lie: exit status, secrets, bounded reads, no orphaned servers."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from pytest_inferaccept.fake import FakeServer
from tests._processes import FAKE_CMD
from tests._processes import group_gone as _group_gone
from tests._processes import pids_started as _pids_started

KEY = "sk-gate-0123456789abcdef"
PASSWORD = "hunter2-url-password"
CHAT_PASSES = """
def test_chat(http_client, model):
    r = http_client.post("/v1/chat/completions", json={
        "model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200
"""


# --- exit status ------------------------------------------------------------------------------


def test_a_plain_failure_beside_a_passing_acceptance_test_fails_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(CHAT_PASSES + "\ndef test_plain():\n    assert 1 == 2\n")
    with FakeServer() as server:
        result = pytester.runpytest_inprocess("--server-url", server.url, "--inferaccept-json", "r.json")
    out = result.stdout.str()
    assert result.ret == 1
    assert "VERDICT: GO" in out  # the acceptance checks themselves passed ...
    assert "outside the acceptance verdict: test_a_plain_failure_beside_a_passing_acceptance_test" \
           "_fails_the_run.py::test_plain failed" in out  # ... and the summary says what else failed
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["other_failures"] == [
        "test_a_plain_failure_beside_a_passing_acceptance_test_fails_the_run.py::test_plain failed"]
    assert data["exit_status"] == 1


def test_a_collection_error_kept_going_still_fails_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_good=CHAT_PASSES, test_broken="import no_such_module_here\n")
    with FakeServer() as server:
        result = pytester.runpytest_inprocess("--server-url", server.url,
                                              "--continue-on-collection-errors")
    assert result.ret == 1
    assert "test_broken.py could not be collected" in result.stdout.str()


# --- secrets ----------------------------------------------------------------------------------


def _echo_app() -> web.Application:
    """A server that echoes the Authorization it got, in its body and in a header."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "echo", "object": "model"}]})

    async def chat(request: web.Request) -> web.Response:
        seen = request.headers.get("X-Api-Key") or request.headers.get("Authorization", "")
        return web.json_response({"error": {"message": f"Incorrect API key provided: {seen}",
                                            "type": "invalid_request_error", "code": None,
                                            "param": None}},
                                 status=401, headers={"X-Seen-Authorization": seen})

    app = web.Application()
    app.router.add_get("/health", lambda r: web.json_response({"status": "ok"}))
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


@pytest.fixture(scope="module")
def echo_server() -> Iterator[str]:
    """The echo server on a free port, in a background thread."""
    import asyncio
    import threading

    ready = threading.Event()
    stop: dict[str, object] = {}

    async def serve() -> None:
        runner = web.AppRunner(_echo_app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        stop["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        event = asyncio.Event()
        stop["event"], stop["loop"] = event, asyncio.get_running_loop()
        ready.set()
        await event.wait()
        await runner.cleanup()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield f"127.0.0.1:{stop['port']}"
    stop["loop"].call_soon_threadsafe(stop["event"].set)  # type: ignore[attr-defined]
    thread.join(5)


LEAKY_TESTS = f"""
import httpx
def test_wrong_key_is_echoed(http_client, model):
    r = http_client.post("/v1/chat/completions", headers={{"X-Api-Key": "{KEY}-wrong"}},
                         json={{"model": model, "messages": [{{"role": "user", "content": "hi"}}]}})
    print("the server said", r.text, dict(r.headers))
    assert r.status_code == 200, r.text + " " + r.headers["x-seen-authorization"]

def test_sdk_error(openai_client, model):
    openai_client.chat.completions.create(model=model, messages=[{{"role": "user", "content": "x"}}])
"""


def test_a_key_in_the_url_the_command_an_echoed_body_and_a_header_reaches_no_output(
        pytester: pytest.Pytester, echo_server: str) -> None:
    pytester.makepyfile(LEAKY_TESTS)
    url = f"http://admin:{PASSWORD}@{echo_server}"
    result = pytester.runpytest_inprocess(
        "--server-url", url, "--api-key", KEY, "--inferaccept-json", "r.json",
        "--junitxml", "junit.xml", "-rA")
    assert result.ret == 1
    out = result.stdout.str() + result.stderr.str()
    assert "Incorrect API key provided: ***-wrong" in out  # the finding survives, the key does not
    written = (pytester.path / "r.json").read_text() + (pytester.path / "junit.xml").read_text()
    for secret in (KEY, KEY[:12], PASSWORD):
        assert secret not in out
        assert secret not in written
    assert f"admin:***@{echo_server}" in written


def test_a_key_in_a_launched_server_command_reaches_no_output(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(CHAT_PASSES + f"\ndef test_fails(model):\n    assert False, 'x {KEY} y'\n")
    result = pytester.runpytest_subprocess(
        "--server-cmd", f"{FAKE_CMD} --api-key {KEY}", "--api-key", KEY,
        "--inferaccept-json", "r.json", "--junitxml", "junit.xml")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 1
    assert "x *** y" in out
    written = (pytester.path / "r.json").read_text() + (pytester.path / "junit.xml").read_text()
    assert KEY not in out and KEY not in written
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["server"]["launched"].endswith("--api-key ***")
    assert data["conditions"]["settings"]["server_cmd"].endswith("--api-key ***")


# --- bounded reads ----------------------------------------------------------------------------

HOSTILE_TESTS = """
def test_raw_stream(http_client, model):
    with http_client.stream("POST", "/v1/chat/completions", json={
            "model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}) as r:
        for _ in r.iter_bytes():
            pass

def test_sdk_stream(openai_client, model):
    for _ in openai_client.chat.completions.create(
            model=model, stream=True, messages=[{"role": "user", "content": "hi"}]):
        pass

def test_sdk_plain(openai_client, model):
    openai_client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])

def test_raw_plain(http_client, model):
    http_client.post("/v1/chat/completions", json={
        "model": model, "messages": [{"role": "user", "content": "hi"}]}).json()
"""


SLOW = "the stream sent no end in {timeout} s"
LARGE = "the answer exceeded 16 MB"


# --request-timeout covers the whole exchange. 1.5 s is three times the drip's 0.5 s between
# bytes, so no single read times out before the deadline on a loaded machine; the huge answer
# keeps 3 s, so that reading its 16 MB on a loaded machine ends at the size bound, not the clock.
@pytest.mark.parametrize(("fault", "findings", "failing", "timeout"), [
    ("stream_drip", (SLOW,), 2, "1.5"),
    ("stream_forever", (SLOW, LARGE), 2, "1.5"),  # which bound comes first depends on the reader's speed
    ("huge_json", (LARGE,), 2, "3"),
])
def test_a_hostile_answer_ends_in_bounded_time_and_memory_as_a_finding(
        pytester: pytest.Pytester, fault: str, findings: tuple[str, ...], failing: int, timeout: str) -> None:
    findings = tuple(f.format(timeout=timeout) for f in findings)
    pytester.makepyfile(HOSTILE_TESTS)
    with FakeServer(faults=[fault]) as server:
        start = time.monotonic()
        result = pytester.runpytest_subprocess("--server-url", server.url, "--request-timeout", timeout,
                                               "--inferaccept-json", "r.json", timeout=120)
        took = time.monotonic() - start
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "VERDICT: NO-GO" in out
    assert took < 60, f"took {took:.0f}s"
    assert peak_mb < 1024, f"pytest's peak resident memory was {peak_mb:.0f} MB"
    data = json.loads((pytester.path / "r.json").read_text())
    failed = [t for t in data["tests"] if t["outcome"] == "failed"]
    assert len(failed) == failing
    assert all(any(f in t["message"] for f in findings) for t in failed), [t["message"] for t in failed]


def test_a_gzipped_stream_is_read_like_any_client_reads_it(run_suite: object) -> None:
    run = run_suite("test_streaming", gzip_streams=True)  # type: ignore[operator]
    bad = {name: o for name, o in run.outcomes.items() if o not in ("passed", "skipped")}
    assert not bad, run.output[-3000:]
    assert "passed" in run.outcomes.values()


# --- launched servers die with the run ------------------------------------------------------


def _start_pytest(pytester: pytest.Pytester, *args: str) -> tuple[subprocess.Popen[str], str]:
    pytester.makepyfile("""
        import pathlib, time
        def test_first(http_client):
            assert http_client.get("/health").status_code == 200
        def test_slow(http_client):
            pathlib.Path("slow.started").touch()
            time.sleep(120)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "--server-cmd", FAKE_CMD,
         "--inferaccept-json", "r.json", *args],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen += line
        if "ready at" in line or not line:
            break
    # test_first has passed and test_slow runs once test_slow says so with a file. A bound, not a
    # measurement: a loaded machine may take long to get there.
    started = pytester.path / "slow.started"
    deadline = time.monotonic() + 120
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), "test_slow never started:\n" + seen
    return proc, seen


def test_sigterm_to_pytest_stops_the_launched_server_and_keeps_the_results(
        pytester: pytest.Pytester) -> None:
    proc, seen = _start_pytest(pytester)
    pids = _pids_started(seen)
    assert pids, seen
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=90)
    out = seen + rest
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert all(_group_gone(pid, wait=5) for pid in pids)
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["verdict"]["status"] == "INVALID"
    assert "interrupted (SIGTERM)" in data["verdict"]["reasons"][0]
    assert any(t["outcome"] == "passed" for t in data["tests"])


def test_a_killed_pytest_leaves_no_server_behind(pytester: pytest.Pytester) -> None:
    proc, seen = _start_pytest(pytester)
    pids = _pids_started(seen)
    assert pids, seen
    proc.kill()  # SIGKILL: no handler, no cleanup in pytest itself
    proc.communicate(timeout=30)
    assert all(_group_gone(pid, wait=20) for pid in pids)


def test_an_unwritable_server_log_is_invalid_once(pytester: pytest.Pytester, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    pytester.makepyfile(CHAT_PASSES + CHAT_PASSES.replace("test_chat", "test_chat_again"))
    result = pytester.runpytest_inprocess("--server-cmd", FAKE_CMD,
                                          "--server-log", str(blocker / "server.log"))
    out = result.stdout.str()
    assert result.ret == 6
    assert out.count("could not launch the server") == 2  # the stop line and the verdict reason
    assert "VERDICT: INVALID" in out


def test_each_run_logs_into_its_own_directory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(CHAT_PASSES)
    logs = []
    for _ in range(2):
        result = pytester.runpytest_inprocess("--server-cmd", FAKE_CMD, "--inferaccept-json", "r.json")
        assert result.ret == 0
        logs.append(json.loads((pytester.path / "r.json").read_text())["server"]["log_paths"][0])
    assert logs[0] != logs[1]
    assert Path(logs[0]).parent != Path(logs[1]).parent


# --- junitxml, probes, environment ------------------------------------------------------------


def test_results_reach_junitxml_as_properties(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(CHAT_PASSES)
    with FakeServer() as server:
        result = pytester.runpytest_inprocess("--server-url", server.url, "--junitxml", "j.xml")
    assert result.ret == 0
    case = ET.parse(pytester.path / "j.xml").getroot().find(".//testcase")
    assert case is not None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    payload = json.loads(props["inferaccept_json"] or "")
    assert payload["file"].endswith(".py")
    assert payload["evidence"]["exchanges"][0]["status"] == 200


def test_a_broken_optional_capability_is_a_verdict_warning(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(CHAT_PASSES + """
import pytest
@pytest.mark.capability("tools")
def test_tools(http_client):
    pass
""")
    with FakeServer(faults=["tools_500"]) as server:
        result = pytester.runpytest_inprocess("--server-url", server.url, "--inferaccept-json", "r.json")
    assert result.ret == 0
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["verdict"]["status"] == "GO"
    (warning,) = data["verdict"]["warnings"]
    assert warning.startswith("optional capability tools is broken (its tests were skipped): HTTP 500")
    assert "warning: optional capability tools is broken" in result.stdout.str()


def test_a_probe_that_failed_in_transport_is_not_kept(fake_server: FakeServer) -> None:
    from pytest_inferaccept.run.session import AcceptanceSession
    from pytest_inferaccept.settings import Settings

    session = AcceptanceSession(Settings(server_url=fake_server.url), Path("."), lambda _: None)
    session.servers.server()
    real_port = fake_server.port
    session.servers.current = session.servers.current.__class__(**{**session.servers.current.__dict__,  # type: ignore[union-attr]
                                                   "base_url": "http://127.0.0.1:9"})
    first = session.capabilities.probe("tools")
    assert first.status == "broken" and first.transient
    session.servers.current = session.servers.current.__class__(**{**session.servers.current.__dict__,  # type: ignore[union-attr]
                                                   "base_url": f"http://127.0.0.1:{real_port}"})
    assert session.capabilities.probe("tools").status == "supported"


def test_a_bad_environment_variable_only_matters_to_runs_that_target_a_server(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERACCEPT_FUZZ_EXAMPLES", "many")
    pytester.makepyfile("def test_plain(): pass")
    assert pytester.runpytest_inprocess().ret == 0
    result = pytester.runpytest_inprocess("--server-url", "http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INFERACCEPT_FUZZ_EXAMPLES" in result.stderr.str()
