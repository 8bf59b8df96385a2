"""Each generation-control check fails against the fake server with its fault, and passes without."""

from __future__ import annotations

import pytest

from tests.conftest import RunSuite, one_run_per_fault

SUITE = "test_generation_control"
FAULT_TABLE = [
    ("stop_ignored", "test_stop_string_cuts_the_output_right_before_it[non-stream]"),
    ("stop_included", "test_stop_string_cuts_the_output_right_before_it[non-stream]"),
    ("stop_partial_leak_stream", "test_stop_string_cuts_the_output_right_before_it[stream]"),
    ("stop_finish_reason_wrong", "test_stop_string_cuts_the_output_right_before_it[stream]"),
    ("stop_list_first_only", "test_stop_list_cuts_at_the_earliest_of_its_strings[non-stream]"),
    ("stop_list_first_only", "test_stop_list_cuts_at_the_earliest_of_its_strings[stream]"),
    ("stop_multi_token_ignored", "test_multi_token_stop_cuts_the_output_right_before_it[non-stream]"),
    ("stop_partial_leak_stream", "test_multi_token_stop_cuts_the_output_right_before_it[stream]"),
    ("max_tokens_ignored", "test_max_tokens_cuts_the_output_with_finish_reason_length[non-stream]"),
    ("length_finish_reason_wrong", "test_max_tokens_cuts_the_output_with_finish_reason_length[stream]"),
    ("length_usage_miscounted", "test_max_tokens_cuts_the_output_with_finish_reason_length[non-stream]"),
    ("max_completion_tokens_ignored",
     "test_max_completion_tokens_cuts_the_output_with_finish_reason_length"),
    ("nondeterministic_temp0", "test_temperature_zero_gives_the_same_text_twice"),
    ("seed_ignored", "test_fixed_seed_reproduces_sampled_text"),
]
# -k cannot select one parameter id, so whole test functions run and each row reads one outcome;
# the checks of one fault run together.
SELECT = one_run_per_fault((fault, check.split("[")[0]) for fault, check in FAULT_TABLE)


def test_every_check_passes_on_the_correct_fake(run_suite: RunSuite) -> None:
    clean = run_suite(SUITE)
    for _, check in FAULT_TABLE:
        assert clean.outcome(check) == "passed", clean.output[-2000:]
    assert set(clean.outcomes.values()) == {"passed"}, clean.outcomes


@pytest.mark.parametrize(("fault", "check"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, fault: str, check: str) -> None:
    faulty = run_suite(SUITE, faults=[fault], select=SELECT[fault])
    assert faulty.outcome(check) == "failed", faulty.output[-2000:]
