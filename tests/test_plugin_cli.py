"""The plugin as a user meets it: options, markers, clear failures, verdict and exit status."""

from __future__ import annotations

import json
import sys
import time

import pytest

from pytest_inferaccept.fake import FakeServer
from tests._processes import FAKE_CMD
from tests._processes import group_gone as _group_gone
from tests._processes import pids_started as _pids_started

ONE_CHAT_TEST = """
def test_chat(http_client, model):
    r = http_client.post("/v1/chat/completions", json={
        "model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200
"""


def test_help_lists_every_option_in_one_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    text = result.stdout.str()
    assert "inference server acceptance (pytest-inferaccept)" in text
    for flag in ("--server-url", "--server-cmd", "--server-preset", "--server-ready-timeout",
                 "--model", "--embedding-model", "--embedding-url", "--api-key", "--capabilities",
                 "--request-timeout", "--connect-timeout", "--inferaccept-json"):
        assert flag in text
    assert "inferaccept_server_url" in text  # the ini twin


def test_markers_are_listed_with_their_signatures(pytester: pytest.Pytester) -> None:
    text = pytester.runpytest("--markers").stdout.str()
    assert "@pytest.mark.slo(*, ttft_p95=None" in text
    assert "@pytest.mark.capability(*names)" in text


def test_an_unknown_slo_key_stops_the_run_naming_the_allowed_keys(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.slo(ttft_p96=1.0)
        def test_x(): pass
    """)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown key(s) ttft_p96; allowed: ttft_p50*"])


def test_a_bad_option_value_is_a_usage_error_naming_what_is_allowed(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--server-url", "http://h:1", "--capabilities", "chat,wings")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown capability wings; allowed: chat, stream*"])


def test_an_unreachable_server_ends_quickly_with_one_clear_line_and_invalid(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(ONE_CHAT_TEST * 1 + ONE_CHAT_TEST.replace("test_chat", "test_chat2"))
    start = time.monotonic()
    result = pytester.runpytest_inprocess("--server-url", "http://127.0.0.1:9")
    assert time.monotonic() - start < 15  # a bound, not a measurement: the run ends at the first refusal
    assert result.ret == 6
    out = result.stdout.str() + result.stderr.str()
    assert out.count("server unreachable at http://127.0.0.1:9: connection refused") >= 1
    assert "VERDICT: INVALID" in out
    assert "Traceback" not in out


def test_a_server_cmd_that_exits_at_once_is_invalid_with_its_exit_code_and_log(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(ONE_CHAT_TEST)
    result = pytester.runpytest_inprocess("--server-cmd", "echo starting {port}; exit 7")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 6
    assert "server command exited (exit code 7)" in out
    assert "VERDICT: INVALID" in out


def test_a_server_cmd_that_never_becomes_ready_is_stopped_and_invalid(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(ONE_CHAT_TEST)
    result = pytester.runpytest_inprocess(
        "--server-cmd", "sleep 300 & sleep 301 # {port}", "--server-ready-timeout", "1.5")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 6
    assert "server not ready after 2s" in out or "server not ready after 1s" in out
    pids = _pids_started(out)
    assert pids and all(_group_gone(pid) for pid in pids)


def test_a_server_that_dies_mid_run_errors_the_remaining_tests_clearly(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("\n".join(ONE_CHAT_TEST.replace("test_chat", f"test_chat_{i}")
                                  for i in range(5)))
    result = pytester.runpytest_inprocess("--server-cmd", FAKE_CMD + " --exit-after 2")
    out = result.stdout.str()
    assert result.ret == 1
    assert "server command exited (exit code 3)" in out
    assert "fake server listening" in out  # the last log lines come with the message
    assert "VERDICT: NO-GO" in out
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 2
    assert outcomes.get("errors", 0) + outcomes.get("failed", 0) == 3
    pids = _pids_started(out)
    assert pids and all(_group_gone(pid) for pid in pids)


def test_a_launched_server_is_stopped_at_the_end_of_a_good_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(ONE_CHAT_TEST)
    result = pytester.runpytest_inprocess("--server-cmd", FAKE_CMD)
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "VERDICT: GO" in out
    pids = _pids_started(out)
    assert pids and all(_group_gone(pid) for pid in pids)


def test_the_plugin_stays_silent_for_tests_that_do_not_use_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain(): assert True")
    result = pytester.runpytest()
    assert result.ret == 0
    assert "VERDICT" not in result.stdout.str()


def test_results_json_holds_verdict_conditions_and_evidence_but_never_the_key(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.slo(ttft_p95=0.5)
        def test_chat(http_client, model, inferaccept_evidence):
            inferaccept_evidence.record("answer_chars", 3)
            r = http_client.post("/v1/chat/completions", json={
                "model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 418, "wanted a teapot"
    """)
    with FakeServer(api_key="sk-very-secret") as server:
        result = pytester.runpytest_inprocess("--server-url", server.url, "--api-key",
                                              "sk-very-secret", "--inferaccept-json", "out.json")
    data = json.loads((pytester.path / "out.json").read_text())
    assert data["schema"] == "pytest-inferaccept/results/1"
    assert data["verdict"]["status"] == "NO-GO"
    assert data["server"]["model"] == "fake-chat"
    (test,) = data["tests"]
    assert test["outcome"] == "failed"
    assert "wanted a teapot" in test["message"]
    assert test["slo"] == {"ttft_p95": 0.5}
    assert test["evidence"]["values"] == {"answer_chars": 3}
    assert test["evidence"]["exchanges"][0]["status"] == 200
    everything = (pytester.path / "out.json").read_text() + str(result.stdout) + str(result.stderr)
    assert "sk-very-secret" not in everything


REQUIRES_TOOLS = """
import pytest
@pytest.mark.capability("tools")
def test_tools(http_client, model):
    r = http_client.post("/v1/chat/completions", json={
        "model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})
    assert r.status_code == 200, r.text
"""


def _run_tools(pytester: pytest.Pytester, faults: list[str], *args: str) -> tuple[pytest.RunResult, dict]:  # type: ignore[type-arg]
    pytester.makepyfile(REQUIRES_TOOLS)
    with FakeServer(faults=faults) as server:
        result = pytester.runpytest_inprocess("--server-url", server.url, "--inferaccept-json",
                                              "r.json", *args)
    return result, json.loads((pytester.path / "r.json").read_text())


def test_a_required_capability_that_is_broken_fails(pytester: pytest.Pytester) -> None:
    result, data = _run_tools(pytester, ["tools_500"], "--capabilities", "chat,tools")
    result.assert_outcomes(failed=1)
    assert data["capabilities"]["tools"]["required"] is True
    assert data["capabilities"]["tools"]["status"] == "broken"
    assert data["verdict"]["status"] == "NO-GO"


def test_a_capability_not_required_and_unsupported_is_skipped_with_its_reason(
        pytester: pytest.Pytester) -> None:
    result, data = _run_tools(pytester, ["no_tools"])
    result.assert_outcomes(skipped=1)
    (test,) = data["tests"]
    assert test["message"].startswith("unsupported: tools: HTTP 400")
    assert data["capabilities"]["tools"]["status"] == "unsupported"
    assert data["capabilities"]["tools"]["probe"]["status"] == "unsupported"


def test_a_capability_not_required_but_supported_runs(pytester: pytest.Pytester) -> None:
    result, data = _run_tools(pytester, [])
    result.assert_outcomes(passed=1)
    assert data["capabilities"]["tools"] == {
        "required": False, "status": "supported", "tests": {"passed": 1},
        "probe": {"capability": "tools", "status": "supported", "detail": "HTTP 200, 1 tool call(s)"}}


def test_ctrl_c_stops_the_launched_server_and_keeps_the_results(pytester: pytest.Pytester) -> None:
    import signal
    import subprocess

    pytester.makepyfile("""
        import pathlib, time
        def test_first(http_client):
            assert http_client.get("/health").status_code == 200
        def test_slow(http_client):
            pathlib.Path("slow.started").touch()
            time.sleep(60)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "--server-cmd", FAKE_CMD,
         "--inferaccept-json", "r.json"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Interrupt once test_first has passed and test_slow runs: it says so with a file. A bound,
    # not a measurement: a loaded machine may take long to get there.
    started = pytester.path / "slow.started"
    try:
        deadline = time.monotonic() + 120
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "test_slow never started"
        proc.send_signal(signal.SIGINT)
        # A bound, not a measurement: the stop takes a second or two, but a loaded machine may
        # stretch it well past the 25 s a stop can take at worst (10 s grace + the group's wait).
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED
    assert "VERDICT: INVALID" in out
    pids = _pids_started(out)
    assert pids and all(_group_gone(pid) for pid in pids)
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["verdict"]["status"] == "INVALID"
    assert any(t["outcome"] == "passed" for t in data["tests"])


def test_a_failed_check_shows_the_finding_and_where_without_a_traceback(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        from pytest_inferaccept.checks import require
        def test_finish(http_client):
            require(False, "finish_reason 'eos_token' is not allowed", "choices[0]: {...}")
    """)
    with FakeServer() as server:
        result = pytester.runpytest_inprocess("--server-url", server.url)
    out = result.stdout.str()
    assert "finish_reason 'eos_token' is not allowed" in out
    assert "(checked at " in out and "test_a_failed_check_shows" in out
    assert "raise CheckFailed" not in out


def test_a_preset_that_cannot_be_prepared_is_invalid_with_the_reason(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_inferaccept.servers as servers

    def broken(name: str, **_: object) -> None:
        raise servers.PrepareError(f"step llama-build failed; see {name}.log")

    monkeypatch.setattr(servers, "prepare", broken)
    pytester.makepyfile(ONE_CHAT_TEST)
    result = pytester.runpytest_inprocess("--server-preset", "llama-cpp")
    out = result.stdout.str()
    assert result.ret == 6
    assert "could not prepare preset llama-cpp: step llama-build failed" in out
    assert "VERDICT: INVALID" in out


def test_the_suites_without_any_server_option_say_how_to_name_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(ONE_CHAT_TEST)
    result = pytester.runpytest_inprocess()
    out = result.stdout.str()
    assert result.ret == 6
    assert "no server under test: give --server-url URL, --server-cmd CMD or --server-preset" in out
    assert "VERDICT: INVALID" in out


UNSET_LOOP_SCOPE = 'option "asyncio_default_fixture_loop_scope" is unset'
ASYNC_FIXTURE_TEST = """
import pytest_asyncio

@pytest_asyncio.fixture
async def greeting():
    return "hi"

async def test_greeting(greeting):
    assert greeting == "hi"
"""


def test_pytest_asyncios_unset_loop_scope_warning_is_quieted_with_function_scope(
        pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_asyncio")
    pytester.makepyfile(ASYNC_FIXTURE_TEST)  # no ini file: nothing sets the option
    # In a subprocess, as a user runs it: in process, the warning would go to this run instead.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "asyncio_mode=auto")
    result.assert_outcomes(passed=1)
    assert UNSET_LOOP_SCOPE not in result.stdout.str() + result.stderr.str()
    # The same run without this plugin warns: the check above would see the warning.
    bare = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
                                         "-p", "no:inferaccept")
    assert UNSET_LOOP_SCOPE in bare.stdout.str() + bare.stderr.str()


@pytest.mark.parametrize("how", ["ini", "cli"])
def test_a_users_own_fixture_loop_scope_wins(pytester: pytest.Pytester, how: str) -> None:
    pytest.importorskip("pytest_asyncio")
    pytester.makepyfile(ASYNC_FIXTURE_TEST)
    args = ["-p", "no:cacheprovider", "-o", "asyncio_mode=auto"]
    if how == "ini":
        pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = module\n")
    else:
        args += ["-o", "asyncio_default_fixture_loop_scope=module"]
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["asyncio:*loop_scope=module*"])  # pytest-asyncio's own header line


def test_a_capacity_option_without_capacity_implies_it_and_runs_the_ladder(
        pytester: pytest.Pytester, fake_server: FakeServer) -> None:
    result = pytester.runpytest_inprocess(
        "--pyargs", "pytest_inferaccept.suites.test_capacity", "-k", "test_concurrency_ladder",
        "--server-url", fake_server.url, "--ladder", "1,2", "--capacity-step-requests", "8",
        "--client-check", "warn", "--inferaccept-json", "r.json", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*inferaccept: --ladder and --capacity-step-requests given, so the "
                                 "capacity scenarios run (--capacity implied)*"])
    result.assert_outcomes(passed=1)
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["conditions"]["settings"]["capacity"]["enabled"] is True
    (test,) = data["tests"]
    (ladder,) = test["capacity"]
    assert [step["level"] for step in ladder["steps"]] == [1, 2]


def test_a_capacity_option_in_the_ini_file_does_not_start_the_scenarios(
        pytester: pytest.Pytester, fake_server: FakeServer) -> None:
    # Standing configuration for the runs that ask for --capacity, not a request to run them.
    pytester.makeini("[pytest]\ninferaccept_ladder = 1,2\n")
    result = pytester.runpytest_inprocess(
        "--pyargs", "pytest_inferaccept.suites.test_capacity", "-k", "test_concurrency_ladder",
        "--server-url", fake_server.url, "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    assert "--capacity implied" not in result.stdout.str()
