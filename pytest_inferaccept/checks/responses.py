"""Checks of the Responses API (POST /v1/responses): the response resource, its output items and
usage, and streams read from the raw bytes: framing, sequence numbers, event order, and deltas
that add up to the final response."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.checks._base import is_int as _is_int
from pytest_inferaccept.checks._base import show as _show
from pytest_inferaccept.checks.chat import error_envelope, ok_json_object
from pytest_inferaccept.checks.sse import SseStream, read_sse
from pytest_inferaccept.checks.stream import open_stream
from pytest_inferaccept.checks.structured import schema_errors
from pytest_inferaccept.checks.tools import CALL_MARKERS
from pytest_inferaccept.evidence import excerpt

if TYPE_CHECKING:
    import httpx

RESPONSES_PATH = "/v1/responses"
STATUSES: frozenset[str] = frozenset({"completed", "incomplete", "failed", "in_progress", "queued",
                                      "cancelled"})
"""The status values of a response resource."""
TERMINAL: dict[str, str] = {"response.completed": "completed", "response.incomplete": "incomplete",
                            "response.failed": "failed"}
"""The terminal stream events and the status the response they carry must have."""
LIFECYCLE: frozenset[str] = frozenset({"response.created", "response.queued", "response.in_progress"})


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


# --- the response resource ----------------------------------------------------------------------


def post_response(client: httpx.Client, body: Mapping[str, Any]) -> dict[str, Any]:
    """POST a non-stream response; fail unless it answers 200 with a JSON object."""
    resp = client.post(RESPONSES_PATH, json={**body, "stream": False})
    return ok_json_object(resp, f"POST {RESPONSES_PATH}", dict(body))


def check_response(resp: object, what: str = "response") -> list[str]:
    """A response resource: id, object 'response', created_at, status, model, output items, usage.

    Returns warnings: deviations a client survives (an id without the resp_ prefix, items without
    ids, usage without its details).
    """
    if not isinstance(resp, dict):
        fail(f"{what} is not a JSON object", _show(resp))
    warnings: list[str] = []
    rid = resp.get("id")
    require(isinstance(rid, str) and rid, f"{what} has no string id", _show(resp))
    if not str(rid).startswith("resp_"):
        warnings.append(f"{what} id {rid!r} does not start with 'resp_' as OpenAI's ids do")
    require(resp.get("object") == "response",
            f"{what} object is {resp.get('object')!r}, expected 'response' (clients tell a response from "
            "other resources by it)", _show(resp))
    created = resp.get("created_at")
    require(isinstance(created, (int, float)) and not isinstance(created, bool) and created > 0,
            f"{what} created_at is {created!r}, expected unix seconds", _show(resp))
    status = resp.get("status")
    require(status in STATUSES, f"{what} status is {status!r}, expected one of {sorted(STATUSES)}",
            _show(resp))
    require(isinstance(resp.get("model"), str) and resp["model"],
            f"{what} model is {resp.get('model')!r}, expected the model id", _show(resp))
    if status == "failed":
        fail(f"{what} status is 'failed': {_show(resp.get('error'), 300)}", _show(resp))
    if status == "incomplete":
        details = resp.get("incomplete_details")
        require(isinstance(details, dict) and isinstance(details.get("reason"), str),
                f"{what} is incomplete but incomplete_details is {_show(details, 200)}, expected "
                "{reason: ...}", _show(resp))
    output = resp.get("output")
    if not isinstance(output, list):
        fail(f"{what} output is {_show(output, 200)}, expected a list of items", _show(resp))
    for i, item in enumerate(output):
        warnings += check_output_item(item, f"{what} output[{i}]")
    warnings += check_usage(resp.get("usage"), what)
    return warnings


def check_output_item(item: object, where: str) -> list[str]:
    """One output item: a message of output_text parts, a function_call, or another typed item."""
    if not isinstance(item, dict):
        fail(f"{where} is not an object", _show(item))
    kind = item.get("type")
    require(isinstance(kind, str) and kind, f"{where} has no type", _show(item))
    warnings: list[str] = []
    if kind in ("message", "function_call") and not isinstance(item.get("id"), str):
        warnings.append(f"{where} ({kind}) has no id: a streaming client matches items by id")
    if kind == "message":
        require(item.get("role") == "assistant",
                f"{where}.role is {item.get('role')!r}, expected 'assistant'", _show(item))
        content = item.get("content")
        if not isinstance(content, list):
            fail(f"{where}.content is {_show(content, 200)}, expected a list of content parts", _show(item))
        for j, part in enumerate(content):
            at = f"{where}.content[{j}]"
            if not isinstance(part, dict):
                fail(f"{at} is not an object", _show(item))
            if part.get("type") == "output_text":
                require(isinstance(part.get("text"), str), f"{at}.text is {_show(part.get('text'), 80)}, "
                        "expected a string", _show(part))
                require(isinstance(part.get("annotations"), list),
                        f"{at}.annotations is {_show(part.get('annotations'), 80)}, expected a list "
                        "([] when there are none)", _show(part))
            else:
                require(part.get("type") == "refusal", f"{at}.type is {part.get('type')!r}, expected "
                        "'output_text' or 'refusal'", _show(part))
    elif kind == "function_call":
        check_call_shape(item, where)
    return warnings


def check_call_shape(item: Mapping[str, Any], where: str) -> None:
    """A function_call item: call_id, name and arguments as strings (a client answers by call_id)."""
    call_id = item.get("call_id")
    require(isinstance(call_id, str) and call_id,
            f"{where} (function_call) has no call_id: a client cannot send its function_call_output back",
            _show(item))
    require(isinstance(item.get("name"), str) and item["name"],
            f"{where} (function_call) has no name", _show(item))
    args = item.get("arguments")
    require(isinstance(args, str), f"{where}.arguments is a JSON {type(args).__name__}, expected a string "
            "holding JSON", _show(item))


def check_usage(usage: object, what: str = "response", max_output_tokens: int | None = None) -> list[str]:
    """usage: integer input, output and total tokens (total = input + output); the details objects
    (cached_tokens, reasoning_tokens) are warned about when missing."""
    require(isinstance(usage, dict), f"{what} usage is {_show(usage, 200)}, expected an object with "
            "input_tokens, output_tokens and total_tokens (clients bill and budget by it)")
    assert isinstance(usage, dict)
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        require(_is_int(usage.get(key)) and usage[key] >= 0,
                f"{what} usage.{key} is {usage.get(key)!r}, expected an integer >= 0", _show(usage))
    inp, out, total = usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]
    require(total == inp + out, f"{what} usage.total_tokens is {total}, expected input_tokens + "
            f"output_tokens = {inp} + {out} = {inp + out}", _show(usage))
    require(inp > 0, f"{what} usage.input_tokens is 0 for a non-empty input", _show(usage))
    if max_output_tokens is not None:
        require(out <= max_output_tokens, f"{what} usage.output_tokens is {out}, more than "
                f"max_output_tokens={max_output_tokens}", _show(usage))
    warnings = []
    for details, key in (("input_tokens_details", "cached_tokens"),
                         ("output_tokens_details", "reasoning_tokens")):
        value = (usage.get(details) or {}).get(key) if isinstance(usage.get(details), dict) else None
        if value is None:
            warnings.append(f"{what} usage has no {details}.{key}")
            continue
        require(_is_int(value) and value >= 0, f"{what} usage.{details}.{key} is {value!r}, expected an "
                "integer >= 0", _show(usage))
    reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens") \
        if isinstance(usage.get("output_tokens_details"), dict) else None
    if _is_int(reasoning):
        require(reasoning <= out, f"{what} usage.output_tokens_details.reasoning_tokens is {reasoning}, more "
                f"than output_tokens={out} (reasoning is part of the output)", _show(usage))
    return warnings


def items_of(resp: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    """The output items of one type."""
    return [i for i in resp.get("output") or [] if isinstance(i, dict) and i.get("type") == kind]


def output_text(resp: Mapping[str, Any]) -> str:
    """The text of every output_text part of the message items, in order (what SDKs call output_text)."""
    return "".join(part.get("text") or "" for item in items_of(resp, "message")
                   for part in item.get("content") or []
                   if isinstance(part, dict) and part.get("type") == "output_text")


def input_tokens(resp: Mapping[str, Any], what: str) -> int:
    """usage.input_tokens; fail when the server did not report it."""
    value = (resp.get("usage") or {}).get("input_tokens") if isinstance(resp.get("usage"), dict) else None
    if not _is_int(value):
        fail(f"{what} reports no usage.input_tokens, so what reached the model cannot be measured",
             _show(resp.get("usage"), 200))
    assert isinstance(value, int)
    return value


def check_function_calls(resp: Mapping[str, Any], tools: Sequence[Mapping[str, Any]],
                         what: str = "response") -> list[tuple[str, Any]]:
    """Every function_call item names a declared (flattened) tool and carries a call_id and arguments:
    a string of JSON that validates against that tool's parameter schema. Returns (name, arguments)."""
    schemas = {str(t["name"]): t.get("parameters") or {} for t in tools}
    out = []
    for i, item in enumerate(resp.get("output") or []):
        if not isinstance(item, dict) or item.get("type") != "function_call":
            continue
        where = f"{what} output[{i}]"
        check_call_shape(item, where)
        name = item["name"]
        require(name in schemas, f"{where} calls {name!r}, which is not among the tools {sorted(schemas)}",
                _show(item))
        try:
            parsed = json.loads(item["arguments"])
        except ValueError as exc:
            fail(f"{where}.arguments is not valid JSON: {exc}", f"arguments: {item['arguments'][:400]!r}")
        errors = schema_errors(parsed, schemas[name])
        require(not errors, f"{where} arguments do not match {name}'s parameter schema: {errors[:1]}",
                f"arguments: {item['arguments'][:400]!r}\nschema: {_show(schemas[name])}")
        out.append((name, parsed))
    return out


def check_forced_call(resp: Mapping[str, Any], calls: Sequence[object], limit: int) -> None:
    """A response to tool_choice 'required' holds a function call; without one, the failure says what came
    instead, as observed: the status, the output tokens against the limit, the characters of text and
    whether a call had started in them (llama-server b11434 writes text until the limit, no call begun)."""
    if calls:
        return
    text = output_text(resp)
    started = [m for m in CALL_MARKERS if m in text]
    begun = f"in which a call starts ({started[0]})" if started else "with no call started"
    fail(f"no function_call item although tool_choice is 'required': status {resp.get('status')!r}, "
         f"{output_tokens(resp)} output tokens of max_output_tokens={limit}, {len(text)} characters of text "
         f"{begun}", excerpt(json.dumps(resp.get("output")), 400))


def check_error_envelope(resp: httpx.Response, situation: str) -> list[str]:
    """A refused request: 4xx with the error envelope {"error": {"message", ...}}.

    Returns warnings: `type`, `param` or `code` missing or not a string (openai-python reads them
    when present and tolerates their absence, as the project's other error checks do).
    """
    require(400 <= resp.status_code < 500, f"{situation} answered {resp.status_code}, expected a 4xx error",
            excerpt(resp.text, 400))
    try:
        body = resp.json()
    except ValueError:
        fail(f"{situation} answered {resp.status_code} with a body that is not JSON", excerpt(resp.text, 400))
    enveloped, why = error_envelope(body)
    if not enveloped:
        fail(f"{situation} answered {resp.status_code} without the error envelope "
             f'{{"error": {{"message", "type", "param", "code"}}}} ({why}): an openai-python exception then '
             "carries no code, type or param to act on", excerpt(resp.text, 400))
    error = body["error"]
    require(error["message"], f"{situation}: error.message is empty", excerpt(resp.text, 400))
    warnings = []
    for key in ("type", "param", "code"):
        if key not in error:
            warnings.append(f"{situation}: the error envelope has no {key}")
        elif error[key] is not None and not isinstance(error[key], str):
            warnings.append(f"{situation}: error.{key} is {error[key]!r}, a string or null expected")
    return warnings


# --- streams --------------------------------------------------------------------------------------


@dataclass
class ResponseStream:
    """One streamed response: its content type, the raw SSE events, and their JSON payloads."""

    content_type: str
    sse: SseStream
    events: list[dict[str, Any]]
    """The JSON object of every data event, `[DONE]` left out."""

    @property
    def types(self) -> list[str]:
        """The type of every event, in order."""
        return [str(e.get("type")) for e in self.events]


def stream_response(client: httpx.Client, body: Mapping[str, Any]) -> ResponseStream:
    """POST a streamed response and read every event from the raw bytes."""
    ctype, sse = open_stream(client, RESPONSES_PATH, {**body, "stream": True})
    return ResponseStream(content_type=ctype, sse=sse, events=[e.json() for e in sse.events if not e.is_done])


def stream_or_refusal(client: httpx.Client, body: Mapping[str, Any]) -> ResponseStream | tuple[int, str]:
    """POST a streamed response: the stream read from the raw bytes, or (status, body text) when the server
    answered anything but 200."""
    with client.stream("POST", RESPONSES_PATH, json={**body, "stream": True}) as resp:
        if resp.status_code != 200:
            resp.read()
            return resp.status_code, resp.text
        sse = read_sse(resp.iter_bytes())
        return ResponseStream(content_type=resp.headers.get("content-type", ""), sse=sse,
                              events=[e.json() for e in sse.events if not e.is_done])


def check_stream_framing(stream: ResponseStream) -> list[str]:
    """text/event-stream; every event a JSON object with a type, named by its `event:` line. A trailing
    `data: [DONE]` is a warning. The numbering is check_sequence_numbers' (a stream without it is still
    well framed).

    Returns warnings.
    """
    sse = stream.sse
    warnings: list[str] = []
    require("text/event-stream" in stream.content_type.lower(),
            f"stream content-type is {stream.content_type!r}, expected text/event-stream",
            excerpt(sse.raw, 300))
    done_at = [i for i, e in enumerate(sse.events) if e.is_done]
    problems = [p for p in sse.problems if p != "event after data: [DONE]"]
    require(not problems, f"SSE framing problems: {'; '.join(problems[:5])}", excerpt(sse.raw, 400))
    require(stream.events, "the stream carried no events", excerpt(sse.raw, 400))
    if done_at:
        require(done_at == [len(sse.events) - 1],
                f"data: [DONE] arrives at event {done_at[0]} of {len(sse.events)}, before the stream ends: "
                "openai-python stops reading there and never sees what follows", excerpt(sse.raw, 400))
        warnings.append("the stream ends with data: [DONE], which the Responses API does not send: "
                        "openai-python stops there, a client that parses every data line as JSON fails on it")
    missing_names = 0
    for i, (raw, event) in enumerate(zip((e for e in sse.events if not e.is_done), stream.events,
                                         strict=True)):
        _check_error_framing(i, raw.fields.get("event"), event)
        kind = event.get("type")
        require(isinstance(kind, str) and kind, f"event {i} has no type", _show(event, 300))
        name = raw.fields.get("event")
        if name is None:
            missing_names += 1
        else:
            require(name == kind, f"event {i} is named {name!r} by its event: line but its data says type "
                    f"{kind!r}", _show(event, 300))
    if missing_names:
        warnings.append(f"{missing_names} of {len(stream.events)} events have no `event:` line: a client "
                        "that listens by event name (EventSource) sees nothing")
    return warnings


def _check_error_framing(i: int, name: str | None, event: Mapping[str, Any]) -> None:
    """An error in a Responses stream is an `error` event: `event: error`, and data of type 'error' with
    its message at the top (llama-server b11434 sends a bare Chat-style `data: {"error": {...}}` line)."""
    bare = "type" not in event and "error" in event
    if bare:
        fail(f"event {i} is an error sent as a bare data line {{\"error\": {{...}}}} with "
             f"{'no event: line' if name is None else f'event: {name!r}'} and no type: the Responses API "
             "sends errors as `event: error` with data {type: 'error', code, message, param}, so a client "
             "reading typed events (the Responses event union, EventSource listeners) never sees this one "
             "(openai-python raises it as an APIError only because it also reads Chat-style errors)",
             _show(event, 300))
    if name == "error" or event.get("type") == "error":
        require(name == "error" and event.get("type") == "error",
                f"event {i} is an error event named {name!r} by its event: line with data of type "
                f"{event.get('type')!r}: both must say 'error'", _show(event, 300))
        require(isinstance(event.get("message"), str) and event["message"],
                f"event {i}, an error event, has no message at the top of its data (the Responses API puts "
                "code, message and param there)", _show(event, 300))


def check_error_events(stream: ResponseStream) -> int:
    """Every error the stream carries is an `error` event (see _check_error_framing). Returns how many."""
    raw = [e for e in stream.sse.events if not e.is_done]
    found = 0
    for i, (sse_event, event) in enumerate(zip(raw, stream.events, strict=True)):
        if event.get("type") == "error" or sse_event.fields.get("event") == "error" \
                or ("type" not in event and "error" in event):
            found += 1
            _check_error_framing(i, sse_event.fields.get("event"), event)
    return found


def check_sequence_numbers(stream: ResponseStream) -> None:
    """sequence_number on every event, counting 0, 1, 2, ... without a gap or repeat."""
    numbers = [e.get("sequence_number") for e in stream.events]
    absent = sum(1 for n in numbers if n is None)
    if absent:
        fail(f"{absent} of {len(numbers)} stream events carry no sequence_number: the numbers must count "
             "0, 1, 2, ... (a client resuming a stream or detecting loss relies on them)",
             f"event types: {stream.types[:12]}\nsequence numbers: {numbers[:40]}")
    for i, number in enumerate(numbers):
        if number != i:
            before = f"after {numbers[i - 1]!r} " if i else ""
            fail(f"sequence_number is {number!r} {before}at event {i} ({stream.types[i]}), expected {i}: "
                 "the numbers must count 0, 1, 2, ... (a client resuming a stream or detecting loss "
                 "relies on them)", f"sequence numbers: {numbers[:40]}")


PART_EVENTS: frozenset[str] = frozenset({
    "response.content_part.added", "response.content_part.done", "response.output_text.delta",
    "response.output_text.done", "response.refusal.delta", "response.refusal.done",
    "response.reasoning_text.delta", "response.reasoning_text.done"})
"""The events about one content part of an output item: each carries content_index."""


def _about_an_item(event: Mapping[str, Any]) -> bool:
    """True for an event about one output item (it names the item, or the item's id)."""
    return "item" in event or "item_id" in event or str(event.get("type")) in PART_EVENTS


def check_event_indices(stream: ResponseStream) -> None:
    """output_index (an integer) on every event about an output item, content_index on every event about
    a content part: openai-python's responses.stream() indexes its running snapshot by both."""
    missing: dict[str, list[int]] = {"output_index": [], "content_index": []}
    for i, event in enumerate(stream.events):
        if not _about_an_item(event):
            continue
        if not _is_int(event.get("output_index")):
            missing["output_index"].append(i)
        if str(event.get("type")) in PART_EVENTS and not _is_int(event.get("content_index")):
            missing["content_index"].append(i)
    about = sum(1 for e in stream.events if _about_an_item(e))
    parts = sum(1 for t in stream.types if t in PART_EVENTS)
    said = [f"{len(at)} of {about if key == 'output_index' else parts} events about "
            f"{'an output item' if key == 'output_index' else 'a content part'} carry no integer {key}"
            for key, at in missing.items() if at]
    if said:
        first = min(at[0] for at in missing.values() if at)
        fail(f"{'; '.join(said)}: a client that places events by index (openai-python's responses.stream() "
             "does) cannot assemble the response", f"event {first}: {_show(stream.events[first], 300)}")


class _Item:
    """What the order check knows of one output item while the stream runs."""

    def __init__(self, added: dict[str, Any]) -> None:
        self.item = added
        self.parts: dict[int, str] = {}
        """content_index -> 'added', 'text done', 'done'."""
        self.args_done = False
        self.done = False


def check_event_order(stream: ResponseStream) -> dict[str, Any]:
    """response.created first; each output item opened by output_item.added before any of its
    events and closed by output_item.done after them (parts added before their deltas, text done
    before the part is done); exactly one terminal event, last, whose response has the matching
    status and the id of response.created. Returns the terminal event's response."""
    events, types = stream.events, stream.types
    require(types[0] == "response.created",
            f"the first event is {types[0]!r}, expected 'response.created' (openai-python's "
            "responses.stream() raises on any other)", f"event types: {types[:8]}")
    created = events[0].get("response")
    if not isinstance(created, dict) or not isinstance(created.get("id"), str):
        fail("response.created carries no response with an id", _show(events[0]))
    errors = [e for e in events if e.get("type") == "error"]
    require(not errors, f"the stream carried an error event after HTTP 200: {_show(errors[:1], 300)}")
    terminals = [i for i, t in enumerate(types) if t in TERMINAL]
    require(terminals, f"the stream ended without a terminal event (response.completed, .incomplete or "
            f".failed): the client never gets the final response; last events: {types[-4:]}")
    require(len(terminals) == 1, f"{len(terminals)} terminal events ({[types[i] for i in terminals]}), "
            "expected exactly one", f"event types: {types[-8:]}")
    require(terminals[0] == len(events) - 1, f"{types[terminals[0]]} is event {terminals[0]} of "
            f"{len(events)}: events follow the terminal event ({types[terminals[0] + 1:][:4]})")
    items: dict[int, _Item] = {}
    for i, (event, kind, index) in enumerate(zip(events[:-1], types[:-1], item_positions(events[:-1]),
                                                 strict=True)):
        at = f"event {i} ({kind})"
        if kind in LIFECYCLE:
            require(i == 0 or not items, f"{at} comes after output items began",
                    f"event types: {types[:i + 1]}")
            continue
        if kind == "response.output_item.added":
            # A missing output_index is check_event_indices' finding: the order is judged without it.
            if "output_index" in event:
                require(event["output_index"] == len(items), f"{at} has output_index "
                        f"{event['output_index']!r}, expected {len(items)} (items are added in order, each "
                        "index once)", _show(event, 300))
            item = event.get("item")
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                fail(f"{at} carries no typed item", _show(event, 300))
            items[len(items)] = _Item(item)
            continue
        if index is None:
            fail(f"{at} carries neither output_index nor an item_id naming an added item: no client can tell "
                 "which output item it belongs to", _show(event, 300))
        if index not in items:
            fail(f"{at} refers to output_index {index!r} before its response.output_item.added "
                 "(openai-python raises on it)", f"event types: {types[max(0, i - 5):i + 1]}")
        state = items[index]
        require(not state.done, f"{at} refers to output {index} after its response.output_item.done",
                f"event types: {types[max(0, i - 5):i + 1]}")
        item_id = state.item.get("id")
        if "item_id" in event and item_id is not None:
            require(event["item_id"] == item_id, f"{at} names item_id {event['item_id']!r}, but output "
                    f"{index} was added as {item_id!r}", _show(event, 300))
        _advance(state, event, kind, at)
    return _check_terminal(events[-1], types[-1], created, items)


def item_positions(events: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """The output item each event is about, as its position: its output_index where it has an integer
    one, else found by its item_id (or its item's id) among the items added so far; None for events
    about no item, or about an item no response.output_item.added announced.

    A stream without output_index (llama-server b11434) is still placed by item ids, so the order and
    delta checks judge it; the missing index is check_event_indices' finding alone.
    """
    by_id: dict[str, int] = {}
    added = 0
    out: list[int | None] = []
    for event in events:
        index = event.get("output_index")
        raw_item = event.get("item")
        item: Mapping[str, Any] = raw_item if isinstance(raw_item, dict) else {}
        ids = [v for v in (event.get("item_id"), item.get("id")) if isinstance(v, str)]
        position: int | None
        if event.get("type") == "response.output_item.added":
            placed = index if isinstance(index, int) and _is_int(index) else added
            added += 1
            for iid in ids:
                by_id.setdefault(iid, placed)
            position = placed
        elif isinstance(index, int) and _is_int(index):
            position = index
        else:
            position = next((by_id[iid] for iid in ids if iid in by_id), None)
        out.append(position)
    return out


def _advance(state: _Item, event: Mapping[str, Any], kind: str, at: str) -> None:
    """Move one output item through its events, failing on an event out of its place."""
    raw = event.get("content_index")
    part = raw if isinstance(raw, int) else -1
    status = state.parts.get(part, "not added")
    if kind == "response.content_part.added":
        require(part not in state.parts, f"{at}: content part {raw!r} added twice")
        state.parts[part] = "added"
    elif kind in ("response.output_text.delta", "response.output_text.done"):
        require(status == "added", f"{at} for content part {raw!r}, which is {status} (expected "
                "response.content_part.added before it and no text after response.output_text.done)")
        if kind.endswith(".done"):
            state.parts[part] = "text done"
    elif kind == "response.content_part.done":
        text_part = (event.get("part") or {}).get("type") == "output_text"
        require(status == "text done" or (status == "added" and not text_part),
                f"{at} for content part {raw!r}, which is {status} (expected its "
                "response.output_text.done first)")
        state.parts[part] = "done"
    elif kind == "response.function_call_arguments.delta":
        require(not state.args_done, f"{at} after response.function_call_arguments.done")
    elif kind == "response.function_call_arguments.done":
        require(not state.args_done, f"{at} sent twice")
        state.args_done = True
    elif kind == "response.output_item.done":
        open_parts = sorted(k for k, v in state.parts.items() if v != "done")
        require(not open_parts, f"{at} while content part(s) {open_parts} are not done")
        # A function call closed without its arguments .done is check_call_argument_events' finding.
        state.done = True


def _check_terminal(event: Mapping[str, Any], kind: str, created: Mapping[str, Any],
                    items: Mapping[int, _Item]) -> dict[str, Any]:
    response = event.get("response")
    if not isinstance(response, dict):
        fail(f"{kind} carries no response object: the client gets no final response", _show(event, 300))
    want = TERMINAL[kind]
    require(response.get("status") == want, f"{kind} carries a response with status "
            f"{response.get('status')!r}, expected {want!r}", _show(response, 300))
    require(response.get("id") == created.get("id"), f"{kind} carries response id {response.get('id')!r}, "
            f"but response.created announced {created.get('id')!r}")
    open_items = [i for i, s in items.items() if not s.done]
    require(not open_items, f"{kind} arrives while output item(s) {open_items} have no "
            "response.output_item.done (openai-python raises on it)")
    output = response.get("output")
    require(isinstance(output, list) and len(output) == len(items),
            f"{kind} carries {len(output) if isinstance(output, list) else 'no'} output item(s), but the "
            f"stream added {len(items)}", _show(response, 300))
    return response


def check_stream_assembly(stream: ResponseStream, final: Mapping[str, Any]) -> None:
    """The deltas of each text part and each function call add up to its .done event, to the item of
    response.output_item.done, and to the same item in the terminal response."""
    deltas: dict[tuple[str, int, int], str] = {}
    done: dict[tuple[str, int, int], list[tuple[str, str]]] = {}
    output = final.get("output") or []

    def add_done(key: tuple[str, int, int], source: str, text: object) -> None:
        done.setdefault(key, []).append((source, text if isinstance(text, str) else repr(text)))

    for event, position in zip(stream.events, item_positions(stream.events), strict=True):
        kind = event.get("type")
        index = position or 0
        part = event["content_index"] if _is_int(event.get("content_index")) else 0
        if kind in ("response.output_text.delta", "response.reasoning_text.delta"):
            key = ("text" if "output_text" in str(kind) else "reasoning", index, part)
            deltas[key] = deltas.get(key, "") + str(event.get("delta") or "")
        elif kind == "response.function_call_arguments.delta":
            key = ("arguments", index, 0)
            deltas[key] = deltas.get(key, "") + str(event.get("delta") or "")
        elif kind == "response.output_text.done":
            add_done(("text", index, part), "response.output_text.done", event.get("text"))
        elif kind == "response.reasoning_text.done":
            add_done(("reasoning", index, part), "response.reasoning_text.done", event.get("text"))
        elif kind == "response.content_part.done":
            raw_part = event.get("part")
            done_part: dict[str, Any] = raw_part if isinstance(raw_part, dict) else {}
            kinds = {"output_text": "text", "reasoning_text": "reasoning"}
            if done_part.get("type") in kinds:
                add_done((kinds[done_part["type"]], index, part), "response.content_part.done",
                         done_part.get("text"))
        elif kind == "response.function_call_arguments.done":
            add_done(("arguments", index, 0), "response.function_call_arguments.done", event.get("arguments"))
        elif kind == "response.output_item.done":
            _item_texts(event.get("item"), index, "response.output_item.done", add_done)
    for index, item in enumerate(output):
        _item_texts(item, index, f"the terminal response's output[{index}]", add_done)
    for key, sources in done.items():
        streamed = deltas.get(key, "")
        kind, index, part = key
        for source, text in sources:
            if text != streamed:
                what = "argument deltas" if kind == "arguments" else f"{kind} deltas of content part {part}"
                at = _first_difference(streamed, text)
                fail(f"output {index}: the {what} add up to {len(streamed)} characters, "
                     f"{source} has {len(text)} (first difference at character {at})",
                     f"deltas: {excerpt(streamed, 300)!r}\n{source}: {excerpt(text, 300)!r}")


def _item_texts(item: object, index: int, source: str, add: Any) -> None:
    """Hand the texts of one finished output item to `add` (text parts, reasoning, arguments)."""
    if not isinstance(item, dict):
        return
    if item.get("type") == "function_call":
        add(("arguments", index, 0), source, item.get("arguments"))
    elif item.get("type") == "message":
        for part, content in enumerate(item.get("content") or []):
            if isinstance(content, dict) and content.get("type") == "output_text":
                add(("text", index, part), source, content.get("text"))
    elif item.get("type") == "reasoning":
        for part, content in enumerate(item.get("content") or []):
            if isinstance(content, dict) and isinstance(content.get("text"), str):
                add(("reasoning", index, part), source, content.get("text"))


def check_call_argument_events(stream: ResponseStream, final: Mapping[str, Any]) -> int:
    """Each streamed function_call item carries its arguments as response.function_call_arguments.delta
    events and ends them with exactly one response.function_call_arguments.done, before the item is done,
    whose arguments equal the item's final arguments (output_item.done and the terminal response).
    Returns how many function calls the stream held."""
    positions = item_positions(stream.events)
    calls: dict[int, dict[str, Any]] = {}
    for event, position in zip(stream.events, positions, strict=True):
        item = event.get("item")
        if event.get("type") == "response.output_item.added" and isinstance(item, dict) \
                and item.get("type") == "function_call" and position is not None:
            calls[position] = {"deltas": 0, "done": [], "closed": False, "name": item.get("name")}
    for i, (event, position) in enumerate(zip(stream.events, positions, strict=True)):
        call = calls.get(position) if position is not None else None
        if call is None:
            continue
        kind = event.get("type")
        if kind == "response.function_call_arguments.delta":
            call["deltas"] += 1
        elif kind == "response.function_call_arguments.done":
            require(not call["closed"], f"event {i}: response.function_call_arguments.done for output "
                    f"{position} after its response.output_item.done", _show(event, 300))
            call["done"].append(event.get("arguments"))
        elif kind == "response.output_item.done":
            call["closed"] = True
            raw = event.get("item")
            call["final"] = raw.get("arguments") if isinstance(raw, dict) else None
    output = final.get("output") or []
    for position, call in calls.items():
        at = f"the streamed function call {call['name']!r} (output {position})"
        finished = output[position].get("arguments") if position < len(output) \
            and isinstance(output[position], dict) else call.get("final")
        if isinstance(finished, str) and finished:
            require(call["deltas"], f"{at} has arguments {excerpt(finished, 80)!r} in the final response but "
                    "no response.function_call_arguments.delta event carried them: a streaming client sees "
                    "them only at the end")
        if not call["done"]:
            fail(f"{at} sent {call['deltas']} response.function_call_arguments.delta event(s) and no "
                 "response.function_call_arguments.done: a client that runs a call on that event (the one "
                 "the Responses API documents for complete arguments) never runs this one",
                 f"event types: {list(dict.fromkeys(stream.types))}")
        require(len(call["done"]) == 1, f"{at} has {len(call['done'])} response.function_call_arguments.done "
                "events, expected one")
        for source, value in (("response.output_item.done", call.get("final")),
                              ("the terminal response", finished)):
            require(call["done"][0] == value, f"{at}: response.function_call_arguments.done says arguments "
                    f"{_show(call['done'][0], 120)}, {source} {_show(value, 120)}: they must be equal")
    return len(calls)


def check_input_tokens_count(counted: object, resp: Mapping[str, Any]) -> int:
    """An answer of POST /v1/responses/input_tokens: {object: 'response.input_tokens', input_tokens} whose
    count equals usage.input_tokens of the response to the same request. Returns the count."""
    if not isinstance(counted, dict):
        fail(f"{RESPONSES_PATH}/input_tokens answered {_show(counted, 200)}, expected a JSON object")
    value = counted.get("input_tokens")
    if not isinstance(value, int) or not _is_int(value):
        fail(f"{RESPONSES_PATH}/input_tokens answered input_tokens {value!r}, expected an integer",
             _show(counted, 300))
    billed = input_tokens(resp, "the response to the same request")
    require(value == billed, f"{RESPONSES_PATH}/input_tokens counts {value} input tokens, but the response "
            f"to the same request bills usage.input_tokens={billed}: a client that budgets a request by the "
            f"count is off by {billed - value}", _show(counted, 300))
    return value


def terminal_response(stream: ResponseStream) -> dict[str, Any]:
    """The response the last terminal event carries; fail when the stream has none."""
    for event in reversed(stream.events):
        if event.get("type") in TERMINAL:
            response = event.get("response")
            if not isinstance(response, dict):
                fail(f"{event['type']} carries no response object: the client gets no final response",
                     _show(event, 300))
            return response
    fail("the stream ended without a terminal event (response.completed, .incomplete or .failed): the "
         f"client never gets the final response; last events: {stream.types[-4:]}")


def read_stream(stream: ResponseStream) -> tuple[dict[str, Any], list[str]]:
    """Framing, order and assembly of a stream at once: (the terminal response, warnings). The
    numbering (check_sequence_numbers) and the indices (check_event_indices) are checks of their own,
    so that a stream without them still reaches the check it was read for."""
    warnings = check_stream_framing(stream)
    final = check_event_order(stream)
    check_stream_assembly(stream, final)
    return final, warnings


def check_cut_by_limit(resp: Mapping[str, Any], limit: int, what: str, natural: int | None = None) -> bool:
    """A response to a request with max_output_tokens=limit: cut (status incomplete, reason
    max_output_tokens, no more than `limit` output tokens) or finished within the limit. `natural`
    is how many output tokens the same request made with room to spare: when it is above the limit,
    the response must be cut.

    Returns False when the model finished within the limit by itself (nothing to judge).
    """
    usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else {}
    raw_used = usage.get("output_tokens") if isinstance(usage, dict) else None
    used = raw_used if _is_int(raw_used) else None
    status = resp.get("status")
    context = f"status {status!r}, usage {_show(usage, 200)}, incomplete_details " \
              f"{_show(resp.get('incomplete_details'), 120)}"
    if status == "completed":
        if used is not None and used > limit:
            fail(f"{what}: max_output_tokens={limit} was ignored: {used} output tokens and status "
                 "'completed'", context)
        if natural is not None and natural > limit:
            fail(f"{what}: status 'completed' for output cut by max_output_tokens={limit} (the same request "
                 f"with room made {natural} output tokens): a client keeps the cut answer as a whole one",
                 context)
        return False
    require(status == "incomplete", f"{what}: status is {status!r} for output cut by max_output_tokens="
            f"{limit}, expected 'incomplete'", context)
    reason = (resp.get("incomplete_details") or {}).get("reason") \
        if isinstance(resp.get("incomplete_details"), dict) else None
    require(reason == "max_output_tokens", f"{what}: incomplete_details.reason is {reason!r}, expected "
            "'max_output_tokens'", context)
    if used is not None:
        require(used <= limit, f"{what}: {used} output tokens, more than max_output_tokens={limit}", context)
    return True


def output_tokens(resp: Mapping[str, Any]) -> int | None:
    """usage.output_tokens when the server reported it."""
    usage = resp.get("usage")
    value = usage.get("output_tokens") if isinstance(usage, dict) else None
    return value if _is_int(value) else None
