"""Each Messages API check fails against the fake server with its fault, and passes without."""

from __future__ import annotations

import json

import httpx
import pytest

from pytest_inferaccept.checks import CheckFailed
from pytest_inferaccept.checks.messages import check_error_envelope, check_event_stream
from pytest_inferaccept.checks.sse import SseStream, read_sse
from pytest_inferaccept.fake import FakeServer
from tests.conftest import RunSuite, one_run_per_fault

SUITE = "test_messages"
CUT = "test_max_tokens_cuts_the_reply_with_stop_reason_max_tokens"
STOP = "test_stop_sequence_ends_the_reply_with_stop_reason_stop_sequence"
REFUSED = "test_invalid_request_is_refused_in_the_anthropic_error_envelope"
THINK = "test_thinking_comes_as_a_signed_block_before_the_text"
FAULT_TABLE = [
    ("messages_content_string", "test_message_has_the_anthropic_shape"),
    ("messages_stop_reason_end_turn", f"{CUT}[non-stream]"),
    ("messages_stop_reason_end_turn", f"{CUT}[stream]"),
    ("messages_stop_reason_end_turn", f"{STOP}[non-stream]"),
    ("messages_stop_reason_end_turn", f"{STOP}[stream]"),
    ("messages_system_ignored", "test_system_prompt_reaches_the_model"),
    ("messages_stream_no_stop", "test_stream_events_come_in_the_documented_order"),
    ("messages_stream_delta_repeated", "test_streamed_reply_adds_up_to_the_non_streamed_one"),
    ("messages_error_openai", "test_errors_come_in_the_anthropic_error_envelope"),
    ("messages_history_dropped", "test_multi_turn_conversation_is_answered_with_its_earlier_turns_counted"),
    ("messages_count_tokens_off", "test_count_tokens_matches_the_message_input_size"),
    ("messages_tool_result_rejected", "test_tool_result_turn_is_accepted_and_answered"),
    ("messages_tool_use_end_turn", "test_forced_tool_call_comes_as_a_tool_use_block"),
    ("messages_missing_500", f"{REFUSED}[messages_missing]"),
    ("messages_lenient", f"{REFUSED}[max_tokens_missing]"),
    ("messages_lenient", f"{REFUSED}[temperature_above_one]"),
]
"""(fault, check): one inner run per fault; the stop-reason fault breaks four checks at once."""
SELECT = one_run_per_fault((fault, check.split("[")[0]) for fault, check in FAULT_TABLE)
ARGS = ["--capabilities", "chat,messages", "--request-timeout", "5"]
"""Required, so that a capability a fault breaks fails instead of being probed and skipped."""

WORDS = {
    "test_message_has_the_anthropic_shape": "content is str, expected a list of content blocks",
    f"{CUT}[non-stream]": "stop_reason is 'end_turn' for a reply cut by max_tokens=4",
    f"{CUT}[stream]": "stop_reason is 'end_turn' for a reply cut by max_tokens=4",
    f"{STOP}[stream]": "stop_reason is 'end_turn' after a stop sequence ended the reply",
    "test_system_prompt_reaches_the_model": "added 0 input tokens",
    "test_stream_events_come_in_the_documented_order": "the stream ended without message_stop",
    "test_streamed_reply_adds_up_to_the_non_streamed_one": "the text_deltas add up to",
    "test_errors_come_in_the_anthropic_error_envelope": 'the error body has no "type": "error"',
    "test_multi_turn_conversation_is_answered_with_its_earlier_turns_counted":
        "words of earlier turns added 0",
    "test_count_tokens_matches_the_message_input_size": "count_tokens says",
    "test_tool_result_turn_is_accepted_and_answered": "answered 400",
    "test_forced_tool_call_comes_as_a_tool_use_block": "stop_reason is 'end_turn' for a reply that calls",
    f"{REFUSED}[messages_missing]": "HTTP 500: a server error for a client mistake",
    f"{REFUSED}[max_tokens_missing]": "accepted with HTTP 200",
    f"{REFUSED}[temperature_above_one]": "accepted with HTTP 200",
}
"""What the failure says, for the checks whose message names the fault's defect."""


def test_every_check_passes_on_the_correct_fake(run_suite: RunSuite) -> None:
    clean = run_suite(SUITE, args=ARGS)
    for _, check in FAULT_TABLE:
        assert clean.outcome(check) == "passed", clean.output[-3000:]
    skipped = {name for name, outcome in clean.outcomes.items() if outcome != "passed"}
    assert {name.split("::")[-1] for name in skipped} == {f"{THINK}[non-stream]", f"{THINK}[stream]"}, \
        clean.outcomes
    assert set(clean.outcomes[name] for name in skipped) == {"skipped"}
    assert "warning:" not in clean.output, clean.output[-3000:]


THINKING_FAKE: dict[str, object] = {"reasoning_tokens": 6}
"""A fake that reasons: each Messages reply opens with a thinking block of six tokens."""


def test_thinking_check_passes_on_a_thinking_fake_and_fails_without_signatures(run_suite: RunSuite) -> None:
    clean = run_suite(SUITE, select=THINK, args=ARGS, **THINKING_FAKE)
    unsigned = run_suite(SUITE, faults=["messages_thinking_unsigned"], select=THINK, args=ARGS,
                         **THINKING_FAKE)
    for mode, missing in (("non-stream", "no signature field"),
                          ("stream", "no signature_delta before its content_block_stop")):
        assert clean.outcome(f"{THINK}[{mode}]") == "passed", clean.output[-3000:]
        assert unsigned.outcome(f"{THINK}[{mode}]") == "failed", unsigned.output[-3000:]
        assert missing in unsigned.failure(f"{THINK}[{mode}]"), unsigned.failure(f"{THINK}[{mode}]")


@pytest.mark.parametrize(("fault", "check"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, fault: str, check: str) -> None:
    faulty = run_suite(SUITE, faults=[fault], select=SELECT[fault], args=ARGS)
    assert faulty.outcome(check) == "failed", faulty.output[-3000:]
    if check in WORDS:
        assert WORDS[check] in faulty.failure(check), faulty.failure(check)


def _events(text: str) -> list[str]:
    return [line.removeprefix("event: ") for line in text.splitlines() if line.startswith("event: ")]


def test_the_fake_serves_the_documented_stream_and_errors() -> None:
    with FakeServer() as server, httpx.Client(base_url=server.url) as client:
        body = {"model": "fake-chat", "max_tokens": 3, "temperature": 0, "stream": True,
                "messages": [{"role": "user", "content": "hi"}]}
        resp = client.post("/v1/messages", json=body)
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert _events(resp.text) == ["message_start", "content_block_start", "ping", "content_block_delta",
                                      "content_block_delta", "content_block_delta", "content_block_stop",
                                      "message_delta", "message_stop"]
        delta = json.loads(resp.text.split("event: message_delta\ndata: ")[1].split("\n")[0])
        assert delta == {"type": "message_delta", "usage": {"output_tokens": 3},
                         "delta": {"stop_reason": "max_tokens", "stop_sequence": None}}
        for bad, status in (({"model": "fake-chat", "messages": [{"role": "user", "content": "hi"}]}, 400),
                            ({"model": "other", "max_tokens": 3,
                              "messages": [{"role": "user", "content": "hi"}]}, 404)):
            refused = client.post("/v1/messages", json=bad)
            assert refused.status_code == status
            assert refused.json()["type"] == "error" and refused.json()["error"]["message"]
        not_json = client.post("/v1/messages", content=b"{", headers={"content-type": "application/json"})
        assert not_json.status_code == 400 and not_json.json()["error"]["type"] == "invalid_request_error"


def _stream(text: str) -> SseStream:
    return read_sse([text.encode()])


def test_hand_made_streams_and_errors_are_judged_as_a_client_reads_them() -> None:
    start = 'event: message_start\ndata: {"type": "message_start", "message": {"type": "message", ' \
            '"role": "assistant", "content": [], "usage": {"input_tokens": 3}}}\n\n'
    unnamed = 'data: {"type": "message_start", "message": {}}\n\n'
    with pytest.raises(CheckFailed, match="has no `event:` line"):
        check_event_stream("text/event-stream", _stream(unnamed))
    error = 'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", ' \
            '"message": "busy"}}\n\n'
    with pytest.raises(CheckFailed, match="error event after 1 events"):
        check_event_stream("text/event-stream", _stream(start + error))
    early_delta = 'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": ' \
                  '"end_turn"}, "usage": {"output_tokens": 0}}\n\n' \
                  'event: message_stop\ndata: {"type": "message_stop"}\n\n'
    reply, warnings = check_event_stream("text/event-stream; charset=utf-8", _stream(start + early_delta))
    assert (reply.text, reply.stop_reason, reply.output_tokens, reply.input_tokens, warnings) == \
        ("", "end_turn", 0, 3, [])
    ok = '{"type": "error", "error": {"type": "invalid_request_error", "message": "messages: bad"}}'
    assert check_error_envelope(400, ok, "x") == []
    assert check_error_envelope(422, ok, "x") == ["x answered 422; the Messages API answers 400"]
    with pytest.raises(CheckFailed, match="a server error for a client mistake"):
        check_error_envelope(500, ok, "x")


def test_a_text_block_opened_before_the_thinking_block_closes_is_a_finding() -> None:
    # The order llama-server b11434 streams with its deepseek reasoning parser on.
    start = 'event: message_start\ndata: {"type": "message_start", "message": {"type": "message", ' \
            '"role": "assistant", "content": [], "usage": {"input_tokens": 3}}}\n\n'
    thinking = 'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, ' \
               '"content_block": {"type": "thinking", "thinking": ""}}\n\n'
    text = 'event: content_block_start\ndata: {"type": "content_block_start", "index": 1, ' \
           '"content_block": {"type": "text", "text": ""}}\n\n'
    with pytest.raises(CheckFailed, match=r"block 1 \('text'\) while block 0 \('thinking'\) is still open"):
        check_event_stream("text/event-stream", _stream(start + thinking + text))
