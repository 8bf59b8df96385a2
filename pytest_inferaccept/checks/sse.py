"""A strict server-sent-events reader for OpenAI streams, working on the raw bytes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_inferaccept.checks._base import fail


@dataclass
class SseEvent:
    """One event: its data text, the time it was complete, and the JSON it holds (if any)."""

    data: str
    at: float
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def is_done(self) -> bool:
        """True for the `data: [DONE]` terminator."""
        return self.data.strip() == "[DONE]"

    def json(self) -> dict[str, Any]:
        """The event's JSON object; a CheckFailed when it is not one."""
        try:
            value = json.loads(self.data)
        except ValueError:
            fail("stream event is not JSON", f"data: {self.data[:300]}")
        if not isinstance(value, dict):
            fail("stream event is not a JSON object", f"data: {self.data[:300]}")
        return value


@dataclass
class SseStream:
    """Everything read from one stream."""

    events: list[SseEvent]
    raw: bytes
    problems: list[str]
    """Framing problems seen (lines that are not `field: value`, data after [DONE], ...)."""

    @property
    def done(self) -> bool:
        """True when the stream ended with data: [DONE]."""
        return bool(self.events) and self.events[-1].is_done

    def chunks(self) -> list[dict[str, Any]]:
        """The JSON chunks, without the [DONE] terminator."""
        return [e.json() for e in self.events if not e.is_done]


def read_sse(byte_chunks: Iterable[bytes], clock: Any = time.monotonic) -> SseStream:
    """Parse SSE from raw byte chunks as they arrive, timestamping each event when complete."""
    buffer = b""
    raw = bytearray()
    events: list[SseEvent] = []
    problems: list[str] = []
    current: dict[str, list[str]] = {}

    def dispatch(now: float) -> None:
        if "data" in current:
            others = {k: "\n".join(v) for k, v in current.items() if k != "data"}
            if events and events[-1].is_done:
                problems.append("event after data: [DONE]")
            events.append(SseEvent(data="\n".join(current["data"]), at=now, fields=others))
        current.clear()

    for chunk in byte_chunks:
        now = clock()
        raw.extend(chunk)
        buffer += chunk
        while True:
            cut = _line_end(buffer)
            if cut is None:
                break
            line, buffer = buffer[: cut[0]], buffer[cut[1]:]
            text = line.decode("utf-8", "replace")
            if text == "":
                dispatch(now)
            elif text.startswith(":"):
                continue  # comment / keep-alive
            elif ":" in text:
                name, _, value = text.partition(":")
                current.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
            else:
                problems.append(f"line without a field name: {text[:120]!r}")
    if buffer.strip():
        problems.append(f"stream ended inside an unterminated line: {buffer[:120]!r}")
    if current:
        problems.append("last event not terminated by a blank line")
        dispatch(clock())
    return SseStream(events=events, raw=bytes(raw), problems=problems)


def data_texts(body: str | bytes) -> list[str]:
    """The data of each event of a whole SSE body, framed as `read_sse` frames a live stream
    (multi-line data joined, CR/LF endings, comments skipped); for callers that only need the
    payloads of a body already read (probes, the robustness judge)."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return [event.data for event in read_sse([raw]).events]


def _line_end(buffer: bytes) -> tuple[int, int] | None:
    """Position and length-after of the first line ending (\\r\\n, \\n or \\r)."""
    for i, byte in enumerate(buffer):
        if byte == 0x0A:
            return i, i + 1
        if byte == 0x0D:
            if i + 1 < len(buffer):
                return (i, i + 2) if buffer[i + 1] == 0x0A else (i, i + 1)
            return None  # wait: \r may be followed by \n in the next chunk
    return None


def assemble_content(chunks: list[dict[str, Any]]) -> dict[int, str]:
    """Concatenate delta.content per choice index."""
    texts: dict[int, str] = {}
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            idx = int(choice.get("index", 0))
            piece = (choice.get("delta") or {}).get("content")
            texts[idx] = texts.get(idx, "") + (piece or "")
    return texts


def assemble_tool_calls(chunks: list[dict[str, Any]], choice_index: int = 0) -> list[dict[str, Any]]:
    """Rebuild tool calls from streamed deltas: id/type/name once, arguments concatenated by index."""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            if int(choice.get("index", 0)) != choice_index:
                continue
            for frag in (choice.get("delta") or {}).get("tool_calls") or []:
                idx = frag.get("index")
                if not isinstance(idx, int):
                    fail("streamed tool-call fragment has no integer index", json.dumps(frag)[:300])
                call = calls.setdefault(idx, {"id": None, "type": None,
                                              "function": {"name": None, "arguments": ""}})
                if frag.get("id"):
                    call["id"] = frag["id"]
                if frag.get("type"):
                    call["type"] = frag["type"]
                fn = frag.get("function") or {}
                if fn.get("name"):
                    call["function"]["name"] = (call["function"]["name"] or "") + fn["name"]
                if fn.get("arguments"):
                    call["function"]["arguments"] += fn["arguments"]
    return [calls[i] for i in sorted(calls)]
