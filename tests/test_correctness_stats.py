"""The correctness statistics: exact accuracy intervals, the paired gate, and seeded simulations of
its power, its false NO-GO rate and its refusal to say GO on a noisy server."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pytest_inferaccept.correctness.paired import (
    SelfFlip,
    accuracy,
    accuracy_by_tag,
    drop_interval,
    flip_probability,
    judge_floor,
    judge_pairs,
    mcnemar_p,
    paired_gate,
    self_flip,
)

N_ITEMS = 200
RUNS = 600


def simulate(flip: float, drop: float, *, runs: int = RUNS, n: int = N_ITEMS, seed: int = 7,
             rule: str = "real-drop") -> Counter[str]:
    """Verdicts of `runs` seeded comparisons: a baseline answered twice (the self-flip measurement)
    and a candidate that lost `drop` of the items, every answer flipping with the server's noise."""
    rng = random.Random(seed)
    q = flip_probability(flip)
    out: Counter[str] = Counter()
    for _ in range(runs):
        truth = [rng.random() < 0.5 for _ in range(n)]  # a 135M model gets about half right
        broken = set(rng.sample([i for i, t in enumerate(truth) if t], round(drop * n)))
        candidate = [t and i not in broken for i, t in enumerate(truth)]

        def answered(xs: list[bool]) -> list[bool]:
            return [x ^ (rng.random() < q) for x in xs]

        base, again = answered(truth), answered(truth)
        verdict = paired_gate(base, answered(candidate), tolerance=0.05,
                              self_flip_rate=self_flip(base, again), rule=rule)  # type: ignore[arg-type]
        out[verdict.status] += 1
    return out


def test_accuracy_has_an_exact_interval_and_counts_unanswered_apart() -> None:
    acc = accuracy(["correct"] * 60 + ["wrong"] * 30 + ["unanswered"] * 10)
    assert (acc.correct, acc.n, acc.unanswered) == (60, 100, 10)
    assert acc.low == pytest.approx(0.4972, abs=1e-3)  # Clopper–Pearson 95% for 60 of 100
    assert acc.high == pytest.approx(0.6967, abs=1e-3)
    assert acc.describe() == "accuracy 60.0% (95% CI 49.7%–69.7%, 60 of 100 correct; 10 unanswered, 10.0%)"


def test_accuracy_per_tag_groups_items_by_key_and_value() -> None:
    by = accuracy_by_tag(["correct", "wrong", "correct"],
                         [{"kind": "a"}, {"kind": "a"}, {"kind": "b"}])
    assert {k: (v.correct, v.n) for k, v in by.items()} == {"kind=a": (1, 2), "kind=b": (1, 1)}


def test_a_floor_passes_fails_or_lacks_data_on_the_interval() -> None:
    assert judge_floor(accuracy(["correct"] * 190 + ["wrong"] * 10), 0.8).status == "pass"
    assert judge_floor(accuracy(["correct"] * 100 + ["wrong"] * 100), 0.8).status == "fail"
    assert judge_floor(accuracy(["correct"] * 16 + ["wrong"] * 4), 0.8).status == "not_enough_data"


def test_mcnemar_is_the_exact_binomial_tail_of_the_discordant_pairs() -> None:
    assert mcnemar_p(12, 2) == pytest.approx(106 / 16384)
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(5, 0) == pytest.approx(1 / 32)


def test_each_end_of_the_drop_interval_holds_at_least_95_percent_in_simulation() -> None:
    rng = random.Random(3)
    misses_low = misses_high = 0
    runs = 2000
    p10, p01 = 0.08, 0.03  # true drop 5 points
    for _ in range(runs):
        draws = [rng.random() for _ in range(N_ITEMS)]
        b = sum(d < p10 for d in draws)
        c = sum(p10 <= d < p10 + p01 for d in draws)
        low, high = drop_interval(b, c, N_ITEMS, 0.05)
        misses_low += low > p10 - p01
        misses_high += high < p10 - p01
    assert misses_low / runs <= 0.05
    assert misses_high / runs <= 0.05


def test_a_five_point_drop_is_no_go_in_at_least_85_percent_of_runs_at_2_percent_self_flip() -> None:
    verdicts = simulate(0.02, 0.05)
    assert verdicts["fail"] / RUNS >= 0.85


def test_a_ten_point_drop_is_no_go_in_at_least_99_percent_of_runs_at_2_percent_self_flip() -> None:
    verdicts = simulate(0.02, 0.10)
    assert verdicts["fail"] / RUNS >= 0.99


def test_an_unchanged_server_is_no_go_in_at_most_5_percent_of_runs_and_mostly_go() -> None:
    verdicts = simulate(0.02, 0.0)
    assert verdicts["fail"] / RUNS <= 0.05
    assert verdicts["pass"] / RUNS >= 0.85


def test_at_10_percent_self_flip_the_gate_says_it_cannot_decide_rather_than_go() -> None:
    verdicts = simulate(0.10, 0.0)
    assert verdicts["cannot_decide"] / RUNS >= 0.9
    assert verdicts["pass"] / RUNS <= 0.01
    assert verdicts["fail"] / RUNS <= 0.05


def test_the_strict_rule_needs_the_interval_wholly_beyond_the_tolerance_so_misses_a_drop_at_it() -> None:
    # With 200 items, an interval wholly above 5 points needs an observed drop near 10: the power
    # at the tolerance itself is below 50% for any valid test; docs/correctness.md shows the table.
    verdicts = simulate(0.02, 0.05, rule="beyond-tolerance")
    assert verdicts["fail"] / RUNS <= 0.05
    assert verdicts["pass"] == 0


def test_a_verdict_says_what_was_measured_and_what_would_decide() -> None:
    nogo = judge_pairs(12, 2, 200, self_flip_rate=SelfFlip(3, 200))
    assert nogo.status == "fail"
    assert nogo.message.startswith("NO-GO: accuracy fell by 5.0 points "
                                   "(12 items right→wrong, 2 wrong→right, of 200")
    assert "self-flip rate 1.5% (3 of 200" in nogo.message
    unsure = judge_pairs(6, 4, 200, self_flip_rate=SelfFlip(3, 200))
    assert unsure.status == "not_enough_data"
    assert unsure.needed_n is not None and unsure.needed_n > 200
    assert f"about {unsure.needed_n} items would decide" in unsure.message
    # at the rates measured, that many items do decide
    scaled = judge_pairs(round(6 * unsure.needed_n / 200), round(4 * unsure.needed_n / 200), unsure.needed_n)
    assert scaled.status != "not_enough_data"


def test_a_noisy_server_cannot_decide_but_a_conclusive_drop_is_still_no_go() -> None:
    noisy = SelfFlip(20, 200)
    assert judge_pairs(2, 2, 200, self_flip_rate=noisy).status == "cannot_decide"
    assert judge_pairs(30, 2, 200, self_flip_rate=noisy).status == "fail"


def test_an_improvement_is_go_and_says_it_rose() -> None:
    verdict = judge_pairs(0, 12, 200, self_flip_rate=SelfFlip(2, 200))
    assert verdict.status == "pass"
    assert "accuracy rose by 6.0 points" in verdict.message
