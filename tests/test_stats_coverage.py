"""Claimed coverage, shown by seeded simulation: ITL intervals treat the answer as the unit, and
mean intervals hold on skewed latency (docs/statistics.md, "Intervals on dependent and skewed
samples"). Every run is seeded, so the numbers are the same on every machine."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from statistics import NormalDist

import pytest

from pytest_inferaccept.stats.clustered import (
    SKEW_MEAN_MIN_SAMPLES,
    clustered_mean_estimate,
    clustered_min_answers,
    clustered_quantile_estimate,
    skew_mean_estimate,
)
from pytest_inferaccept.stats.percentiles import Estimate, mean_estimate, quantile, quantile_estimate

# The ITL model: each answer streams at its own pace (its batch, its context length), and each
# gap is that pace times a little noise of its own. Lengths do not depend on the pace, so the
# pooled gaps are lognormal with the two variances added: the true quantile is exact.
PACE_MEDIAN = 0.03
PACE_SIGMA = 0.5
NOISE_SIGMA = 0.3
ANSWERS = 400  # p99 needs 368 answers at 95%; the test runs just above that
REPLICATIONS = 300
LEVELS = (0.5, 0.95, 0.99)

TOLERANCE = 0.03  # coverage within 3 points of the nominal 95%
WRONG_PASS_CEILING = 0.045  # a limit at the true value passes at most 2.5% + 2 points


def paced_answers(rng: random.Random, n: int) -> list[list[float]]:
    """n answers of 10 to 60 gaps, each gap its answer's pace times lognormal noise."""
    answers = []
    for _ in range(n):
        pace = PACE_MEDIAN * math.exp(rng.gauss(0.0, PACE_SIGMA))
        answers.append([pace * math.exp(rng.gauss(0.0, NOISE_SIGMA)) for _ in range(rng.randint(10, 60))])
    return answers


def true_pooled_quantile(p: float) -> float:
    """The p-quantile of a gap drawn from all gaps of all answers: lognormal, sigmas added."""
    return PACE_MEDIAN * math.exp(math.hypot(PACE_SIGMA, NOISE_SIGMA) * NormalDist().inv_cdf(p))


TRUE_GAP_MEAN = PACE_MEDIAN * math.exp((PACE_SIGMA**2 + NOISE_SIGMA**2) / 2)


@dataclass
class Tally:
    """How often intervals covered the truth, and how often a limit at the truth passed."""

    runs: int = 0
    covered: int = 0
    passed: int = 0  # the upper end at or below the truth: a limit set there would pass
    failed: int = 0  # the lower end above the truth: a limit set there would fail
    unbounded: int = 0

    def add(self, est: Estimate, truth: float) -> None:
        self.runs += 1
        low = -math.inf if est.low is None else est.low
        high = math.inf if est.high is None else est.high
        self.covered += low <= truth <= high
        self.passed += high <= truth
        self.failed += low > truth
        self.unbounded += est.low is None or est.high is None

    @property
    def coverage(self) -> float:
        return self.covered / self.runs

    @property
    def wrong_pass(self) -> float:
        return self.passed / self.runs

    @property
    def wrong_fail(self) -> float:
        return self.failed / self.runs


@cache
def itl_runs() -> dict[tuple[str, float], Tally]:
    """REPLICATIONS runs of ANSWERS paced answers, each judged both ways at p50, p95, p99 and mean."""
    rng = random.Random(20240611)
    tallies = {(kind, p): Tally() for kind in ("clustered", "pooled") for p in (*LEVELS, -1.0)}
    for _ in range(REPLICATIONS):
        answers = paced_answers(rng, ANSWERS)
        pooled = sorted(gap for answer in answers for gap in answer)
        for p in LEVELS:
            truth = true_pooled_quantile(p)
            tallies["clustered", p].add(clustered_quantile_estimate(answers, p), truth)
            tallies["pooled", p].add(quantile_estimate(pooled, p), truth)
        tallies["clustered", -1.0].add(clustered_mean_estimate(answers), TRUE_GAP_MEAN)
        tallies["pooled", -1.0].add(mean_estimate(pooled), TRUE_GAP_MEAN)
    return tallies


# ------------------------------------------------------------------------ ITL: the answer is the unit

@pytest.mark.parametrize("p", LEVELS)
def test_the_clustered_itl_interval_covers_the_true_pooled_quantile_within_three_points(p: float) -> None:
    tally = itl_runs()["clustered", p]
    # 400 answers nearly always support both ends; when the tail rests on too few answers the
    # interval honestly has no upper end (and counts as covering)
    assert tally.unbounded <= 0.02 * tally.runs, tally
    assert abs(tally.coverage - 0.95) <= TOLERANCE, tally


@pytest.mark.parametrize("p", LEVELS)
def test_a_limit_at_the_true_itl_percentile_seldom_passes_or_fails(p: float) -> None:
    tally = itl_runs()["clustered", p]
    assert tally.wrong_pass <= WRONG_PASS_CEILING, tally
    assert tally.wrong_fail <= WRONG_PASS_CEILING, tally


@pytest.mark.parametrize("p", LEVELS)
def test_pooling_the_gaps_as_independent_samples_covers_far_less(p: float) -> None:
    # the interval that treats every gap as a sample: what summarize did before this module
    pooled, clustered = itl_runs()["pooled", p], itl_runs()["clustered", p]
    assert pooled.coverage < 0.60 < clustered.coverage, (pooled, clustered)
    assert pooled.wrong_pass > 0.20 > clustered.wrong_pass, (pooled, clustered)


def test_the_clustered_itl_mean_holds_its_coverage_where_the_pooled_t_interval_does_not() -> None:
    clustered, pooled = itl_runs()["clustered", -1.0], itl_runs()["pooled", -1.0]
    assert abs(clustered.coverage - 0.95) <= TOLERANCE, clustered
    assert clustered.wrong_pass <= WRONG_PASS_CEILING, clustered
    assert pooled.coverage < 0.60, pooled


def test_the_point_estimate_is_the_quantile_of_all_gaps_pooled() -> None:
    answers = paced_answers(random.Random(1), 50)
    pooled = sorted(gap for answer in answers for gap in answer)
    for p in LEVELS:
        assert clustered_quantile_estimate(answers, p).value == quantile(pooled, p)
    assert clustered_mean_estimate(answers).value == pytest.approx(math.fsum(pooled) / len(pooled))


def test_n_counts_the_answers_that_have_a_gap() -> None:
    answers = [[0.02, 0.03], [], [0.05], [0.04, 0.01, 0.02]] * 3
    assert clustered_quantile_estimate(answers, 0.5).n == 9
    assert clustered_mean_estimate(answers).n == 9
    with pytest.raises(ValueError, match="no answer has a gap"):
        clustered_quantile_estimate([[], []], 0.5)
    with pytest.raises(ValueError, match="p must lie"):
        clustered_quantile_estimate(answers, 1.0)


def test_the_minimum_answers_per_percentile_follow_the_iid_table() -> None:
    assert [clustered_min_answers(p) for p in (0.5, 0.95, 0.99, 0.999)] == [6, 72, 368, 3688]
    answers = paced_answers(random.Random(2), 368)
    short = clustered_quantile_estimate(answers[:367], 0.99)
    assert (short.low, short.high) == (None, None)  # 367 answers: no p99 interval at 95%, however many gaps
    full = clustered_quantile_estimate(answers, 0.99)
    assert full.low is not None and full.high is not None


def test_independent_gaps_get_an_interval_at_least_as_wide_as_the_iid_one() -> None:
    rng = random.Random(3)
    answers = [[math.exp(rng.gauss(0.0, 0.5)) for _ in range(rng.randint(10, 60))] for _ in range(400)]
    pooled = sorted(gap for answer in answers for gap in answer)
    for p in LEVELS:
        clustered, iid = clustered_quantile_estimate(answers, p), quantile_estimate(pooled, p)
        assert clustered.low is not None and clustered.high is not None
        assert iid.low is not None and iid.high is not None
        assert clustered.low <= iid.low <= iid.high <= clustered.high
        # and not much wider: without a shared pace the answers hide nothing
        assert clustered.high - clustered.low < 1.5 * (iid.high - iid.low)


# --------------------------------------------------------------------------- means on skewed latency

def lognormal(sigma: float) -> Callable[[random.Random], float]:
    """Draws from a lognormal with median 1."""
    return lambda rng: math.exp(rng.gauss(0.0, sigma))


def gamma(shape: float) -> Callable[[random.Random], float]:
    """Draws from a gamma with unit scale."""
    return lambda rng: rng.gammavariate(shape, 1.0)


SKEWED = {  # name: (draw, true mean)
    "lognormal sigma 0.5": (lognormal(0.5), math.exp(0.5**2 / 2)),
    "lognormal sigma 0.75": (lognormal(0.75), math.exp(0.75**2 / 2)),
    "gamma shape 1": (gamma(1.0), 1.0),
    "gamma shape 2": (gamma(2.0), 2.0),
}


def mean_tallies(draw: Callable[[random.Random], float], truth: float, n: int, runs: int,
                 seed: int) -> tuple[Tally, Tally]:
    """(Hall, Student t) tallies over `runs` samples of n values."""
    rng = random.Random(seed)
    hall, student = Tally(), Tally()
    for _ in range(runs):
        values = [draw(rng) for _ in range(n)]
        hall.add(skew_mean_estimate(values), truth)
        student.add(mean_estimate(values), truth)
    return hall, student


@pytest.mark.parametrize("name", SKEWED)
def test_the_skew_corrected_mean_holds_its_coverage_from_its_minimum_sample(name: str) -> None:
    draw, truth = SKEWED[name]
    seed = 100 + list(SKEWED).index(name)
    hall, student = mean_tallies(draw, truth, SKEW_MEAN_MIN_SAMPLES, 2000, seed=seed)
    assert abs(hall.coverage - 0.95) <= TOLERANCE, hall
    assert hall.wrong_pass <= WRONG_PASS_CEILING, hall
    assert hall.wrong_fail <= WRONG_PASS_CEILING, hall
    assert hall.wrong_pass <= student.wrong_pass, (hall, student)


def test_on_very_skewed_latency_the_t_interval_passes_wrongly_twice_as_often() -> None:
    # lognormal sigma 1 at 30 samples, below the minimum: no method holds 2.5% here, which is why
    # the minimum is 100, but the t interval is far worse than the corrected one
    hall, student = mean_tallies(lognormal(1.0), math.exp(0.5), 30, 2000, seed=30)
    assert student.wrong_pass > 0.08, student
    assert hall.wrong_pass < student.wrong_pass / 1.5, (hall, student)


def test_the_skew_corrected_mean_needs_three_values_and_is_exact_without_spread() -> None:
    assert skew_mean_estimate([0.1, 0.2]).low is None
    assert skew_mean_estimate([0.3] * 40) == Estimate(value=0.3, low=0.3, high=0.3, n=40)
    est = skew_mean_estimate([0.1, 0.1, 0.1, 0.1, 0.9] * 20)
    assert est.low is not None and est.high is not None
    assert est.high - est.value > est.value - est.low  # right skew widens the high side
