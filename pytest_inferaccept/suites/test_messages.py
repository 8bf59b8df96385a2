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

from pytest_inferaccept.checks.generation import stop_candidates
from pytest_inferaccept.checks.messages import (
    MESSAGES_PATH,
    Reply,
    check_error_envelope,
    check_event_stream,
    check_max_tokens,
    check_message,
    check_same_reply,
    check_stop_sequence,
    check_system_counted,
    headers,
    open_event_stream,
    post_message,
    reply_of,
)
from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.settings import Settings

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


@pytest.fixture
def sent(inferaccept_settings: Settings) -> dict[str, str]:
    """The headers an Anthropic client adds to every request."""
    return headers(inferaccept_settings.api_key)


def _body(model: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": 48, "temperature": 0,
                            "messages": [{"role": "user", "content": PROMPT}]}
    body.update(extra)
    return body


def _reply(client: httpx.Client, body: dict[str, Any], sent: dict[str, str], stream: bool) -> Reply:
    if not stream:
        return reply_of(post_message(client, body, sent))
    reply, _ = check_event_stream(*open_event_stream(client, body, sent))
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
                                                               sent: dict[str, str], stream: bool) -> None:
    reference = reply_of(post_message(http_client, _body(model), sent))
    natural = reference.output_tokens
    if not isinstance(natural, int) or natural <= LIMIT:
        pytest.skip(f"the model's own reply used {natural!r} output tokens, not more than max_tokens="
                    f"{LIMIT}: nothing to cut ({reference.describe()})")
    cut = _reply(http_client, _body(model, max_tokens=LIMIT), sent, stream)
    check_max_tokens(cut, LIMIT, natural)


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_stop_sequence_ends_the_reply_with_stop_reason_stop_sequence(http_client: httpx.Client, model: str,
                                                                     sent: dict[str, str], stream: bool,
                                                                     inferaccept_evidence: Evidence) -> None:
    reference = reply_of(post_message(http_client, _body(model), sent))
    candidates = stop_candidates(reference.text)
    if not candidates:
        pytest.skip(f"the model's own reply has no word after its first to stop at: {reference.text!r}")
    stop = candidates[0]
    inferaccept_evidence.record("stop_sequence", stop)
    reply = _reply(http_client, _body(model, stop_sequences=[stop]), sent, stream)
    check_stop_sequence(reply, reference.text, stop)


def test_system_prompt_reaches_the_model(http_client: httpx.Client, model: str, sent: dict[str, str],
                                         inferaccept_evidence: Evidence) -> None:
    without = reply_of(post_message(http_client, _body(model, max_tokens=8), sent))
    with_system = reply_of(post_message(http_client, _body(model, max_tokens=8, system=SYSTEM), sent))
    inferaccept_evidence.record("input_tokens", {"without_system": without.input_tokens,
                                                 "with_system": with_system.input_tokens})
    check_system_counted(without.input_tokens, with_system.input_tokens, len(SYSTEM.split()))


def test_stream_events_come_in_the_documented_order(http_client: httpx.Client, model: str,
                                                   sent: dict[str, str],
                                                   inferaccept_evidence: Evidence) -> None:
    content_type, stream = open_event_stream(http_client, _body(model), sent)
    inferaccept_evidence.record("events", [e.fields.get("event") for e in stream.events][:40])
    _, warnings = check_event_stream(content_type, stream)
    for warning in warnings:
        inferaccept_evidence.warn(warning)


def test_streamed_reply_adds_up_to_the_non_streamed_one(http_client: httpx.Client, model: str,
                                                        sent: dict[str, str]) -> None:
    plain = reply_of(post_message(http_client, _body(model), sent))
    streamed = _reply(http_client, _body(model), sent, stream=True)
    check_same_reply(streamed, plain)


def test_errors_come_in_the_anthropic_error_envelope(http_client: httpx.Client, model: str,
                                                     sent: dict[str, str],
                                                     inferaccept_evidence: Evidence) -> None:
    # messages must be a list: every server refuses this one, whatever else it tolerates
    resp = http_client.post(MESSAGES_PATH, json={"model": model, "max_tokens": 16, "messages": "hello"},
                            headers=sent)
    for warning in check_error_envelope(resp.status_code, resp.text, "messages given as a string"):
        inferaccept_evidence.warn(warning)
