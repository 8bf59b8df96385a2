"""The rollback drill: the plugin stops the fake server it launched, starts a baseline command in its
place, times ready / warmed / in service against a bound, then starts the candidate again.

Each run is an in-process pytester run with --server-cmd and --rollback-cmd; the figures come back
in the results JSON.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from pytest_inferaccept.capacity.rollback import settled
from tests._processes import FAKE_CMD

FAKE = FAKE_CMD + " --ttft 0.02 --itl 0.002"

DRILL_THEN_ANSWER = """
import httpx

def test_rollback(loadgen):
    loadgen.scenario("rollback", warm_requests=4)

def test_zz_the_candidate_answers_after_the_drill(inferaccept_server):
    resp = httpx.post(inferaccept_server.base_url + "/v1/chat/completions", timeout=10,
                      json={"model": inferaccept_server.model, "max_tokens": 4,
                            "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200 and resp.json()["model"] == "fake-chat", resp.text
"""


def _drill(pytester: pytest.Pytester, *args: str) -> tuple[int, str, dict[str, Any]]:
    pytester.makepyfile(test_rollback=DRILL_THEN_ANSWER)
    result = pytester.runpytest_inprocess("--server-cmd", FAKE, "--inferaccept-json", "r.json",
                                          "-p", "no:cacheprovider", *args)
    doc = json.loads((pytester.path / "r.json").read_text())
    (found,) = [c for t in doc["tests"] for c in t.get("capacity", []) if c["kind"] == "rollback"]
    return int(result.ret), result.stdout.str(), dict(found)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_baseline_that_starts_and_answers_is_back_in_service_within_the_bound(
        pytester: pytest.Pytester) -> None:
    baseline = FAKE_CMD + " --startup-delay 0.5 --model fake-baseline"
    ret, out, found = _drill(pytester, "--rollback-cmd", baseline)
    assert ret == 0, out
    drill = found["findings"]["rollback"]
    assert found["status"] == "pass", found["reasons"]
    assert 0.5 <= drill["ready_s"] <= drill["warmed_s"] <= drill["in_service_s"] < 60, drill
    assert drill["served_models"][0] == "fake-baseline" and drill["model"] == "fake-baseline"
    assert [c["name"] for c in drill["checks"]] == ["models", "chat", "stream", "health"]
    assert all(c["status"] == "pass" for c in drill["checks"]), drill["checks"]
    assert len(drill.get("warm_ttft_s", [])) == 4, drill
    assert drill["restored"] is True and drill["restored_s"] > 0
    assert not _alive(drill["pid_started"])  # the baseline was stopped when the candidate came back
    assert "rolled back: ready after" in found["headline"] and "within the 600 s bound" in found["headline"]
    assert "the server under test started again" in found["headline"]


def test_a_baseline_whose_stream_never_ends_fails_the_smoke_checks(pytester: pytest.Pytester) -> None:
    ret, out, found = _drill(pytester, "--rollback-cmd", FAKE_CMD + " --fault stream_no_done")
    assert ret == 1, out
    assert found["status"] == "fail"
    (why,) = found["reasons"]
    assert why.startswith("smoke checks failed on the baseline: stream:") and "[DONE]" in why, why
    assert found["findings"]["rollback"].get("in_service_s") is None
    assert "1 passed" in out  # the candidate answers again after the drill


def test_a_baseline_slower_than_the_bound_fails_it(pytester: pytest.Pytester) -> None:
    ret, out, found = _drill(pytester, "--rollback-cmd", FAKE_CMD + " --startup-delay 1",
                             "--rollback-within", "0.5")
    assert ret == 1, out
    (why,) = found["reasons"]
    assert "beyond the 0.5 s bound" in why and why.startswith("back in service after"), why
    assert found["findings"]["rollback"]["ready_s"] >= 1


def test_a_baseline_that_never_becomes_ready_fails_and_the_candidate_comes_back(
        pytester: pytest.Pytester) -> None:
    ret, out, found = _drill(pytester, "--rollback-cmd", "sleep 30", "--server-ready-timeout", "2")
    assert ret == 1, out
    (why,) = found["reasons"]
    assert why.startswith("the baseline command was not ready: the chat server was not ready again after "
                          "a deliberate restart (rollback drill)"), why
    assert found["findings"]["rollback"]["restored"] is True
    assert "1 passed" in out


def test_without_a_rollback_command_or_a_launched_server_the_drill_skips(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_rollback=DRILL_THEN_ANSWER)
    result = pytester.runpytest_inprocess("--server-cmd", FAKE, "-p", "no:cacheprovider", "-rs")
    assert "needs the baseline's command: --rollback-cmd CMD" in result.stdout.str()
    result.assert_outcomes(passed=1, skipped=1)


@pytest.mark.parametrize(("ttfts", "steady", "first"), [
    ([0.9, 0.4, 0.05, 0.05, 0.06, 0.05], 0.05, 2),   # cold answers, then flat
    ([0.05, 0.05, 0.06, 0.05], 0.055, 0),            # warm from the start
    ([0.05, 0.5, 0.05, 0.05, 0.05, 0.05], 0.05, 0),  # one slow answer later is noise
    ([0.05, 0.5, 0.6, 0.05, 0.05, 0.05], 0.05, 3),   # two slow in a row: not warm before them
    ([1.2, 0.06, 0.08, 0.05, 0.05, 0.08, 0.84, 0.1], 0.09, 1),  # llama-server, busy machine
])
def test_the_warm_moment_is_the_first_answer_from_which_every_later_one_is_steady(
        ttfts: list[float], steady: float, first: int) -> None:
    got_steady, got_first = settled(ttfts)
    assert got_steady == pytest.approx(steady) and got_first == first
