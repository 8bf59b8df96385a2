"""A finding names its cause as observed: a forced tool_choice the server ignored or let run to text, and
a Responses stream without sequence_number or indices, whose other checks still run and pass."""

from __future__ import annotations

import pytest

from pytest_inferaccept.checks import CheckFailed
from pytest_inferaccept.checks.responses import check_forced_call
from tests.conftest import RunSuite

NAMED = "test_tool_choice_named_calls_that_function"
REQUIRED_CHOICE = "test_tool_choice_required_forces_a_valid_call"
TOOL_CAPABILITIES = ["--capabilities", "chat,stream,tools,tool_choice_required,tool_choice_named"]
RESPONSES_CAPABILITIES = ["--capabilities", "chat,responses"]
NUMBERS = "test_stream_events_are_numbered_in_sequence"
INDICES = "test_stream_events_carry_their_output_and_content_index"
SDK = "test_openai_sdk_reads_responses"
STILL_JUDGED = [
    "test_a_response_stream_is_well_formed_sse",
    "test_stream_events_come_in_the_documented_order",
    "test_stream_deltas_add_up_to_the_final_response",
    "test_a_forced_function_call_has_a_call_id_and_json_arguments[stream]",
    "test_text_format_json_schema_is_enforced[stream]",
    "test_max_output_tokens_ends_the_response_incomplete[stream]",
]
"""The stream checks that need neither sequence_number nor output_index to judge what they exist for."""


def test_a_named_choice_treated_as_auto_is_reported_as_not_honoured(run_suite: RunSuite) -> None:
    run = run_suite("test_tools", faults=["tool_named_ignored"], select=NAMED, args=TOOL_CAPABILITIES)
    for mode in ("non-stream", "stream"):
        check = f"{NAMED}[{mode}]"
        assert run.outcome(check) == "failed", run.output[-3000:]
        said = run.failure(check)
        assert "the named tool_choice (get_time) was not honoured: the answer is the same as with " \
               "tool_choice 'auto' — 0 tool calls, finish_reason" in said, said
        assert "no tool call although" not in said, said


def test_a_named_choice_calling_another_function_says_which_and_what_auto_gave(run_suite: RunSuite) -> None:
    run = run_suite("test_tools", faults=["tool_named_wrong"], select=NAMED, args=TOOL_CAPABILITIES)
    said = run.failure(f"{NAMED}[non-stream]")
    assert "the named tool_choice (get_time) was not honoured (calls ['get_weather'])" in said, said
    assert "(with tool_choice 'auto': 0 tool calls" in said, said


def test_a_required_choice_treated_as_auto_says_what_came_instead_of_a_call(run_suite: RunSuite) -> None:
    run = run_suite("test_tools", faults=["tool_required_ignored"], select=REQUIRED_CHOICE,
                    args=TOOL_CAPABILITIES)
    for mode in ("non-stream", "stream"):
        said = run.failure(f"{REQUIRED_CHOICE}[{mode}]")
        assert "tool_choice 'required' was not honoured: the answer is the same as with tool_choice " \
               "'auto' — 0 tool calls, finish_reason 'stop'" in said, said
        assert "characters of text with no call started" in said, said


def test_a_required_choice_cut_by_max_tokens_in_text_says_no_call_came_within_the_limit(
        run_suite: RunSuite) -> None:
    # A long natural answer (600 tokens) spends the 128-token limit on text, as SmolLM2 does on
    # llama-server b11434, whose grammar allows any text before <tool_call>.
    run = run_suite("test_tools", faults=["tool_required_ignored"],
                    select=REQUIRED_CHOICE, args=TOOL_CAPABILITIES, max_natural_tokens=600)
    said = run.failure(f"{REQUIRED_CHOICE}[non-stream]")
    assert "tool_choice 'required' gave no tool call within the token limit: the answer is the same as " \
           "with tool_choice 'auto' — 0 tool calls, finish_reason 'length' after 128 completion tokens" \
           in said, said
    assert "with no call started" in said, said


def test_a_stream_without_numbers_or_indices_fails_those_checks_alone(run_suite: RunSuite) -> None:
    run = run_suite("test_responses", faults=["responses_stream_no_indices"], args=RESPONSES_CAPABILITIES)
    assert run.outcome(NUMBERS) == "failed", run.output[-3000:]
    assert "stream events carry no sequence_number" in run.failure(NUMBERS), run.failure(NUMBERS)
    said = run.failure(INDICES)
    assert "carry no integer output_index" in said and "carry no integer content_index" in said, said
    for check in STILL_JUDGED:
        assert run.outcome(check) == "passed", run.failure(check) or run.output[-3000:]


def test_the_sdk_check_names_the_client_path_that_breaks(run_suite: RunSuite) -> None:
    run = run_suite("test_responses", faults=["responses_stream_no_indices"], args=RESPONSES_CAPABILITIES)
    said = run.failure(SDK)
    assert "responses.stream() raised TypeError" in said, said
    assert "while responses.create(stream=True) read the whole stream" in said, said
    assert "without content_index" in said, said


def test_a_sequence_gap_fails_the_numbering_check_and_not_the_framing_check(run_suite: RunSuite) -> None:
    run = run_suite("test_responses", faults=["responses_stream_sequence_gap"], args=RESPONSES_CAPABILITIES,
                    select=f"{NUMBERS} or test_a_response_stream_is_well_formed_sse")
    assert "sequence_number is 4 after 2 at event 3" in run.failure(NUMBERS), run.output[-3000:]
    assert run.outcome("test_a_response_stream_is_well_formed_sse") == "passed"


def test_a_responses_forced_call_answered_in_text_says_what_came_instead() -> None:
    # llama-server b11434's answer to tool_choice 'required': text until the limit, status completed.
    text = "You can use the get_weather function to get the current weather in celsius in Paris."
    resp = {"status": "completed", "usage": {"input_tokens": 90, "output_tokens": 128, "total_tokens": 218},
            "output": [{"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}]}
    with pytest.raises(CheckFailed) as failed:
        check_forced_call(resp, [], 128)
    assert failed.value.title == ("no function_call item although tool_choice is 'required': status "
                                  "'completed', 128 output tokens of max_output_tokens=128, "
                                  f"{len(text)} characters of text with no call started")
    check_forced_call(resp, [("get_weather", {})], 128)  # a call present: nothing to say


def test_the_probe_calls_a_forced_choice_answered_as_auto_broken_not_unsupported(run_suite: RunSuite) -> None:
    faults = ["tool_named_ignored", "tool_required_ignored", "tools_unprompted_silent"]
    run = run_suite("test_tools", faults=faults, select=NAMED, args=["--capabilities", "chat"])
    assert run.outcome(f"{NAMED}[non-stream]") == "skipped", run.output[-3000:]
    assert "tool_choice_named      broken" in run.output, run.output[-3000:]
    said = ("optional capability tool_choice_named is broken (its tests were skipped): the forced "
            "tool_choice {'type': 'function', 'function': {'name': 'get_weather'}} was not honoured: the "
            "answer is the same")
    assert said in run.output, run.output[-3000:]


def test_the_probe_keeps_a_forced_choice_honoured_by_a_quiet_model_supported(run_suite: RunSuite) -> None:
    run = run_suite("test_tools", faults=["tools_unprompted_silent"], select=NAMED,
                    args=["--capabilities", "chat"])
    assert run.outcome(f"{NAMED}[non-stream]") == "passed", run.output[-3000:]
