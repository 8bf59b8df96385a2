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
    assert found["requests_failed"] >= 1 and found["clean_errors"] and found["hung"] == 0, found
    assert set(found["error_classes"]) <= {"connect", "stream_error"}, found
    assert found["requests_ok_after_restart"] >= 1, found
    # Requests lost at the traffic the level served before the kill, over the outage: the closed
    # loop's refused attempts meanwhile (one per millisecond or so per slot) are kept, not counted.
    rate, outage = found["request_rate_per_s"], found["outage_s"]
    assert found["request_rate_basis"] == "before the kill" and found["outage_ended"], found
    assert rate == pytest.approx(found["request_rate_answers"] / found["killed_at_s"], rel=0.05), found
    assert 2 < rate < 4 / 0.05, found  # 4 slots, each answer longer than the fake's 50 ms TTFT
    assert outage == pytest.approx(found["first_good_answer_s"])
    assert found["requests_lost_during_outage"] == pytest.approx(rate * outage), found
    assert found["client_attempts_refused"] == found["requests_failed"] - found["lost_in_flight"]
    assert rec["headline"].startswith(f"killed {found['killed_at_s']:.1f} s into the load: ready again "
                                      f"{found['ready_s']:.1f} s after the kill, first good answer after "
                                      f"{outage:.1f} s; at the {rate:.1f} requests/s this level served, "
                                      "about "), rec["headline"]
    flight = found["lost_in_flight"]
    assert (f"plus {flight} in flight at the kill" if flight else "none was in flight") in rec["headline"]
    assert "every failure was a clean error (" in rec["headline"]
    # The attempts' number is the client's spin, not a loss: a 'connect' count in the headline is only
    # that of the requests sent before the kill (one whose connection opened as the server died).
    spun = found["client_attempts_refused"]
    connect_in_flight = found["in_flight_error_classes"].get("connect", 0)
    assert connect_in_flight <= flight, found
    assert (f"connect ×{connect_in_flight}" in rec["headline"]) == bool(connect_in_flight), rec["headline"]
    assert spun in (0, connect_in_flight) or f"connect ×{spun}" not in rec["headline"], rec["headline"]
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
    result.assert_outcomes(skipped=2)  # the recovery and the rollback drill: no launched server
    result.stdout.fnmatch_lines(["*failure recovery needs a server the plugin launched "
                                 "(--server-cmd or --server-preset)*",
                                 "*the rollback drill needs a server the plugin launched*"])
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*capacity scenarios run with --capacity (they take minutes)*"])


# -- the judgement, with the load, the kill and the liveness probe stubbed (no server) --------


def _stubbed(records: list[Any], *, restart: Any = None, answers: bool = True,
             answer_within: float = 30.0, down: float = 0.0) -> Any:
    """recovery() over a made-up load: `records` are (send, end, error) seconds since the load's start.

    The kill comes 1.0 s into the load, `down` seconds before the restarted server is ready (and
    answers at once when `answers`).
    """
    from pytest_inferaccept.capacity.recovery import recovery
    from pytest_inferaccept.load import LoadRun
    from pytest_inferaccept.load.records import RequestRecord
    from pytest_inferaccept.loadgen import LoadResult, client_check
    from pytest_inferaccept.stats import summarize

    called = threading.Event()
    kills: list[float] = []

    def kill() -> dict[str, Any]:
        if restart is not None:
            called.set()
            return dict(restart())
        now = time.monotonic()
        kills.append(now - down)
        called.set()
        return {"killed_at": now - down, "ready_at": now + 0.01, "ready_s": down + 0.01, "pid_killed": 1,
                "pid": 2, "error": None}

    def measure(tag: str, **kwargs: Any) -> LoadResult:
        called.wait(5)
        # The load "started" a second before the kill.
        t0 = (kills[0] if kills else time.monotonic()) - 1.0
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
    assert result.findings.hung == 1 and not result.findings.clean_errors
    assert result.reasons == [
        "1 request(s) hung past the request timeout (5 s + 2 s): the longest took 7.5 s"]
    assert result.findings.lost_in_flight == 1 and result.findings.client_attempts_refused == 1
    assert result.findings.requests_ok_after_restart == 1


def test_no_good_answer_after_the_restart_fails_and_a_failed_kill_is_invalid() -> None:
    silent = _stubbed([(0.2, 0.9, None)], answers=False, answer_within=0.3)
    assert silent.status == "fail"
    assert silent.reasons[0].startswith("ready again 0.0 s after the kill, but no good answer within 0.3 s")
    # The outage had not ended when the probing gave up: the loss is a lower bound, and says so.
    assert silent.findings.outage_ended is False and silent.findings.outage_s >= 0.3
    assert silent.findings.request_rate_per_s == pytest.approx(1.0, rel=0.01)
    assert (f"at the 1.0 requests/s this level served, at least {silent.findings.outage_s:.1f} requests "
            "would have been lost during the outage, which was still going") in silent.headline

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


def _outage_load(refused: int, *, down: float, before: bool = True) -> list[tuple[float, float, Any]]:
    """Ten answers a second before the kill at 1.0 s (or none), two streams cut by it, `refused`
    connection attempts while the server is down for `down` s, then ten answers a second again."""
    pre = [(i / 10, i / 10 + 0.05, None) for i in range(10)] if before else []
    cut = [(0.9, 1.05, "stream_error")] * 2
    gap = [(1.0 + down * k / refused, 1.0 + down * k / refused + 0.001, "connect") for k in range(refused)]
    back = [(1.1 + down + i / 10, 1.15 + down + i / 10, None) for i in range(10)]
    return pre + cut + gap + back


def test_requests_lost_are_counted_at_the_served_rate_not_at_the_clients_resend_speed() -> None:
    # The same traffic and the same 0.8 s outage; the client failed 40 or 4,000 times meanwhile.
    slow, fast = (_stubbed(_outage_load(n, down=0.8), down=0.8) for n in (40, 4000))
    for result, attempts in ((slow, 40), (fast, 4000)):
        found = result.findings
        assert result.status == "pass", result.reasons
        assert found.client_attempts_refused == attempts and found.lost_in_flight == 2, found
        assert found.request_rate_per_s == pytest.approx(10.0) and found.request_rate_answers == 10
        assert found.request_rate_basis == "before the kill"
        assert found.outage_s == pytest.approx(0.8, abs=0.1) and found.outage_ended, found
        assert found.requests_lost_during_outage == pytest.approx(10.0 * found.outage_s)
        match = re.search(r"; at the 10\.0 requests/s this level served, about (\d+\.\d) requests would have "
                          r"been lost during the outage, plus 2 in flight at the kill \(stream_error ×2\); "
                          r"every failure was a clean error \(connect, stream_error\)$", result.headline)
        assert match, result.headline
        assert float(match.group(1)) == pytest.approx(found.requests_lost_during_outage, abs=0.05)
        assert str(attempts) not in result.headline
    # A hundred times the refused attempts, the same loss (up to the few ms the stub's threads take).
    lost = [r.findings.requests_lost_during_outage for r in (slow, fast)]
    assert abs(lost[0] - lost[1]) < 0.5, lost


def test_without_an_answer_before_the_kill_the_rate_after_the_restart_stands_in() -> None:
    result = _stubbed(_outage_load(20, down=0.5, before=False), down=0.5)
    found = result.findings
    assert found.request_rate_basis == "after the restart" and found.request_rate_answers == 10, found
    # Ten answers from the first good one to the last answer's end (about 1.05 s).
    assert found.request_rate_per_s == pytest.approx(10 / 1.05, rel=0.05), found
    served = f"at the {found.request_rate_per_s:.1f} requests/s this level served after the restart, "
    assert served in result.headline, result.headline


def test_the_loads_own_garbage_collection_does_not_hold_up_the_kill() -> None:
    # The engine collects garbage as its measured phase starts. In a large test process on a busy
    # machine that full collection held the interpreter for up to 2.3 s: the load had not begun
    # and the kill timer could not run, so the kill came late and before any answer. The process's
    # objects are frozen out of the collector before the timer starts, and thawed after.
    import gc

    from pytest_inferaccept.capacity.recovery import recovery

    heap = [[i] for i in range(500_000)]  # a large test process: half a million tracked objects
    t = time.perf_counter()
    gc.collect()
    full = time.perf_counter() - t
    seen: dict[str, Any] = {}

    def measure(tag: str, **kwargs: Any) -> Any:
        seen["frozen_at_start"] = gc.get_freeze_count()
        t = time.perf_counter()
        gc.collect()  # what the engine does before its first measured send
        seen["pause"] = time.perf_counter() - t
        seen["ready"].wait(5)
        return _stub_result([(0.0, 0.1, None), (0.2, 0.3, None)], seen["t0"])

    def kill() -> dict[str, Any]:
        seen["frozen_at_kill"] = gc.get_freeze_count()
        now = time.monotonic()
        seen["ready"].set()
        return {"killed_at": now, "ready_at": now, "ready_s": 0.0, "pid_killed": 1, "pid": 2, "error": None}

    seen["ready"], seen["t0"] = threading.Event(), time.monotonic()
    result = recovery(measure, lambda: (True, "HTTP 200"), kill, concurrency=1, duration=10.0,
                      kill_after=0.05, request_timeout=5.0, label="gc")
    assert result.status == "pass", result.reasons
    assert seen["frozen_at_start"] >= len(heap) and seen["frozen_at_kill"] >= len(heap), seen
    assert gc.get_freeze_count() == 0  # thawed: the test process collects as before
    # Only what is new is walked: a fraction of the full collection (same machine, same moment).
    assert seen["pause"] < full / 4, (seen["pause"], full)
    del heap


def _stub_result(records: list[tuple[float, float, Any]], t0: float) -> Any:
    """A LoadResult over (send, end, error) seconds since `t0`, as `measure` returns it."""
    from pytest_inferaccept.load import LoadRun
    from pytest_inferaccept.load.records import RequestRecord
    from pytest_inferaccept.loadgen import LoadResult, client_check
    from pytest_inferaccept.stats import summarize

    recs = [RequestRecord(index=i, send=send, end=end, error=error, status=None if error else 200)
            for i, (send, end, error) in enumerate(records)]
    run = LoadRun(spec={}, records=recs, window=(0.0, 10.0), server_metrics={}, stopped_by="duration",
                  selfcheck={"per_worker": [{"worker": 0, "t0": t0}], "total": {}})
    run.selfcheck = client_check(run)
    return LoadResult(label="recovery", run=run, summary=summarize(recs, run.window), slo=None,
                      evaluation=None)
