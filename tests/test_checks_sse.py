"""The SSE reader on hand-made byte streams, and the stream checks on hand-made chunks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_inferaccept.checks import CheckFailed
from pytest_inferaccept.checks.sse import assemble_content, read_sse
from pytest_inferaccept.checks.stream import (
    assemble_text,
    check_chat_chunks,
    check_completion_chunks,
    check_framing,
    check_same_text,
    check_stream_usage,
)

SSE = "text/event-stream; charset=utf-8"


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, index: int = 0,
           **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                           "model": "m", "choices": [{"index": index, "delta": delta or {},
                                                      "finish_reason": finish}]}
    out.update(extra)
    return out


def _good(n: int = 1) -> list[dict[str, Any]]:
    chunks = [_chunk({"role": "assistant", "content": ""}, index=i) for i in range(n)]
    chunks += [_chunk({"content": w}, index=i) for w in ("Hello", " world") for i in range(n)]
    chunks += [_chunk(finish="stop", index=i) for i in range(n)]
    return chunks


def _wire(chunks: list[dict[str, Any]], done: bool = True) -> bytes:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


def _split(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 2, 7, 4096])
def test_reader_rebuilds_events_whatever_the_chunking(size: int) -> None:
    stream = read_sse(_split(_wire(_good()), size))
    assert not stream.problems
    assert stream.done
    assert assemble_content(stream.chunks()) == {0: "Hello world"}


def test_reader_accepts_crlf_and_a_cr_split_from_its_lf() -> None:
    stream = read_sse([b'data: {"a": 1}\r', b"\n\r\n", b"data: [DONE]\r\n\r\n"])
    assert not stream.problems
    assert [e.data for e in stream.events] == ['{"a": 1}', "[DONE]"]


def test_reader_skips_comments_and_joins_multi_line_data() -> None:
    stream = read_sse([b": keep-alive\n\ndata: {\"a\":\ndata:  2}\n\ndata: [DONE]\n\n"])
    assert not stream.problems
    assert stream.chunks() == [{"a": 2}]


def test_reader_reports_framing_problems() -> None:
    stream = read_sse([b"data: {}\n\ngarbage line\ndata: [DONE]\n\ndata: {}\n\ndata: {}"])
    joined = " | ".join(stream.problems)
    assert "line without a field name" in joined
    assert "after data: [DONE]" in joined
    assert "unterminated" in joined


def test_framing_needs_the_sse_content_type_and_the_done_terminator() -> None:
    check_framing(SSE, read_sse([_wire(_good())]))
    with pytest.raises(CheckFailed, match="content-type"):
        check_framing("application/json", read_sse([_wire(_good())]))
    with pytest.raises(CheckFailed, match=r"\[DONE\]"):
        check_framing(SSE, read_sse([_wire(_good(), done=False)]))


def test_consistent_chunks_pass_for_one_and_for_several_choices() -> None:
    check_chat_chunks(_good())
    check_chat_chunks(_good(2), n=2)


@pytest.mark.parametrize(("mangle", "message"), [
    (lambda c: c[2].update(id="other"), "different ids"),
    (lambda c: c[2].update(created=5), "created"),
    (lambda c: c[2].update(created="now"), "not all integers"),
    (lambda c: c[1].update(object="chat.completion"), "object"),
    (lambda c: c[0]["choices"][0]["delta"].pop("role"), "role 'assistant'"),
    (lambda c: c.append(_chunk(finish="stop")), "exactly one"),
    (lambda c: c[-1]["choices"][0].update(finish_reason="eos_token"), "eos_token"),
    (lambda c: c[-1]["choices"][0].update(finish_reason=None), "0 chunks carry a finish_reason"),
    (lambda c: c.insert(2, {"error": {"message": "boom"}}), "error chunk.*boom"),
])
def test_inconsistent_chunks_fail_with_the_reason(mangle: Any, message: str) -> None:
    chunks = _good()
    mangle(chunks)
    with pytest.raises(CheckFailed, match=message):
        check_chat_chunks(chunks)


def test_created_stamped_per_chunk_only_warns_while_it_keeps_pace_with_the_stream() -> None:
    chunks = _good()
    chunks[-1]["created"] += 1
    warnings = check_chat_chunks(chunks)
    assert len(warnings) == 1 and "stamped per chunk" in warnings[0]
    chunks[-1]["created"] += 9
    assert check_chat_chunks(chunks, seconds=8.5)
    with pytest.raises(CheckFailed, match="created values"):
        check_chat_chunks(chunks, seconds=1.0)


def test_n_streams_need_every_index_from_zero() -> None:
    chunks = _good(2)
    for chunk in chunks:
        chunk["choices"][0]["index"] = 0
    with pytest.raises(CheckFailed):
        check_chat_chunks(chunks, n=2)


def _usage_chunk(choices: list[Any] | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
            "choices": choices or [], "usage": {"prompt_tokens": 5, "completion_tokens": 2,
                                                "total_tokens": 7}}


def test_usage_chunk_must_be_single_final_and_choiceless() -> None:
    asked = [{**c, "usage": None} for c in _good()] + [_usage_chunk()]
    assert check_stream_usage(asked, asked=True, max_tokens=4) == asked[-1]["usage"]
    every = [{**c, "usage": _usage_chunk()["usage"]} for c in _good()] + [_usage_chunk()]
    with pytest.raises(CheckFailed, match="vLLM #7262"):
        check_stream_usage(every, asked=True)
    with_choices = [*_good(), _usage_chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}])]
    with pytest.raises(CheckFailed, match="LiteLLM #28735"):
        check_stream_usage(with_choices, asked=True)
    with pytest.raises(CheckFailed, match="no chunk carries usage"):
        check_stream_usage(_good(), asked=True)


def test_usage_must_be_absent_or_null_unless_asked() -> None:
    check_stream_usage([{**c, "usage": None} for c in _good()], asked=False)
    with pytest.raises(CheckFailed, match=r"llama.cpp #16048"):
        check_stream_usage([*_good(), _usage_chunk()], asked=False)


def test_streamed_usage_must_add_up() -> None:
    bad = _usage_chunk()
    bad["usage"]["total_tokens"] = 9
    with pytest.raises(CheckFailed, match="total_tokens"):
        check_stream_usage([*_good(), bad], asked=True)


def test_legacy_completion_chunks() -> None:
    def c(text: str, finish: str | None = None) -> dict[str, Any]:
        return {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]}

    good = [c("Hi"), c(" there"), c("", "length")]
    check_completion_chunks(good)
    assert assemble_text(good) == {0: "Hi there"}
    with pytest.raises(CheckFailed, match="text_completion"):
        check_completion_chunks([*good[:2], {**good[2], "object": "completion"}])


def test_text_comparison_names_the_first_difference() -> None:
    check_same_text("abc", "abc", "chat")
    with pytest.raises(CheckFailed, match="character 2"):
        check_same_text("abX", "abc", "chat")


def _lp_choice(tokens: list[str], content: str, finish: str = "stop") -> dict[str, Any]:
    entries = [{"token": t, "logprob": -0.1, "bytes": list(t.encode()), "top_logprobs": []} for t in tokens]
    return {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish,
            "logprobs": {"content": entries}}


def test_logprob_tokens_must_spell_the_content_joined_by_bytes() -> None:
    from pytest_inferaccept.checks.chat import check_logprobs

    assert check_logprobs(_lp_choice(["Hel", "lo"], "Hello"), 0) == []
    split = _lp_choice(["x", "x"], "é")  # one character split over two byte-level tokens
    split["logprobs"]["content"][0]["bytes"], split["logprobs"]["content"][1]["bytes"] = [0xC3], [0xA9]
    assert check_logprobs(split, 0) == []
    with pytest.raises(CheckFailed, match="spell"):
        check_logprobs(_lp_choice(["Hel", "p"], "Hello"), 0)


def test_a_trailing_end_of_turn_logprob_only_warns() -> None:
    from pytest_inferaccept.checks.chat import check_logprobs

    warnings = check_logprobs(_lp_choice(["Hi", ".", "<|im_end|>"], "Hi."), 0)
    assert len(warnings) == 1 and "<|im_end|>" in warnings[0]
    with pytest.raises(CheckFailed):
        check_logprobs(_lp_choice(["Hi", ".", "<|im_end|>"], "Hi.", finish="length"), 0)
