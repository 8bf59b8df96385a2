"""A minimal-overhead SSE reader for OpenAI streams: raw network reads in, record fields out.

Per read: one clock value from the caller, one split on blank lines (CRLF and CR normalised only
when present), and per event one `json.loads`, which is what it takes to tell content from
reasoning text, tool-call deltas and the empty role-only chunk. Several events completing in one
read share its timestamp; content events among them are counted as `coalesced`.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_inferaccept.load.records import RequestRecord

EXCERPT = 300
"""Characters of a body or event kept in an error detail."""
_loads = json.loads


def excerpt(data: bytes | str) -> str:
    """The start of a body or event, as text for an error detail."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text[:EXCERPT]


def _event_data(block: bytes) -> tuple[bytes | None, bool]:
    """The data of one SSE event block and whether it was named `error` (None: no data lines)."""
    lines: list[bytes] = []
    named_error = False
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(b" ") else value)
        elif line.startswith(b"event:"):
            named_error = line[6:].strip() == b"error"
    return (b"\n".join(lines) if lines else None), named_error


class StreamParser:
    """Incremental SSE reader for one streamed answer; writes straight into the record."""

    __slots__ = ("blank_at", "buf", "content_read", "done", "done_at", "finish", "finished", "problem", "rec",
                 "text_key")

    def __init__(self, rec: RequestRecord) -> None:
        self.rec = rec
        self.buf = b""
        self.text_key = "content" if rec.kind == "chat" else "text"
        self.content_read = -1
        self.done = False
        self.done_at: float | None = None
        self.finish: str | None = None
        self.finished: set[object] = set()
        """The indices of the choices that carried a finish_reason."""
        self.problem: str | None = None
        self.blank_at: float | None = None
        """When the first generated event came, blank or not (the first token of a blank answer)."""

    def feed(self, data: bytes, now: float) -> None:
        """Take one network read that arrived at `now` (seconds since t0)."""
        rec = self.rec
        rec.reads += 1
        if self.buf:
            data = self.buf + data
        if b"\r" in data:
            # CRLF (and bare CR) line ends; a CR at the very end may be half of a CRLF split
            # across reads, so it waits for the next read.
            tail = b""
            if data.endswith(b"\r"):
                data, tail = data[:-1], b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
        if b"\n\n" not in data:
            self.buf = data
            return
        blocks = data.split(b"\n\n")
        self.buf = blocks.pop()
        for block in blocks:
            self.event(block, now)
            if self.problem is not None:
                return

    def finish_input(self, now: float) -> None:
        """The body ended: an unterminated last event is still read (lenient on the final blank line)."""
        if self.buf.strip() and self.problem is None:
            block, self.buf = self.buf, b""
            self.event(block.strip(b"\n"), now)
        self.settle()

    def settle(self) -> None:
        """The answer is over: one that was whitespace throughout takes its first generated event as
        its first token of any kind (it did generate; it just never said anything)."""
        if self.rec.first_token_any is None and self.blank_at is not None:
            self.rec.first_token_any = self.blank_at

    def event(self, block: bytes, now: float) -> None:
        """Handle one complete event block."""
        rec = self.rec
        if block.startswith(b"data: ") and b"\n" not in block:
            payload: bytes | None = block[6:]
            named_error = False
        else:
            payload, named_error = _event_data(block)
            if payload is None:
                return  # a comment (keep-alive) or a field-only block
        assert payload is not None
        if rec.first_event is None:
            rec.first_event = now
        if len(payload) < 16 and payload.strip() == b"[DONE]":
            self.done = True
            self.done_at = now
            self.settle()
            return
        rec.chunks += 1
        try:
            # Decoding first is cheaper than letting json sniff the encoding of bytes.
            obj = _loads(payload.decode())
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
            self.problem = f"malformed JSON in stream event: {excerpt(payload)}"
            return
        if type(obj) is not dict:
            self.problem = f"stream event is not a JSON object: {excerpt(payload)}"
            return
        if named_error or obj.get("error"):
            self.problem = f"error event in stream: {excerpt(payload)}"
            return
        choices = obj.get("choices")
        if choices is not None:
            wrong = (f"choices is {_shown(choices)}, not a list" if type(choices) is not list
                     else self.choices(choices, now))
            if wrong is not None:
                # The server's answer breaks the chunk schema: its protocol error, not the client's.
                self.problem = f"the stream broke the chunk schema: {wrong}: {excerpt(payload)}"
                return
        usage = obj.get("usage")
        if usage and type(usage) is dict:
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if type(prompt) is int:
                rec.prompt_tokens = prompt
            if type(completion) is int:
                rec.completion_tokens = completion
            details = usage.get("completion_tokens_details")
            if details and type(details) is dict and type(details.get("reasoning_tokens")) is int:
                rec.reasoning_tokens = details["reasoning_tokens"]
        if rec.response_id is None:
            rid = obj.get("id")
            if type(rid) is str:
                rec.response_id = rid

    def choices(self, choices: list[Any], now: float) -> str | None:
        """Tell content from reasoning, tool-call and role-only deltas; note the finish.

        Returns what breaks the chunk schema (a choice that is not an object, text that is not a
        string, ...), or None. The first token of any kind is the first event with a character
        that is not whitespace, of whatever kind.
        """
        rec = self.rec
        text = solid = other = False
        key = self.text_key
        for i, choice in enumerate(choices):
            if type(choice) is not dict:
                return f"choices[{i}] is {_shown(choice)}, not an object"
            where = f"choices[{i}].delta" if key == "content" else f"choices[{i}]"
            part = choice.get("delta") if key == "content" else choice
            if part is not None and type(part) is not dict:
                return f"{where} is {_shown(part)}, not an object"
            if part:
                value = part.get(key)
                if value is not None:
                    if type(value) is not str:
                        return f"{where}.{key} is {_shown(value)}, not a string"
                    if value:
                        text = True
                        rec.output_chars += len(value)
                        solid = solid or not value.isspace()
                for name in ("reasoning_content", "reasoning"):
                    thought = part.get(name)
                    if thought is None:
                        continue
                    if type(thought) is not str:
                        return f"{where}.{name} is {_shown(thought)}, not a string"
                    if thought:
                        other = True
                        if not thought.isspace():
                            solid = True
                            rec.reasoning_events += 1
                            break  # one event, even when it carries the text under both names
                calls = part.get("tool_calls")
                if calls is not None:
                    if type(calls) is not list:
                        return f"{where}.tool_calls is {_shown(calls)}, not a list"
                    if calls:
                        other = True
                        solid = solid or any(_says_something(call) for call in calls)
            reason = choice.get("finish_reason")
            if reason is not None:
                if type(reason) is not str:
                    return f"choices[{i}].finish_reason is {_shown(reason)}, not a string"
                if reason:
                    self.finish = reason
                    rec.finish_reasons += 1
                    index = choice.get("index")
                    self.finished.add(index if type(index) is int else i)
                    rec.finished_choices = len(self.finished)
        if text:
            rec.content_events += 1
            rec.content_times.append(now)
            if rec.first_content is None:
                rec.first_content = now
            if self.content_read == rec.reads:
                rec.coalesced += 1
            self.content_read = rec.reads
        if text or other:
            if self.blank_at is None:
                self.blank_at = now
            if solid and rec.first_token_any is None:
                rec.first_token_any = now
        return None


def _shown(value: Any) -> str:
    """A JSON value as an error detail names it: `7 (int)`."""
    return f"{excerpt(json.dumps(value))[:60]} ({type(value).__name__})"


def _says_something(call: Any) -> bool:
    """A streamed tool-call fragment with a name or arguments that are not blank."""
    if type(call) is not dict:
        return True  # not blank, whatever it is; the load client does not judge tool-call shapes
    function = call.get("function")
    if type(function) is not dict:
        return bool(function)
    name, args = function.get("name"), function.get("arguments")
    if name:
        return True
    return bool(args) and (type(args) is not str or not args.isspace())
