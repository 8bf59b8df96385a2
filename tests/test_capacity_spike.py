"""The spike: c=2 for 2 s, c=8 for 2 s, back to c=2 for 4 s (one timeline), against fakes with known faults.

Each fake answers in about 0.2 s (50 ms to the first token, then 5 ms a token). With six slots
the spike's eight users queue a little (e2e p95 about 0.3 s) and the two users after it are
served at once: back within the SLO in the first window. With --slow-recovery the fake stays
four times slower for 2 s from half a second after its queue empties (e2e about 0.8 s against
the SLO's 0.6 s), so recovery takes about 2.5 s. With two slots and room for one waiting request, the spike's
extra users are refused with 429 + Retry-After (rejected cleanly, not failures); with
--spike-unbounded-queue the same server refuses nothing and the queue of six leaves TTFT around
0.7 s, past the SLO's 0.4 s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests._processes import fake_process

SPIKE = """
def test_spike(loadgen):
    loadgen.require_capacity()
    loadgen.scenario("spike", base=2, factor=4, before=2, hold=2, after=4, recover_within=1.5,
                     window=0.5)
"""
TIMING = ("--ttft", "0.05", "--itl", "0.005")
SLO = ("--slo", "ttft_p95=0.4", "--slo", "e2e_p95=0.6")


def _fake(factory: pytest.TempPathFactory, *args: str) -> Iterator[str]:
    yield from fake_process(factory.mktemp("spike"), *TIMING, *args)


@pytest.fixture(scope="module")
def six_slots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Six generations at once; the rest queue, nothing is refused."""
    yield from _fake(tmp_path_factory, "--slots", "6")


@pytest.fixture(scope="module")
def slow_to_recover(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same, four times slower for 2 s from half a second after its queue emptied."""
    yield from _fake(tmp_path_factory, "--slots", "6", "--slow-recovery", "2")


@pytest.fixture(scope="module")
def sheds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Two generating, one waiting; the rest get 429 with Retry-After at once."""
    yield from _fake(tmp_path_factory, "--slots", "2", "--max-queue", "1", "--overload-status", "429")


@pytest.fixture(scope="module")
def unbounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The shedding server with its bound ignored: every request of the spike queues."""
    yield from _fake(tmp_path_factory, "--slots", "2", "--max-queue", "1", "--overload-status", "429",
                     "--spike-unbounded-queue")


def _spike(pytester: pytest.Pytester, url: str, *extra: str) -> tuple[Any, dict[str, Any]]:
    pytester.makepyfile(SPIKE)
    result = pytester.runpytest_inprocess("--server-url", url, "--inferaccept-json", "r.json", "--capacity",
                                          "--client-check", "warn", *SLO, *extra)
    doc = json.loads((pytester.path / "r.json").read_text())
    (scenario,) = [c for t in doc["tests"] for c in t.get("capacity", [])]
    assert scenario["kind"] == "spike"
    return result, scenario


def test_a_server_that_queues_a_little_and_recovers_at_once_passes_with_its_figures(
        pytester: pytest.Pytester, six_slots: str) -> None:
    pytester_html = ("--inferaccept-html", "r.html")
    result, scenario = _spike(pytester, six_slots, *pytester_html)
    spike = scenario["findings"]["spike"]
    assert scenario["status"] == "pass", (scenario["headline"], scenario["reasons"])
    assert result.ret == 0
    phases = {s["phase"]: s for s in scenario["steps"]}
    assert [s["phase"] for s in scenario["steps"]] == ["before", "during", "after"]
    assert phases["during"]["level"] == 8 and phases["before"]["level"] == phases["after"]["level"] == 2
    # one timeline: the phases follow each other, the spike about 2 s in and 2 s long
    assert phases["before"]["end_s"] == phases["during"]["start_s"] == spike["spike_start_s"]
    assert 1.5 < spike["spike_start_s"] < 3.5
    assert spike["spike_end_s"] - spike["spike_start_s"] == pytest.approx(2, abs=0.002)  # rounded to ms
    assert phases["during"]["achieved_concurrency"] > 2 * phases["before"]["achieved_concurrency"]
    assert spike["failed_during"] == 0 and spike["rejected_clean"] == 0 and spike["requests_during"] > 20
    assert spike["recovered"] and spike["recovery_s"] <= 1.0, spike["windows"]
    assert spike["reference"] == "slo" and spike["limits"] == {"ttft_p95": 0.4, "e2e_p95": 0.6}
    assert spike["queue_source"] == "/metrics vllm:num_requests_waiting"
    assert spike["waiting_during"] > spike["waiting_before"]  # it queued, within the SLO
    assert spike["handling"] == "absorbed"
    params = scenario["params"]
    assert (params["concurrency"], params["factor"], params["before_s"], params["hold_s"], params["after_s"],
            params["recover_within_s"], params["window_s"]) == (2, 4, 2, 2, 4, 1.5, 0.5)
    assert params["basis"] == "as asked" and params["max_failure_share"] == 0.01
    assert "back within the limits 0.0 s after the spike" in scenario["headline"] or spike["recovery_s"] > 0
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert "Traffic spike" in html


def test_a_server_slow_to_recover_fails_naming_its_recovery_time(pytester: pytest.Pytester,
                                                                 slow_to_recover: str) -> None:
    result, scenario = _spike(pytester, slow_to_recover)
    spike = scenario["findings"]["spike"]
    assert scenario["status"] == "fail" and result.ret != 0
    assert spike["recovered"] and 1.5 < spike["recovery_s"] <= 3.5, spike["windows"]
    (reason,) = [r for r in scenario["reasons"] if "after the spike to come back within" in r]
    assert reason.startswith(f"latency took {spike['recovery_s']:.1f} s after the spike"), reason
    assert "above the 1.5 s allowed" in reason
    assert spike["failed_during"] == 0 and spike["handling"] == "absorbed"  # the spike itself was served
    assert len(scenario["reasons"]) == 1


def test_a_server_that_sheds_the_spike_with_retry_after_rejected_it_cleanly(pytester: pytest.Pytester,
                                                                            sheds: str) -> None:
    _, scenario = _spike(pytester, sheds)
    spike = scenario["findings"]["spike"]
    assert spike["handling"] == "rejected_cleanly", spike["handling_text"]
    assert spike["rejected_clean"] > 0 and spike["rejected_bare"] == 0
    assert spike["failed_during"] == 0  # clean rejections are not failures
    assert spike["handling_text"].startswith(f"rejected cleanly: {spike['rejected_clean']} answers 429/503")
    assert "rejected cleanly" in scenario["headline"]
    assert scenario["steps"][1]["rejected_clean"] > 0
    assert not any("queue grow" in r for r in scenario["reasons"])


def test_a_server_that_lets_its_queue_grow_through_the_spike_fails_for_it(pytester: pytest.Pytester,
                                                                         unbounded: str) -> None:
    result, scenario = _spike(pytester, unbounded)
    spike = scenario["findings"]["spike"]
    assert scenario["status"] == "fail" and result.ret != 0
    assert spike["handling"] == "queued" and spike["rejected_clean"] == 0
    assert spike["waiting_during"] >= 3 > spike["waiting_before"]
    (reason,) = [r for r in scenario["reasons"] if "let its queue grow" in r]
    assert "vllm:num_requests_waiting rose to" in reason and "no request was rejected" in reason
    assert "ttft_p95" in reason
