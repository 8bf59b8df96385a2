"""Each sampling and determinism check fails against the fake server with its fault, for the right
reason, and passes without; near-tie-only variance of greedy repeats passes with its figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunSuite, one_run_per_fault

SUITE = "test_sampling"
FAULT_TABLE = [
    ("temperature_ignored", "test_temperature_one_gives_varied_answers_to_an_open_prompt",
     "temperature ignored: only 1 distinct answers in 10"),
    ("temperature_ignored", "test_sampled_first_tokens_follow_the_reported_probabilities",
     "do not follow the server's own reported probabilities"),
    ("sampled_frequencies_off", "test_sampled_first_tokens_follow_the_reported_probabilities",
     "do not follow the server's own reported probabilities"),
    ("stream_text_differs", "test_stream_equals_non_stream_at_temperature_zero",
     "the streamed text differs from the non-streamed text"),
    ("nondeterministic_temp0", "test_greedy_answer_repeats_alone", "changed at a non-tie"),
    ("seed_ignored", "test_fixed_seed_repeats_the_sampled_answer", "seed ignored: seed 1234"),
]
SELECT = one_run_per_fault((fault, check) for fault, check, _ in FAULT_TABLE)


def _values(path: Path, test: str) -> dict[str, Any]:
    """The evidence values one test of an inner run recorded in its results document."""
    doc = json.loads(path.read_text())
    values: dict[str, Any] = next(t["evidence"]["values"] for t in doc["tests"] if t["nodeid"].endswith(test))
    return values


def test_every_sampling_check_passes_on_the_correct_fake(run_suite: RunSuite) -> None:
    clean = run_suite(SUITE)
    assert set(clean.outcomes.values()) == {"passed"}, clean.output[-3000:]
    assert len(clean.outcomes) == 8, clean.outcomes


@pytest.mark.parametrize(("fault", "check", "reason"), FAULT_TABLE)
def test_sampling_check_fails_with_its_fault_for_the_right_reason(run_suite: RunSuite, fault: str, check: str,
                                                                  reason: str) -> None:
    faulty = run_suite(SUITE, faults=[fault], select=SELECT[fault])
    assert faulty.outcome(check) == "failed", faulty.output[-2000:]
    assert reason in faulty.failure(check), faulty.failure(check)


def test_near_tie_only_variance_of_greedy_repeats_passes_with_its_figure(run_suite: RunSuite,
                                                                         tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    run = run_suite(SUITE, faults=["greedy_near_tie_jitter"], select="test_greedy_answer_repeats_alone",
                    args=["--inferaccept-json", str(out)])
    assert run.outcome("test_greedy_answer_repeats_alone") == "passed", run.output[-2000:]
    figure = _values(out, "test_greedy_answer_repeats_alone")["greedy_repeats"]
    assert figure["real_change"] == 0 and figure["not_classifiable"] == 0, figure
    assert figure["same"] + figure["near_tie"] == 4, figure


def test_changed_default_sampling_shows_in_the_recorded_diversity(run_suite: RunSuite,
                                                                  tmp_path: Path) -> None:
    figures: list[dict[str, Any]] = []
    for faults in ([], ["default_sampling_changed"]):
        out = tmp_path / f"results{len(figures)}.json"
        run = run_suite(SUITE, faults=faults, select="test_default_sampling_diversity_is_recorded",
                        args=["--inferaccept-json", str(out)])
        assert run.outcome("test_default_sampling_diversity_is_recorded") == "passed", run.output[-2000:]
        figures.append(_values(out, "test_default_sampling_diversity_is_recorded")["default_sampling"])
    sampled, greedy = figures
    assert sampled["distinct"] >= 9, sampled
    assert greedy["distinct"] == 1 and greedy["bigram_share"] <= 0.1, greedy
