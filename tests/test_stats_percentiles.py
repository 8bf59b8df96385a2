"""Percentile point estimates, order-statistic intervals, means and proportions."""

from __future__ import annotations

import math
import random
import re
import statistics
from pathlib import Path

import pytest

from pytest_inferaccept.stats.percentiles import (
    PERCENTILE_LEVELS,
    binom_cdf,
    binom_sf,
    mean_estimate,
    min_sample_size,
    order_statistic_ranks,
    proportion_estimate,
    proportion_interval,
    quantile,
    quantile_estimate,
    samples_to_settle_proportion,
    samples_to_settle_quantile,
    t_quantile,
)

DOCS = Path(__file__).resolve().parent.parent / "docs" / "statistics.md"


def test_percentiles_interpolate_linearly_between_order_statistics() -> None:
    ten = [float(x) for x in range(1, 11)]
    assert quantile(ten, 0.5) == pytest.approx(5.5)
    assert quantile(ten, 0.95) == pytest.approx(9.55)  # h = 9 * 0.95 = 8.55: 9 + 0.55 * (10 - 9)
    assert quantile(ten, 0.0) == 1.0
    assert quantile(ten, 1.0) == 10.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.75) == pytest.approx(3.25)
    assert quantile([7.0], 0.99) == 7.0


def test_the_point_estimate_agrees_with_the_standard_librarys_inclusive_method() -> None:
    rng = random.Random(3)
    data = sorted(rng.expovariate(1.0) for _ in range(257))
    cuts = statistics.quantiles(data, n=100, method="inclusive")
    assert quantile(data, 0.95) == pytest.approx(cuts[94])
    assert quantile(data, 0.5) == pytest.approx(cuts[49])


def test_an_empty_sample_has_no_quantile() -> None:
    with pytest.raises(ValueError, match="empty"):
        quantile([], 0.5)


@pytest.mark.parametrize(("n", "p"), [(40, 0.3), (200, 0.95), (1000, 0.999), (7, 0.5)])
def test_binomial_tails_match_a_direct_sum(n: int, p: float) -> None:
    pmf = [math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(n + 1)]
    for k in range(-1, n + 2):
        below = math.fsum(pmf[: max(k + 1, 0)])
        at_or_above = math.fsum(pmf[max(k, 0):])
        assert binom_cdf(k, n, p) == pytest.approx(min(below, 1.0), abs=1e-12)
        assert binom_sf(k, n, p) == pytest.approx(min(at_or_above, 1.0), abs=1e-12)


def test_the_median_interval_of_1000_values_uses_the_textbook_ranks() -> None:
    assert order_statistic_ranks(1000, 0.5) == (469, 532)


@pytest.mark.parametrize(("n", "p"), [(72, 0.95), (200, 0.95), (612, 0.95), (368, 0.99), (5000, 0.999),
                                      (30, 0.5), (100_000, 0.99)])
def test_each_tail_of_the_percentile_interval_holds_at_most_two_and_a_half_percent(n: int, p: float) -> None:
    low, high = order_statistic_ranks(n, p)
    assert low is not None and high is not None
    assert binom_cdf(low - 1, n, p) <= 0.025 < binom_cdf(low, n, p)  # the lowest rank that may be used
    assert binom_sf(high, n, p) <= 0.025 < binom_sf(high - 1, n, p)  # the highest rank that must be
    assert binom_cdf(high - 1, n, p) - binom_cdf(low - 1, n, p) >= 0.95


def test_minimum_sample_sizes_for_a_two_sided_95_percent_interval() -> None:
    expected = {"p50": 6, "p75": 13, "p90": 36, "p95": 72, "p99": 368, "p999": 3688}
    assert {name: min_sample_size(p) for name, p in PERCENTILE_LEVELS.items()} == expected
    assert order_statistic_ranks(71, 0.95)[1] is None
    assert order_statistic_ranks(72, 0.95) == (64, 72)
    assert order_statistic_ranks(367, 0.99)[1] is None
    assert order_statistic_ranks(368, 0.99)[1] == 368


def test_the_docs_table_shows_the_computed_minimum_sample_sizes() -> None:
    rows = re.findall(r"^\| (p\d+) +\| +(\d+) +\| +(\d+) +\| +(\d+) +\|", DOCS.read_text(encoding="utf-8"),
                      re.MULTILINE)
    assert {name for name, *_ in rows} == set(PERCENTILE_LEVELS)
    for name, c90, c95, c99 in rows:
        p = PERCENTILE_LEVELS[name]
        assert (int(c90), int(c95), int(c99)) == (min_sample_size(p, 0.90), min_sample_size(p, 0.95),
                                                  min_sample_size(p, 0.99)), name


def test_the_p95_interval_covers_the_true_p95_in_at_least_93_percent_of_2000_uniform_samples() -> None:
    rng = random.Random(20240601)
    covered = 0
    for _ in range(2000):
        est = quantile_estimate(sorted(rng.random() for _ in range(200)), 0.95)
        assert est.low is not None and est.high is not None
        covered += 1 if est.low <= 0.95 <= est.high else 0
    assert covered / 2000 >= 0.93


def test_the_p99_interval_covers_the_true_p99_of_an_exponential_distribution() -> None:
    rng = random.Random(7)
    truth = -math.log(0.01)
    covered = 0
    for _ in range(500):
        est = quantile_estimate(sorted(rng.expovariate(1.0) for _ in range(400)), 0.99)
        assert est.low is not None and est.high is not None
        covered += 1 if est.low <= truth <= est.high else 0
    assert covered / 500 >= 0.93


def test_a_sample_too_small_for_the_upper_end_has_no_upper_bound() -> None:
    est = quantile_estimate([float(x) for x in range(20)], 0.95)
    assert est.high is None
    assert est.low == 16.0  # rank 17
    assert est.value == pytest.approx(18.05)


def test_huge_samples_get_exact_ranks_quickly() -> None:
    low, high = order_statistic_ranks(1_000_000, 0.5)
    assert low is not None and high is not None
    assert low < 500_000 < high
    assert high - low == pytest.approx(2 * 1.96 * 500, abs=5)  # z * sqrt(n p (1 - p)) on each side


@pytest.mark.parametrize(("df", "t"), [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (9, 2.262),
                                       (10, 2.228), (30, 2.042), (120, 1.980)])
def test_t_quantiles_match_the_printed_tables(df: int, t: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(t, abs=0.004)


def test_the_mean_interval_is_a_student_t_interval() -> None:
    values = [float(x) for x in range(1, 11)]  # mean 5.5, sd sqrt(55 / 6)
    est = mean_estimate(values)
    half = 2.2622 * math.sqrt(55 / 6) / math.sqrt(10)
    assert est.value == pytest.approx(5.5)
    assert est.low == pytest.approx(5.5 - half, abs=1e-3)
    assert est.high == pytest.approx(5.5 + half, abs=1e-3)


def test_a_single_value_has_a_mean_but_no_interval() -> None:
    est = mean_estimate([0.4])
    assert (est.value, est.low, est.high, est.n) == (0.4, None, None, 1)


def test_clopper_pearson_matches_published_intervals() -> None:
    assert proportion_interval(3, 100) == pytest.approx((0.00623, 0.08518), abs=1e-5)
    assert proportion_interval(50, 100) == pytest.approx((0.39832, 0.60168), abs=1e-5)
    assert proportion_interval(0, 300) == pytest.approx((0.0, 1 - 0.025 ** (1 / 300)))
    assert proportion_interval(20, 20) == pytest.approx((0.025 ** (1 / 20), 1.0))
    est = proportion_estimate(19, 612)
    assert est.low == pytest.approx(0.01879, abs=1e-5)
    assert est.high == pytest.approx(0.04806, abs=1e-5)


def test_a_confidence_outside_zero_and_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="confidence"):
        min_sample_size(0.95, confidence=1.0)


def test_the_sample_needed_to_settle_a_percentile_clears_the_limit_at_that_size() -> None:
    n = samples_to_settle_quantile(0.95, 0.97)
    assert n is not None
    high = order_statistic_ranks(n, 0.95)[1]
    assert high is not None and high <= n * 0.97
    failing = samples_to_settle_quantile(0.95, 0.90)
    assert failing is not None
    assert (order_statistic_ranks(failing, 0.95)[0] or 0) > failing * 0.90
    assert samples_to_settle_quantile(0.95, 0.95) is None


def test_zero_failures_need_368_requests_to_bound_the_error_rate_under_one_percent() -> None:
    assert samples_to_settle_proportion(0.0, 0.01) == 368
    assert proportion_interval(0, 368)[1] <= 0.01 < proportion_interval(0, 367)[1]
    assert samples_to_settle_proportion(0.01, 0.01) is None


def test_the_docs_planning_table_shows_the_computed_sample_sizes() -> None:
    rows = re.findall(r"^\| (p\d+) \| ([\d.]+)% \| (\d+) \|$", DOCS.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(rows) >= 6
    for name, share, needed in rows:
        needed_now = samples_to_settle_quantile(PERCENTILE_LEVELS[name], float(share) / 100)
        assert needed_now == int(needed), (name, share)
