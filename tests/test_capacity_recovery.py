"""Failure recovery: the plugin kills the fake server it launched mid-load, restarts it and times it.

Each run is an in-process pytester run with --server-cmd; the figures come back in the results
JSON, the pids in the output, and whatever still runs is read from /proc.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.fake import FakeServer
from tests._processes import FAKE_CMD, group_gone, pids_started

FAKE = FAKE_CMD + " --ttft 0.05 --itl 0.003"

GROUPS_AT_THE_END = """
import json, os
from pathlib import Path

def test_zz_processes_at_the_end(inferaccept_server):
    # Every process group running the fake on the server's port, as the run ends.
    port = inferaccept_server.base_url.rsplit(":", 1)[1]
    needle = f"pytest_inferaccept.fake --port {port} ".encode()
    groups = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\\0", b" ")
            if needle in cmd:
                groups.add(os.getpgid(int(entry)))
        except OSError:
            continue
    Path("groups.json").write_text(json.dumps(sorted(groups)))
"""


def _recovery(pytester: pytest.Pytester) -> dict[str, Any]:
    doc = json.loads((pytester.path / "r.json").read_text())
    (found,) = [c for t in doc["tests"] for c in t.get("capacity", []) if c["kind"] == "recovery"]
    found["causes"] = doc["causes"]
    return dict(found)


def _restarted(out: str) -> int:
    match = re.search(r"restarted chat server \(pid (\d+)\)", out)
    assert match, out
    return int(match.group(1))


def test_a_killed_server_comes_back_and_the_recovery_is_measured(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_recovery="""
        def test_recovery(loadgen):
            loadgen.recovery(concurrency=4, duration=6, kill_after=1.5)
    """, test_zz=GROUPS_AT_THE_END)
    result = pytester.runpytest_inprocess("--server-cmd", FAKE, "--inferaccept-json", "r.json",
                                          "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "VERDICT: GO" in out
    rec = _recovery(pytester)
    assert rec["causes"] == []  # the deliberate kill is no outage
    found = rec["findings"]
    assert rec["status"] == "pass", rec
    assert 1.0 < found["killed_at_s"] < 2.5, found
    assert 0 < found["ready_s"] <= found["first_good_answer_s"] < 20, found
    assert found["requests_lost"] >= 1 and found["clean_errors"] and found["hung"] == 0, found
    assert set(found["error_classes"]) <= {"connect", "stream_error"}, found
    assert found["requests_ok_after_restart"] >= 1, found
    assert rec["headline"].startswith(f"killed {found['killed_at_s']:.1f} s into the load: ready again ")
    assert "all with clean errors" in rec["headline"]
    # The old process group is gone; exactly the new one ran at the end; nothing after the run.
    started = pids_started(out)
    new = _restarted(out)
    old = found["pid_killed"]
    assert started == [old, new] and found["pid_restarted"] == new, out
    assert json.loads((pytester.path / "groups.json").read_text()) == [new]
    assert group_gone(old) and group_gone(new, wait=5)
    # The same log, appended: both starts and the kill between them.
    logged = re.search(r"started chat server \(pid \d+\), log (\S+)", out)
    assert logged, out
    text = Path(logged.group(1)).read_text()
    assert text.count("fake server listening") == 2 and "killed on purpose (failure recovery)" in text


def test_a_server_that_does_not_come_back_fails_the_scenario_and_leaves_nothing(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    # The first start runs the fake; the restart only sleeps, so it never becomes ready.
    marker = tmp_path / "started-once"
    script = tmp_path / "server.sh"
    script.write_text(f'if [ -e "{marker}" ]; then exec sleep 300; fi\n: > "{marker}"\n'
                      f'exec {sys.executable} -m pytest_inferaccept.fake --port "$1" --ttft 0.05 '
                      '--itl 0.003\n')
    pytester.makepyfile("""
        def test_recovery(loadgen):
            loadgen.recovery(concurrency=2, duration=4, kill_after=1.5)

        def test_chat_afterwards(http_client, model):
            http_client.post("/v1/chat/completions", json={
                "model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
    """)
    result = pytester.runpytest_inprocess("--server-cmd", f"sh {script} {{port}}",
                                          "--server-ready-timeout", "6", "--inferaccept-json", "r.json",
                                          "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "VERDICT: NO-GO" in out
    rec = _recovery(pytester)
    assert rec["status"] == "fail", rec
    assert rec["reasons"][0].startswith("the chat server was not ready again after a deliberate restart: "
                                        "server not ready after 6s"), rec["reasons"]
    assert rec["findings"]["ready_s"] is None and rec["findings"]["first_good_answer_s"] is None
    assert "capacity scenario failed" in out and "recovery: the chat server was not ready again" in out
    # What fails after it is its consequence, named as such.
    (cause,) = rec["causes"]
    assert cause["reason"] == "not ready again after the failure-recovery restart", cause
    assert "server under test is gone (the chat server was not ready again" in out
    pids = pids_started(out)
    assert len(pids) == 2 and all(group_gone(pid, wait=5) for pid in pids), out
    assert os.path.exists(marker)


def test_against_a_server_url_the_recovery_is_skipped(pytester: pytest.Pytester,
                                                      fake_server: FakeServer) -> None:
    args = ("--pyargs", "pytest_inferaccept.suites.test_capacity_recovery", "--server-url", fake_server.url,
            "-p", "no:cacheprovider", "-rs")
    result = pytester.runpytest_inprocess(*args, "--capacity")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*failure recovery needs a server the plugin launched "
                                 "(--server-cmd or --server-preset)*"])
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*capacity scenarios run with --capacity (they take minutes)*"])


# -- the judgement, with the load, the kill and the liveness probe stubbed (no server) --------


def _stubbed(records: list[Any], *, restart: Any = None, answers: bool = True,
             answer_within: float = 30.0) -> Any:
    """recovery() over a made-up load: `records` are (send, end, error) seconds since the load's start."""
    from pytest_inferaccept.capacity.recovery import recovery
    from pytest_inferaccept.load import LoadRun
    from pytest_inferaccept.load.records import RequestRecord
    from pytest_inferaccept.loadgen import LoadResult, client_check
    from pytest_inferaccept.stats import summarize

    called = threading.Event()

    def kill() -> dict[str, Any]:
        called.set()
        if restart is not None:
            return dict(restart())
        now = time.monotonic()
        return {"killed_at": now, "ready_at": now + 0.01, "ready_s": 0.01, "pid_killed": 1, "pid": 2,
                "error": None}

    def measure(tag: str, **kwargs: Any) -> LoadResult:
        called.wait(5)
        t0 = time.monotonic() - 1.0  # the load "started" a second ago: the kill came at 1.0 s
        recs = [RequestRecord(index=i, send=send, end=end, error=error, status=None if error else 200)
                for i, (send, end, error) in enumerate(records)]
        run = LoadRun(spec={}, records=recs, window=(0.0, 10.0), server_metrics={}, stopped_by="duration",
                      selfcheck={"per_worker": [{"worker": 0, "t0": t0}], "total": {}})
        run.selfcheck = client_check(run)
        return LoadResult(label=tag, run=run, summary=summarize(recs, run.window), slo=None, evaluation=None)

    return recovery(measure, lambda: (answers, "HTTP 200" if answers else "ConnectError"), kill,
                    concurrency=2, duration=10.0, kill_after=0.05, request_timeout=5.0, label="stub",
                    answer_within=answer_within)


def test_a_client_left_hanging_past_the_timeout_fails_the_recovery() -> None:
    result = _stubbed([(0.2, 0.9, None), (0.5, 8.0, "timeout"), (1.2, 1.3, "connect"), (1.5, 2.0, None)])
    assert result.status == "fail"
    assert result.findings["hung"] == 1 and not result.findings["clean_errors"]
    assert result.reasons == [
        "1 request(s) hung past the request timeout (5 s + 2 s): the longest took 7.5 s"]
    assert result.findings["lost_in_flight"] == 1 and result.findings["lost_after_kill"] == 1
    assert result.findings["requests_ok_after_restart"] == 1


def test_no_good_answer_after_the_restart_fails_and_a_failed_kill_is_invalid() -> None:
    silent = _stubbed([(0.2, 0.9, None)], answers=False, answer_within=0.3)
    assert silent.status == "fail"
    assert silent.reasons[0].startswith("ready again 0.0 s after the kill, but no good answer within 0.3 s")

    def cannot_kill() -> dict[str, Any]:
        raise RuntimeError("the chat server is not running")

    unkilled = _stubbed([(0.2, 0.9, None)], restart=cannot_kill)
    assert unkilled.status == "invalid"
    assert unkilled.reasons == [
        "the server could not be killed: RuntimeError: the chat server is not running"]
    from pytest_inferaccept.capacity.recovery import recovery

    with pytest.raises(ValueError, match="must fall inside the load"):
        recovery(lambda tag, **kw: pytest.fail("no load without a kill"), lambda: (True, ""), dict,
                 concurrency=1, duration=2.0, kill_after=3.0, request_timeout=5.0, label="x")
