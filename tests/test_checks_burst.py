"""The burst check on hand-made streams: what counts as a complete answer, and how failures read."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks import CheckFailed
from pytest_inferaccept.checks.burst import BurstAnswer, check_burst, judge_stream
from pytest_inferaccept.checks.sse import read_sse

SSE = "text/event-stream"
ROLE = {"role": "assistant", "content": ""}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _judge(*deltas: dict[str, Any], finish: str | None = "stop", done: bool = True) -> BurstAnswer:
    chunks = [_chunk(d) for d in deltas]
    if finish is not None:
        chunks.append(_chunk({}, finish))
    wire = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
    return judge_stream(SSE, read_sse([wire + (b"data: [DONE]\n\n" if done else b"")]))


@pytest.mark.parametrize("output", [
    {"content": "Hello"},
    {"reasoning_content": "thinking"},
    {"reasoning": "thinking"},
    {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                     "function": {"name": "f", "arguments": "{}"}}]},
], ids=["content", "reasoning_content", "reasoning", "tool_call"])
def test_an_answer_with_any_generated_output_and_a_finish_is_complete(output: dict[str, Any]) -> None:
    answer = _judge(ROLE, output)
    assert answer.problem is None
    check_burst([answer] * 6)


def test_a_role_chunk_and_done_is_an_empty_answer_and_the_failure_counts_them() -> None:
    good, empty = _judge(ROLE, {"content": "Hi"}), _judge(ROLE, finish=None)
    assert empty.kind == "empty"
    with pytest.raises(CheckFailed) as info:
        check_burst([good] + [empty] * 5)
    assert info.value.title == ("under 6 concurrent streams, 5 of 6 answers were empty (role chunk and "
                                "[DONE]; no content, no finish_reason)")
    assert "answer 2: role chunk and [DONE]" in info.value.detail
    assert '"role": "assistant"' in info.value.detail  # one excerpt of what was sent


def test_a_finish_without_output_is_incomplete_and_a_broken_stream_is_invalid() -> None:
    incomplete = _judge(ROLE, finish="stop")
    no_done = _judge(ROLE, {"content": "Hi"}, done=False)
    assert (incomplete.kind, no_done.kind) == ("incomplete", "invalid")
    assert "without any generated output" in str(incomplete.problem)
    assert "[DONE]" in str(no_done.problem)  # the lone-stream validator's own finding
    with pytest.raises(CheckFailed, match=r"2 of 3 answers were incomplete or invalid"):
        check_burst([_judge(ROLE, {"content": "Hi"}), incomplete, no_done])


def test_an_unanswered_request_is_counted_and_its_transport_error_is_kept_as_the_cause() -> None:
    error = httpx.ReadTimeout("timed out")
    lost = BurstAnswer(problem="no answer: ReadTimeout: timed out", kind="failed", error=error)
    with pytest.raises(CheckFailed, match=r"1 of 2 answers were unanswered") as info:
        check_burst([_judge(ROLE, {"content": "Hi"}), lost])
    assert info.value.__cause__ is error
