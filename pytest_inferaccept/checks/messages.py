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
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.checks._base import show as _show
from pytest_inferaccept.checks.chat import ok_json_object
from pytest_inferaccept.checks.generation import cut_at_stops
from pytest_inferaccept.checks.pace import Pace, read_paced
from pytest_inferaccept.checks.sse import SseStream, read_sse
from pytest_inferaccept.evidence import excerpt

if TYPE_CHECKING:
    import httpx

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
ANTHROPIC_VERSION = "2023-06-01"
STOP_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"})
"""Every stop_reason the API documents (a local server says the first four)."""
BLOCK_TYPES = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})
STREAM_EVENTS = frozenset({"message_start", "content_block_start", "content_block_delta",
                           "content_block_stop", "message_delta", "message_stop", "ping", "error"})
CACHE_COUNTS = ("cache_read_input_tokens", "cache_creation_input_tokens")
"""The prompt tokens a Messages usage counts apart from input_tokens: read from and written to the
prompt cache. input_tokens holds only the rest (unlike Chat's prompt_tokens, which includes its
cached_tokens), so a warm llama-server reports input_tokens 1 for a prompt of 113 tokens."""


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
    """The whole prompt's tokens (`prompt_size`: input_tokens with the cached ones), None when unreported."""
    usage: dict[str, Any] = field(default_factory=dict)
    """The usage as sent (the non-streamed message's, or the stream's message_start one)."""
    streamed: bool = False
    body: dict[str, Any] = field(default_factory=dict)
    """The non-streamed message (empty for a stream)."""
    blocks: list[dict[str, Any]] = field(default_factory=list)
    """The content blocks: the message's, or those a stream's events add up to (a streamed thinking
    block holds `signature` only when a signature_delta came)."""

    def describe(self) -> str:
        """A one-line account for failure messages."""
        mode = "stream" if self.streamed else "non-stream"
        return (f"{mode}: stop_reason={self.stop_reason!r}, stop_sequence={self.stop_sequence!r}, "
                f"output_tokens={self.output_tokens!r}, text={excerpt(self.text, 300)!r}")


def prompt_size(usage: object) -> int | None:
    """The whole prompt's tokens from a Messages usage: input_tokens plus the cache reads and writes
    counted apart from it; None when input_tokens is not a count."""
    counts = usage if isinstance(usage, Mapping) else {}
    if not _count(counts.get("input_tokens")):
        return None
    return int(counts["input_tokens"]) + sum(int(counts[k]) for k in CACHE_COUNTS if _count(counts.get(k)))


def prompt_parts(usage: object) -> str:
    """How a usage's prompt size adds up, for messages: input_tokens 1 + cache_read_input_tokens 112."""
    counts = usage if isinstance(usage, Mapping) else {}
    parts = [f"{k} {counts[k]!r}" for k in ("input_tokens", *CACHE_COUNTS) if k in counts]
    return " + ".join(parts) or f"usage {_show(usage, 120)}"


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
                 input_tokens=prompt_size(usage), usage=usage, body=body,
                 blocks=[b for b in body["content"] if isinstance(b, dict)])


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
    named = ("stop_sequence names it" if reply.stop_sequence == stop
             else f"stop_sequence is {reply.stop_sequence!r}")
    require(reply.stop_reason == "stop_sequence",
            f"stop_reason is {reply.stop_reason!r} after a stop sequence ended the reply, expected "
            f"'stop_sequence' ({named}): a client that reads stop_reason takes the reply for finished "
            "by the model", context)
    require(reply.stop_sequence == stop,
            f"stop_sequence is {reply.stop_sequence!r}, expected the matched {stop!r}", context)


def check_system_counted(without: Mapping[str, Any], with_system: Mapping[str, Any],
                         system_words: int) -> None:
    """A top-level system prompt must reach the model: the prompt's tokens (input_tokens with the cache
    reads and writes the Messages API counts apart) grow by about its length."""
    _check_grown(without, with_system, system_words, ("without", "with a system prompt"),
                 f"a system prompt of {system_words} words",
                 "the server drops `system`, and an agent's instructions never reach the model")


def _check_grown(small: Mapping[str, Any], large: Mapping[str, Any], words: int, cases: tuple[str, str],
                 added: str, meaning: str) -> None:
    """The prompt of `large` must count at least a quarter token per added word more than `small`'s,
    cached input tokens counted (`prompt_size`)."""
    before, after = prompt_size(small), prompt_size(large)
    shown = f"usage {cases[0]}: {_show(small, 200)}\nusage {cases[1]}: {_show(large, 200)}"
    require(before is not None and after is not None,
            f"usage.input_tokens is {small.get('input_tokens')!r} {cases[0]} and "
            f"{large.get('input_tokens')!r} {cases[1]}, expected integers", shown)
    assert before is not None and after is not None
    least = words // 4
    require(after - before >= least,
            f"{added} added {after - before} input tokens, cached ones counted ({before} -> {after}: "
            f"{prompt_parts(small)} -> {prompt_parts(large)}), expected at least {least}: {meaning}",
            shown)


def open_event_stream(client: httpx.Client, body: Mapping[str, Any], sent: Mapping[str, str],
                      pace: Pace | None = None) -> tuple[str, SseStream]:
    """POST a streamed message and read the whole SSE stream: (content-type, stream). With `pace` the
    stream is read under limits sized from its own pace (checks/pace.py)."""
    extra: dict[str, Any] = {} if pace is None else pace.request_options(client.timeout.connect or 5.0)
    started = time.monotonic()
    with client.stream("POST", MESSAGES_PATH, json={**body, "stream": True}, headers=dict(sent),
                       **extra) as resp:
        if resp.status_code != 200:
            resp.read()
            fail(f"streamed POST {MESSAGES_PATH} answered {resp.status_code}, expected 200",
                 excerpt(resp.text, 400))
        if pace is None:
            return resp.headers.get("content-type", ""), read_sse(resp.iter_bytes())
        raw = read_paced(resp.iter_bytes(), max_tokens=int(body["max_tokens"]), pace=pace,
                         started=started)
        return resp.headers.get("content-type", ""), read_sse([raw])


@dataclass
class _Order:
    """Where a stream is in the documented order of events."""

    stage: str = "start"
    """start, message, block (inside content block `index`), between, delta (after message_delta), done."""
    index: int = -1
    texts: dict[int, str] = field(default_factory=dict)
    blocks: list[dict[str, Any]] = field(default_factory=list)


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
    reply.blocks = order.blocks
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
        reply.usage = usage if isinstance(usage, dict) else {}
        reply.input_tokens = prompt_size(usage)
        order.stage = "message"
        return
    require(order.stage != "start", f"{kind} comes before message_start", where)
    index = data.get("index")
    if kind == "content_block_start":
        if order.stage == "block":
            opened = order.blocks[order.index].get("type")
            new = data.get("content_block")
            kind_new = new.get("type") if isinstance(new, dict) else None
            fail(f"content_block_start for block {index!r} ({kind_new!r}) while block {order.index} "
                 f"({opened!r}) is still open: the documented stream closes each block before it opens the "
                 "next", where)
        require(order.stage in ("message", "between"), "content_block_start after message_delta", where)
        require(index == order.index + 1, f"content_block_start has index {index!r}, expected "
                f"{order.index + 1}", where)
        block = data.get("content_block")
        block = block if isinstance(block, dict) else {}
        require(isinstance(block.get("type"), str),
                "content_block_start carries no content_block with a type", where)
        order.stage, order.index = "block", order.index + 1
        order.texts[order.index] = str(block.get("text") or "") if block.get("type") == "text" else ""
        # a streamed thinking block's signature is what its signature_deltas add up to, not the start's
        order.blocks.append({k: v for k, v in block.items() if k != "signature"})
    elif kind == "content_block_delta":
        require(order.stage == "block" and index == order.index,
                f"content_block_delta for index {index!r} outside its content block", where)
        delta = data.get("delta")
        require(isinstance(delta, dict) and isinstance(delta.get("type"), str), "delta without a type", where)
        assert isinstance(delta, dict)
        if delta["type"] == "text_delta":
            require(isinstance(delta.get("text"), str), "text_delta without string text", where)
            order.texts[order.index] += delta["text"]
        elif delta["type"] in ("thinking_delta", "signature_delta"):
            key = delta["type"].removesuffix("_delta")
            require(isinstance(delta.get(key), str), f"{delta['type']} without string {key}", where)
            current = order.blocks[order.index]
            current[key] = str(current.get(key) or "") + delta[key]
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


def check_history_counted(alone: Mapping[str, Any], conversation: Mapping[str, Any],
                          history_words: int) -> None:
    """The earlier turns of a conversation must reach the model: the prompt's tokens (cached ones
    counted) grow by about their length over the last user turn sent alone."""
    _check_grown(alone, conversation, history_words, ("for the last turn alone", "for the conversation"),
                 f"{history_words} words of earlier turns",
                 "the server answers the last message only, and an agent's conversation is forgotten "
                 "between turns")


def check_count_tokens(status: int, text: str, message_usage: Mapping[str, Any]) -> int:
    """count_tokens answers {input_tokens} equal to the message's input size (input_tokens with the
    cached ones) for the same request; return the count."""
    shown = f"POST {COUNT_TOKENS_PATH} -> HTTP {status}: {excerpt(text, 300)}\n" \
            f"the message's usage: {_show(message_usage, 200)}"
    require(status == 200, f"{COUNT_TOKENS_PATH} answered {status}, expected 200", shown)
    try:
        body = json.loads(text)
    except ValueError:
        fail(f"{COUNT_TOKENS_PATH} answered a body that is not JSON", shown)
    counted = body.get("input_tokens") if isinstance(body, dict) else None
    require(_count(counted), f"{COUNT_TOKENS_PATH} answered input_tokens {counted!r}, expected an integer "
            ">= 0", shown)
    assert isinstance(counted, int)
    size = prompt_size(message_usage)
    require(size is not None, f"the message's usage has no integer input_tokens: {_show(message_usage)}",
            shown)
    require(counted == size,
            f"count_tokens says {counted} input tokens, the message for the same request used {size} "
            f"({prompt_parts(message_usage)}), a difference of {counted - (size or 0):+d}: an agent that "
            "budgets its context window by count_tokens overflows or wastes it", shown)
    return counted


def check_tool_use(body: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A reply that calls a tool holds a tool_use block {id, name, input: object} and says stop_reason
    tool_use; return the block."""
    shown = _show(body, 600)
    blocks = [b for b in body.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"]
    require(blocks, "the reply holds no tool_use block", shown)
    block = blocks[0]
    require(isinstance(block.get("id"), str) and block["id"],
            f"the tool_use block's id is {block.get('id')!r}, expected a non-empty string: the client "
            "cannot name the call its tool_result answers", shown)
    require(block.get("name") == name, f"the tool_use block names {block.get('name')!r}, expected {name!r}",
            shown)
    require(isinstance(block.get("input"), dict),
            f"the tool_use block's input is {type(block.get('input')).__name__}, expected a JSON object "
            "(not a string of JSON, as OpenAI's arguments are)", shown)
    require(body.get("stop_reason") == "tool_use",
            f"stop_reason is {body.get('stop_reason')!r} for a reply that calls {name!r}, expected "
            "'tool_use': an agent that reads stop_reason takes the turn for finished and never runs the tool",
            shown)
    return block


def refusal_problems(status: int, text: str) -> list[str]:
    """What is wrong with the answer to a request the Messages API refuses: a 2xx, a 5xx, a body
    outside {type: error, error: {type, message}} (all of them, not only the first)."""
    problems = []
    if 200 <= status < 300:
        return [f"accepted with HTTP {status}: a client's mistake goes unnoticed here and is refused by "
                "the Messages API itself"]
    if status >= 500:
        problems.append(f"HTTP {status}: a server error for a client mistake (expected 400 "
                        "invalid_request_error; a client retries a 5xx)")
    elif status != 400:
        problems.append(f"HTTP {status}, expected 400")
    try:
        body = json.loads(text)
    except ValueError:
        return [*problems, "the body is not JSON: an Anthropic client cannot read the message"]
    err = body.get("error") if isinstance(body, dict) else None
    if not (isinstance(body, dict) and body.get("type") == "error" and isinstance(err, dict)
            and isinstance(err.get("type"), str) and isinstance(err.get("message"), str)):
        shape = ("the OpenAI envelope {error: {message, type, code}}" if isinstance(err, dict)
                 else "another shape")
        problems.append(f"the body is {shape}, not {{\"type\": \"error\", \"error\": {{type, message}}}}: "
                        "an Anthropic client shows a generic failure instead of the message")
    return problems


def check_thinking(blocks: list[dict[str, Any]], streamed: bool) -> dict[str, Any]:
    """A reply that thinks carries a thinking block with its text and a signature (streamed: as
    thinking_delta and signature_delta events), before the text; return the thinking block."""
    mode = "streamed" if streamed else "non-stream"
    shown = f"{mode} content blocks: {_show(blocks, 600)}"
    kinds = [b.get("type") for b in blocks]
    assert "thinking" in kinds, "the caller skips a reply without thinking"
    at = kinds.index("thinking")
    block = blocks[at]
    require(isinstance(block.get("thinking"), str) and block["thinking"],
            f"the thinking block's thinking is {block.get('thinking')!r}, expected the reasoning text"
            + (" (from thinking_delta events)" if streamed else ""), shown)
    where = "no signature_delta before its content_block_stop" if streamed else "no signature field"
    require(isinstance(block.get("signature"), str),
            f"the thinking block has {where}: the Anthropic SDKs read it, and a client that sends the "
            "block back in the next turn (as agents with tools must) has none to send", shown)
    texts = [i for i, k in enumerate(kinds) if k == "text"]
    require(not texts or at < texts[0], f"the thinking block is block {at}, after the text block "
            f"{texts[0] if texts else None}: thinking comes before the answer", shown)
    return block
