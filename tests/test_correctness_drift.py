"""The logprob tier's verdict: drift against the baseline judged against the server's own (seeded)."""

from __future__ import annotations

import random

from pytest_inferaccept.correctness.drift import Score, judge_drift, score

RUNS = 1000
PROMPTS = 200


def _noisy(rng: random.Random, *, mean: float, real: float, shift: float = 0.0) -> Score:
    """One prompt's distance on a server with batch-dependent numerics (vLLM CPU-like)."""
    if rng.random() < real:
        return Score(real_change=True, mean_abs_delta=0.0)
    return Score(real_change=False, mean_abs_delta=rng.expovariate(1 / mean) + shift)


def _found_share(*, shift: float, extra_real: float = 0.0, seed: int = 7) -> float:
    rng = random.Random(seed)
    found = 0
    for _ in range(RUNS):
        own = [_noisy(rng, mean=0.01, real=0.04) for _ in range(PROMPTS)]
        cross = [_noisy(rng, mean=0.01, real=0.04 + extra_real, shift=shift) for _ in range(PROMPTS)]
        found += judge_drift(cross, own).status == "found"
    return found / RUNS


def test_an_unchanged_noisy_server_is_found_drifting_in_at_most_one_run_in_a_hundred() -> None:
    assert _found_share(shift=0.0) <= 0.01


def test_a_shift_of_three_hundredths_of_a_nat_beyond_the_noise_is_found_in_nearly_every_run() -> None:
    assert _found_share(shift=0.03) >= 0.99


def test_a_shift_within_the_tolerance_is_significant_but_not_found() -> None:
    rng = random.Random(3)
    own = [_noisy(rng, mean=0.01, real=0.0) for _ in range(PROMPTS)]
    cross = [_noisy(rng, mean=0.01, real=0.0, shift=0.01) for _ in range(PROMPTS)]
    verdict = judge_drift(cross, own)
    assert verdict.status == "not_found" and verdict.p_value is not None and verdict.p_value < 0.01
    assert "significant but within the tolerance" in verdict.message


def test_prompts_parting_at_a_real_change_well_beyond_the_servers_own_share_are_found() -> None:
    # 4% of prompts part by themselves; 20% against the baseline is found in nearly every run, 12% in most.
    assert _found_share(shift=0.0, extra_real=0.16) >= 0.98
    assert _found_share(shift=0.0, extra_real=0.08) >= 0.5


def test_a_deterministic_server_unchanged_shows_no_drift_and_any_shift_shows() -> None:
    same = [Score(real_change=False, mean_abs_delta=0.0)] * PROMPTS
    assert judge_drift(same, same).status == "not_found"
    shifted = [Score(real_change=False, mean_abs_delta=0.025)] * PROMPTS
    verdict = judge_drift(shifted, same)
    assert verdict.status == "found" and verdict.farther == PROMPTS
    assert "+0.0250 nats beyond the server's own" in verdict.message


def test_without_logprobs_or_with_the_tier_off_drift_is_not_measured() -> None:
    assert judge_drift([None] * 3, [None] * 3).status == "not_measured"
    same = [Score(real_change=False, mean_abs_delta=0.0)] * 3
    assert judge_drift(same, same, tolerance=None).status == "not_measured"


def _token(piece: str, lp: float, top: list[tuple[str, float]]) -> dict[str, object]:
    return {"token": piece, "logprob": lp, "top_logprobs": [{"token": t, "logprob": v} for t, v in top]}


def test_a_prompt_score_is_the_mean_delta_before_the_answers_part_or_a_real_change() -> None:
    a = [_token("A", -0.1, [("A", -0.1), ("B", -3.0)]), _token(" x", -0.2, [(" x", -0.2), (" y", -2.5)])]
    b = [_token("A", -0.15, [("A", -0.15), ("B", -2.9)]), _token(" y", -0.3, [(" y", -0.3), (" z", -2.0)])]
    found = score(a, b)
    assert found is not None and found.real_change and abs(found.mean_abs_delta - 0.05) < 1e-9
    assert score(a, a) == Score(real_change=False, mean_abs_delta=0.0)
    assert score(a, None) is None


def test_a_server_whose_every_answer_parts_at_a_real_change_is_found_and_says_so() -> None:
    parted = [Score(real_change=True, mean_abs_delta=0.0)] * PROMPTS
    same = [Score(real_change=False, mean_abs_delta=0.0)] * PROMPTS
    verdict = judge_drift(parted, same)
    assert verdict.status == "found" and verdict.real_excess == PROMPTS
    assert "no prompt matched on both sides; 200 prompts part from the baseline" in verdict.message
    assert "chat-template" in verdict.message
