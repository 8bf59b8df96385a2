"""The Anthropic Messages API (POST /v1/messages): the message, its stop reasons, its event stream, errors.

Coding agents (Claude Code and others) talk to llama-server and vLLM through this endpoint. Every
request carries the headers an Anthropic client sends (anthropic-version, and x-api-key when a
key is configured). Expected replies are derived from the server's own temperature-0 reply to the
same request without the parameter under test; no check assumes a model that follows instructions.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks._base import fail
from pytest_inferaccept.checks.generation import stop_candidates
from pytest_inferaccept.checks.messages import (
    COUNT_TOKENS_PATH,
    MESSAGES_PATH,
    Reply,
    check_count_tokens,
    check_error_envelope,
    check_event_stream,
    check_history_counted,
    check_max_tokens,
    check_message,
    check_same_reply,
    check_stop_sequence,
    check_system_counted,
    check_thinking,
    check_tool_use,
    headers,
    open_event_stream,
    post_message,
    refusal_problems,
    reply_of,
)
from pytest_inferaccept.checks.pace import Pace
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.suites._pace import pace_of, unfinished_is_invalid

pytestmark = pytest.mark.capability("messages")

PROMPT = "Write two sentences about rivers and the towns along them."
LIMIT = 4
"""max_tokens of the request that must be cut."""
SYSTEM = (
    "You are a careful assistant for a team of software engineers who maintain a large codebase. "
    "Answer briefly and precisely, prefer plain words to jargon, say when you are unsure, never "
    "invent file names, functions or command-line options, and when a question is ambiguous ask "
    "one short question back before answering. Keep every answer under one hundred words unless "
    "the engineer asks for more detail, and format code as fenced blocks with the language named."
)
HISTORY = [
    {"role": "user", "content": "I am planning a walk along the Rhine from Basel to Strasbourg next spring."},
    {"role": "assistant", "content": "That is a fine route: flat paths, small towns on both banks, and "
                                     "frequent trains if you want to shorten a day."},
]
"""The earlier turns of the multi-turn check: a user turn and the assistant's answer to it."""
FOLLOW_UP = "Which town should I stop in on the first night?"
TOOL_NAME = "get_weather"
TOOL: dict[str, Any] = {"name": TOOL_NAME, "description": "Get the current weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
TOOL_PROMPT = "What is the weather in Paris right now? Use the get_weather tool."
INVALID: dict[str, tuple[dict[str, Any], str]] = {
    "messages_missing": ({"max_tokens": 16}, "a body without messages"),
    "max_tokens_missing": ({"messages": [{"role": "user", "content": PROMPT}]},
                           "a body without max_tokens (required by the Messages API)"),
    "temperature_above_one": ({"max_tokens": 16, "temperature": 3,
                               "messages": [{"role": "user", "content": PROMPT}]},
                              "temperature 3 (the Messages API allows 0 to 1)"),
}
"""Requests the Messages API refuses with 400 invalid_request_error: (body without the model, what it is)."""
THINKING = {"type": "enabled", "budget_tokens": 1024}
"""Extended thinking as a client asks for it (1024 is the API's least budget, below max_tokens)."""
THINK_PROMPT = "Three spiders and two ants walk across a garden. How many legs are there in all?"


@pytest.fixture
def sent(inferaccept_settings: Settings) -> dict[str, str]:
    """The headers an Anthropic client adds to every request."""
    return headers(inferaccept_settings.api_key)


@pytest.fixture
def pace(inferaccept_settings: Settings) -> Pace:
    """The limits a streamed reply is read under, sized from its own pace (checks/pace.py)."""
    return pace_of(inferaccept_settings)


def _body(model: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": 48, "temperature": 0,
                            "messages": [{"role": "user", "content": PROMPT}]}
    body.update(extra)
    return body


def _reply(client: httpx.Client, body: dict[str, Any], sent: dict[str, str], stream: bool,
           pace: Pace | None = None) -> Reply:
    if not stream:
        return reply_of(post_message(client, body, sent))
    reply, _ = check_event_stream(*open_event_stream(client, body, sent, pace))
    return reply


def test_message_has_the_anthropic_shape(http_client: httpx.Client, model: str, sent: dict[str, str],
                                         inferaccept_evidence: Evidence) -> None:
    # The content as blocks and the system prompt as a string: both forms a client may send.
    body = _body(model, system="Answer plainly.",
                 messages=[{"role": "user", "content": [{"type": "text", "text": PROMPT}]}])
    message = post_message(http_client, body, sent)
    for warning in check_message(message):
        inferaccept_evidence.warn(warning)
    inferaccept_evidence.record("stop_reason", message.get("stop_reason"))
    inferaccept_evidence.record("usage", message.get("usage"))


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_max_tokens_cuts_the_reply_with_stop_reason_max_tokens(http_client: httpx.Client, model: str,
                                                               sent: dict[str, str], stream: bool,
                                                               inferaccept_evidence: Evidence,
                                                               pace: Pace) -> None:
    reference = reply_of(post_message(http_client, _body(model), sent))
    natural = reference.output_tokens
    if not isinstance(natural, int) or natural <= LIMIT:
        pytest.skip(f"the model's own reply used {natural!r} output tokens, not more than max_tokens="
                    f"{LIMIT}: nothing to cut ({reference.describe()})")
    with unfinished_is_invalid(inferaccept_evidence):
        cut = _reply(http_client, _body(model, max_tokens=LIMIT), sent, stream, pace)
    check_max_tokens(cut, LIMIT, natural)


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_stop_sequence_ends_the_reply_with_stop_reason_stop_sequence(http_client: httpx.Client, model: str,
                                                                     sent: dict[str, str], stream: bool,
                                                                     inferaccept_evidence: Evidence,
                                                                     pace: Pace) -> None:
    reference = reply_of(post_message(http_client, _body(model), sent))
    candidates = stop_candidates(reference.text)
    if not candidates:
        pytest.skip(f"the model's own reply has no word after its first to stop at: {reference.text!r}")
    stop = candidates[0]
    inferaccept_evidence.record("stop_sequence", stop)
    with unfinished_is_invalid(inferaccept_evidence):
        reply = _reply(http_client, _body(model, stop_sequences=[stop]), sent, stream, pace)
    check_stop_sequence(reply, reference.text, stop)


def test_system_prompt_reaches_the_model(http_client: httpx.Client, model: str, sent: dict[str, str],
                                         inferaccept_evidence: Evidence) -> None:
    without = reply_of(post_message(http_client, _body(model, max_tokens=8), sent))
    with_system = reply_of(post_message(http_client, _body(model, max_tokens=8, system=SYSTEM), sent))
    # input_tokens leaves out the prompt tokens read from or written to the cache: a warm server
    # reports input_tokens 1 for the whole prompt, so the cached counts are added before comparing.
    inferaccept_evidence.record("usage", {"without_system": without.usage, "with_system": with_system.usage})
    check_system_counted(without.usage, with_system.usage, len(SYSTEM.split()))


def test_stream_events_come_in_the_documented_order(http_client: httpx.Client, model: str,
                                                   sent: dict[str, str], inferaccept_evidence: Evidence,
                                                   pace: Pace) -> None:
    with unfinished_is_invalid(inferaccept_evidence):
        content_type, stream = open_event_stream(http_client, _body(model), sent, pace)
    inferaccept_evidence.record("events", [e.fields.get("event") for e in stream.events][:40])
    _, warnings = check_event_stream(content_type, stream)
    for warning in warnings:
        inferaccept_evidence.warn(warning)


def test_streamed_reply_adds_up_to_the_non_streamed_one(http_client: httpx.Client, model: str,
                                                        sent: dict[str, str], inferaccept_evidence: Evidence,
                                                        pace: Pace) -> None:
    plain = reply_of(post_message(http_client, _body(model), sent))
    with unfinished_is_invalid(inferaccept_evidence):
        streamed = _reply(http_client, _body(model), sent, stream=True, pace=pace)
    check_same_reply(streamed, plain)


def test_errors_come_in_the_anthropic_error_envelope(http_client: httpx.Client, model: str,
                                                     sent: dict[str, str],
                                                     inferaccept_evidence: Evidence) -> None:
    # messages must be a list: every server refuses this one, whatever else it tolerates
    resp = http_client.post(MESSAGES_PATH, json={"model": model, "max_tokens": 16, "messages": "hello"},
                            headers=sent)
    for warning in check_error_envelope(resp.status_code, resp.text, "messages given as a string"):
        inferaccept_evidence.warn(warning)


def test_multi_turn_conversation_is_answered_with_its_earlier_turns_counted(
        http_client: httpx.Client, model: str, sent: dict[str, str], inferaccept_evidence: Evidence) -> None:
    turns = [*HISTORY, {"role": "user", "content": FOLLOW_UP}]
    last = [{"role": "user", "content": FOLLOW_UP}]
    alone = reply_of(post_message(http_client, _body(model, max_tokens=8, messages=last), sent))
    message = post_message(http_client, _body(model, max_tokens=8, messages=turns), sent)
    for warning in check_message(message):
        inferaccept_evidence.warn(warning)
    conversation = reply_of(message)
    inferaccept_evidence.record("usage", {"last_turn_alone": alone.usage, "conversation": conversation.usage})
    words = sum(len(str(t["content"]).split()) for t in HISTORY)
    check_history_counted(alone.usage, conversation.usage, words)


def test_count_tokens_matches_the_message_input_size(http_client: httpx.Client, model: str,
                                                     sent: dict[str, str],
                                                     inferaccept_evidence: Evidence) -> None:
    request = {"model": model, "system": SYSTEM, "messages": [{"role": "user", "content": PROMPT}]}
    counted = http_client.post(COUNT_TOKENS_PATH, json=request, headers=sent)
    if counted.status_code in (404, 405, 501):
        pytest.skip(f"{COUNT_TOKENS_PATH} is not served (HTTP {counted.status_code}): token counting cannot "
                    "be judged")
    message = reply_of(post_message(http_client, {**request, "max_tokens": 1, "temperature": 0}, sent))
    inferaccept_evidence.record("count_tokens", {"status": counted.status_code,
                                                 "body": excerpt(counted.text, 200),
                                                 "message_usage": message.usage})
    check_count_tokens(counted.status_code, counted.text, message.usage)


def test_tool_result_turn_is_accepted_and_answered(http_client: httpx.Client, model: str,
                                                   sent: dict[str, str],
                                                   inferaccept_evidence: Evidence) -> None:
    # An agent's second request: its tool_use turn and the user's tool_result for it, as upstream's
    # own tests send them; a server that keeps the blocks as unknown content refuses or fails here.
    turns = [{"role": "user", "content": TOOL_PROMPT},
             {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": TOOL_NAME,
                                                "input": {"city": "Paris"}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01",
                                           "content": "Sunny, 25 degrees Celsius, light wind."}]}]
    message = post_message(http_client, _body(model, max_tokens=32, tools=[TOOL], messages=turns), sent)
    inferaccept_evidence.record("reply", {"stop_reason": message.get("stop_reason"),
                                          "usage": message.get("usage"),
                                          "content": excerpt(str(message.get("content")), 300)})
    for warning in check_message(message):
        inferaccept_evidence.warn(warning)


def test_forced_tool_call_comes_as_a_tool_use_block(http_client: httpx.Client, model: str,
                                                    sent: dict[str, str],
                                                    inferaccept_evidence: Evidence) -> None:
    choice = {"type": "tool", "name": TOOL_NAME}
    body = _body(model, max_tokens=64, tools=[TOOL], tool_choice=choice,
                 messages=[{"role": "user", "content": TOOL_PROMPT}])
    message = post_message(http_client, body, sent)
    kinds = [b.get("type") for b in message.get("content") or [] if isinstance(b, dict)]
    inferaccept_evidence.record("reply", {"blocks": kinds, "stop_reason": message.get("stop_reason"),
                                          "usage": message.get("usage")})
    if "tool_use" not in kinds:
        # Whether a server honours a forced choice is judged on the Chat endpoint (test_tools); here
        # only the shape of a call is, and a reply without one has none to judge.
        pytest.skip(f"tool_choice {choice} was sent, but the reply holds blocks {kinds} and no tool_use "
                    f"(stop_reason {message.get('stop_reason')!r}, {message.get('usage')}): the shape of a "
                    f"tool_use block cannot be judged. Text: {excerpt(reply_of(message).text, 200)!r}")
    block = check_tool_use(message, TOOL_NAME)
    inferaccept_evidence.record("tool_use", block)


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_request_is_refused_in_the_anthropic_error_envelope(http_client: httpx.Client, model: str,
                                                                    sent: dict[str, str], case: str,
                                                                    inferaccept_evidence: Evidence) -> None:
    # The project's status policy (docs/robustness.md): a 2xx to invalid input is a failure, as it is
    # on the OpenAI endpoints; a client developed against this server breaks against the real API.
    extra, what = INVALID[case]
    resp = http_client.post(MESSAGES_PATH, json={"model": model, **extra}, headers=sent)
    inferaccept_evidence.record("answer", {"status": resp.status_code, "body": excerpt(resp.text, 300)})
    problems = refusal_problems(resp.status_code, resp.text)
    if problems == [f"HTTP {resp.status_code}, expected 400"]:
        inferaccept_evidence.warn(f"{what} answered {resp.status_code}; the Messages API answers 400")
        return
    if problems:
        fail(f"{what}: " + "; and ".join(problems), f"HTTP {resp.status_code}: {excerpt(resp.text, 400)}")


@pytest.mark.capability("reasoning")  # a server that does not reason may refuse `thinking` (vLLM: 400)
@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_thinking_comes_as_a_signed_block_before_the_text(http_client: httpx.Client, model: str,
                                                          sent: dict[str, str], stream: bool,
                                                          inferaccept_evidence: Evidence, pace: Pace) -> None:
    body = _body(model, max_tokens=1536, thinking=THINKING,
                 messages=[{"role": "user", "content": THINK_PROMPT}])
    with unfinished_is_invalid(inferaccept_evidence):
        reply = _reply(http_client, body, sent, stream, pace)
    kinds = [b.get("type") for b in reply.blocks]
    inferaccept_evidence.record("blocks", kinds)
    if "thinking" not in kinds:
        pytest.skip(f"the reply to a request with thinking {THINKING} holds blocks {kinds} and no thinking "
                    "block: the server does not think (or returns no reasoning), nothing to judge")
    block = check_thinking(reply.blocks, stream)
    inferaccept_evidence.record("thinking", {"chars": len(block["thinking"]),
                                             "signature": block["signature"]})
    if not block["signature"]:
        inferaccept_evidence.note("the thinking block's signature is empty: a local server cannot sign, and "
                                  "a client sends the empty string back")
