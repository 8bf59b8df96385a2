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

from pytest_inferaccept.checks.generation import chat
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

PROMPT = "Three spiders and two ants walk across a garden. How many legs are there in all?"
STOP_PROMPT = "Describe a walk along a river at dawn, in three sentences."
MAX_TOKENS = 256
SPENT_MAX_TOKENS = 16
"""A limit every reasoning model's thinking runs past (and the fake's, with reasoning_tokens above it)."""
MODES = [
    pytest.param(False, id="non-stream"),
    pytest.param(True, id="stream", marks=pytest.mark.capability("stream")),
]


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
                                                          inferaccept_evidence: Evidence) -> None:
    result = chat(http_client, _body(model, PROMPT), stream)
    client_reads = inferaccept_settings.reasoning_field
    names = check_reasoning_field(result, client_reads)
    inferaccept_evidence.record("reasoning_field", {"sent": names, "client_reads": client_reads,
                                                    "reasoning_tokens": reasoning_tokens(result.usage)})
    inferaccept_evidence.note(f"the {_mode(stream)} answer carries its reasoning as {' and '.join(names)} "
                              f"(the client reads {client_reads}, --reasoning-field)")


@pytest.mark.capability("chat")
@pytest.mark.parametrize("stream", MODES)
def test_no_reasoning_or_markers_leak_into_the_answer(http_client: httpx.Client, model: str, stream: bool,
                                                      inferaccept_evidence: Evidence) -> None:
    # The prompt asks for no tags or markers: any in the answer are the model's own syntax left in.
    result = chat(http_client, _body(model, PROMPT), stream)
    inferaccept_evidence.record("answer", {"content": excerpt(result.text, 300),
                                           "reasoning": excerpt(reasoning_text(result), 300)})
    check_no_leak(result, "to a plain question")


@pytest.mark.capability("reasoning")
@pytest.mark.parametrize("stream", MODES)
def test_stop_applies_to_the_answer_not_the_reasoning(http_client: httpx.Client, model: str, stream: bool,
                                                      inferaccept_evidence: Evidence) -> None:
    body = _body(model, STOP_PROMPT)
    reference = chat(http_client, body, stream)
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
    result = chat(http_client, {**body, "stop": stops}, stream)
    check_stop_spares_reasoning(result, reference, in_reasoning[0], in_content[0] if in_content else None)


@pytest.mark.capability("reasoning")
@pytest.mark.parametrize("stream", MODES)
def test_reasoning_that_uses_up_max_tokens_reports_length(http_client: httpx.Client, model: str,
                                                          stream: bool,
                                                          inferaccept_evidence: Evidence) -> None:
    result = chat(http_client, _body(model, PROMPT, max_tokens=SPENT_MAX_TOKENS), stream)
    inferaccept_evidence.record("spent", {"finish_reason": result.finish_reason, "content": result.text,
                                          "reasoning_chars": len(reasoning_text(result)),
                                          "reasoning_tokens": reasoning_tokens(result.usage)})
    if result.text.strip() or result.tool_calls:
        pytest.skip(f"the reasoning left room for an answer within max_tokens={SPENT_MAX_TOKENS} "
                    f"({len(result.text)} chars of content): no empty answer to judge")
    check_length_for_spent_budget(result, SPENT_MAX_TOKENS)
