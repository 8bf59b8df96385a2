"""Each Responses API check fails against the fake server with its fault, and passes without."""

from __future__ import annotations

import pytest

from tests.conftest import RunSuite, one_run_per_fault

SUITE = "test_responses"
SHAPE = "test_a_response_has_the_documented_shape"
ORDER = "test_stream_events_come_in_the_documented_order"
CALL = "test_a_forced_function_call_has_a_call_id_and_json_arguments"
FORMAT = "test_text_format_json_schema_is_enforced"
LIMIT = "test_max_output_tokens_ends_the_response_incomplete"
STATE = "test_previous_response_id_carries_the_earlier_turn"
UNKNOWN = "test_an_unknown_previous_response_id_is_refused"
FRAMING = "test_a_response_stream_is_well_formed_sse"
SDK = "test_openai_sdk_reads_responses"
JSON_OBJECT = "test_text_format_json_object_answers_a_json_object"
COUNT = "test_input_tokens_endpoint_counts_what_the_response_bills"
ARGS_DONE = "test_a_streamed_function_call_ends_with_its_arguments_done"
MID_ERROR = "test_a_mid_stream_error_comes_as_an_error_event"
FAULT_TABLE = [
    ("responses_object_wrong", f"{SHAPE}[string]", "failed"),
    ("responses_object_wrong", f"{SHAPE}[messages]", "failed"),
    ("responses_object_wrong", f"{SHAPE}[typed-parts]", "failed"),
    ("responses_object_wrong", ORDER, "failed"),
    ("responses_usage_missing", f"{SHAPE}[string]", "failed"),
    ("responses_usage_missing", "test_instructions_reach_the_model", "failed"),
    ("responses_instructions_ignored", "test_instructions_reach_the_model", "failed"),
    ("responses_call_args_invalid", f"{CALL}[non-stream]", "failed"),
    ("responses_call_args_invalid", f"{CALL}[stream]", "failed"),
    ("responses_call_id_missing", f"{CALL}[non-stream]", "failed"),
    ("responses_call_id_missing", f"{CALL}[stream]", "failed"),
    ("responses_tool_output_rejected", "test_a_function_call_output_gets_an_answer", "failed"),
    ("responses_format_ignored", f"{FORMAT}[non-stream]", "failed"),
    ("responses_format_ignored", f"{FORMAT}[stream]", "failed"),
    ("responses_format_ignored", f"{JSON_OBJECT}[non-stream]", "failed"),
    ("responses_format_ignored", f"{JSON_OBJECT}[stream]", "failed"),
    ("responses_input_tokens_off", COUNT, "failed"),
    ("responses_stream_call_args_no_done", ARGS_DONE, "failed"),
    ("responses_stream_call_args_no_done", f"{CALL}[stream]", "passed"),
    ("responses_stream_error_bare", MID_ERROR, "failed"),
    ("responses_stream_error_bare", FRAMING, "passed"),
    ("responses_max_output_ignored", f"{LIMIT}[non-stream]", "failed"),
    ("responses_max_output_ignored", f"{LIMIT}[stream]", "failed"),
    ("responses_cut_reported_completed", f"{LIMIT}[non-stream]", "failed"),
    ("responses_cut_reported_completed", f"{LIMIT}[stream]", "failed"),
    ("responses_previous_ignored", STATE, "failed"),
    ("responses_previous_ignored", UNKNOWN, "failed"),
    ("responses_store_unsupported", STATE, "failed"),
    ("responses_stream_sequence_gap", "test_stream_events_are_numbered_in_sequence", "failed"),
    ("responses_stream_done_sentinel", FRAMING, "warned"),
    ("responses_stream_done_sentinel", SDK, "passed"),
    ("responses_stream_out_of_order", ORDER, "failed"),
    ("responses_stream_out_of_order", SDK, "failed"),
    ("responses_stream_two_terminals", ORDER, "failed"),
    ("responses_stream_no_terminal", ORDER, "failed"),
    ("responses_stream_no_terminal", SDK, "failed"),
    ("responses_stream_deltas_differ", "test_stream_deltas_add_up_to_the_final_response", "failed"),
    ("error_shape_flat", "test_bad_requests_get_an_error_envelope", "failed"),
    ("error_shape_flat", UNKNOWN, "failed"),
]
"""(fault, check, outcome with the fault): 'warned' = passes with a warning; with
responses_stream_done_sentinel the SDK check passes (openai-python stops reading at [DONE]); a call
without its arguments .done, and a bare mid-stream error, fail their own checks only."""
# -k cannot select one parameter id: whole test functions run, those of one fault together.
SELECT = one_run_per_fault((fault, check.split("[")[0]) for fault, check, _ in FAULT_TABLE)
# Required, so that a capability the fault breaks fails instead of being probed and skipped.
REQUIRED = ["--capabilities", "chat,responses,responses_state"]
WARNINGS = {FRAMING: "ends with data: [DONE]"}


def test_every_check_passes_on_the_correct_fake_without_warnings(run_suite: RunSuite) -> None:
    clean = run_suite(SUITE, args=REQUIRED)
    for _, check, _ in FAULT_TABLE:
        assert clean.outcome(check) == "passed", clean.output[-3000:]
    assert set(clean.outcomes.values()) == {"passed"}, clean.outcomes
    assert "warning:" not in clean.output, clean.output[-3000:]


@pytest.mark.parametrize(("fault", "check", "expected"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, fault: str, check: str, expected: str) -> None:
    faulty = run_suite(SUITE, faults=[fault], select=SELECT[fault], args=REQUIRED)
    if expected == "warned":
        assert faulty.outcome(check) == "passed", faulty.output[-3000:]
        assert WARNINGS[check] in faulty.output, faulty.output[-3000:]
    else:
        assert faulty.outcome(check) == expected, faulty.failure(check) or faulty.output[-3000:]


def test_a_server_without_state_is_skipped_unless_state_is_required(run_suite: RunSuite) -> None:
    run = run_suite(SUITE, faults=["responses_store_unsupported"],
                    select=SELECT["responses_previous_ignored"])
    for check in (STATE, UNKNOWN):
        assert run.outcome(check) == "skipped", run.output[-3000:]
    assert "responses_state        unsupported" in run.output, run.output[-3000:]
    assert "the server keeps no responses" in run.output, run.output[-3000:]
