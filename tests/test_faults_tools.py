"""Each tool-calling check fails against the fake server with its fault, and passes without."""

from __future__ import annotations

import pytest

from tests.conftest import RunSuite, one_run_per_fault

SUITE = "test_tools"
FAULT_TABLE = [
    ("tool_args_object", "test_tool_choice_auto_gives_valid_calls_or_a_plain_answer[non-stream]"),
    ("tool_finish_reason_stop", "test_tool_choice_auto_gives_valid_calls_or_a_plain_answer[stream]"),
    ("tool_required_ignored", "test_tool_choice_required_forces_a_valid_call[non-stream]"),
    ("tool_args_schema_violation", "test_tool_choice_required_forces_a_valid_call[non-stream]"),
    ("tool_args_invalid_json", "test_tool_choice_required_forces_a_valid_call[stream]"),
    ("tool_finish_reason_stop", "test_tool_choice_required_forces_a_valid_call[non-stream]"),
    ("tool_named_wrong", "test_tool_choice_named_calls_that_function[non-stream]"),
    ("tool_named_wrong", "test_tool_choice_named_calls_that_function[stream]"),
    ("tool_choice_none_ignored", "test_tool_choice_none_gives_no_tool_calls[non-stream]"),
    ("tool_choice_none_ignored", "test_tool_choice_none_gives_no_tool_calls[stream]"),
    ("tool_stream_args_duplicated", "test_streamed_tool_call_equals_the_non_streamed_call"),
    ("no_parallel_tool_calls", "test_parallel_tool_calls_come_as_separate_calls"),
    ("tool_result_rejected", "test_agent_loop_gets_an_answer_after_every_tool_result[non-stream]"),
    ("tool_result_rejected", "test_agent_loop_gets_an_answer_after_every_tool_result[stream]"),
    ("tool_length_finish_wrong", "test_tool_call_cut_by_max_tokens_reports_length[non-stream]"),
    ("tool_length_finish_wrong", "test_tool_call_cut_by_max_tokens_reports_length[stream]"),
    ("harmony_in_tool_name", "test_tool_choice_required_forces_a_valid_call[non-stream]"),
    ("harmony_in_tool_name", "test_tool_choice_required_forces_a_valid_call[stream]"),
    ("harmony_in_content", "test_tool_choice_none_gives_no_tool_calls[non-stream]"),
    ("harmony_in_content", "test_agent_loop_gets_an_answer_after_every_tool_result[stream]"),
    ("agent_followup_empty", "test_agent_loop_gets_an_answer_after_every_tool_result[non-stream]"),
    ("agent_followup_empty", "test_agent_loop_gets_an_answer_after_every_tool_result[stream]"),
    ("stream_tool_index_zero", "test_streamed_parallel_tool_calls_keep_one_index_per_call"),
    ("stream_tool_name_repeated", "test_streamed_parallel_tool_calls_keep_one_index_per_call"),
    ("stream_tool_name_repeated", "test_tool_choice_required_forces_a_valid_call[stream]"),
    ("stream_tool_type_missing", "test_streamed_parallel_tool_calls_keep_one_index_per_call"),
    ("tool_required_runaway", "test_tool_choice_required_stream_ends_within_max_tokens"),
]
FAILURE_TEXT = {
    "harmony_in_tool_name": "holds the model syntax <|channel|>",
    "harmony_in_content": "content holds <|channel|>, <|message|>",
    "agent_followup_empty": "round 2 of 3: the",
    "stream_tool_index_zero": "2 streamed tool calls share index 0",
    "stream_tool_name_repeated": "vLLM #14951",
    "stream_tool_type_missing": "never says type: 'function'",
    "tool_required_runaway": "the stream did not end",
}
"""What the failure of a check says, for the faults whose diagnosis is the point of the check."""
# -k cannot select one parameter id: whole test functions run, those of one fault together.
SELECT = one_run_per_fault((fault, check.split("[")[0]) for fault, check in FAULT_TABLE)
# Required, so that a capability the fault breaks fails instead of being probed and skipped.
REQUIRED = "chat,stream,tools,tool_choice_required,tool_choice_named,parallel_tool_calls"


def test_every_check_passes_on_the_correct_fake(run_suite: RunSuite) -> None:
    clean = run_suite(SUITE, args=["--capabilities", REQUIRED])
    for _, check in FAULT_TABLE:
        assert clean.outcome(check) == "passed", clean.output[-2000:]
    assert set(clean.outcomes.values()) == {"passed"}, clean.outcomes


def test_parallel_calls_missing_is_a_skip_when_not_required(run_suite: RunSuite) -> None:
    check = "test_parallel_tool_calls_come_as_separate_calls"
    run = run_suite(SUITE, faults=["no_parallel_tool_calls"], select=check)
    assert run.outcome(check) == "skipped", run.output[-2000:]


@pytest.mark.parametrize(("fault", "check"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, fault: str, check: str) -> None:
    faulty = run_suite(SUITE, faults=[fault], select=SELECT[fault], args=["--capabilities", REQUIRED])
    assert faulty.outcome(check) == "failed", faulty.output[-2000:]
    assert FAILURE_TEXT.get(fault, "") in faulty.failure(check), faulty.failure(check)
