"""Cancellation hygiene: a burst of requests cancelled mid-answer must free the server.

The fake answers 24 to 48 tokens, 20 ms apart, four at a time (the rest queue). The burst is
eight requests asking for 1024 tokens: four streams cut after three content chunks, four
non-streamed requests closed after 0.25 s (before their answer, which takes half a second or more).
The clean fake notices each client leave within a token and frees its slot; each fault keeps
something: a generation nobody reads, a slot, or every later completion. Bounds are loose (a
loaded 2-core machine): the gauges have 3 s to come back, a completion 2 s to answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._processes import fake_process

CANCEL = """
def test_cancel(loadgen):
    loadgen.require_capacity()
    loadgen.scenario("cancel", burst=8, share=0.5, after_chunks=3, close_after=0.25, bound=3,
                     return_within=3, grace=1, quiet=1, poll=0.1, concurrency=2, requests=6,
                     hang_timeout=2)
"""
FAKE = ("--slots", "4", "--ttft", "0.02", "--itl", "0.02")
FAULTS = [
    ("--cancel-keeps-generating", "vllm:generation_tokens_total rose by"),  # and its slots stay taken
    ("--cancel-leaks-slot", "vllm:num_requests_running (running requests) read 4"),
    ("--cancel-deadlock", "/health answered 200 while a completion hung (no answer within 2 s)"),
]


def _fake(tmp: Path, *args: str) -> Iterator[str]:
    yield from fake_process(tmp, *FAKE, *args)


@pytest.fixture
def fake(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The fake with the fault flag the test is parametrized with (none: the clean fake)."""
    flag = getattr(request, "param", None)
    yield from _fake(tmp_path, *([flag] if flag else []))


def _scenario(pytester: pytest.Pytester, url: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makepyfile(CANCEL)
    result = pytester.runpytest_inprocess("--server-url", url, "--inferaccept-json", "r.json",
                                          "--inferaccept-html", "r.html", "--capacity",
                                          "--client-check", "warn")
    doc = json.loads((pytester.path / "r.json").read_text())
    (scenario,) = [c for t in doc["tests"] for c in t.get("capacity", [])]
    assert scenario["kind"] == "cancel"
    return result, scenario


def test_a_server_that_stops_on_cancel_passes_with_its_figures(pytester: pytest.Pytester, fake: str) -> None:
    result, scenario = _scenario(pytester, fake)
    assert result.ret == 0 and scenario["status"] == "pass", (scenario["reasons"], scenario["headline"])
    found = scenario["findings"]["cancel"]
    assert found["gauges_served"] and found["sent"] == 8 and found["streamed"] == 4
    assert found["cut_mid_stream"] + found["cut_waiting"] == 4, found
    # Closed at 0.25 s, half an answer's time at least: only a badly delayed client sees one end first.
    assert found["closed_early"] >= 1 and found["closed_early"] + found.get("answered_before_cancel", 0) == 4
    running = next(g for g in found["gauges"] if g["role"] == "running")
    assert running["metric"] == "vllm:num_requests_running" and running["judged"]
    assert running["before"] == 0 and running["peak"] >= 1 and running["at_end"] == 0
    assert running["returned_s"] is not None and running["returned_s"] < 5
    # The tokens made before each cancel are counted once, then the counter stands still.
    assert found["generated_at_grace"] > found["generated_before"] and found["generated_after_grace"] == 0
    assert found["completion_hangs"] is False and found["health_status"] == 200
    assert found["failed_after"] == 0 and found["ttft_ratio"] is not None
    assert [s["step"] for s in scenario["steps"]] == ["before", "after"]
    assert scenario["params"]["cancel"]["max_tokens"] == 1024
    assert "no tokens generated after the cancels" in scenario["headline"], scenario["headline"]
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert "Cancellation hygiene" in html and "before the burst, c=2" in html
    assert "vllm:num_requests_running" in html and "0 at rest, peak" in html


@pytest.mark.parametrize(("fake", "reason"), FAULTS, indirect=["fake"],
                         ids=[flag.lstrip("-") for flag, _ in FAULTS])
def test_a_server_that_keeps_something_after_a_cancel_fails_for_that_reason(
        pytester: pytest.Pytester, fake: str, reason: str) -> None:
    result, scenario = _scenario(pytester, fake)
    assert result.ret != 0 and scenario["status"] == "fail", scenario
    reasons = "\n".join(scenario["reasons"])
    assert reason in reasons, reasons
    found = scenario["findings"]["cancel"]
    if "/health" in reason:
        # Its gauges came back and it generates nothing: what it keeps is every later completion.
        assert "still hold the server" not in reasons and "rose by" not in reasons, reasons
        assert found["completion_hangs"] and found["after_not_run"], found
    if "read 4" in reason:
        assert "rose by" not in reasons, reasons  # a leaked slot generates nothing


def test_a_server_without_metrics_is_judged_on_the_requests_alone_and_says_so(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    for url in _fake(tmp_path, "--fault", "metrics_missing"):
        result, scenario = _scenario(pytester, url)
    assert scenario["status"] == "pass", scenario["reasons"]
    found = scenario["findings"]["cancel"]
    assert not found["gauges_served"] and not found.get("gauges") and not found.get("generated_metric")
    assert found["gauges_absent"] == "gauges not served: /metrics answered HTTP 404"
    said = "gauges not served: /metrics answered HTTP 404; judged on the requests alone"
    assert said in scenario["headline"], scenario["headline"]
    assert found["closed_early"] >= 1 and found["failed_after"] == 0
    assert result.ret == 0
