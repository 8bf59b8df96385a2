"""Reasoning models: the field the reasoning travels in (and whether the team's client reads it),
no reasoning text or model syntax in the answer, `stop` applied to the answer and not inside the
reasoning, and `finish_reason: length` when the reasoning used up `max_tokens`.

The checks that need reasoning carry the capability `reasoning` and are skipped on a server whose
plain answers carry none. The leak check runs on every server: a server whose reasoning parser is
off sends no reasoning field at all (the probe calls it unsupported) and leaves the think tags in
the content, which is exactly what that check is for.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks._base import require
from pytest_inferaccept.checks.generation import chat
from pytest_inferaccept.checks.pace import Pace
from pytest_inferaccept.checks.reasoning import (
    check_length_for_spent_budget,
    check_no_leak,
    check_reasoning_field,
    check_stop_spares_reasoning,
    content_stop_candidates,
    reasoning_stop_candidates,
    reasoning_text,
    reasoning_tokens,
)
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.suites._pace import pace_of, unfinished_is_invalid

PROMPT = "Three spiders and two ants walk across a garden. How many legs are there in all?"
STOP_PROMPT = "Describe a walk along a river at dawn, in three sentences."
MAX_TOKENS = 256
SPENT_MAX_TOKENS = 16
"""A limit every reasoning model's thinking runs past (and the fake's, with reasoning_tokens above it)."""
OFF_SWITCHES: dict[str, dict[str, Any]] = {
    "enable_thinking_false": {"chat_template_kwargs": {"enable_thinking": False}},
    "reasoning_effort_none": {"reasoning_effort": "none"},
}
"""The two ways a client asks a reasoning server for an answer without thinking: the chat template's
switch (Qwen3, DeepSeek and llama-server's templates read it) and OpenAI's effort level."""
MODES = [
    pytest.param(False, id="non-stream"),
    pytest.param(True, id="stream", marks=pytest.mark.capability("stream")),
]


@pytest.fixture
def pace(inferaccept_settings: Settings) -> Pace:
    """The limits a streamed answer is read under, sized from its own pace (checks/pace.py)."""
    return pace_of(inferaccept_settings)


def _body(model: str, prompt: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "temperature": 0, "max_tokens": MAX_TOKENS,
                            "messages": [{"role": "user", "content": prompt}]}
    body.update(extra)
    return body


def _mode(stream: bool) -> str:
    return "streamed" if stream else "non-stream"


@pytest.mark.capability("reasoning")
@pytest.mark.parametrize("stream", MODES)
def test_reasoning_arrives_under_a_field_the_client_reads(http_client: httpx.Client, model: str,
                                                          stream: bool, inferaccept_settings: Settings,
                                                          inferaccept_evidence: Evidence, pace: Pace) -> None:
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, _body(model, PROMPT), stream, pace)
    client_reads = inferaccept_settings.reasoning_field
    names = check_reasoning_field(result, client_reads)
    inferaccept_evidence.record("reasoning_field", {"sent": names, "client_reads": client_reads,
                                                    "reasoning_tokens": reasoning_tokens(result.usage)})
    inferaccept_evidence.note(f"the {_mode(stream)} answer carries its reasoning as {' and '.join(names)} "
                              f"(the client reads {client_reads}, --reasoning-field)")


@pytest.mark.capability("chat")
@pytest.mark.parametrize("stream", MODES)
def test_no_reasoning_or_markers_leak_into_the_answer(http_client: httpx.Client, model: str, stream: bool,
                                                      inferaccept_evidence: Evidence, pace: Pace) -> None:
    # The prompt asks for no tags or markers: any in the answer are the model's own syntax left in.
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, _body(model, PROMPT), stream, pace)
    inferaccept_evidence.record("answer", {"content": excerpt(result.text, 300),
                                           "reasoning": excerpt(reasoning_text(result), 300)})
    check_no_leak(result, "to a plain question")


@pytest.mark.capability("reasoning")
@pytest.mark.parametrize("stream", MODES)
def test_stop_applies_to_the_answer_not_the_reasoning(http_client: httpx.Client, model: str, stream: bool,
                                                      inferaccept_evidence: Evidence, pace: Pace) -> None:
    body = _body(model, STOP_PROMPT)
    with unfinished_is_invalid(inferaccept_evidence):
        reference = chat(http_client, body, stream, pace)
    thought = reasoning_text(reference)
    if not thought:
        pytest.skip(f"the {_mode(stream)} reference answer carries no reasoning text: no stop string can be "
                    "chosen inside it (test_reasoning_arrives_under_a_field_the_client_reads judges that)")
    in_reasoning = reasoning_stop_candidates(thought, reference.text)
    if not in_reasoning:
        pytest.skip(f"every word of the reasoning ({len(thought)} chars) also occurs in the answer: no stop "
                    "string can match inside the reasoning only")
    in_content = content_stop_candidates(reference.text, thought)
    stops = [in_reasoning[0], *in_content[:1]]
    inferaccept_evidence.record("stop", {"stops": stops, "reference_reasoning_chars": len(thought),
                                         "reference_content_chars": len(reference.text),
                                         "reference_finish_reason": reference.finish_reason})
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, {**body, "stop": stops}, stream, pace)
    check_stop_spares_reasoning(result, reference, in_reasoning[0], in_content[0] if in_content else None)


@pytest.mark.capability("reasoning")
@pytest.mark.parametrize("stream", MODES)
def test_reasoning_that_uses_up_max_tokens_reports_length(http_client: httpx.Client, model: str,
                                                          stream: bool, inferaccept_evidence: Evidence,
                                                          pace: Pace) -> None:
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, _body(model, PROMPT, max_tokens=SPENT_MAX_TOKENS), stream, pace)
    inferaccept_evidence.record("spent", {"finish_reason": result.finish_reason, "content": result.text,
                                          "reasoning_chars": len(reasoning_text(result)),
                                          "reasoning_tokens": reasoning_tokens(result.usage)})
    if result.text.strip() or result.tool_calls:
        pytest.skip(f"the reasoning left room for an answer within max_tokens={SPENT_MAX_TOKENS} "
                    f"({len(result.text)} chars of content): no empty answer to judge")
    check_length_for_spent_budget(result, SPENT_MAX_TOKENS)


@pytest.mark.capability("reasoning")
@pytest.mark.parametrize("switch", list(OFF_SWITCHES))
def test_reasoning_off_switch_gives_an_answer_without_reasoning(http_client: httpx.Client, model: str,
                                                                switch: str, inferaccept_evidence: Evidence,
                                                                pace: Pace) -> None:
    # The capability probe saw reasoning in a plain answer, so the same server with the switch off
    # must send none: an agent that turns thinking off for speed otherwise pays for it anyway.
    extra = OFF_SWITCHES[switch]
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, _body(model, PROMPT, **extra), False, pace)
    thought = reasoning_text(result)
    inferaccept_evidence.record("switched_off", {"sent": extra, "reasoning_chars": len(thought),
                                                 "reasoning_tokens": reasoning_tokens(result.usage),
                                                 "content": excerpt(result.text, 200)})
    require(not thought, f"{switch}: the request sent {extra} and the answer still carries {len(thought)} "
            f"characters of reasoning ({reasoning_tokens(result.usage)!r} reasoning tokens): the switch is "
            "ignored, and a client that turned thinking off for speed waits for it anyway",
            f"reasoning: {excerpt(thought, 300)!r}\ncontent: {excerpt(result.text, 300)!r}")
