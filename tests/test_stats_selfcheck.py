"""The load generator checks itself: when the client set the pace, the reasons say so with figures."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from pytest_inferaccept.stats import SelfCheck, Thresholds, bottleneck_reasons, steady_concurrency

AFTERWORD = "the measurements describe the client, not the server"


def load(**kw: Any) -> dict[str, Any]:
    """One worker's JSON with healthy defaults overridden by kw."""
    base: dict[str, Any] = {"worker": 0, "asked_concurrency": 64, "achieved_concurrency": 63.5,
                            "asked_rate": None, "achieved_rate": None,
                            "schedule_lag_s": {"p50": 0.0005, "p99": 0.002, "max": 0.004},
                            "loop_lag_s": {"p50": 0.001, "p99": 0.004, "max": 0.009},
                            "cpu_s": 30.0, "wall_s": 60.0, "cpu_utilisation": 0.5}
    return {**base, **kw}


def closed(**kw: Any) -> dict[str, Any]:
    """A closed-loop self-check with one worker."""
    return {"mode": "closed", "total": load(worker=None, **kw), "workers": [load(**kw)]}


def test_a_client_that_kept_up_gives_no_reasons() -> None:
    assert bottleneck_reasons(closed()) == []


def test_a_closed_loop_short_of_its_concurrency_without_a_turnaround_is_reported_with_its_figures() -> None:
    assert bottleneck_reasons(closed(achieved_concurrency=51.2, schedule_lag_s=None)) == [
        f"the client could not keep 64 requests in flight: 51.2 on average (80%); {AFTERWORD}"]


def test_a_shortfall_in_concurrency_with_a_quick_turnaround_is_the_servers_pace_not_the_clients() -> None:
    # A server answering 500 within a millisecond leaves each slot idle for the client's
    # turnaround (0.5 ms here) between a failure and the next send: 96% of 4 in flight, and the
    # client kept up (the verdict on the server's 500s must not become "client-bound").
    fast_failures = closed(asked_concurrency=4, achieved_concurrency=3.84,
                           schedule_lag_s={"p50": 0.00004, "p99": 0.0002, "max": 0.0007})
    assert bottleneck_reasons(fast_failures) == []


def test_concurrency_within_two_percent_of_the_asked_is_fine() -> None:
    assert bottleneck_reasons(closed(achieved_concurrency=62.8)) == []


def test_an_open_loop_short_of_its_rate_is_reported() -> None:
    data: dict[str, Any] = {"mode": "open", "total": load(asked_concurrency=None, achieved_concurrency=None,
                                          asked_rate=20.0, achieved_rate=17.1)}
    assert bottleneck_reasons(data) == [
        f"the client could not send 20 requests/s: it sent 17.10/s (86%); {AFTERWORD}"]
    data["total"]["achieved_rate"] = 19.2
    assert bottleneck_reasons(data) == []


def test_schedule_lag_over_ten_milliseconds_at_p99_is_reported() -> None:
    (reason,) = bottleneck_reasons(closed(schedule_lag_s={"p50": 0.002, "p99": 0.035, "max": 0.12}))
    assert reason.startswith("the client sent requests 35 ms late at p99 (max 120 ms; limit 10 ms)")


def test_event_loop_lag_over_twenty_milliseconds_at_p99_is_reported() -> None:
    (reason,) = bottleneck_reasons(closed(loop_lag_s={"p50": 0.002, "p99": 0.045, "max": 0.3}))
    assert reason.startswith("the client event loop ran 45 ms late at p99 (max 300 ms; limit 20 ms)")
    assert "latencies are overstated" in reason


def test_a_client_using_most_of_a_core_is_reported() -> None:
    (reason,) = bottleneck_reasons(closed(cpu_utilisation=0.97))
    assert reason.startswith("the client used 97% of a CPU core (limit 90%)")


def test_cpu_utilisation_is_derived_from_cpu_and_wall_seconds_when_absent() -> None:
    assert len(bottleneck_reasons(closed(cpu_utilisation=None, cpu_s=57.0, wall_s=60.0))) == 1


def test_thresholds_are_parameters() -> None:
    data = closed(achieved_concurrency=60.0, cpu_utilisation=0.95, schedule_lag_s=None)
    assert len(bottleneck_reasons(data)) == 2
    assert bottleneck_reasons(data, Thresholds(concurrency_fraction=0.9, cpu_utilisation=0.99)) == []


def test_several_workers_are_checked_one_by_one_for_lag_and_cpu() -> None:
    data = {"mode": "closed", "total": load(worker=None, asked_concurrency=128, achieved_concurrency=127.0,
                                            cpu_utilisation=1.4),
            "workers": [load(worker=0), load(worker=1, cpu_utilisation=0.96)]}
    assert bottleneck_reasons(data) == [
        "worker 1: the client used 96% of a CPU core (limit 90%): a saturated client reads answers late "
        f"and inflates latencies; {AFTERWORD}"]


def test_the_json_form_is_read_whole() -> None:
    data = closed()
    check = SelfCheck.from_json(json.loads(json.dumps(data)))
    read = {"mode": check.mode, "total": dataclasses.asdict(check.total),
            "workers": [dataclasses.asdict(w) for w in check.workers]}
    assert read == {"mode": "closed", "total": {**data["total"], "node": None, "died": None},
                    "workers": [{**data["workers"][0], "node": None, "died": None}]}
    assert check.workers[0].loop_lag_s is not None and check.workers[0].loop_lag_s.p99 == 0.004


def test_an_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="'closed' or 'open'"):
        SelfCheck.from_json({"mode": "ladder", "total": {}})


def test_missing_figures_are_not_held_against_the_client() -> None:
    assert bottleneck_reasons({"mode": "closed", "total": {}}) == []


def test_steady_concurrency_leaves_out_the_ramp_up_and_the_drain() -> None:
    # two slots: both sent at 0 and 0.5, then each slot resends the moment its request ends
    spans = [(0.0, 2.0), (0.5, 3.0), (2.0, 4.0), (3.0, 5.0), (4.0, 9.0)]
    # steady from the second send (0.5) to the last send (4.0): two in flight throughout
    assert steady_concurrency(spans, asked=2) == pytest.approx(2.0)
    gappy = [(0.0, 1.0), (0.0, 1.0), (2.0, 3.0), (2.0, 3.0), (4.0, 5.0)]
    assert steady_concurrency(gappy, asked=2) == pytest.approx(1.0)  # two in flight half the time
    assert steady_concurrency([(0.0, 1.0)], asked=2) is None
