"""Each determinism check fails against the fake server with its fault, for the right reason, and passes
without; near-tie-only batch variance passes with its figure, and fails once the team declares the
server batch-invariant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.suites.test_determinism import GREEDY_PROMPTS, LOAD_REPEATS
from tests.conftest import RunSuite, one_run_per_fault

SUITE = "test_determinism"
LOADED = {"itl": 0.01, "prefix_cache": True}
"""A fake whose answers take a while (fillers stay in flight while a probe is answered) and whose
prefix cache counts its hits on /metrics."""
GREEDY = "test_greedy_answer_is_the_same_alone_and_inside_a_batch"
PREFIX = "test_warm_prefix_cache_gives_the_cold_answer"
SEEDED = "test_fixed_seed_gives_the_same_sample_alone_and_under_load"
FAULT_TABLE = [
    ("batch_variant_greedy", GREEDY, "inside a batch of up to 8 fillers"),
    ("prefix_cache_changes_output", PREFIX, "warm prefix cache against cold (hit shown): real change"),
    ("seed_ignored_under_load", SEEDED, "seed 4321 at temperature 1, beside up to 8 fillers against alone: "
                                        "real change"),
]
IN_A_BATCH = len(GREEDY_PROMPTS) * LOAD_REPEATS
"""Greedy answers compared with their alone answer inside the fillers' batches."""
SELECT = one_run_per_fault((fault, check) for fault, check, _ in FAULT_TABLE)


def _values(path: Path, test: str) -> dict[str, Any]:
    """The evidence values one test of an inner run recorded in its results document."""
    doc = json.loads(path.read_text())
    values: dict[str, Any] = next(t["evidence"]["values"] for t in doc["tests"] if t["nodeid"].endswith(test))
    return values


def test_every_determinism_check_passes_on_the_correct_fake(run_suite: RunSuite, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    clean = run_suite(SUITE, args=["--inferaccept-json", str(out)], **LOADED)
    assert clean.outcomes == {GREEDY: "passed", PREFIX: "passed", SEEDED: "passed"}, clean.output[-3000:]
    greedy = _values(out, GREEDY)
    assert greedy["alone_vs_batch"]["identical"] == greedy["alone_vs_batch"]["repeats"] == IN_A_BATCH, greedy
    assert min(greedy["fillers"]["busy_at_each_probe"]) >= 2, greedy["fillers"]
    cache = _values(out, PREFIX)["prefix_cache"]
    assert cache["proven"] and "vllm:prefix_cache_hits_total" in cache["how"], cache


@pytest.mark.parametrize(("fault", "check", "reason"), FAULT_TABLE)
def test_determinism_check_fails_with_its_fault_for_the_right_reason(run_suite: RunSuite, fault: str,
                                                                     check: str, reason: str) -> None:
    faulty = run_suite(SUITE, faults=[fault], select=SELECT[fault], **LOADED)
    assert faulty.outcome(check) == "failed", faulty.output[-2000:]
    failure = faulty.failure(check)
    assert reason in failure, failure
    assert "at token" in failure and "logprob" in failure, failure


def test_a_batch_variant_finding_names_the_prompt_the_position_and_both_tokens(run_suite: RunSuite) -> None:
    run = run_suite(SUITE, faults=["batch_variant_greedy"], select=SELECT["batch_variant_greedy"], **LOADED)
    failure = run.failure(GREEDY)
    assert f"real change: {IN_A_BATCH} of {IN_A_BATCH} repeats differ" in failure, failure
    assert "'Write a short paragraph about the sea" in failure, failure
    assert "at token 3 the alone answer picked" in failure, failure


def test_near_tie_only_batch_variance_passes_with_its_figure(run_suite: RunSuite, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    run = run_suite(SUITE, faults=["near_tie_batch_variance"], select=GREEDY,
                    args=["--inferaccept-json", str(out)], **LOADED)
    assert run.outcome(GREEDY) == "passed", run.output[-2000:]
    figure = _values(out, GREEDY)["alone_vs_batch"]
    assert (figure["near_tie"], figure["real_change"], figure["changed_unclassified"]) == (IN_A_BATCH, 0, 0)
    assert figure["differences"][0]["position"] == 1, figure


def test_batch_invariant_turns_a_near_tie_difference_into_a_failure(run_suite: RunSuite) -> None:
    run = run_suite(SUITE, faults=["near_tie_batch_variance"], select=GREEDY,
                    args=["--capabilities", "chat,batch_invariant"], **LOADED)
    assert run.outcome(GREEDY) == "failed", run.output[-2000:]
    failure = run.failure(GREEDY)
    assert "declared batch-invariant (--capabilities batch_invariant)" in failure, failure
    assert "0.20 nats apart" in failure, failure


def test_a_server_without_load_effects_passes_when_declared_batch_invariant(run_suite: RunSuite) -> None:
    run = run_suite(SUITE, args=["--capabilities", "chat,seed,batch_invariant"], **LOADED)
    assert set(run.outcomes.values()) == {"passed"}, run.output[-2000:]


def test_a_warm_prefix_without_proof_of_a_hit_says_so(run_suite: RunSuite, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    run = run_suite(SUITE, select=PREFIX, args=["--inferaccept-json", str(out)], itl=0.01)
    assert run.outcome(PREFIX) == "passed", run.output[-2000:]
    cache = _values(out, PREFIX)["prefix_cache"]
    assert not cache["proven"] and cache["how"].startswith("no proof of a cache hit was seen"), cache
