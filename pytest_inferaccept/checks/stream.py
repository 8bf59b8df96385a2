"""Checks of streamed responses read from the raw bytes: framing, chunk consistency, usage."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.checks.chat import FINISH_REASONS, check_usage_arithmetic
from pytest_inferaccept.checks.pace import Pace, read_paced
from pytest_inferaccept.checks.sse import SseStream, read_sse
from pytest_inferaccept.evidence import excerpt

if TYPE_CHECKING:
    import httpx


def _show(value: object, limit: int = 300) -> str:
    return excerpt(json.dumps(value), limit)


def check_framing(content_type: str, stream: SseStream) -> None:
    """text/event-stream, well-formed `data:` events, and the `data: [DONE]` terminator last."""
    require("text/event-stream" in content_type.lower(),
            f"stream content-type is {content_type!r}, expected text/event-stream",
            excerpt(stream.raw, 300))
    require(not stream.problems, f"SSE framing problems: {'; '.join(stream.problems[:5])}",
            excerpt(stream.raw, 400))
    require(stream.events, "the stream carried no data events", excerpt(stream.raw, 400))
    require(stream.done, "the stream did not end with `data: [DONE]`",
            f"last event: {excerpt(stream.events[-1].data, 200)}")


def error_chunks(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chunks that carry an `error` member (a failure reported after HTTP 200)."""
    return [c for c in chunks if "error" in c]


def require_no_error_chunk(chunks: list[dict[str, Any]]) -> None:
    """A stream whose chunks include {"error": ...} did not produce a valid answer."""
    errors = error_chunks(chunks)
    if errors:
        fail(f"the stream carried an error chunk after HTTP 200: "
             f"{excerpt(json.dumps(errors[0].get('error')), 300)}",
             f"{len(errors)} error chunk(s) among {len(chunks)} chunks")


def stream_seconds(stream: SseStream) -> float:
    """Seconds between the first and the last event of a stream."""
    return stream.events[-1].at - stream.events[0].at if stream.events else 0.0


def check_chat_chunks(chunks: list[dict[str, Any]], n: int = 1, seconds: float = 0.0) -> list[str]:
    """Every chunk chat.completion.chunk with one id and created; a role delta and one finish per choice.

    Returns warnings: `created` stamped per chunk (llama.cpp takes the clock for every chunk, so a
    stream crossing a second boundary carries two values) is a deviation, not a failure, as long as
    the values only move forward, by no more than the stream lasted (`seconds`) plus rounding.
    """
    warnings: list[str] = []
    require_no_error_chunk(chunks)
    require(chunks, "the stream carried no chunks")
    first = chunks[0]
    require(isinstance(first.get("id"), str) and first["id"], "first chunk has no string id", _show(first))
    ids = {c.get("id") for c in chunks}
    require(len(ids) == 1, f"chunks carry {len(ids)} different ids, expected one for the whole stream",
            f"ids: {sorted(map(str, ids))[:5]}")
    raw_stamps = [c.get("created") for c in chunks]
    stamps = [t for t in raw_stamps if isinstance(t, int) and not isinstance(t, bool)]
    require(len(stamps) == len(raw_stamps),
            f"chunk created values {sorted(set(map(str, raw_stamps)))[:5]} are not all integers")
    if len(set(stamps)) > 1:
        ordered = all(a <= b for a, b in itertools.pairwise(stamps))
        require(ordered and max(stamps) - min(stamps) <= seconds + 2,
                f"chunks carry created values {sorted(set(stamps))[:5]}, expected one value for the "
                f"whole stream (the stream lasted {seconds:.1f} s)")
        warnings.append(f"created changes within the stream ({min(stamps)} .. {max(stamps)}): "
                        "stamped per chunk instead of once per stream")
    objects = {c.get("object") for c in chunks}
    require(objects == {"chat.completion.chunk"},
            f"chunk object values are {sorted(map(str, objects))}, expected 'chat.completion.chunk'")
    roles: dict[int, list[object]] = {}
    finishes: dict[int, list[object]] = {}
    for chunk in chunks:
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            fail("a chunk has no choices list", _show(chunk))
        for choice in choices:
            idx = choice.get("index")
            require(isinstance(idx, int), "a chunk choice has no integer index", _show(chunk))
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                fail(f"choice {idx} chunk has no delta object", _show(chunk))
            if delta.get("role") is not None:
                roles.setdefault(idx, []).append(delta["role"])
            if choice.get("finish_reason") is not None:
                finishes.setdefault(idx, []).append(choice["finish_reason"])
    seen = sorted(set(roles) | set(finishes))
    require(seen == list(range(n)), f"asked n={n}, stream choice indices are {seen}, "
            f"expected {list(range(n))}")
    for idx in range(n):
        require(roles.get(idx) and roles[idx][0] == "assistant",
                f"choice {idx}: no delta with role 'assistant' in the stream (roles seen: "
                f"{roles.get(idx, [])})")
        got = finishes.get(idx, [])
        require(len(got) == 1, f"choice {idx}: {len(got)} chunks carry a finish_reason {got}, "
                "expected exactly one")
        require(got[0] in FINISH_REASONS,
                f"choice {idx}: streamed finish_reason is {got[0]!r}, expected one of "
                f"{sorted(FINISH_REASONS)}")
    return warnings


def check_stream_usage(chunks: list[dict[str, Any]], *, asked: bool,
                       max_tokens: int | None = None) -> Mapping[str, Any] | None:
    """With include_usage: one final chunk, choices [], usage; otherwise no usage anywhere."""
    require_no_error_chunk(chunks)
    with_usage = [i for i, c in enumerate(chunks) if c.get("usage") is not None]
    if not asked:
        require(not with_usage, f"usage not asked for, yet {len(with_usage)} chunk(s) carry usage "
                "(llama.cpp #16048)", _show(chunks[with_usage[0]]) if with_usage else "")
        return None
    require(with_usage, "include_usage asked, no chunk carries usage")
    require(len(with_usage) == 1, f"include_usage asked, {len(with_usage)} chunks carry usage, "
            "expected only the final one (vLLM #7262)", _show(chunks[with_usage[0]]))
    pos = with_usage[0]
    require(pos == len(chunks) - 1, f"the usage chunk is chunk {pos} of {len(chunks)}, expected the last "
            "before [DONE]", _show(chunks[pos]))
    final = chunks[pos]
    require(final.get("choices") == [], "the usage chunk has choices "
            f"{excerpt(json.dumps(final.get('choices')), 200)}, expected [] (LiteLLM #28735)",
            _show(final))
    check_usage_arithmetic(final["usage"], max_tokens=max_tokens)
    usage: Mapping[str, Any] = final["usage"]
    return usage


def check_completion_chunks(chunks: list[dict[str, Any]], n: int = 1) -> None:
    """Legacy completion chunks: object text_completion, one id, choices with text, one finish each."""
    require_no_error_chunk(chunks)
    require(chunks, "the stream carried no chunks")
    ids = {c.get("id") for c in chunks}
    require(len(ids) == 1 and isinstance(chunks[0].get("id"), str),
            f"completion chunks carry ids {sorted(map(str, ids))[:5]}, expected one string id")
    objects = {c.get("object") for c in chunks}
    require(objects == {"text_completion"},
            f"completion chunk object values are {sorted(map(str, objects))}, expected 'text_completion'")
    finishes: dict[int, list[object]] = {}
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            idx = choice.get("index")
            require(isinstance(idx, int) and isinstance(choice.get("text"), str),
                    "a completion chunk choice lacks an integer index or a text string", _show(chunk))
            if choice.get("finish_reason") is not None:
                finishes.setdefault(idx, []).append(choice["finish_reason"])
    for idx in range(n):
        got = finishes.get(idx, [])
        require(len(got) == 1 and got[0] in FINISH_REASONS,
                f"choice {idx}: finish_reason values {got}, expected exactly one of {sorted(FINISH_REASONS)}")


def assemble_text(chunks: list[dict[str, Any]]) -> dict[int, str]:
    """Concatenate legacy completion `text` per choice index."""
    texts: dict[int, str] = {}
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            idx = int(choice.get("index", 0))
            texts[idx] = texts.get(idx, "") + (choice.get("text") or "")
    return texts


def check_same_text(streamed: str, plain: str, what: str) -> None:
    """The streamed text must equal the non-streamed one (same request at temperature 0)."""
    if streamed == plain:
        return
    common = next((i for i, (a, b) in enumerate(zip(streamed, plain, strict=False)) if a != b),
                  min(len(streamed), len(plain)))
    fail(f"{what}: streamed text differs from the non-streamed text at temperature 0 "
         f"(first difference at character {common})",
         f"stream:     {excerpt(streamed, 300)!r}\nnon-stream: {excerpt(plain, 300)!r}")


def open_stream(client: httpx.Client, path: str, body: Mapping[str, Any],
                pace: Pace | None = None) -> tuple[str, SseStream]:
    """POST a streamed request and read the whole SSE stream from the raw bytes: (content-type, stream).

    With `pace` (and a token limit in the body: max_tokens, or Responses' max_output_tokens) the stream
    is read under limits sized from its own pace (checks/pace.py): a slow but steady stream raises
    CouldNotFinish instead of being cut by the client's whole-exchange limit, which would read as a
    stream that sent no end."""
    limit = body.get("max_tokens", body.get("max_output_tokens"))
    if not isinstance(limit, int) or isinstance(limit, bool):
        pace = None  # without a token limit there is no whole answer to size the wait by
    extra: dict[str, Any] = {} if pace is None else pace.request_options(client.timeout.connect or 5.0)
    sent = time.monotonic()
    with client.stream("POST", path, json=dict(body), **extra) as resp:
        if resp.status_code != 200:
            resp.read()
            fail(f"streamed request to {path} answered {resp.status_code}, expected 200",
                 excerpt(resp.text, 400))
        ctype = resp.headers.get("content-type", "")
        if pace is None:
            return ctype, read_sse(resp.iter_bytes())
        assert isinstance(limit, int)
        # n choices share one stream: each sends its own token events.
        n = body.get("n")
        choices = n if isinstance(n, int) and n > 0 else 1
        raw = read_paced(resp.iter_bytes(), max_tokens=limit * choices, pace=pace, started=sent)
        return ctype, read_sse([raw])
