"""The soak's drift in production terms: horizons, budgets, projections, shapes, and the soak to plan.

The simulations at the end are seeded and pure Python: a stable server's memory wandering with
slow load swings is called leaking at most 1% of the time, and a leak that would use the budget
within half the horizon is found at least 95% of the time by a soak of the recommended length;
a leak per request under traffic that swings and sags keeps its per-request interval and its
steady shape when fitted against the requests finished.
"""

from __future__ import annotations

import bisect
import math
import random

import pytest

from pytest_inferaccept.capacity.soak_judge import Capacity, Traffic, judge_memory
from pytest_inferaccept.capacity_settings import CapacitySettingsError, resolve_capacity
from pytest_inferaccept.fake.config import FakeConfig
from pytest_inferaccept.fake.metrics import BASE_RESIDENT_BYTES, MetricsState
from pytest_inferaccept.stats.projection import (
    MIN_SOAK_S,
    Horizon,
    Projection,
    ProjectionInputError,
    Slope,
    bytes_words,
    duration_words,
    parse_bytes,
    parse_horizon,
    projection_view,
    shape_of,
    soak_needed,
)

GIB, MIB, KIB = 2**30, 2**20, 2**10
DAY = 86400.0


@pytest.mark.parametrize(("raw", "seconds", "requests"), [
    ("24h", DAY, None), ("90m", 5400.0, None), ("3600s", 3600.0, None), ("1.5d", 1.5 * DAY, None),
    ("7200", 7200.0, None), ("2000000req", None, 2e6), ("2e6 requests", None, 2e6), ("45 min", 2700.0, None),
])
def test_a_horizon_is_a_duration_of_traffic_or_a_request_count(
        raw: str, seconds: float | None, requests: float | None) -> None:
    assert parse_horizon(raw) == Horizon(seconds=seconds, requests=requests)


@pytest.mark.parametrize("raw", ["soon", "24x", "0h", "-1h", "h", ""])
def test_a_horizon_that_cannot_be_read_says_what_is_accepted(raw: str) -> None:
    with pytest.raises(ProjectionInputError, match=r"expected a (duration|positive horizon)"):
        parse_horizon(raw)


def test_a_horizon_is_described_in_both_time_and_requests_at_the_soaks_rate() -> None:
    assert Horizon(seconds=DAY).describe(20.0) == "24 h of this traffic (1.73 M requests at 20 requests/s)"
    assert Horizon(requests=2e6).describe(20.0) == "2 M requests (28 h at 20 requests/s)"
    assert Horizon(requests=2e6).seconds_at(20.0) == 1e5
    assert Horizon(requests=2e6).seconds_at(None) is None  # no traffic measured: no time to project over


@pytest.mark.parametrize(("raw", "size"), [
    ("24GiB", 24 * GIB), ("512MiB", 512 * MIB), ("16GB", 16e9), ("8Gi", 8 * GIB), ("1000", 1000.0),
    ("1.5 TiB", 1.5 * 2**40),
])
def test_a_memory_limit_reads_binary_and_decimal_units(raw: str, size: float) -> None:
    assert parse_bytes(raw) == size


def test_a_memory_limit_in_bare_g_is_ambiguous_and_refused() -> None:
    with pytest.raises(ProjectionInputError, match="ambiguous"):
        parse_bytes("24G")


def test_the_soak_options_are_resolved_once_and_a_bad_one_names_itself() -> None:
    def lookup(values: dict[str, str]):  # type: ignore[no-untyped-def]
        return lambda key: values.get(key)

    default = resolve_capacity(lookup({}), enabled=True)
    assert default.soak_horizon == Horizon(seconds=DAY) and default.memory_limit is None
    assert default.drift_tolerance == 1.0 and default.memory_tolerance == 1.0
    given = resolve_capacity(lookup({"soak_horizon": "2000000req", "memory_limit": "24GiB"}), enabled=True)
    assert given.soak_horizon == Horizon(requests=2e6) and given.memory_limit == 24 * GIB
    assert given.describe()["soak_horizon"] == {"seconds": None, "requests": 2e6}
    with pytest.raises(CapacitySettingsError, match=r"^--soak-horizon 'soon': expected a duration"):
        resolve_capacity(lookup({"soak_horizon": "soon"}), enabled=True)
    with pytest.raises(CapacitySettingsError, match=r"^--memory-limit '24G': "):
        resolve_capacity(lookup({"memory_limit": "24G"}), enabled=True)


def test_a_bad_horizon_on_the_command_line_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("--soak-horizon", "soon", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--soak-horizon 'soon': expected a duration (24h, 90m, 3600s, 2d)*"])


def test_figures_are_worded_for_people() -> None:
    assert bytes_words(2.6 * GIB, sign=True) == "+2.6 GiB"
    assert bytes_words(4096 * 1.0) == "4 KiB" and bytes_words(0.0, sign=True) == "±0 B"
    assert duration_words(9 * 3600.0) == "9.0 h" and duration_words(40.0) == "40 s"
    assert duration_words(None) == "never" and duration_words(5 * DAY) == "5.0 days"


def _slope(per_s: float, half: float, *, floor_half: float | None = None, span: float = 600.0) -> Slope:
    return Slope(per_s=per_s, low=per_s - half, high=per_s + half, floor=per_s - (floor_half or 1.3 * half),
                 error=0.85 * half, start=4 * GIB, span_s=span, n=20, p_value=0.001)


def test_a_projection_carries_the_rate_to_the_horizon_and_says_when_the_limit_is_reached() -> None:
    # 30 KiB/s with a 95% interval of 28-32 KiB/s, 10 GiB left: about 97 h, past a 24 h horizon.
    p = Projection(slope=_slope(30 * KIB, 2 * KIB), horizon_s=DAY, level=4 * GIB, limit=14 * GIB)
    assert projection_view(p).growth == pytest.approx(30 * KIB * DAY)
    assert p.time_to_limit(30 * KIB) == pytest.approx(10 * GIB / (30 * KIB))
    found = projection_view(p)
    assert found.time_to_limit_low_s is not None and found.time_to_limit_s is not None
    assert found.time_to_limit_high_s is not None
    assert found.time_to_limit_low_s < found.time_to_limit_s < found.time_to_limit_high_s
    assert p.crosses is False
    # Ten times the rate: the low end of the interval reaches the limit within the day.
    assert Projection(slope=_slope(300 * KIB, 20 * KIB), horizon_s=DAY, level=4 * GIB, limit=14 * GIB).crosses


def test_a_server_already_past_its_budget_is_a_finding_only_while_it_grows() -> None:
    flat = Projection(slope=_slope(0.0, 1 * KIB), horizon_s=DAY, level=15 * GIB, limit=14 * GIB)
    assert flat.crosses is False and flat.time_to_limit(0.0) is None
    growing = Projection(slope=_slope(50 * KIB, 5 * KIB), horizon_s=DAY, level=15 * GIB, limit=14 * GIB)
    assert growing.crosses is True and growing.time_to_limit(50 * KIB) == 0.0
    assert Projection(slope=_slope(50 * KIB, 5 * KIB), horizon_s=DAY, level=1.0).crosses is None  # no limit


def _sampled(f, seconds: float = 60.0, step: float = 0.25, noise: float = 0.0,  # type: ignore[no-untyped-def]
             seed: int = 1) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [(i * step, f(i * step) + rng.gauss(0.0, noise)) for i in range(int(seconds / step) + 1)]


def test_a_cache_that_fills_then_stays_levels_off_and_a_leak_does_not() -> None:
    cache = shape_of(_sampled(lambda t: 200 * MIB + 64 * MIB * min(1.0, t / 15), noise=0.2 * MIB))
    assert cache.kind == "levels_off", cache
    leak = shape_of(_sampled(lambda t: 200 * MIB + 60 * KIB * t, noise=0.2 * MIB))
    assert leak.kind == "steady", leak
    slowing = shape_of(_sampled(lambda t: 200 * MIB + 8 * MIB * math.sqrt(t), noise=0.05 * MIB))
    assert slowing.kind == "slowing", slowing
    assert shape_of([(0.0, 1.0), (1.0, 2.0)]).kind == "steady"  # too few points to tell


def test_the_soak_to_plan_grows_with_the_noise_and_shrinks_with_the_headroom() -> None:
    noisy, quiet = _slope(0.0, 100 * KIB), _slope(0.0, 10 * KIB)
    room = 10 * GIB
    long_soak = soak_needed(noisy, headroom=room, horizon_s=DAY, duration_s=600.0)
    short_soak = soak_needed(quiet, headroom=room, horizon_s=DAY, duration_s=600.0)
    assert long_soak is not None and short_soak is not None
    assert long_soak == pytest.approx(10 * short_soak)
    roomier = soak_needed(noisy, headroom=2 * room, horizon_s=DAY, duration_s=600.0)
    assert roomier == pytest.approx(long_soak / 2)
    assert soak_needed(_slope(0.0, 0.0), headroom=room, horizon_s=DAY, duration_s=600.0) == MIN_SOAK_S
    assert soak_needed(noisy, headroom=-1.0, horizon_s=DAY, duration_s=600.0) is None


def test_the_fake_server_leaks_a_set_size_per_request_and_its_cache_levels_off() -> None:
    state = MetricsState()
    sizes = []
    for _ in range(300):
        state.request_finished(10, 10, ttft=0.01, e2e=0.02)
        sizes.append(state.resident_bytes(cache_fill=64 * MIB, cache_fill_requests=100))
    assert sizes[99] == sizes[-1] == BASE_RESIDENT_BYTES + 64 * MIB  # full after 100, then flat
    assert sizes[49] == BASE_RESIDENT_BYTES + 32 * MIB
    assert state.resident_bytes(memory_growth=4096) == BASE_RESIDENT_BYTES + 300 * 4096  # for ever
    assert "process_resident_memory_bytes 276824064.0" in state.render(
        "m", memory_growth=0, cache_fill=64 * MIB, cache_fill_requests=100)
    with pytest.raises(ValueError, match="cache_fill needs cache_fill_requests"):
        FakeConfig(cache_fill=MIB)


# ---------------------------------------------------------------------------------------------
# Simulated soaks: a 4 GiB server with 16 GiB (its budget 90%: 10.4 GiB of headroom), a day's horizon.

BASE = 4 * GIB
CAPACITY = Capacity(total=16 * GIB, share=0.9, source="simulated")
HORIZON = Horizon(seconds=DAY)
EDGE = (CAPACITY.budget - BASE) / DAY
"""The leak rate that uses the headroom exactly at the horizon (about 126 KiB/s)."""


def _memory(rng: random.Random, seconds: float, *, leak: float, swing: float, tau: float,
            noise: float) -> list[tuple[float, float]]:
    """Memory sampled 600 times over a soak: a leak, slow swings (Ornstein-Uhlenbeck with standard
    deviation `swing` and time constant `tau`: load coming and going) and independent jitter."""
    step = max(1.0, seconds / 600)
    keep = math.exp(-step / tau)
    shock = swing * math.sqrt(1 - keep * keep)
    level = rng.gauss(0.0, swing)
    out = []
    for i in range(int(seconds / step) + 1):
        out.append((i * step, BASE + leak * i * step + level + rng.gauss(0.0, noise)))
        level = keep * level + shock * rng.gauss(0.0, 1.0)
    return out


def _judge(points: list[tuple[float, float]], seconds: float) -> dict[str, object]:
    traffic = Traffic(request_rate=20.0, duration_s=seconds, horizon=HORIZON, alpha=0.01)
    return judge_memory(points, what="memory", window_s=max(1.0, seconds / 20), traffic=traffic,
                        capacity=CAPACITY, tolerance=1.0, source="simulated")


def test_a_stable_server_with_slow_load_swings_is_rarely_called_leaking() -> None:
    # 10-minute soaks; swings of 128 MiB lasting about half the soak (tau 300 s: neighbouring
    # windows correlated at about 0.9, as in test_capacity_coverage). A projection this noisy
    # reaches the budget often; only the interval that allows for the swings keeps it honest.
    rng = random.Random(20)
    trials = 600
    false = sum(_judge(_memory(rng, 600.0, leak=0.0, swing=128 * MIB, tau=300.0, noise=16 * MIB), 600.0)
                .status == "fail" for _ in range(trials))
    assert false / trials <= 0.01, false / trials  # measured 0.0% (3 × 3000 soaks, other seeds: 0.2-0.5%)


def test_a_leak_that_would_use_the_budget_in_half_the_horizon_is_found_by_the_recommended_soak() -> None:
    # Each trial: a 10-minute soak of a stable server plans the soak; a soak that long then runs
    # on a server leaking twice the edge rate (it reaches its budget after 12 h).
    rng = random.Random(21)
    trials = 150
    found = 0
    planned = []
    for _ in range(trials):
        pilot = _judge(_memory(rng, 600.0, leak=0.0, swing=128 * MIB, tau=300.0, noise=16 * MIB), 600.0)
        plan = pilot.plan
        assert plan is not None
        seconds = float(plan.soak_needed_s)
        planned.append(seconds)
        leaking = _memory(rng, seconds, leak=2 * EDGE, swing=128 * MIB, tau=300.0, noise=16 * MIB)
        soak = _judge(leaking, seconds)
        found += soak.status == "fail"
    assert found / trials >= 0.95, found / trials  # measured 97.3% (500 trials, another seed: 96.4%)
    planned.sort()
    assert 3600 < planned[trials // 2] < 12 * 3600, planned[trials // 2]  # about 5.4 h


# ---------------------------------------------------------------------------------------------
# The latency and GPU checks, and the memory a launched server has

def _latency(creep_per_s: float, seconds: float = 600.0, seed: int = 2) -> list[tuple[float, float]]:
    """TTFT of 10 requests a second: 100 ms with 5% jitter, creeping by `creep_per_s` s a second."""
    rng = random.Random(seed)
    return [(i / 10, (0.1 + creep_per_s * i / 10) * math.exp(rng.gauss(0.0, 0.05)))
            for i in range(int(seconds * 10))]


def test_a_latency_creep_says_when_it_would_cross_the_slo() -> None:
    from pytest_inferaccept.capacity.soak_judge import judge_latency

    traffic = Traffic(request_rate=10.0, duration_s=600.0, horizon=HORIZON)
    # +20 ms over ten minutes (+120 ms/h): a p95 of 150 ms reaches its 500 ms limit after about 3 h.
    check = judge_latency(_latency(0.02 / 600), what="TTFT", metric="ttft", window_s=30.0, traffic=traffic,
                          limits=[("ttft_p95", 0.5, 0.15)], tolerance=1.0)
    assert check.status == "fail", check.text
    assert check.projection is not None and check.projection.time_to_limit_s is not None
    hours = check.projection.time_to_limit_s / 3600
    assert 2 < hours < 4.5, hours
    assert "TTFT p95 would cross its SLO of 500 ms after about" in (check.answer or "")
    assert check.rate is not None and 100 < (check.rate.per_hour or 0) * 1000 < 140, check.rate
    flat = judge_latency(_latency(0.0), what="TTFT", metric="ttft", window_s=30.0, traffic=traffic,
                         limits=[("ttft_p95", 0.5, 0.15)], tolerance=1.0)
    assert flat.status == "pass", flat.text
    assert flat.rate is not None, flat
    assert (flat.rate.per_hour_low or 0) <= 0 <= (flat.rate.per_hour_high or 0), flat.rate
    # Without an SLO on it, doubling within the horizon is the limit.
    alone = judge_latency(_latency(0.02 / 600), what="TTFT", metric="ttft", window_s=30.0, traffic=traffic,
                          limits=[], tolerance=1.0)
    assert alone.status == "fail" and "TTFT would reach 2× its start" in alone.text, alone.text


def test_gpu_memory_is_judged_against_the_whole_gpu() -> None:
    from pytest_inferaccept.capacity.sampler import Sampler, Series
    from pytest_inferaccept.capacity.soak_judge import gpu_memory_check

    sampler = Sampler(base_url="http://127.0.0.1:9", gpu_command="")
    # 70 GiB of 80 used, growing 1 MiB a second: the last 10 GiB go in under 3 h.
    used = [(t * 1.0, 70.0 * GIB + MIB * t) for t in range(120)]
    source = "gpu 0 (nvidia-smi)"
    sampler.series["gpu0_memory_bytes"] = Series(name="gpu0_memory_bytes", source=source, points=used)
    sampler.series["gpu0_memory_total_bytes"] = Series(name="gpu0_memory_total_bytes", source=source,
                                                       points=[(t, 80.0 * GIB) for t, _ in used])
    traffic = Traffic(request_rate=10.0, duration_s=120.0, horizon=HORIZON)
    check = gpu_memory_check(sampler, 0.0, 120.0, window_s=6.0, traffic=traffic, tolerance=1.0)
    assert check is not None and check.status == "fail" and check.gpu == "0", check
    text = check.text
    assert text.startswith("GPU 0 memory (gpu 0 (nvidia-smi)) grows +102 KiB per request"), text
    assert "reaches all of its 80 GiB (the GPU's total) after about 2.8 h" in check.text, check.text
    assert gpu_memory_check(Sampler(base_url="x", gpu_command=""), 0.0, 1.0, window_s=1.0, traffic=traffic,
                            tolerance=1.0) is None


def test_a_launched_server_has_its_cgroup_limit_or_the_hosts_ram() -> None:
    import os

    from pytest_inferaccept.capacity.sampler import cgroup_memory_limit, host_memory, memory_capacity

    found = memory_capacity(os.getpid())
    assert found is not None and found[0] > 0
    limit = cgroup_memory_limit(os.getpid())
    assert found == ((limit, "cgroup memory limit") if limit is not None
                     else (host_memory()["MemTotal"], "host RAM: MemTotal"))
    assert memory_capacity(2**22 + 12345) is None or cgroup_memory_limit(2**22 + 12345) is None  # no such pid


# ---------------------------------------------------------------------------------------------
# Growth per request when the traffic varies


def _leak_under_varying_traffic(rng: random.Random, per_request: float, seconds: float = 60.0
                                ) -> tuple[list[tuple[float, float]], list[int], float]:
    """(memory points, requests the client saw finished at each, the soak's mean request rate).

    The server leaks `per_request` bytes a finished request; its rate swings by a third around
    15 requests/s and sags in the last third (a loaded client, a server that slows), as on a
    busy 2-core machine. The client counts a request a few milliseconds after the server does."""
    step, t, done, points, counts = 0.25, 0.0, 0, [], []
    phase = rng.uniform(0, 2 * math.pi)
    ends: list[float] = []
    while t < seconds:
        rate = 15.0 * (1 + 0.33 * math.sin(phase + 2 * math.pi * t / (seconds / 2)))
        if t > 2 * seconds / 3:
            rate *= 0.7
        arrivals = rng.expovariate(1.0) / rate
        t += arrivals
        done += 1
        ends.append(t)
    seen = sorted(e + rng.uniform(0.0, 0.01) for e in ends)
    for i in range(int(seconds / step) + 1):
        at = i * step + rng.uniform(0.0, 0.05)  # when the scrape happened
        server = bisect.bisect_right(ends, at)
        points.append((at, BASE + per_request * server + rng.gauss(0.0, 64 * KIB)))
        counts.append(bisect.bisect_right(seen, at))
    return points, counts, len(ends) / seconds


def test_growth_per_request_is_fitted_against_the_requests_finished_and_its_interval_holds() -> None:
    # Dividing the growth per second by the mean rate assumed a steady rate: when the rate swings
    # the growth per second swings with it, so that quotient is off by several percent and its
    # interval wide; and the sag looks like a cache filling up. Against the requests finished, the
    # leak is a straight line: a narrow interval that holds it, and a steady shape.
    rng = random.Random(22)
    trials, held, steady, steady_by_time = 100, 0, 0, 0
    widths, quotient_widths = [], []
    for _ in range(trials):
        points, counts, rate = _leak_under_varying_traffic(rng, 4 * KIB)
        traffic = Traffic(request_rate=rate, duration_s=60.0, horizon=HORIZON, alpha=0.01)
        check = judge_memory(points, what="memory", window_s=3.0, traffic=traffic, capacity=CAPACITY,
                             tolerance=1.0, source="simulated", finished=counts)
        got = check.rate
        assert got is not None and got.per_request_basis == "finished_requests"
        low, high = got.per_request_low or 0.0, got.per_request_high or 0.0
        held += low <= 4 * KIB <= high
        widths.append((high - low) / (4 * KIB))
        quotient_widths.append((got.slope.high - got.slope.low) / rate / (4 * KIB))
        steady += check.shape is not None and check.shape.kind == "steady"
        by_time = judge_memory(points, what="memory", window_s=3.0, traffic=traffic, capacity=CAPACITY,
                               tolerance=1.0, source="simulated")
        steady_by_time += by_time.shape is not None and by_time.shape.kind == "steady"
    widths.sort()
    quotient_widths.sort()
    assert held / trials >= 0.92, held / trials  # 95% intervals: measured 100% (another seed: 99%)
    # Median width as a share of the leak: measured 4.1% against the quotient's 48.8%.
    assert widths[trials // 2] < 0.1 < quotient_widths[trials // 2], (widths[trials // 2],
                                                                      quotient_widths[trials // 2])
    assert steady / trials >= 0.97, steady / trials  # measured 100% (another seed: 100%)
    # Judged by time alone, the sag reads as a cache filling in most trials (measured: steady 37%,
    # another seed 38%).
    assert steady_by_time / trials <= 0.6, steady_by_time / trials
