"""The capacity rules on known numbers: the knee, the highest SLO-compliant level, the breaker, trends."""

from __future__ import annotations

import random

import pytest

from pytest_inferaccept.capacity.analysis import breaker, explain, find_knee, knee_caveat, max_slo_level
from pytest_inferaccept.capacity_settings import CapacitySettingsError, resolve_capacity
from pytest_inferaccept.model import CapacityStep
from pytest_inferaccept.stats.trend import mann_kendall, theil_sen, trend, trend_view


def _slots_ladder(k: int, levels: tuple[int, ...] = (1, 2, 4, 8, 16, 32), per_slot: float = 100.0,
                  service_s: float = 0.2) -> list[CapacityStep]:
    """What a server with k slots gives: throughput grows to k slots, then requests queue."""
    return [CapacityStep(level=c, throughput_tokens_per_s=per_slot * min(c, k),
                         e2e_p95=service_s * max(1.0, c / k), slo_status="pass") for c in levels]


@pytest.mark.parametrize("k", [1, 2, 4, 8, 16])
def test_the_knee_of_a_server_with_k_slots_is_k_when_k_is_a_level(k: int) -> None:
    assert find_knee(_slots_ladder(k)).level == k


@pytest.mark.parametrize("k", [3, 6, 12])
def test_the_knee_is_within_one_level_of_k_between_levels(k: int) -> None:
    levels = (1, 2, 4, 8, 16, 32)
    knee = find_knee(_slots_ladder(k, levels)).level
    assert knee is not None
    below = max(x for x in levels if x <= k)
    above = min(x for x in levels if x >= k)
    assert knee in (below, above)


def test_no_knee_while_throughput_grows_and_flat_latency_alone_is_no_knee() -> None:
    growing = _slots_ladder(64)
    knee = find_knee(growing)
    assert knee.level is None
    assert "kept growing" in knee.reason
    # Throughput flat but latency flat too (an under-driven client): not a knee either.
    flat = [CapacityStep(level=c, throughput_tokens_per_s=100.0, e2e_p95=0.2) for c in (1, 2, 4)]
    assert find_knee(flat).level is None


def test_the_knee_reason_gives_the_figures() -> None:
    knee = find_knee(_slots_ladder(4))
    assert "from c=4 to c=8 throughput grew +0%" in knee.reason
    assert "latency p95 rose +100%" in knee.reason
    assert knee.efficiency[:2] == [1.0, 1.0]


def test_one_disturbed_level_does_not_move_the_knee() -> None:
    rows = _slots_ladder(16, (1, 2, 4, 8, 16, 32, 64))
    # c=4 measured 40% low on throughput and 50% high on latency: from 2 to 4 it looks saturated.
    rows[2].throughput_tokens_per_s = (rows[2].throughput_tokens_per_s or 0.0) * 0.6
    rows[2].e2e_p95 = (rows[2].e2e_p95 or 0.0) * 1.5
    knee = find_knee(rows)
    assert (knee.level, knee.confirmed) == (16, True)
    assert "on the lines fitted through all 7 levels" in knee.reason


def test_a_knee_with_one_level_beyond_it_is_not_confirmed_and_says_so() -> None:
    knee = find_knee(_slots_ladder(16))
    assert (knee.level, knee.confirmed, knee.levels_beyond) == (16, False, 1)
    assert knee.certainty.startswith("not confirmed: only c=32 lies beyond")
    assert knee_caveat(knee) == "the ladder's knee at c=16, which is not confirmed (only 1 level beyond it)"
    assert knee_caveat(knee.model_dump()) == knee_caveat(knee)  # as a mapping too
    sure = find_knee(_slots_ladder(4))
    assert sure.confirmed is True and knee_caveat(sure) == ""
    assert knee_caveat({"level": 4, "reason": "an older document"}) == ""  # no `confirmed` key: as reported
    assert knee_caveat(None) == ""


def test_a_sweep_knee_is_read_off_its_throughput_alone() -> None:
    # Open loop: latency climbs before capacity (queues form), so only throughput places the bend.
    rows = []
    for rate in (2.5, 5.0, 7.5, 10.0, 12.5, 15.0):
        load = rate / 10.0
        rows.append(CapacityStep(level=rate, throughput_tokens_per_s=100 * min(rate, 10.0),
                                 e2e_p95=0.2 / (1 - load) if load < 0.9 else 2.0 + 30 * (load - 0.9)))
    knee = find_knee(rows, unit="rate", closed_loop=False)
    assert (knee.level, knee.confirmed) == (10.0, True)
    assert knee.reason.startswith("from rate=10 to rate=12.5 throughput grew +0%")


def test_max_slo_level_counts_up_from_the_bottom_and_names_the_first_failure() -> None:
    failure = "ttft_p95 = 2.3 s vs limit 0.5 s"
    rows = [CapacityStep(level=c, slo_status=s, slo_failures=failure if s == "fail" else "")
            for c, s in ((1, "pass"), (2, "pass"), (4, "pass"), (8, "fail"), (16, "pass"))]
    best, why = max_slo_level(rows)
    assert best == 4
    assert why == "at c=8: ttft_p95 = 2.3 s vs limit 0.5 s"


def test_max_slo_level_stops_at_a_level_it_cannot_judge() -> None:
    rows = [CapacityStep(level=1, slo_status="pass"), CapacityStep(level=2, slo_status="not_enough_data"),
            CapacityStep(level=4, slo_status="pass")]
    assert max_slo_level(rows) == (1, "c=2 could not be judged: not enough data")
    bound = [CapacityStep(level=1, slo_status="pass", client_bound=["loop late"])]
    assert max_slo_level(bound)[0] is None


def test_the_breaker_trips_on_errors_or_latency() -> None:
    def row(**figures: float) -> CapacityStep:
        return CapacityStep(level=1, **figures)

    assert breaker(row(error_rate=0.2), max_error_rate=0.1, max_latency_s=30) == "error rate 20.0% > 10%"
    assert breaker(row(error_rate=0.0, e2e_p95=40.0), max_error_rate=0.1, max_latency_s=30) == (
        "latency p95 40 s > 30 s")
    assert breaker(row(error_rate=0.05, e2e_p95=1.0), max_error_rate=0.1, max_latency_s=30) is None


def test_explanations_come_from_the_gauges() -> None:
    rows = _slots_ladder(4)
    for r in rows:
        r.telemetry = {"waiting": max(0, r.level - 4), "kv_cache": 1.0 if r.level >= 16 else 0.3}
    kinds = {e.kind: e for e in explain(rows, 4)}
    assert "requests queue" in kinds["queueing"].text
    assert kinds["kv_cache_full"].level == 16
    # Without a waiting gauge the queue is not claimed, and the absence is said.
    for r in rows:
        r.telemetry = {}
    (only,) = explain(rows, 4)
    assert only.kind == "saturated"
    assert "exposes no waiting gauge" in only.text


def test_theil_sen_ignores_outliers_and_mann_kendall_sees_a_trend() -> None:
    points = [(float(t), 1.0 + 0.01 * t) for t in range(30)]
    points[5] = (5.0, 100.0)  # one wild outlier
    fit = theil_sen(points)
    assert fit is not None
    assert fit[0] == pytest.approx(0.01, rel=0.05)
    p = mann_kendall([v for _, v in points])
    assert p is not None and p < 1e-6


def test_a_flat_noisy_series_does_not_drift_and_a_rising_one_does() -> None:
    rng = random.Random(1)
    flat = [(t * 0.5, 0.1 + rng.gauss(0, 0.01)) for t in range(240)]
    tr = trend(flat, window_s=6)
    assert tr.n == 20
    assert tr.drifts(tolerance=0.10) is False
    rising = [(t, v + 0.002 * t) for t, v in flat]  # +0.24 s over 120 s on a 0.1 s base
    tr = trend(rising, window_s=6)
    assert tr.drifts(tolerance=0.10) is True
    assert tr.relative_change is not None and tr.relative_change > 1.5


def test_a_trend_reports_its_slope_with_an_interval_and_keeps_its_old_keys() -> None:
    rng = random.Random(2)
    rising = [(t * 0.5, 0.1 + 0.002 * t + rng.gauss(0, 0.01)) for t in range(240)]
    tr = trend(rising, window_s=6)
    assert tr.slope_per_s is not None and tr.slope_low is not None and tr.slope_high is not None
    assert tr.slope_low < tr.slope_per_s < tr.slope_high
    assert tr.slope_low > 0  # per second: the true slope is 0.004 s/s
    assert tr.slope_low < 0.004 < tr.slope_high
    found = trend_view(tr).model_dump(exclude_unset=True)
    assert {"n", "slope_per_s", "p_value", "start", "span_s", "change", "relative_change"} <= set(found)
    assert {"slope_low", "slope_high", "confidence", "lag1", "assumed_correlation", "method"} <= set(found)
    # Reproducible: the simulated null distribution is seeded.
    assert trend(rising, window_s=6) == tr


def test_a_perfect_line_is_a_trend_and_a_constant_is_none() -> None:
    line = trend([(float(t), 1.0 + 0.5 * t) for t in range(12)])
    assert line.p_value is not None and line.p_value < 0.001
    assert line.slope_low == line.slope_high == pytest.approx(0.5)
    flat = trend([(float(t), 2.0) for t in range(12)])
    assert flat.p_value == 1.0 and flat.drifts(tolerance=0.1) is False


def test_too_few_windows_cannot_judge_drift() -> None:
    tr = trend([(t, float(t)) for t in range(5)])
    assert tr.p_value is None
    assert tr.drifts(tolerance=0.1) is None


def test_capacity_options_are_checked() -> None:
    def lookup(values: dict[str, str]):  # type: ignore[no-untyped-def]
        return lambda key: values.get(key)

    s = resolve_capacity(lookup({"ladder": "1,4,16", "soak_duration": "60"}), enabled=True)
    assert s.ladder == (1, 4, 16)
    assert s.soak_duration == 60.0
    for key, raw, words in (("ladder", "4,2", "increasing"), ("ladder", "x", "list of numbers"),
                            ("soak_fraction", "1.5", "at most 1"), ("breaker_error_rate", "-1", "positive")):
        with pytest.raises(CapacitySettingsError, match=words):
            resolve_capacity(lookup({key: raw}), enabled=True)
