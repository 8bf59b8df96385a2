"""MLPerf's early-stopping rule: the published query counts, and its 1% false-pass rate simulated."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from pytest_inferaccept.stats.early_stopping import (
    early_stopping_max_overlatency,
    early_stopping_min_queries,
    early_stopping_passes,
    overlatency_odds,
)


@pytest.mark.parametrize(("overlatency", "queries"), [(0, 459), (1, 662), (10, 2010)])
def test_the_p99_query_counts_mlperf_publishes_are_reproduced(overlatency: int, queries: int) -> None:
    assert early_stopping_min_queries(0.99, overlatency) == queries
    assert early_stopping_passes(0.99, queries, overlatency)
    assert not early_stopping_passes(0.99, queries - 1, overlatency)


def test_with_none_over_the_limit_the_count_is_the_closed_form() -> None:
    # 0 over the limit: the odds are p**n, so n is the smallest with p**n <= 1 - c.
    for p in (0.5, 0.9, 0.95, 0.99, 0.999):
        assert early_stopping_min_queries(p, 0) == math.ceil(math.log(0.01) / math.log(p))


def test_the_odds_are_the_binomial_cdf_of_a_minimally_failing_system() -> None:
    n, over, miss = 30, 2, 0.01
    direct = sum(math.comb(n, k) * miss**k * (1 - miss) ** (n - k) for k in range(over + 1))
    assert overlatency_odds(n - over, over, 0.99) == pytest.approx(direct, rel=1e-12)
    assert overlatency_odds(0, 5, 0.99) == pytest.approx(1.0)


def test_each_query_over_the_limit_asks_for_more_queries() -> None:
    counts = [early_stopping_min_queries(0.99, t) for t in range(30)]
    assert all(b > a + 1 for a, b in itertools.pairwise(counts))


def test_the_most_queries_over_the_limit_agrees_with_the_minimum_count() -> None:
    assert early_stopping_max_overlatency(0.99, 458) is None
    assert early_stopping_max_overlatency(0.99, 459) == 0
    assert early_stopping_max_overlatency(0.99, 661) == 0
    assert early_stopping_max_overlatency(0.99, 662) == 1
    assert early_stopping_max_overlatency(0.99, 2010) == 10
    for n in (700, 1000, 5000, 20000):
        most = early_stopping_max_overlatency(0.99, n)
        assert most is not None
        assert early_stopping_passes(0.99, n, most) and not early_stopping_passes(0.99, n, most + 1)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="fraction in"):
        early_stopping_min_queries(99, 0)
    with pytest.raises(ValueError, match="never negative"):
        early_stopping_min_queries(0.99, -1)
    with pytest.raises(ValueError, match="between 0 and n"):
        early_stopping_passes(0.99, 10, 11)


def _overs(rng: random.Random, n: int, miss: float) -> int:
    """Queries over the limit among n, each over with probability `miss` (geometric gaps: fast)."""
    count, position, log_keep = 0, -1, math.log1p(-miss)
    while True:
        position += 1 + int(math.log(1.0 - rng.random()) / log_keep)
        if position >= n:
            return count
        count += 1


@pytest.mark.parametrize("n", [459, 662, 2010, 10000])
def test_a_system_that_just_misses_p99_passes_at_most_one_run_in_a_hundred(n: int) -> None:
    # The claim of the rule: a system whose queries meet the limit exactly 99% of the time (the
    # minimally failing one, tolerance 0) is let through with probability at most 1 - c = 1%.
    rng = random.Random(20260)
    trials = 20000
    most = early_stopping_max_overlatency(0.99, n)
    assert most is not None
    passed = sum(_overs(rng, n, 0.01) <= most for _ in range(trials))
    rate = passed / trials
    exact = overlatency_odds(n - most, most, 0.99)  # the CDF at the pass threshold
    assert exact <= 0.01
    # 20,000 trials: one standard error at 1% is 0.07 points; four of them bound the noise.
    assert rate <= 0.01 + 4 * math.sqrt(0.01 * 0.99 / trials)
    assert rate == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / trials) + 1e-4)


def test_a_system_well_within_p99_passes_at_2010_queries_almost_always() -> None:
    rng = random.Random(7)
    trials = 5000
    passed = sum(early_stopping_passes(0.99, 2010, _overs(rng, 2010, 0.002)) for _ in range(trials))
    assert passed / trials > 0.99  # 4 over the limit expected; 10 allowed
