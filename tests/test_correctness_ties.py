"""Near tie or real change at the first differing token, and logprob drift between greedy runs."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_inferaccept.correctness.ties import classify, drift


def tok(token: str, logprob: float, *alts: tuple[str, float]) -> dict[str, Any]:
    """One position in the OpenAI chat logprobs shape, the pick first in its top list."""
    top = [{"token": token, "logprob": logprob}, *({"token": t, "logprob": lp} for t, lp in alts)]
    return {"token": token, "logprob": logprob, "top_logprobs": top}


def test_two_picks_within_half_a_nat_and_in_each_others_top5_are_a_near_tie() -> None:
    a = [tok("The", -0.1), tok(" cat", -0.9, (" dog", -1.1))]
    b = [tok("The", -0.1), tok(" dog", -0.95, (" cat", -1.05))]
    check = classify(a, b, text_a="The cat", text_b="The dog")
    assert check.kind == "near_tie"
    assert (check.position, check.tokens) == (1, (" cat", " dog"))
    assert "0.20 nats apart" in check.reason


def test_a_near_tie_is_not_called_batching_noise_since_a_requantization_tips_ties_too() -> None:
    # llama.cpp b11434, SmolLM2-135M Q4_1 vs Q8_0 of the same weights: all 12 changed grades were
    # near ties, e.g. " Atlantic" -> " Pacific" 0.18 nats apart
    a = [tok(" Atlantic", -0.80, (" Pacific", -0.98))]
    b = [tok(" Pacific", -0.85, (" Atlantic", -0.95))]
    check = classify(a, b)
    assert check.kind == "near_tie"
    assert "quantization" in check.reason
    assert "noise of batching or kernels" not in check.reason


def test_picks_more_than_half_a_nat_apart_are_a_real_change() -> None:
    a = [tok(" cat", -0.2, (" dog", -2.0))]
    b = [tok(" dog", -0.3, (" cat", -1.9))]
    check = classify(a, b)
    assert check.kind == "real_change"
    assert "1.80 nats apart" in check.reason


def test_a_pick_missing_from_the_other_runs_top5_is_a_real_change() -> None:
    a = [tok(" cat", -0.6, (" dog", -0.8))]
    b = [tok(" bird", -0.7, (" dog", -0.9))]
    check = classify(a, b)
    assert check.kind == "real_change"
    assert "' bird' is not in the other run's top-5" in check.reason


def test_only_the_top_k_alternatives_count() -> None:
    alts = [(f" w{i}", -0.5 - i * 0.01) for i in range(6)]
    a = [tok(" cat", -0.4, *alts, (" dog", -0.7))]  # " dog" is 8th in a's list
    b = [tok(" dog", -0.4, (" cat", -0.6))]
    assert classify(a, b).kind == "real_change"
    assert classify(a, b, top_k=10).kind == "near_tie"


def test_without_logprobs_a_difference_is_not_classifiable() -> None:
    check = classify(None, [tok("x", -0.1)], text_a="y", text_b="x")
    assert check.kind == "not_classifiable"
    assert "no logprobs for one answer" in check.reason
    assert classify(None, None, text_a="same", text_b="same").kind == "same"


def test_an_answer_that_ends_where_the_other_goes_on_is_not_classifiable() -> None:
    a = [tok("Yes", -0.1)]
    b = [tok("Yes", -0.1), tok(".", -0.2)]
    assert classify(a, b).kind == "not_classifiable"


def test_drift_counts_divergences_at_non_ties_and_the_logprob_change_of_matched_tokens() -> None:
    same = ([tok("A", -0.10), tok("B", -0.50)], [tok("A", -0.12), tok("B", -0.40)])
    tie = ([tok("A", -0.2), tok(" x", -0.7, (" y", -0.8))], [tok("A", -0.2), tok(" y", -0.7, (" x", -0.75))])
    real = ([tok("Q", -0.3, ("R", -3.0))], [tok("R", -0.1, ("Q", -2.5))])
    d = drift([same, tie, real, (None, [tok("A", -1.0)])])
    assert (d.prompts, d.diverged_real, d.diverged_tie, d.unclassified) == (4, 1, 1, 1)
    assert d.real_share == pytest.approx(1 / 3)
    assert d.matched_tokens == 3  # two in the first prompt, one before the tie
    assert d.mean_abs_delta == pytest.approx((0.02 + 0.10 + 0.0) / 3)
    assert d.max_abs_delta == pytest.approx(0.10)
    assert d.describe().startswith("1 of 3 prompts diverge at a non-tie (33.3%), 1 at a near tie, 1 without")


def test_identical_greedy_runs_have_no_drift() -> None:
    run = [tok("A", -0.1), tok("B", -0.2)]
    d = drift([(run, list(run))])
    assert (d.diverged_real, d.diverged_tie, d.mean_abs_delta, d.max_abs_delta) == (0, 0, 0.0, 0.0)
