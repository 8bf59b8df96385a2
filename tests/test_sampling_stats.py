"""The first-token frequency test, shown by seeded simulation: at most 1% false alarms on a server that
samples from the distribution it reports, and a server that ignores temperature found every time."""

from __future__ import annotations

import math
import random

import pytest

from pytest_inferaccept.correctness.sampling import (
    chi2_sf,
    detects_greedy,
    diversity,
    frequency_test,
    reported_probabilities,
)

SAMPLES = 200
TRIALS = 1000


def _geometric(ratio: float, tokens: int, reported: int) -> tuple[list[str], list[float], dict[str, float]]:
    """A full distribution over `tokens` tokens, each `ratio` times as likely as the one before, and
    its top `reported` entries as a server reports them."""
    weights = [ratio ** k for k in range(tokens)]
    total = sum(weights)
    names = [f"t{k}" for k in range(tokens)]
    probs = [w / total for w in weights]
    return names, probs, dict(list(zip(names, probs, strict=True))[:reported])


# Distributions like real first tokens: peaked, spread, with a heavy unreported tail, or a long flat one.
DISTRIBUTIONS = {
    "peaked": _geometric(0.3, 40, 20),
    "halving": _geometric(0.5, 20, 20),
    "spread, top 5 reported": _geometric(0.8, 60, 5),
    "flat, top 20 of 100 reported": _geometric(0.97, 100, 20),
}


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_a_server_sampling_what_it_reports_is_flagged_in_at_most_one_run_in_a_hundred(name: str) -> None:
    names, probs, reported = DISTRIBUTIONS[name]
    rng = random.Random(20261203)
    alarms = sum(frequency_test(reported, rng.choices(names, probs, k=SAMPLES)).fails for _ in range(TRIALS))
    assert alarms / TRIALS <= 0.01, f"{alarms} false alarms in {TRIALS}"


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_a_server_that_ignores_temperature_is_found_every_time(name: str) -> None:
    names, _, reported = DISTRIBUTIONS[name]
    assert detects_greedy(reported, SAMPLES)
    result = frequency_test(reported, [names[0]] * SAMPLES)
    assert result.fails and result.p_value < 1e-6, result.describe()


def test_a_server_sampling_at_half_the_temperature_is_found_nearly_every_time() -> None:
    names, probs, reported = DISTRIBUTIONS["halving"]
    sharper = [p ** 2 for p in probs]  # temperature 0.5 squares the probabilities (renormalised by choices)
    rng = random.Random(7)
    found = sum(frequency_test(reported, rng.choices(names, sharper, k=SAMPLES)).fails for _ in range(200))
    assert found / 200 >= 0.95, f"found in {found} of 200 runs"


def test_a_first_token_too_certain_to_tell_greedy_from_sampling_is_said_so() -> None:
    assert not detects_greedy({"a": 0.999, "b": 0.001}, SAMPLES)


def test_tokens_sampled_from_a_tail_the_server_calls_rare_fail_the_test() -> None:
    reported = {"a": 0.5, "b": 0.49}  # 1% unreported: 2 of 200 expected
    assert frequency_test(reported, ["a"] * 100 + ["b"] * 98 + ["z"] * 2).p_value > 0.5
    result = frequency_test(reported, ["a"] * 100 + ["b"] * 80 + ["z"] * 20)
    assert result.fails, result.describe()


def test_a_sampled_token_the_server_gives_no_probability_fails_the_test() -> None:
    result = frequency_test({"a": 0.5, "b": 0.5}, ["a"] * 100 + ["b"] * 99 + ["z"])
    assert result.fails, result.describe()


def test_chi_square_tail_matches_known_values() -> None:
    assert chi2_sf(3.841, 1) == pytest.approx(0.05, abs=1e-4)
    assert chi2_sf(18.307, 10) == pytest.approx(0.05, abs=1e-4)
    assert chi2_sf(29.588, 10) == pytest.approx(0.001, abs=2e-5)
    assert chi2_sf(0.0, 4) == 1.0


def test_reported_probabilities_read_top_logprobs_once_per_token() -> None:
    top = [{"token": "a", "logprob": math.log(0.5)}, {"token": "a", "logprob": -9.0},
           {"token": "b", "logprob": math.log(0.25)}]
    assert reported_probabilities(top) == pytest.approx({"a": 0.5, "b": 0.25})


def test_diversity_counts_distinct_answers_and_word_pairs() -> None:
    figure = diversity(["a b c", "a b c", "a b d"])
    assert (figure.distinct, figure.bigrams, figure.distinct_bigrams) == (2, 6, 3)
    assert figure.bigram_share == pytest.approx(0.5)


def test_the_fake_samples_its_first_token_from_the_probabilities_it_reports() -> None:
    from pytest_inferaccept.fake.generation import generate_text, logprobs_for

    greedy = generate_text("an open prompt", {"temperature": 0, "max_tokens": 2}, 0, 10)
    reported = reported_probabilities(logprobs_for(greedy, 20)["content"][0]["top_logprobs"])
    assert sum(reported.values()) == pytest.approx(1.0)
    sampled = [generate_text("an open prompt", {"temperature": 1.0, "seed": s, "max_tokens": 1}, 0, 10).text
               for s in range(SAMPLES)]
    result = frequency_test(reported, sampled)
    assert not result.fails, result.describe()
    assert detects_greedy(reported, SAMPLES)


def test_the_fake_samples_greedily_at_a_tiny_temperature() -> None:
    from pytest_inferaccept.fake.generation import generate_text

    greedy = generate_text("an open prompt", {"temperature": 0, "max_tokens": 1}, 0, 10).text
    cold = {generate_text("an open prompt", {"temperature": 1e-4, "seed": s, "max_tokens": 1}, 0, 10).text
            for s in range(20)}
    assert cold == {greedy}
