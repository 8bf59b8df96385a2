"""Capacity scenarios against the fake server with known behaviour: slots, overload, creep, memory.

Each scenario runs through the `loadgen` fixture in a pytester run; the figures come back in the
results JSON, where these tests read them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._processes import fake_process

LADDER = """
def test_ladder(loadgen):
    loadgen.ladder([1, 2, 4, 8, 16], requests=40, settle=1MIN)
"""


def _capacity(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    doc = json.loads((pytester.path / "r.json").read_text())
    return [c for t in doc["tests"] for c in t.get("capacity", [])]


@pytest.fixture(scope="module")
def four_slots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Four generations at a time, 30 ms to the first token, 3 ms between tokens; the rest queue."""
    yield from fake_process(tmp_path_factory.mktemp("slots"), "--slots", "4", "--ttft", "0.03",
                            "--itl", "0.003")


def _run(pytester: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("--server-url", url, "--inferaccept-json", "r.json",
                                        "--client-check", "warn", *args)


def test_the_ladder_finds_the_knee_at_the_slots_and_the_highest_slo_level(
        pytester: pytest.Pytester, four_slots: str) -> None:
    pytester.makepyfile(LADDER.replace("MIN", ""))
    # Up to 4 in flight a request waits for nothing (TTFT ~30 ms); at 8, half of them queue
    # behind a whole answer (~130 ms), so TTFT p95 < 100 ms holds up to c=4.
    result = _run(pytester, four_slots, "--slo", "ttft_p95=0.1", "--slo-judge", "point")
    (ladder,) = _capacity(pytester)
    assert result.ret == 0, result.stdout.str()
    knee = ladder["findings"]["knee"]
    assert knee["level"] in (4, 8), knee  # within one level of the 4 slots
    assert ladder["findings"]["max_slo_level"] == 4, [(s["level"], s["ttft_p95"]) for s in ladder["steps"]]
    assert ladder["headline"].startswith("meets the SLOs up to c=4; knee at c=")
    assert [s["level"] for s in ladder["steps"]] == [1, 2, 4, 8, 16]
    waiting = {s["level"]: s["telemetry"].get("waiting") for s in ladder["steps"]}
    # The fake's queue gauge, sampled: 12 wait at c=16 when all 16 are in flight; a starved client
    # keeps fewer in flight and the sampler may miss the peak (7 seen on a machine loaded 3 times over).
    assert waiting[1] == 0 and waiting[16] >= 4, waiting
    assert any(e["kind"] == "queueing" for e in ladder["explanations"])
    assert "inferaccept: ladder c=8:" in result.stdout.str()


def test_a_required_level_the_server_does_not_reach_is_a_no_go(
        pytester: pytest.Pytester, four_slots: str) -> None:
    pytester.makepyfile("""
        def test_ladder(loadgen):
            loadgen.ladder([2, 4, 8], requests=40)
    """)
    result = _run(pytester, four_slots, "--slo", "ttft_p95=0.1", "--slo-judge", "point",
                  "--capacity-min", "8")
    assert result.ret == 1, result.stdout.str()
    (ladder,) = _capacity(pytester)
    assert ladder["status"] == "fail"
    assert ladder["reasons"][0].startswith("meets the SLOs only up to c=4; required: c=8")
    assert "VERDICT: NO-GO" in result.stdout.str()


def test_the_breaker_stops_the_climb(pytester: pytest.Pytester, four_slots: str) -> None:
    pytester.makepyfile(LADDER.replace("MIN", ""))
    result = _run(pytester, four_slots, "--breaker-latency", "0.2")
    assert result.ret == 0, result.stdout.str()
    (ladder,) = _capacity(pytester)
    levels = [s["level"] for s in ladder["steps"]]
    assert levels[-1] < 16, levels
    stopped = ladder["findings"]["stopped_early"]
    assert stopped.startswith(f"stopped climbing after c={levels[-1]}: latency p95"), stopped


def test_the_sweep_reports_asked_and_achieved_rates(pytester: pytest.Pytester, four_slots: str) -> None:
    pytester.makepyfile("""
        def test_sweep(loadgen):
            loadgen.sweep([5, 10], requests=30)
    """)
    result = _run(pytester, four_slots)
    assert result.ret == 0, result.stdout.str()
    (sweep,) = _capacity(pytester)
    assert [s["level"] for s in sweep["steps"]] == [5, 10]
    for step in sweep["steps"]:
        assert step["asked_rate"] > 0 and 0.5 < step["achieved_fraction"] < 1.5, step


@pytest.mark.parametrize(("args", "graceful"), [
    (("--overload-status", "503"), True),
    (("--overload-status", "500"), False),
    (("--overload-hang",), False),
], ids=["503-shedding", "500-collapse", "hang"])
def test_the_push_tells_shedding_from_falling_over(
        pytester: pytest.Pytester, tmp_path: Path, args: tuple[str, ...], graceful: bool) -> None:
    pytester.makepyfile("""
        def test_push(loadgen):
            loadgen.push([2, 8, 32], requests=24)
    """)
    for url in fake_process(tmp_path, "--slots", "2", "--max-queue", "2", "--ttft", "0.05", "--itl", "0.003",
                            *args):
        result = _run(pytester, url, "--request-timeout", "2")
        (push,) = _capacity(pytester)
        boundary = push["findings"]["boundary"]
        assert boundary is not None, push
        out = result.stdout.str()
        if graceful:
            assert result.ret == 0, out
            assert push["headline"].startswith(f"sheds load gracefully at c={boundary['level']}: ")
            assert boundary["statuses"].keys() == {"503"} and boundary["retry_after"] == boundary["shed"]
            assert boundary["alive_after"]
        else:
            assert result.ret == 1, out
            assert push["status"] == "fail"
            expected = f"falls over at c={boundary['level']} instead of shedding load"
            assert push["headline"].startswith(expected), push["headline"]
            problem = "HTTP 500" if "500" in args else "timeout"
            assert problem in push["headline"], push["headline"]
        assert boundary["level"] <= 32  # it stopped by itself at the boundary


SOAK = """
def test_soak(loadgen):
    loadgen.soak(concurrency=2, duration=12)
"""


# The stable server's soak is tests/test_soak_scenario.py's (with its projection and interval).
@pytest.mark.parametrize(("args", "finding"), [
    (("--latency-creep", "0.6"), "ttft_drift"),
    (("--memory-growth", "1048576"), "memory_growth"),
], ids=["latency-creep", "memory-growth"])
def test_a_soak_finds_injected_creep_and_growth(
        pytester: pytest.Pytester, tmp_path: Path, args: tuple[str, ...], finding: str) -> None:
    pytester.makepyfile(SOAK)
    # A 100 ms TTFT: the machine's own jitter stays small against the injected creep.
    for url in fake_process(tmp_path, "--ttft", "0.1", "--itl", "0.002", *args):
        result = _run(pytester, url)
        (soak,) = _capacity(pytester)
        checks = soak["findings"]["checks"]
        assert result.ret == 1, result.stdout.str()
        assert checks[finding]["status"] == "fail", checks[finding]
        assert checks[finding]["trend"]["p_value"] < 0.01
        assert len(soak["series"]["ttft"]) >= 8
        assert soak["series"]["memory_bytes"], soak["series"].keys()


def test_the_prompt_length_push_finds_the_context_window(pytester: pytest.Pytester, four_slots: str) -> None:
    pytester.makepyfile("""
        def test_lengths(loadgen):
            loadgen.push_length([256, 1024, 4096], requests=2)
    """)
    result = _run(pytester, four_slots)
    assert result.ret == 0, result.stdout.str()
    (push,) = _capacity(pytester)
    boundary = push["findings"]["boundary"]
    assert boundary["length"] == 4096 and boundary["graceful"], boundary  # the fake's window: 2048
    assert push["headline"].startswith("prompts of 4096 tokens are refused cleanly (HTTP 400)")


def test_the_bundled_capacity_suite_is_skipped_without_the_option(
        pytester: pytest.Pytester, four_slots: str) -> None:
    result = pytester.runpytest_inprocess("--pyargs", "pytest_inferaccept.suites.test_capacity",
                                          "--server-url", four_slots, "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=7)
    result.stdout.fnmatch_lines(["*capacity scenarios run with --capacity (they take minutes)*"])
