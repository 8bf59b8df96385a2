"""Runs are sized for power, a count too small for the SLO is refused before anything is sent, and the
time bound is said up front; capacity steps are not cut short of the count they were given."""

from __future__ import annotations

import json
import math
import random
import re
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_inferaccept.capacity.analysis import max_slo_level
from pytest_inferaccept.capacity.climb import _headline
from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.markers import SloSpec, parse_slo
from pytest_inferaccept.stats import LoadSummary, evaluate, summarize
from pytest_inferaccept.stats.percentiles import order_statistic_ranks, proportion_interval
from pytest_inferaccept.stats.plan import CountRule, plan_run, requests_to_pass
from tests._processes import fake_process

DOCS = Path(__file__).resolve().parent.parent / "docs"


# ------------------------------------------------------------------------- planned for power

def _clean_run(n: int) -> LoadSummary:
    """n successful streamed answers: first token after 0.1 s, then 20 ms a token."""
    records = []
    for i in range(n):
        times = [i * 0.01 + 0.1 + k * 0.02 for k in range(5)]
        records.append(RequestRecord(index=i, send=i * 0.01, first_content=times[0], first_byte=i * 0.01,
                                     first_token_any=times[0], end=times[-1], content_times=times,
                                     content_events=5, completion_tokens=5))
    return summarize(records, (0.0, n * 0.01 + 1.0))


def _with(base: LoadSummary, *, failed: int = 0, slow: dict[str, int] | None = None) -> LoadSummary:
    """The same run with `failed` requests failed (beyond every latency limit, as the verdict counts
    them) and, per metric, that many more values far beyond any limit."""
    n = base.counts.measured
    metrics = dict(base.samples.metrics)
    for metric, values in base.samples.metrics.items():
        over = failed + (slow or {}).get(metric, 0)
        if values and over:
            metrics[metric] = sorted(values)[: n - over] + [60.0] * (over - failed) + [math.inf] * failed
    counts = replace(base.counts, ok=n - failed, failed=failed)
    return replace(base, counts=counts, samples=replace(base.samples, metrics=metrics))


def _draw(rng: random.Random, n: int, share: float) -> int:
    """How many of n fall beyond a limit, each with probability `share`."""
    return sum(rng.random() < share for _ in range(n))


PLANNED = {
    "error_rate=0.01": (parse_slo((), {"error_rate": 0.01}), False),
    "ttft_p95=0.5": (parse_slo((), {"ttft_p95": 0.5}), False),
    "ttft_p99=1, error_rate=0.01": (parse_slo((), {"ttft_p99": 1.0, "error_rate": 0.01}), False),
    "error_rate=0.01 on the point estimate": (parse_slo((), {"error_rate": 0.01}), True),
}


@pytest.mark.parametrize(("slo", "point"), PLANNED.values(), ids=list(PLANNED))
def test_a_server_at_half_its_limits_passes_nine_planned_runs_in_ten(slo: SloSpec, point: bool) -> None:
    # Sized only so that a perfect server could pass (368 for error_rate=0.01), a server failing
    # 0.5% passed 16% of runs and one failing 0.2% 48%.
    plan = plan_run(slo, point_estimate=point)
    n, trials, rng = plan.planned, 2000, random.Random(1124)
    base = _clean_run(n)
    failing = (slo.error_rate or 0.0) / 2
    # failures lie beyond every latency limit too: the slow ones make up the rest of half the room
    slow_share = {lim.metric: (1.0 - {"p95": 0.95, "p99": 0.99}[lim.stat]) / 2 - failing
                  for lim in slo.latency}

    def one_run() -> tuple[int, tuple[tuple[str, int], ...]]:
        return _draw(rng, n, failing), tuple((m, _draw(rng, n, share)) for m, share in slow_share.items())

    draws = Counter(one_run() for _ in range(trials))
    passed = sum(runs for (failed, slow), runs in draws.items()
                 if evaluate(_with(base, failed=failed, slow=dict(slow)), slo, point_estimate=point).status
                 == "pass")
    assert plan.chance(n)[0] >= 0.9
    assert passed / trials >= 0.9 - 3 * math.sqrt(0.09 / trials), (n, passed / trials)


def test_the_planned_size_is_the_one_a_run_without_a_count_gets_and_it_is_well_past_the_least() -> None:
    plan = plan_run(parse_slo((), {"error_rate": 0.01}))
    assert (plan.least, plan.least_key) == (368, "error_rate")
    assert plan.planned == 3446 and plan.planned_key == "error_rate"
    assert plan.planned_words() == ("3446 measured requests give a server with 0.5% failing for "
                                    "error_rate=0.01 a 90% chance to pass (a perfect server passes from 368)")
    # at the old size a server failing 0.2% passed about half the time; at the plan almost always
    rule = plan.needs[0].rule
    assert rule is not None
    assert rule.chance(368, 0.002) == pytest.approx(0.48, abs=0.01)
    assert rule.chance(plan.planned, 0.002) > 0.99


@pytest.mark.parametrize("limits", [{"error_rate": 0.01}, {"ttft_p95": 0.5}, {"goodput_min": 0.95},
                                    {"ttft_p99": 1.0, "error_rate": 0.01}, {"ttft_p50": 1.0}])
def test_the_power_holds_at_every_count_from_the_plan_to_twice_it(limits: dict[str, float]) -> None:
    # The chance rises in a sawtooth: it falls between the counts where one more failure is
    # allowed. The plan is where it stays up, not the first count that touches 90%.
    plan = plan_run(parse_slo((), limits))
    rules = [need.rule for need in plan.needs if need.rule is not None]
    for n in range(plan.planned, 2 * plan.planned + 1):
        shortfall = sum(1 - rule.chance(n, rule.allowed / 2) for rule in rules)
        assert shortfall <= 0.1 + 1e-12, (n, shortfall)


def test_the_count_rules_are_the_rows_own_rules_at_every_count() -> None:
    p95 = CountRule(allowed=0.05, tail=0.025, least=72)
    one_percent = CountRule(allowed=0.01, tail=0.025)
    for n in range(60, 1600, 11):
        upper = order_statistic_ranks(n, 0.95)[1]
        assert p95.most_over(n) == (-1 if upper is None or n < 72 else n - upper), n
        most = one_percent.most_over(n)  # the upper bound is within 1% at `most` failures, not one more
        assert most == -1 or proportion_interval(most, n)[1] <= 0.01, n
        assert proportion_interval(most + 1, n)[1] > 0.01, n


def test_the_least_a_slo_needs_is_unchanged_for_a_perfect_server() -> None:
    assert requests_to_pass(parse_slo((), {"error_rate": 0.01})) == (368, "error_rate")
    assert requests_to_pass(parse_slo((), {"ttft_p95": 0.5, "ttft_mean": 0.3})) == (100, "ttft_mean")
    assert requests_to_pass(parse_slo((), {"itl_p99": 0.05})) == (368, "itl_p99")  # answers, not gaps
    assert requests_to_pass(parse_slo((), {"error_rate": 0.01}), point_estimate=True) == (100, "error_rate")


def test_the_docs_table_of_planned_sizes_is_what_the_plan_gives() -> None:
    text = (DOCS / "statistics.md").read_text(encoding="utf-8")
    table = text[text.index("| SLO | least (perfect server) | planned"):]
    rows = re.findall(r"^\| `([^`]+)` \| ([\d,]+) \| ([\d,]+) \|", table, re.MULTILINE)
    assert len(rows) >= 5
    for limits, least, planned in rows:
        slo = parse_slo((), {k: float(v) for k, v in (part.split("=") for part in limits.split(", "))})
        plan = plan_run(slo)
        expected = (int(least.replace(",", "")), int(planned.replace(",", "")))
        assert (plan.least, plan.planned) == expected, limits


# ------------------------------------------------------------------- refused before anything is sent

@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A clean, fast fake server."""
    yield from fake_process(tmp_path_factory.mktemp("quick"), "--ttft", "0.002", "--itl", "0.0005")


def _answered(url: str) -> int:
    """The chat requests the fake server has finished so far (its own counter)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    found = re.search(r"^vllm:request_success_total\{[^}]*\} (\S+)$", text, re.MULTILINE)
    assert found, text
    return int(float(found[1]))


REFUSED = {
    "a marker and requests=": ("@pytest.mark.slo(error_rate=0.01)", "concurrency=2, requests=100", (),
                               "100 measured requests cannot support the SLO: error_rate=0.01 needs at least "
                               "368 to pass even on a perfect server (no failure in 368 puts the 95% upper "
                               "bound at or under 1%); ask for 368 or more (3446 give a server at half its "
                               "limits a 90% chance to pass), or give no count and the run is sized from "
                               "the SLO"),
    "a marker and --load-requests": (
        "@pytest.mark.slo(ttft_p99=0.5)", "concurrency=2", ("--load-requests", "200"),
        "200 measured requests cannot support the SLO: ttft_p99=0.5 needs at least 368 to pass even on a "
        "perfect server (a 95% interval for p99)"),
    "an open loop too short to reach the least": (
        "@pytest.mark.slo(ttft_p95=0.5)", "rate=2, duration=10", (),
        "at 2 requests/s for at most 10 s about 20 measured requests can be sent, fewer than the 72 "
        "ttft_p95=0.5 needs to pass even on a perfect server; give a duration of 36 s or more"),
    "an MLPerf profile and requests=400": (
        "", "concurrency=2, requests=400", ("--slo-profile", "mlperf-llama3.1-8b-server"),
        "400 measured requests cannot support the SLO: ttft_any_p99=2 needs at least 459 to pass even on a "
        "perfect server (MLPerf's early stopping, one-sided 99%)"),
}


@pytest.mark.parametrize(("marker", "args", "options", "message"), REFUSED.values(), ids=list(REFUSED))
def test_a_count_too_small_for_the_slo_is_refused_before_anything_is_sent(
        pytester: pytest.Pytester, quick: str, marker: str, args: str, options: tuple[str, ...],
        message: str) -> None:
    pytester.makepyfile(f"""
        import pytest

        {marker}
        def test_traffic(loadgen):
            loadgen.run({args})
    """)
    before = _answered(quick)
    result = pytester.runpytest_inprocess("--server-url", quick, "--client-check", "warn", *options)
    out = result.stdout.str()
    assert "VERDICT: INVALID" in out, out
    assert "the load was not started: " + message in " ".join(out.split()), out
    assert _answered(quick) == before  # not one request was sent


# ----------------------------------------------------------------------------- said up front

def test_a_run_sized_from_the_slo_says_what_its_time_bound_does_to_it(
        pytester: pytest.Pytester, quick: str) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.slo(error_rate=0.01)
        def test_traffic(loadgen):
            loadgen.run(concurrency=4)
    """)
    result = pytester.runpytest_inprocess("--server-url", quick, "--client-check", "warn",
                                          "--load-duration", "2")
    out = " ".join(result.stdout.str().split())
    assert "4 in flight, 3446 requests, at most 2 s, 4 warm-up, 1 worker(s); stops by itself" in out, out
    assert ("(sized from the SLO: 3446 measured requests give a server with 0.5% failing for "
            "error_rate=0.01 a 90% chance to pass (a perfect server passes from 368); the run stops at 2 s, "
            "so a server answering fewer than 1723.0 requests/s ends it sooner, with less power, and one "
            "under 184.0 requests/s cannot reach the 368 a pass needs (raise --load-duration to hold "
            "it))") in out, out


def test_an_explicit_count_below_the_plan_says_how_often_a_good_server_passes_it(
        pytester: pytest.Pytester, quick: str) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.slo(error_rate=0.01)
        def test_traffic(loadgen):
            loadgen.run(concurrency=4, requests=400)
    """)
    result = pytester.runpytest_inprocess("--server-url", quick, "--client-check", "warn")
    out = " ".join(result.stdout.str().split())
    assert ("(at 400 measured requests a server with 0.5% failing for error_rate=0.01 passes 13% of runs; "
            "3446 give 90%") in out, out
    assert result.ret == 0, out  # the clean server passes: 400 is enough for a perfect one


# ----------------------------------------------------------------------------------- capacity

def test_a_capacity_step_is_not_cut_short_of_the_count_it_was_given(
        pytester: pytest.Pytester, quick: str) -> None:
    # The step bound was 30 s: a server at 10 requests/s ended the level at about 330 of 368, so it
    # had not enough data, and --capacity-step-requests changed nothing. The bound is now 120 s,
    # and the step says up front what it asks of the server (a fast server here keeps this quick).
    result = pytester.runpytest_inprocess(
        "--pyargs", "pytest_inferaccept.suites.test_capacity", "-k", "ladder", "--server-url", quick,
        "--capacity", "--ladder", "1", "--capacity-step-requests", "368", "--slo", "error_rate=0.01",
        "--inferaccept-json", "r.json", "--client-check", "warn")
    out = " ".join(result.stdout.str().split())
    assert ("capacity steps of --capacity-step-requests 368: each step stops at 120 s, so a server answering "
            "fewer than 3.1 requests/s cannot reach the 368 a pass needs (raise --capacity-step-duration to "
            "hold it)") in out, out
    doc = json.loads((pytester.path / "r.json").read_text())
    (ladder,) = [c for t in doc["tests"] for c in t.get("capacity", [])]
    (step,) = ladder["steps"]
    assert step["measured"] == 368 and step["slo_status"] == "pass", out
    assert ladder["headline"].startswith("meets the SLOs up to c=1"), ladder["headline"]


def test_a_ladder_whose_first_level_lacked_data_does_not_say_no_level_met_the_slos() -> None:
    from pytest_inferaccept.model import CapacityStep

    rows = [CapacityStep(level=level, slo_status=status, client_bound=[], ttft_p95=0.01, e2e_p95=0.02,
                         throughput_tokens_per_s=100.0 * level, error_rate=0.0)
            for level, status in ((1, "not_enough_data"), (2, "pass"), (4, "pass"), (8, "pass"))]
    best, why = max_slo_level(rows)
    headline = _headline(rows, None, best, True, "c", why=why)
    assert "no level measured" not in headline
    assert headline.startswith("no level counts as meeting the SLOs (c=1 could not be judged: not enough "
                               "data), although c=2, c=4, c=8 pass on their own"), headline
    # a level the client limited passes nothing on its own: its figures are the client's
    bound = [rows[1].model_copy(update={"level": 1,
                                        "client_bound": ["the client could not keep 1 request in flight"]})]
    best, why = max_slo_level(bound)
    assert _headline(bound, None, best, True, "c", why=why).startswith(
        "no level judged against the SLOs (c=1 could not be judged: the client limited the run)")
