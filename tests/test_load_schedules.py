"""Schedules: closed loop holds its concurrency, open loop its rate, replay its times; bounds stop runs."""

from __future__ import annotations

import random
import statistics
from itertools import pairwise
from pathlib import Path

import pytest

from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.load.engine import LoadRun, LoadSpec, run_load
from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.load.schedules import gaps
from pytest_inferaccept.load.workloads import Fixed, SyntheticWorkload, TraceWorkload

TINY = SyntheticWorkload(input=Fixed(8), output=Fixed(2))
"""Two output tokens: requests cheap enough to push a rate on a busy 2-core machine."""


def measured(run: LoadRun) -> list[RequestRecord]:
    return [r for r in run.records if not r.warmup]


def peak_in_flight(records: list[RequestRecord]) -> int:
    """The most requests in flight at one moment, from the records' send and end times."""
    events = sorted([(r.send, 1) for r in records] + [(r.end, -1) for r in records])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


# -- arrival processes --------------------------------------------------------------------------


def test_poisson_gaps_are_exponential_with_mean_one_over_the_rate() -> None:
    draw = gaps(50.0, 1.0, random.Random(1))
    sample = [draw() for _ in range(20_000)]
    mean = statistics.fmean(sample)
    assert mean == pytest.approx(1 / 50, rel=0.03)
    assert statistics.pstdev(sample) / mean == pytest.approx(1.0, abs=0.05)  # exponential: CV = 1


def test_gamma_burstiness_keeps_the_mean_and_changes_the_spread() -> None:
    draw = gaps(50.0, 0.25, random.Random(2))
    sample = [draw() for _ in range(20_000)]
    mean = statistics.fmean(sample)
    assert mean == pytest.approx(1 / 50, rel=0.05)
    assert statistics.pstdev(sample) / mean == pytest.approx(2.0, rel=0.1)  # CV^2 = 1 / shape


# -- closed loop --------------------------------------------------------------------------------


def test_a_closed_loop_keeps_its_concurrency() -> None:
    with FakeServer(ttft=0.03, itl=0.005) as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=4, requests=20, warmup=0,
                                workload=TINY))
    recs = measured(run)
    assert len(recs) == 20 and all(r.ok for r in recs)
    assert peak_in_flight(recs) == 4
    check = run.selfcheck["total"]
    assert check["asked_concurrency"] == 4
    assert check["achieved_concurrency"] >= 3.0
    assert check["schedule_lag"]["n"] == 16  # the turnaround from one end to the slot's next send
    assert check["schedule_lag"]["p50"] < 0.02
    assert run.stopped_by == "requests"


def test_queueing_at_a_server_with_fewer_slots_shows_in_ttft() -> None:
    with FakeServer(ttft=0.04, slots=1) as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=3, requests=6, warmup=0,
                                workload=TINY))
    ttfts = sorted(r.ttft for r in measured(run) if r.ttft is not None)
    assert len(ttfts) == 6
    assert ttfts[-1] >= 0.1  # waited behind two others: the client does not hide server queueing


def test_a_duration_bound_stops_the_run_and_lets_requests_in_flight_finish() -> None:
    with FakeServer(ttft=0.05) as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=2, duration=0.5, warmup=0,
                                workload=TINY))
    recs = measured(run)
    assert run.stopped_by == "duration"
    assert all(r.ok for r in recs)
    assert max(r.send for r in recs) - min(r.send for r in recs) < 0.5
    assert 4 <= len(recs) <= 20


def test_the_hard_bound_cancels_requests_in_flight_and_keeps_their_records() -> None:
    with FakeServer(faults=["hang_completions"]) as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=3, requests=3, warmup=0,
                                max_seconds=0.5))
    assert run.stopped_by == "max_seconds"
    assert [r.error for r in run.records] == ["cancelled"] * 3
    # Each record runs from its send to the one cut that ended them all: a loaded machine may send
    # late (so e2e may be well under the bound) but the cut is one moment for the three.
    assert all(0 < r.e2e <= 3.0 for r in run.records), [r.e2e for r in run.records]
    ends = [r.end for r in run.records]
    assert max(ends) - min(ends) < 0.2, ends


def test_warm_up_requests_run_first_and_are_flagged() -> None:
    with FakeServer(ttft=0.01) as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=2, requests=4, warmup=3,
                                workload=TINY))
    warm = [r for r in run.records if r.warmup]
    assert [r.index for r in warm] == [0, 1, 2]
    assert [r.index for r in measured(run)] == [3, 4, 5, 6]
    assert run.window[0] == min(r.send for r in measured(run))
    assert run.window[0] >= max(r.end for r in warm)


# -- open loop and replay -----------------------------------------------------------------------


def test_an_open_loop_sends_at_the_asked_rate_on_time() -> None:
    with FakeServer() as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", rate=60.0, duration=1.5, warmup=0,
                                workload=TINY, seed=3))
    recs = measured(run)
    check = run.selfcheck["total"]
    assert all(r.ok for r in recs)
    assert 60 <= len(recs) <= 130  # Poisson count over 1.5 s at 60/s: 90 +- 3 sigma
    assert check["achieved_rate"] == pytest.approx(check["scheduled_rate"], rel=0.1)
    assert check["achieved_rate"] == pytest.approx(60, rel=0.35)
    # On time means as punctual as the sender's own event loop: a loaded machine wakes every sleep
    # late (loop lag p50 6 ms beside four CPU hogs on 2 cores), and the sends with it.
    assert check["schedule_lag"]["p50"] < 0.005 + check["loop_lag"]["p50"], check
    assert check["schedule_lag"]["n"] == len(recs)
    sends = sorted(r.send for r in recs)
    gap_mean = statistics.fmean(b - a for a, b in pairwise(sends))
    assert gap_mean == pytest.approx(1 / 60, rel=0.35)


def test_an_open_loop_does_not_drift_when_sleeps_wake_late() -> None:
    with FakeServer() as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", rate=40.0, requests=40, warmup=0,
                                workload=TINY, seed=5))
    lags = [r.send - r.scheduled for r in measured(run) if r.scheduled is not None]
    assert len(lags) == 40
    # The last requests are as punctual as the first: no later than the sender's own event loop
    # wakes at worst (its p99; ten sends are a quarter of a second, within one starved stretch of
    # a loaded machine), where a schedule that drifts falls further behind with every request.
    loop_lag = run.selfcheck["total"]["loop_lag"]["p99"]
    assert statistics.median(lags[-10:]) < 0.005 + loop_lag, (lags, loop_lag)


def test_a_trace_is_replayed_at_its_recorded_arrival_times(tmp_path: Path) -> None:
    arrivals = [0.0, 0.1, 0.3, 0.35, 0.6]
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(f'{{"prompt": "p{i}", "max_tokens": 2, "arrival": {a}, "tags": ["t{i}"]}}\n'
                            for i, a in enumerate(reversed(arrivals))))
    with FakeServer() as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", replay=True, warmup=0,
                                workload=TraceWorkload.from_file(path)))
    recs = measured(run)
    start = recs[0].scheduled
    assert start is not None
    offsets = [round(r.scheduled - start, 6) for r in recs if r.scheduled is not None]
    assert offsets == arrivals
    assert [r.tags for r in recs] == [("t4",), ("t3",), ("t2",), ("t1",), ("t0",)]
    assert all(abs(r.send - r.scheduled) < 0.02 for r in recs if r.scheduled is not None)


def test_the_self_check_samples_event_loop_lag_and_cpu() -> None:
    with FakeServer() as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=1, duration=0.3, warmup=0,
                                workload=TINY))
    worker = run.selfcheck["per_worker"][0]
    assert worker["loop_lag"]["n"] >= 10
    assert 0 <= worker["loop_lag"]["p50"] < 0.05
    assert worker["cpu_seconds"] > 0 and 0 < worker["cpu_utilisation"] < 1.5
    assert worker["loop"] in ("asyncio", "uvloop")
