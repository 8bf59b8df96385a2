"""The Anthropic Messages API (POST /v1/messages), as coding agents use it on llama-server and vLLM.

A reply is `{id, type: message, role: assistant, content: [blocks], model, stop_reason,
stop_sequence, usage: {input_tokens, output_tokens}}`; a stream is a sequence of named SSE events
(message_start, content_block_start, content_block_delta..., content_block_stop, message_delta,
message_stop, with ping anywhere); an error is `{type: error, error: {type, message}}`. The
official SDKs dispatch stream events on the `event:` line and read `stop_reason` to decide whether
a reply was cut short, so each of these is judged as a client depends on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.checks._base import show as _show
from pytest_inferaccept.checks.chat import ok_json_object
from pytest_inferaccept.checks.generation import cut_at_stops
from pytest_inferaccept.checks.sse import SseStream, read_sse
from pytest_inferaccept.evidence import excerpt

if TYPE_CHECKING:
    import httpx

MESSAGES_PATH = "/v1/messages"
ANTHROPIC_VERSION = "2023-06-01"
STOP_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"})
"""Every stop_reason the API documents (a local server says the first four)."""
BLOCK_TYPES = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})
STREAM_EVENTS = frozenset({"message_start", "content_block_start", "content_block_delta",
                           "content_block_stop", "message_delta", "message_stop", "ping", "error"})


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def headers(api_key: str | None) -> dict[str, str]:
    """The headers an Anthropic client sends: the API version, and the key as x-api-key."""
    out = {"anthropic-version": ANTHROPIC_VERSION}
    if api_key:
        out["x-api-key"] = api_key
    return out


@dataclass
class Reply:
    """One reply, streamed or not, reduced to what the checks compare."""

    text: str
    stop_reason: object
    stop_sequence: object
    output_tokens: object
    input_tokens: object = None
    streamed: bool = False
    body: dict[str, Any] = field(default_factory=dict)
    """The non-streamed message (empty for a stream)."""

    def describe(self) -> str:
        """A one-line account for failure messages."""
        mode = "stream" if self.streamed else "non-stream"
        return (f"{mode}: stop_reason={self.stop_reason!r}, stop_sequence={self.stop_sequence!r}, "
                f"output_tokens={self.output_tokens!r}, text={excerpt(self.text, 300)!r}")


def post_message(client: httpx.Client, body: Mapping[str, Any], sent: Mapping[str, str]) -> dict[str, Any]:
    """POST a non-streamed message; fail unless it answers 200 with a JSON object."""
    resp = client.post(MESSAGES_PATH, json={**body, "stream": False}, headers=dict(sent))
    return ok_json_object(resp, f"POST {MESSAGES_PATH}", body)


def message_text(body: Mapping[str, Any]) -> str:
    """The text of a message's text blocks, joined; CheckFailed when content is not a list of blocks."""
    content = body.get("content")
    require(isinstance(content, list), f"content is {type(content).__name__}, expected a list of content "
            "blocks ([{type: text, text}]): an Anthropic client reads content[i].text and finds nothing",
            _show(body))
    assert isinstance(content, list)
    return "".join(b["text"] for b in content
                   if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


def reply_of(body: dict[str, Any]) -> Reply:
    """A non-streamed message as a Reply."""
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Reply(text=message_text(body), stop_reason=body.get("stop_reason"),
                 stop_sequence=body.get("stop_sequence"), output_tokens=usage.get("output_tokens"),
                 input_tokens=usage.get("input_tokens"), body=body)


def check_message(body: Mapping[str, Any]) -> list[str]:
    """A non-streamed message must have the documented shape; return warnings for lesser deviations."""
    warnings = []
    shown = _show(body, 600)
    require(body.get("type") == "message", f"type is {body.get('type')!r}, expected 'message'", shown)
    mid = body.get("id")
    require(isinstance(mid, str) and mid, f"id is {mid!r}, expected a non-empty string", shown)
    if not str(mid).startswith("msg_"):
        warnings.append(f"id {mid!r} does not start with 'msg_' as Anthropic's message ids do")
    require(body.get("role") == "assistant", f"role is {body.get('role')!r}, expected 'assistant'", shown)
    require(isinstance(body.get("model"), str), f"model is {body.get('model')!r}, expected a string", shown)
    message_text(body)
    for i, block in enumerate(body["content"]):
        require(isinstance(block, dict) and isinstance(block.get("type"), str),
                f"content[{i}] is not a block with a type", shown)
        if block["type"] == "text":
            require(isinstance(block.get("text"), str), f"content[{i}] is a text block without string text",
                    shown)
        elif block["type"] not in BLOCK_TYPES:
            warnings.append(f"content[{i}] has the undocumented block type {block['type']!r}")
    reason = body.get("stop_reason")
    require(reason in STOP_REASONS, f"stop_reason is {reason!r}, expected one of {sorted(STOP_REASONS)}",
            shown)
    if "stop_sequence" not in body:
        warnings.append("no stop_sequence field (null unless a stop sequence ended the reply)")
    else:
        require(body["stop_sequence"] is None or isinstance(body["stop_sequence"], str),
                f"stop_sequence is {body['stop_sequence']!r}, expected null or the matched string", shown)
    usage = body.get("usage")
    counts = usage if isinstance(usage, dict) else {}
    require(_count(counts.get("input_tokens")) and _count(counts.get("output_tokens")),
            f"usage is {_show(usage, 200)}, expected {{input_tokens, output_tokens}} as integers >= 0",
            shown)
    return warnings


def check_max_tokens(reply: Reply, limit: int, natural: object) -> None:
    """A reply cut by max_tokens says stop_reason max_tokens and used exactly `limit` tokens."""
    context = f"max_tokens={limit}; the same request with room to finish used {natural} tokens\n" \
              f"{reply.describe()}"
    used = reply.output_tokens
    if isinstance(used, int) and used > limit:
        fail(f"max_tokens={limit} was ignored: {used} output tokens", context)
    require(reply.stop_reason == "max_tokens",
            f"stop_reason is {reply.stop_reason!r} for a reply cut by max_tokens={limit}, expected "
            "'max_tokens' (an agent takes the cut reply for a finished one)", context)
    require(used == limit, f"usage.output_tokens is {used!r}, expected max_tokens={limit}", context)


def check_stop_sequence(reply: Reply, reference: str, stop: str) -> None:
    """The reply is the reference cut before `stop`, with stop_reason stop_sequence naming it."""
    expected = cut_at_stops(reference, [stop])
    assert expected is not None, "the stop sequence must come from the reference text"
    context = (f"stop_sequences={[stop]!r}\n"
               f"reference (same request without it): {excerpt(reference, 400)!r}\n"
               f"expected: {excerpt(expected, 400)!r}\n{reply.describe()}")
    require(stop not in reply.text, f"the reply contains the stop sequence {stop!r}", context)
    require(reply.text == expected, "the reply differs from the reference text cut before the stop sequence",
            context)
    require(reply.stop_reason == "stop_sequence",
            f"stop_reason is {reply.stop_reason!r} after a stop sequence ended the reply, expected "
            "'stop_sequence'", context)
    require(reply.stop_sequence == stop,
            f"stop_sequence is {reply.stop_sequence!r}, expected the matched {stop!r}", context)


def check_system_counted(without: object, with_system: object, system_words: int) -> None:
    """A top-level system prompt must reach the model: input_tokens grow by about its length."""
    require(_count(without) and _count(with_system),
            f"usage.input_tokens is {without!r} without and {with_system!r} with a system prompt, "
            "expected integers")
    assert isinstance(without, int) and isinstance(with_system, int)
    least = system_words // 4
    require(with_system - without >= least,
            f"a system prompt of {system_words} words added {with_system - without} input tokens "
            f"({without} -> {with_system}), expected at least {least}: the server drops `system`, and "
            "an agent's instructions never reach the model")


def open_event_stream(client: httpx.Client, body: Mapping[str, Any],
                      sent: Mapping[str, str]) -> tuple[str, SseStream]:
    """POST a streamed message and read the whole SSE stream: (content-type, stream)."""
    with client.stream("POST", MESSAGES_PATH, json={**body, "stream": True}, headers=dict(sent)) as resp:
        if resp.status_code != 200:
            resp.read()
            fail(f"streamed POST {MESSAGES_PATH} answered {resp.status_code}, expected 200",
                 excerpt(resp.text, 400))
        return resp.headers.get("content-type", ""), read_sse(resp.iter_bytes())


@dataclass
class _Order:
    """Where a stream is in the documented order of events."""

    stage: str = "start"
    """start, message, block (inside content block `index`), between, delta (after message_delta), done."""
    index: int = -1
    texts: dict[int, str] = field(default_factory=dict)


def check_event_stream(content_type: str, stream: SseStream) -> tuple[Reply, list[str]]:
    """A stream must be named events in the documented order; return the reply it adds up to, and warnings."""
    require("text/event-stream" in content_type,
            f"stream content-type is {content_type!r}, expected text/event-stream")
    require(not stream.problems, "the stream is not well-formed server-sent events",
            "\n".join(stream.problems))
    require(stream.events, "the stream holds no events")
    warnings: list[str] = []
    order = _Order()
    reply = Reply(text="", stop_reason=None, stop_sequence=None, output_tokens=None, streamed=True)
    for n, event in enumerate(stream.events):
        data = event.json()
        kind = data.get("type")
        where = f"event {n + 1} of {len(stream.events)} ({kind!r}): {_show(data, 300)}"
        name = event.fields.get("event")
        require(name is not None, f"event {n + 1} has no `event:` line: the Anthropic SDKs dispatch on it "
                "and drop an event without one", where)
        require(name == kind, f"event {n + 1} is named {name!r} but its data says type {kind!r}", where)
        if kind == "error":
            fail(f"the stream sent an error event after {n} events", where)
        require(order.stage != "done", f"{kind!r} event after message_stop", where)
        if kind == "ping":
            continue
        if kind not in STREAM_EVENTS:
            warnings.append(f"undocumented stream event {kind!r} (clients skip it)")
            continue
        _step(order, kind, data, where, reply)
    require(order.stage == "done", f"the stream ended without message_stop (last event: "
            f"{stream.events[-1].fields.get('event')!r}): a client waits for the end of the message",
            f"{len(stream.events)} events")
    reply.text = "".join(order.texts[i] for i in sorted(order.texts))
    return reply, warnings


def _step(order: _Order, kind: str, data: dict[str, Any], where: str, reply: Reply) -> None:
    """Advance the order by one event, failing when the event is out of place or malformed."""
    if kind == "message_start":
        require(order.stage == "start", "message_start is not the first event", where)
        msg = data.get("message")
        require(isinstance(msg, dict) and msg.get("type") == "message" and msg.get("role") == "assistant"
                and isinstance(msg.get("content"), list),
                "message_start does not carry a message {type: message, role: assistant, content: [...]}",
                where)
        assert isinstance(msg, dict)
        usage = msg.get("usage")
        reply.input_tokens = usage.get("input_tokens") if isinstance(usage, dict) else None
        order.stage = "message"
        return
    require(order.stage != "start", f"{kind} comes before message_start", where)
    index = data.get("index")
    if kind == "content_block_start":
        require(order.stage in ("message", "between"), "content_block_start inside another content block "
                "or after message_delta", where)
        require(index == order.index + 1, f"content_block_start has index {index!r}, expected "
                f"{order.index + 1}", where)
        block = data.get("content_block")
        block = block if isinstance(block, dict) else {}
        require(isinstance(block.get("type"), str),
                "content_block_start carries no content_block with a type", where)
        order.stage, order.index = "block", order.index + 1
        order.texts[order.index] = str(block.get("text") or "") if block.get("type") == "text" else ""
    elif kind == "content_block_delta":
        require(order.stage == "block" and index == order.index,
                f"content_block_delta for index {index!r} outside its content block", where)
        delta = data.get("delta")
        require(isinstance(delta, dict) and isinstance(delta.get("type"), str), "delta without a type", where)
        assert isinstance(delta, dict)
        if delta["type"] == "text_delta":
            require(isinstance(delta.get("text"), str), "text_delta without string text", where)
            order.texts[order.index] += delta["text"]
    elif kind == "content_block_stop":
        require(order.stage == "block" and index == order.index,
                f"content_block_stop for index {index!r} outside its content block", where)
        order.stage = "between"
    elif kind == "message_delta":
        require(order.stage in ("message", "between"), "message_delta inside a content block", where)
        delta, usage = data.get("delta"), data.get("usage")
        delta = delta if isinstance(delta, dict) else {}
        usage = usage if isinstance(usage, dict) else {}
        reply.stop_reason, reply.stop_sequence = delta.get("stop_reason"), delta.get("stop_sequence")
        reply.output_tokens = usage.get("output_tokens")
        require(reply.stop_reason in STOP_REASONS, f"message_delta's stop_reason is {reply.stop_reason!r}, "
                f"expected one of {sorted(STOP_REASONS)}", where)
        require(_count(reply.output_tokens), "message_delta carries no usage.output_tokens", where)
        order.stage = "delta"
    elif kind == "message_stop":
        require(order.stage == "delta", "message_stop before message_delta (no stop_reason, no usage)", where)
        order.stage = "done"


def check_same_reply(streamed: Reply, plain: Reply) -> None:
    """A streamed reply must add up to the non-streamed one (same request at temperature 0)."""
    context = f"{streamed.describe()}\n{plain.describe()}"
    if streamed.text != plain.text:
        at = next((i for i, (a, b) in enumerate(zip(streamed.text, plain.text, strict=False)) if a != b),
                  min(len(streamed.text), len(plain.text)))
        fail(f"the text_deltas add up to {len(streamed.text)} characters, the non-streamed text has "
             f"{len(plain.text)} (first difference at character {at})", context)
    require(streamed.stop_reason == plain.stop_reason,
            f"stop_reason {streamed.stop_reason!r} streamed, {plain.stop_reason!r} not streamed", context)
    require(streamed.output_tokens == plain.output_tokens,
            f"output_tokens {streamed.output_tokens!r} streamed, {plain.output_tokens!r} not streamed",
            context)


def check_error_envelope(status: int, text: str, what: str) -> list[str]:
    """A refused request answers 4xx with {type: error, error: {type, message}}; warnings for the rest."""
    shown = f"{what} -> HTTP {status}: {excerpt(text, 400)}"
    require(status < 500, f"{what} answered {status}: a server error for a client mistake", shown)
    require(status >= 400, f"{what} answered {status}, expected 400 (invalid_request_error)", shown)
    warnings = [] if status == 400 else [f"{what} answered {status}; the Messages API answers 400"]
    try:
        body = json.loads(text)
    except ValueError:
        fail("the error body is not JSON: an Anthropic client cannot read the message", shown)
    require(isinstance(body, dict) and body.get("type") == "error",
            "the error body has no \"type\": \"error\": not the Anthropic error envelope, and an Anthropic "
            "client shows a generic failure instead of the message", shown)
    err = body.get("error")
    err = err if isinstance(err, dict) else {}
    require(isinstance(err.get("type"), str) and isinstance(err.get("message"), str),
            "the error envelope has no error {type, message} with strings", shown)
    return warnings
