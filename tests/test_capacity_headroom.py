"""Headroom over recorded traffic: a kind added through the scenario registry alone.

The trace's requests arrive evenly, 10 a second; the fake answers one at a time in ~78 ms
(30 ms to the first token, 16 tokens 3 ms apart). Up to 1× (78% busy) no request waits; at 2×
and more the arrivals outrun the one slot, the queue grows for the whole step, and TTFT p95
leaves the 100 ms SLO far behind. So the headroom is 1× of the recorded traffic.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.scenario_kinds import KINDS, by_name
from pytest_inferaccept.verdict import EXIT_CODES
from tests._processes import fake_process

HEADROOM = """
def test_headroom(loadgen):
    loadgen.require_capacity()
    loadgen.scenario("headroom", trace="trace.jsonl", factors=[0.5, 1, 2, 4])
"""


@pytest.fixture(scope="module")
def one_slot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One generation at a time, 30 ms to the first token, 3 ms between tokens; the rest queue."""
    yield from fake_process(tmp_path_factory.mktemp("slot"), "--slots", "1", "--ttft", "0.03",
                            "--itl", "0.003")


def _trace(path: Path, n: int = 30, gap: float = 0.1) -> None:
    lines = [{"messages": [{"role": "user", "content": f"Question {i}: say something."}], "max_tokens": 16,
              "arrival": round(i * gap, 3)} for i in range(n)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_every_registered_kind_has_its_module_and_a_way_to_start_it() -> None:
    from pytest_inferaccept.capacity.runner import CapacityRunner

    for kind in KINDS:
        module = importlib.import_module(f"pytest_inferaccept.capacity.{kind.module}")
        assert hasattr(CapacityRunner, kind.method) or hasattr(module, "start"), kind
    with pytest.raises(ValueError, match="no capacity scenario of kind 'tsunami'; known: ladder, sweep"):
        by_name("tsunami")


def test_the_headroom_is_the_highest_speed_of_the_recorded_traffic_meeting_the_slo(
        pytester: pytest.Pytester, one_slot: str) -> None:
    _trace(pytester.path / "trace.jsonl")
    pytester.makepyfile(HEADROOM)
    result = pytester.runpytest_inprocess("--server-url", one_slot, "--inferaccept-json", "r.json",
                                          "--inferaccept-html", "r.html", "--capacity",
                                          "--client-check", "warn",
                                          "--slo", "ttft_p95=0.1", "--slo-judge", "point")
    doc: dict[str, Any] = json.loads((pytester.path / "r.json").read_text())
    (scenario,) = [c for t in doc["tests"] for c in t.get("capacity", [])]
    assert result.ret == 0, result.stdout.str()
    assert scenario["kind"] == "headroom" and scenario["status"] == "pass"
    steps = {s["level"]: s for s in scenario["steps"]}
    assert steps[0.5]["measured"] == 30 and steps[1.0]["measured"] == 30  # every recorded request, once
    # Replayed at twice the pace, the same 30 requests arrive in half the time.
    assert steps[2.0]["asked_rate"] == pytest.approx(2 * steps[1.0]["asked_rate"], rel=0.1)
    figures = [(s["level"], s["ttft_p95"]) for s in scenario["steps"]]
    assert scenario["findings"]["max_slo_level"] == 1.0, figures
    assert scenario["findings"]["unit"] == "× the recorded traffic"
    # The headroom in the team's terms: TTFT p95 crosses 100 ms between 1x and 2x. With 30
    # requests a step no p95 has an upper confidence bound (that takes 59), so no factor is
    # conclusively within and the interval's low end is 0; 2x is conclusively beyond.
    headroom = scenario["findings"]["headroom"]
    assert headroom["key"] == "ttft_p95" and 1.0 <= headroom["point"] < 2.0, headroom
    assert (headroom["low"], headroom["high"]) == (0.0, 2.0), headroom
    assert scenario["headline"].startswith(f"holds {headroom['point']:.3g}× of the recorded traffic (95% "
                                           "interval: below 2×); knee at speed=1"), scenario["headline"]
    assert scenario["slo"] == {"ttft_p95": 0.1}
    assert "inferaccept: headroom speed=2:" in result.stdout.str()
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert "Headroom over the recorded traffic" in html and "speed (× recorded)" in html


def test_a_trace_without_arrival_times_cannot_be_replayed_faster(pytester: pytest.Pytester,
                                                                  one_slot: str) -> None:
    (pytester.path / "trace.jsonl").write_text(
        json.dumps({"prompt": "Say hi.", "max_tokens": 4}) + "\n", encoding="utf-8")
    pytester.makepyfile(HEADROOM)
    result = pytester.runpytest_inprocess("--server-url", one_slot, "--capacity",
                                          "--inferaccept-json", "r.json")
    assert result.ret == EXIT_CODES["INVALID"]
    result.stdout.fnmatch_lines(["*the load was not started: the headroom replays a trace at its recorded "
                                 "times, but *trace.jsonl has entries without an `arrival` offset*"])
    doc = json.loads((pytester.path / "r.json").read_text())
    assert doc["verdict"]["status"] == "INVALID", doc["verdict"]  # the plugin's input, not the server


def test_each_speed_opens_every_prompt_with_its_own_tag_keeping_shared_prefixes_within_the_step() -> None:
    from pytest_inferaccept.capacity.headroom import at_speed
    from pytest_inferaccept.load.workloads import TraceEntry, TraceWorkload

    shared = "You are a support assistant for the harbour office. " * 4
    trace = TraceWorkload(entries=(
        TraceEntry(prompt=shared + "Where is berth 4?", max_tokens=8, arrival=0.0),
        TraceEntry(prompt=shared + "When does the ferry leave?", max_tokens=8, arrival=1.0),
        TraceEntry(messages=[{"role": "system", "content": shared}, {"role": "user", "content": "Hi"}],
                   max_tokens=8, arrival=2.0),
        TraceEntry(messages=[{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
                   max_tokens=8, arrival=3.0),
    ), source="t.jsonl")
    slow = at_speed(trace, 1, tag="[replay ab12 at speed 1]")
    fast = at_speed(trace, 2, tag="[replay ab12 at speed 2]")
    assert [e.arrival for e in fast.entries] == [0.0, 0.5, 1.0, 1.5]
    a, b = slow.entries[0].text(), slow.entries[1].text()
    opening = "[replay ab12 at speed 1]\n" + shared
    assert a.startswith(opening) and b.startswith(opening)
    assert fast.entries[0].text().startswith("[replay ab12 at speed 2]\n")  # nothing shared across steps
    assert slow.entries[2].messages is not None and slow.entries[2].messages[0]["content"].endswith(shared)
    assert slow.entries[3].messages is not None
    assert slow.entries[3].messages[0]["content"][0] == {"type": "text", "text": "[replay ab12 at speed 1]"}
    assert trace.entries[0].prompt == shared + "Where is berth 4?"  # the trace itself is unchanged
    assert at_speed(trace, 1).entries[0].prompt == trace.entries[0].prompt  # no tag: prompts as recorded


@pytest.fixture(scope="module")
def quick_slot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One slot, ~25 ms an answer: 20 requests/s keep it half busy, 40/s saturate it."""
    yield from fake_process(tmp_path_factory.mktemp("quick"), "--slots", "1", "--ttft", "0.01",
                            "--itl", "0.001")


def test_a_server_that_cannot_hold_the_traffic_asked_is_no_go(pytester: pytest.Pytester,
                                                               quick_slot: str) -> None:
    """80 requests a step (enough for a p95's upper bound): 1x holds conclusively, 2x is
    conclusively beyond 100 ms. Asked to hold twice the recorded traffic, the server fails; before
    the interval, a pass at 1x made the scenario pass whatever it was asked to hold."""
    _trace(pytester.path / "trace.jsonl", n=80, gap=0.05)
    pytester.makepyfile("""
def test_headroom(loadgen):
    loadgen.require_capacity()
    loadgen.scenario("headroom", trace="trace.jsonl", factors=[1, 2], need=2)
""")
    result = pytester.runpytest_inprocess("--server-url", quick_slot, "--inferaccept-json", "r.json",
                                          "--capacity", "--client-check", "warn", "--slo", "ttft_p95=0.1")
    doc: dict[str, Any] = json.loads((pytester.path / "r.json").read_text())
    (scenario,) = [c for t in doc["tests"] for c in t.get("capacity", [])]
    figures = [(s["level"], s["ttft_p95"], s["slo_status"]) for s in scenario["steps"]]
    assert scenario["findings"]["headroom"]["low"] == 1.0, figures
    assert scenario["findings"]["headroom"]["high"] == 2.0, figures
    assert scenario["status"] == "fail" and result.ret == EXIT_CODES["NO-GO"], scenario["reasons"]
    assert scenario["reasons"][0].startswith("does not hold 2× of the recorded traffic: holds 1."), scenario
    assert scenario["params"]["min_level"] == 2


@pytest.mark.parametrize(("low", "high", "status"), [
    (1.0, 2.0, "pass"), (0.0, 1.0, "fail"), (0.5, 2.0, "invalid"), (0.5, None, "invalid"),
    (0.0, 0.75, "fail"), (1.5, None, "pass")])
def test_the_rule_reads_the_interval_against_the_traffic_asked(low: float, high: float | None,
                                                               status: str) -> None:
    from pytest_inferaccept.capacity.headroom import _judge
    from pytest_inferaccept.stats.headroom import Headroom

    found = Headroom(point=None, low=low, high=high, key=None, below_first=False)
    judged = _judge(found, 1.0)
    assert (judged[0][0] if judged else "pass") == status, judged
