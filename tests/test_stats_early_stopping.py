"""MLPerf's early-stopping rule: the published query counts, its 1% false-pass rate simulated, and the
MLPerf-named profiles judged and sized by it."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from dataclasses import replace

import pytest

from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.markers import SloSpec, parse_slo
from pytest_inferaccept.slo_profile import judged_by_early_stopping, resolve
from pytest_inferaccept.stats import LoadSummary, evaluate, summarize
from pytest_inferaccept.stats.early_stopping import (
    MLPERF_CONFIDENCE,
    early_stopping_max_overlatency,
    early_stopping_min_queries,
    early_stopping_passes,
    overlatency_odds,
)
from pytest_inferaccept.stats.plan import CountRule, plan_run, requests_to_pass


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


# --------------------------------------------------------------- MLPerf-named profiles (judged by it)

def _profile_run(n: int) -> LoadSummary:
    """A clean run of n answers: first token after 0.5 s, then 20 ms a token (TPOT well inside)."""
    records = []
    for i in range(n):
        times = [i * 0.01 + 0.5 + k * 0.02 for k in range(5)]
        records.append(RequestRecord(index=i, send=i * 0.01, first_content=times[0], first_byte=i * 0.01,
                                     first_token_any=times[0], end=times[-1], content_times=times,
                                     content_events=5, completion_tokens=5))
    return summarize(records, (0.0, n * 0.01 + 1.0))


def _with_ttft_any(summary: LoadSummary, over: int, value: float = 2.5) -> LoadSummary:
    """The same run with `over` of its first tokens at `value` s (the rest at 0.5 s)."""
    n = summary.counts.measured
    metrics = dict(summary.samples.metrics)
    metrics["ttft_any"] = [0.5] * (n - over) + [value] * over
    return replace(summary, samples=replace(summary.samples, metrics=metrics))


def _mlperf() -> SloSpec:
    spec, _ = resolve(None, "mlperf-llama3.1-8b-server")  # TTFT p99 <= 2 s, TPOT p99 <= 100 ms
    assert spec is not None
    return spec


@pytest.mark.parametrize("n", [368, 459, 662])
def test_a_server_exactly_at_p99_passes_at_most_one_run_in_a_hundred_under_an_mlperf_profile(n: int) -> None:
    # Under the two-sided 95% interval this server passed 2.5% of 368-request runs; a profile named
    # after MLPerf must let it through no more often than MLPerf does (1 - c = 1%).
    slo, base, rng = _mlperf(), _profile_run(n), random.Random(20261)
    trials = 20000
    # A run's verdict depends only on how many first tokens came late: judge each count once.
    counts = Counter(_overs(rng, n, 0.01) for _ in range(trials))
    passed = sum(runs for over, runs in counts.items()
                 if evaluate(_with_ttft_any(base, over), slo).status == "pass")
    assert passed / trials <= 0.01 + 4 * math.sqrt(0.01 * 0.99 / trials), passed / trials


def test_a_368_request_run_under_an_mlperf_profile_is_not_enough_data_not_go() -> None:
    evaluation = evaluate(_profile_run(368), _mlperf())
    row = evaluation.rows[0]
    assert evaluation.status == "not_enough_data"
    assert (row.key, row.status, row.needed_n, row.min_n) == ("ttft_any_p99", "not_enough_data", 459, 459)
    assert row.early_stopping == ("MLPerf early stopping: 0 of 368 over the limit, p99 not claimed "
                                  "(with 0 over it needs 459 requests)")
    assert row.message == ("ttft_any_p99 = 0.50 s (n=368; 0 of 368 over the limit) vs limit 2.00 s: not "
                           "enough data by MLPerf's early stopping (one-sided 99%): with 0 of 368 over the "
                           "limit p99 is claimed from 459 measured requests; run about 459 measured requests "
                           "(now 368)")
    claimed = evaluate(_profile_run(459), _mlperf())
    assert claimed.status == "pass"
    assert claimed.rows[0].message.endswith(
        "≤ 2.00 s by MLPerf's early stopping (one-sided 99%: with 0 over, p99 is claimed from 459)")


def test_an_mlperf_profile_fails_a_row_only_when_a_server_meeting_it_would_rarely_show_as_many() -> None:
    slo, base = _mlperf(), _profile_run(530)
    clear = evaluate(_with_ttft_any(base, 30), slo).rows[0]  # 5.7% over a p99 limit
    assert clear.status == "fail" and not clear.by_failures
    assert "a server meeting p99 shows 30 or more of 530 over the limit in under 1% of runs" in clear.message
    # 2 of 530 over: a server at exactly 1% shows that often; neither claimed nor refused
    unsure = evaluate(_with_ttft_any(base, 2), slo).rows[0]
    assert unsure.status == "not_enough_data" and unsure.needed_n is not None and unsure.needed_n > 530
    failed = evaluate(_with_ttft_any(base, 30, math.inf), slo).rows[0]
    assert failed.status == "fail" and failed.by_failures  # failed requests alone put it beyond


def test_an_mlperf_profile_stays_judged_by_early_stopping_when_slo_entries_are_added() -> None:
    spec, source = resolve("error_rate=0.01", "mlperf-llama2-70b-server")
    assert spec is not None and judged_by_early_stopping(spec)
    assert spec.to_json() == {"ttft_any_p99": 2.0, "tpot_p99": 0.2, "error_rate": 0.01}
    assert source is not None and "judged by MLPerf's early stopping (one-sided 99%)" in source
    plain, _ = resolve("ttft_any_p99=2,tpot_p99=0.2,error_rate=0.01", None)
    assert plain is not None and not judged_by_early_stopping(plain)


def test_an_mlperf_profile_asks_for_at_least_mlperfs_minimum_and_plans_beyond_it() -> None:
    assert requests_to_pass(_mlperf()) == (459, "ttft_any_p99")
    plan = plan_run(_mlperf())
    assert plan.planned >= 459 and plan.chance(plan.planned)[0] >= 0.9
    # the same limits judged by the 95% interval needed 368 to pass at all
    plain, _ = resolve("ttft_any_p99=2,tpot_p99=0.1", None)
    assert plain is not None and requests_to_pass(plain) == (368, "ttft_any_p99")


def test_the_early_stopping_count_rule_is_mlperfs_own_at_every_count() -> None:
    rule = CountRule(allowed=0.01, tail=1 - MLPERF_CONFIDENCE, least=459)
    for n in range(400, 2100, 7):
        most = early_stopping_max_overlatency(0.99, n)
        assert rule.most_over(n) == (-1 if most is None else most), n


def test_a_plain_slo_keeps_its_interval_and_shows_mlperfs_reading_beside_it() -> None:
    row = evaluate(_profile_run(368), parse_slo((), {"ttft_any_p99": 2.0})).rows[0]
    assert row.status == "pass" and row.basis == "interval" and row.method.startswith("distribution-free")
    assert row.early_stopping.endswith("p99 not claimed (with 0 over it needs 459 requests)")
