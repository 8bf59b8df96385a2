"""Streamed chat completions, read from the raw bytes: SSE framing, chunks, usage, and the SDK."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from pytest_inferaccept.checks import fail
from pytest_inferaccept.checks.burst import check_burst, stream_burst
from pytest_inferaccept.checks.chat import ok_json
from pytest_inferaccept.checks.pace import Pace, paced
from pytest_inferaccept.checks.sse import assemble_content
from pytest_inferaccept.checks.stream import (
    check_chat_chunks,
    check_framing,
    check_same_text,
    check_stream_usage,
    open_stream,
    require_no_error_chunk,
    stream_seconds,
)
from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.suites._pace import pace_of, unfinished_is_invalid

if TYPE_CHECKING:
    import openai

pytestmark = pytest.mark.capability("stream")

CHAT = "/v1/chat/completions"
PROMPT = "Write one sentence about rivers."
BURST = 6
"""Streamed requests sent at once by the concurrency check: a few users arriving together."""


@pytest.fixture
def pace(inferaccept_settings: Settings) -> Pace:
    """The limits a stream is read under, sized from its own pace (checks/pace.py)."""
    return pace_of(inferaccept_settings)


def _body(model: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": 12, "temperature": 0,
                            "messages": [{"role": "user", "content": PROMPT}]}
    body.update(extra)
    return body


@pytest.mark.inferaccept_core
def test_stream_is_well_formed_sse_ending_with_done(http_client: httpx.Client, model: str,
                                                    inferaccept_evidence: Evidence, pace: Pace) -> None:
    with unfinished_is_invalid(inferaccept_evidence):
        ctype, stream = open_stream(http_client, CHAT, _body(model, stream=True), pace)
    inferaccept_evidence.record("events", len(stream.events))
    check_framing(ctype, stream)


def test_stream_chunks_share_one_id_with_one_role_and_one_finish(http_client: httpx.Client, model: str,
                                                                  inferaccept_evidence: Evidence,
                                                                  pace: Pace) -> None:
    with unfinished_is_invalid(inferaccept_evidence):
        _, stream = open_stream(http_client, CHAT, _body(model, stream=True), pace)
    for warning in check_chat_chunks(stream.chunks(), seconds=stream_seconds(stream)):
        inferaccept_evidence.warn(warning)


def test_streamed_text_equals_the_non_streamed_text(http_client: httpx.Client, model: str,
                                                    inferaccept_evidence: Evidence, pace: Pace) -> None:
    plain = ok_json(http_client.post(CHAT, json=_body(model)), "chat completion")
    text = plain["choices"][0]["message"].get("content") or ""
    with unfinished_is_invalid(inferaccept_evidence):
        _, stream = open_stream(http_client, CHAT, _body(model, stream=True), pace)
    chunks = stream.chunks()
    require_no_error_chunk(chunks)
    inferaccept_evidence.record("text", text)
    check_same_text(assemble_content(chunks).get(0, ""), text, "chat")


@pytest.mark.capability("stream_usage")
def test_usage_arrives_once_at_the_end_when_asked(http_client: httpx.Client, model: str,
                                                  inferaccept_evidence: Evidence, pace: Pace) -> None:
    with unfinished_is_invalid(inferaccept_evidence):
        _, stream = open_stream(http_client, CHAT, _body(model, stream=True,
                                                         stream_options={"include_usage": True}), pace)
    usage = check_stream_usage(stream.chunks(), asked=True, max_tokens=12)
    inferaccept_evidence.record("usage", dict(usage) if usage else None)


def test_no_usage_is_streamed_unless_asked(http_client: httpx.Client, model: str,
                                           inferaccept_evidence: Evidence, pace: Pace) -> None:
    # Twice: without stream_options, and with an empty one (vLLM #7262 sent usage for `{}`).
    extras: list[dict[str, Any]] = [{}, {"stream_options": {}}]
    for extra in extras:
        with unfinished_is_invalid(inferaccept_evidence):
            _, stream = open_stream(http_client, CHAT, _body(model, stream=True, **extra), pace)
        check_stream_usage(stream.chunks(), asked=False)


@pytest.mark.capability("n")
def test_n_choices_stream_with_indices_from_zero(http_client: httpx.Client, model: str,
                                                 inferaccept_evidence: Evidence, pace: Pace) -> None:
    with unfinished_is_invalid(inferaccept_evidence):
        _, stream = open_stream(http_client, CHAT, _body(model, stream=True, n=2, temperature=0.8,
                                                         max_tokens=6), pace)
    for warning in check_chat_chunks(stream.chunks(), n=2, seconds=stream_seconds(stream)):
        inferaccept_evidence.warn(warning)


def test_concurrent_streams_each_get_a_complete_answer(http_client: httpx.Client, model: str,
                                                       inferaccept_evidence: Evidence) -> None:
    # Some servers answer one user and break for two at once (200, role chunk, [DONE], nothing
    # else): checked here so that a run without a load SLO catches it too.
    answers = stream_burst(http_client, CHAT, [_body(model, stream=True, max_tokens=8)] * BURST)
    complete = sum(a.problem is None for a in answers)
    inferaccept_evidence.record("burst", {"streams": BURST, "complete": complete})
    for warning in dict.fromkeys(w for a in answers for w in a.warnings):
        inferaccept_evidence.warn(warning)
    check_burst(answers)


def test_openai_sdk_streams_the_same_text(openai_client: openai.OpenAI, http_client: httpx.Client,
                                          model: str, inferaccept_evidence: Evidence, pace: Pace) -> None:
    import openai

    plain = ok_json(http_client.post(CHAT, json=_body(model)), "chat completion")
    text = plain["choices"][0]["message"].get("content") or ""
    pieces: list[str] = []
    sent = time.monotonic()
    try:
        # The SDK call's own timeout lies beyond the paced limit, so a slow but steady stream is judged
        # by its pace (not judged when it cannot finish in time), never cut as "no end in N s".
        stream = openai_client.chat.completions.create(
            model=model, max_tokens=12, temperature=0, stream=True,
            messages=[{"role": "user", "content": PROMPT}], timeout=pace.byte_wait_s)
        with unfinished_is_invalid(inferaccept_evidence):
            for chunk in paced(stream, max_tokens=12, pace=pace, started=sent):
                for choice in chunk.choices:
                    if choice.index == 0 and choice.delta.content:
                        pieces.append(choice.delta.content)
    except openai.APIError as exc:
        fail(f"the OpenAI SDK raised while iterating the stream: {type(exc).__name__}: {exc}",
             f"text so far: {''.join(pieces)!r}")
    check_same_text("".join(pieces), text, "chat via the OpenAI SDK")
