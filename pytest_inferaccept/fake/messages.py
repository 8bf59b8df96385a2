"""The Anthropic Messages API of the fake server (POST /v1/messages), as llama-server and vLLM serve it.

The same deterministic model as the chat endpoint answers: a request's system prompt and messages
are flattened into one prompt, `max_tokens` and `stop_sequences` cut the text exactly, and the
usage counts the prompt's and the text's tokens. Errors come in the Anthropic envelope
`{"type": "error", "error": {"type", "message"}}`, also for a body that is not JSON.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from pytest_inferaccept.fake import generation, textgen
from pytest_inferaccept.fake.config import FakeConfig

ROLES = ("user", "assistant")


class MessagesError(Exception):
    """A request the Messages API refuses: HTTP status, Anthropic error type, message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


def _bad(message: str) -> MessagesError:
    return MessagesError(400, "invalid_request_error", message)


CONFIG_KEY = web.AppKey("config", FakeConfig)
"""Where the fake's app keeps its configuration for this module (app.py sets it)."""


def _config(request: web.Request) -> FakeConfig:
    return request.app[CONFIG_KEY]


def error_response(err: MessagesError, faults: frozenset[str]) -> web.Response:
    """The error answer: the Anthropic envelope, or the OpenAI one under `messages_error_openai`."""
    if "messages_error_openai" in faults:
        body: dict[str, Any] = {"error": {"message": err.message, "type": err.kind, "param": None,
                                          "code": None}}
    else:
        body = {"type": "error", "error": {"type": err.kind, "message": err.message}}
    return web.json_response(body, status=err.status)


def block_text(content: object, where: str) -> str:
    """The text of a content field: a string, or a list of blocks whose text the model reads (text
    blocks, a tool_use block as its name and input, a tool_result block as its content) joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(f"{where}: content must be a string or a list of content blocks")
    parts = []
    for i, block in enumerate(content):
        at = f"{where}.content.{i}"
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise _bad(f"{at}: a content block must be an object with a type")
        if block["type"] == "text":
            if not isinstance(block.get("text"), str):
                raise _bad(f"{at}: a text block needs a string text")
            parts.append(block["text"])
        elif block["type"] == "tool_use":
            if not (isinstance(block.get("id"), str) and isinstance(block.get("name"), str)
                    and isinstance(block.get("input"), Mapping)):
                raise _bad(f"{at}: a tool_use block needs a string id and name and an input object")
            parts.append(f"{block['name']} {json.dumps(block['input'])}")
        elif block["type"] == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise _bad(f"{at}: a tool_result block needs a string tool_use_id")
            parts.append(block_text(block.get("content", ""), at))
    return " ".join(parts)


def _tool_results(messages: list[Any]) -> bool:
    return any(isinstance(m.get("content"), list)
               and any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in m["content"])
               for m in messages)


LENIENT_MAX_TOKENS = 64
"""The max_tokens the fake fills in under `messages_lenient` when a request has none."""


def validate(body: object, served: tuple[str, ...], faults: frozenset[str] = frozenset(),
             counting: bool = False) -> dict[str, Any]:
    """The request, checked against the Messages API contract; MessagesError when it breaks it.
    `counting`: a count_tokens request, which has no max_tokens."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model: field required (a string)")
    lenient = "messages_lenient" in faults
    if lenient and body.get("max_tokens") is None:
        body = {**body, "max_tokens": LENIENT_MAX_TOKENS}
    limit = body.get("max_tokens")
    if not counting and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise _bad("max_tokens: field required (an integer >= 1)")
    messages = body.get("messages")
    if messages is None and "messages_missing_500" in faults:
        raise MessagesError(500, "server_error", "'messages' is required")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages: field required (a non-empty list)")
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping) or msg.get("role") not in ROLES:
            raise _bad(f"messages.{i}: role must be one of {', '.join(ROLES)}")
        block_text(msg.get("content"), f"messages.{i}")
    if body.get("system") is not None:
        block_text(body["system"], "system")
    stops = body.get("stop_sequences")
    if stops is not None and not (isinstance(stops, list) and all(isinstance(s, str) and s for s in stops)):
        raise _bad("stop_sequences: must be a list of non-empty strings")
    temperature = body.get("temperature")
    if temperature is not None and (not isinstance(temperature, (int, float)) or isinstance(temperature, bool)
                                    or not (lenient or 0 <= temperature <= 1)):
        raise _bad("temperature: must be a number between 0 and 1")
    if not isinstance(body.get("stream", False), bool):
        raise _bad("stream: must be a boolean")
    _validate_tools(body.get("tools"), body.get("tool_choice"))
    if "messages_tool_result_rejected" in faults and _tool_results(messages):
        raise _bad("messages: content blocks of type tool_result are not supported")
    if model not in served:
        raise MessagesError(404, "not_found_error", f"model: {model} not found")
    return body


def _validate_tools(tools: object, choice: object) -> None:
    """tools: [{name, input_schema}]; tool_choice: {type: auto|any|none} or {type: tool, name}."""
    if tools is not None and not (isinstance(tools, list) and all(
            isinstance(t, Mapping) and isinstance(t.get("name"), str)
            and isinstance(t.get("input_schema"), Mapping) for t in tools)):
        raise _bad("tools: must be a list of {name, input_schema}")
    if choice is None:
        return
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    named = kind == "tool" and isinstance(choice, Mapping) and isinstance(choice.get("name"), str)
    if kind not in ("auto", "any", "none", "tool") or (kind == "tool" and not named):
        raise _bad("tool_choice: must be {type: auto|any|none} or {type: tool, name}")


def _tool_uses(body: Mapping[str, Any], prompt: str, last_user: str) -> list[dict[str, Any]]:
    """The tool_use blocks the fake model answers with: the fake chat model's choice of OpenAI tool
    calls for the same tools and tool_choice, as Anthropic blocks. None after a tool result."""
    tools = body.get("tools") or []
    if not tools or _tool_results(body["messages"][-1:]):
        return []
    choice = body.get("tool_choice") or {"type": "auto"}
    openai_choice: object = {"auto": "auto", "any": "required", "none": "none"}.get(choice["type"])
    if choice["type"] == "tool":
        openai_choice = {"type": "function", "function": {"name": choice["name"]}}
    functions = [{"type": "function", "function": {"name": t["name"], "parameters": t["input_schema"]}}
                 for t in tools]
    request = {"tools": functions, "tool_choice": openai_choice}
    calls = generation.tool_calls_for(request, last_user, prompt)
    return [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": c["function"]["name"],
             "input": json.loads(c["function"]["arguments"])} for c in calls]


def _stop_reason(choice: generation.Choice, faults: frozenset[str]) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence) for a generated text."""
    if "messages_stop_reason_end_turn" in faults:
        return "end_turn", None
    if choice.finish_reason == "length":
        return "max_tokens", None
    if choice.stop_hit is not None:
        return "stop_sequence", choice.stop_hit
    return "end_turn", None


def _turns(body: Mapping[str, Any], faults: frozenset[str], counting: bool = False) -> list[dict[str, str]]:
    """The conversation as the fake model reads it (system first, when it is read)."""
    messages = body["messages"][-1:] if "messages_history_dropped" in faults else body["messages"]
    turns = [{"role": m["role"], "content": block_text(m["content"], "messages")} for m in messages]
    dropped = "messages_system_ignored" in faults or (counting and "messages_count_tokens_off" in faults)
    if body.get("system") is not None and not dropped:
        turns.insert(0, {"role": "system", "content": block_text(body["system"], "system")})
    return turns


def prompt_tokens(turns: list[dict[str, str]]) -> int:
    """The prompt's token count (usage.input_tokens and count_tokens' input_tokens)."""
    return textgen.count_tokens(textgen.prompt_text(turns)) + 3 * len(turns)


def plan(body: Mapping[str, Any], cfg: FakeConfig) -> tuple[generation.Choice, int, list[dict[str, Any]]]:
    """The generated reply, the prompt's token count (usage.input_tokens) and the tool_use blocks."""
    turns = _turns(body, cfg.faults)
    prompt = textgen.prompt_text(turns)
    last_user = next((t["content"] for t in reversed(turns) if t["role"] == "user"), "")
    tool_uses = _tool_uses(body, prompt, last_user)
    temperature = body.get("temperature")
    request = {"max_tokens": body["max_tokens"], "stop": body.get("stop_sequences") or None,
               "temperature": 1.0 if temperature is None else temperature}
    if tool_uses:
        tokens = sum(textgen.count_tokens(json.dumps(b["input"])) + 2 for b in tool_uses)
        return generation.Choice(index=0, finish_reason="tool_calls", completion_tokens=tokens), \
            prompt_tokens(turns), tool_uses
    thinking, content_request = generation.think_first(request, cfg.reasoning_tokens)
    choice = generation.generate_text(prompt, content_request, 0, cfg.max_natural_tokens)
    if thinking:
        generation.add_reasoning(choice, prompt, thinking)
    return choice, prompt_tokens(turns), []


def _prompt_usage(prompt_tokens: int, faults: frozenset[str]) -> dict[str, int]:
    """The usage's prompt counts: all as input_tokens, or under `messages_cache_accounting` as a warm
    llama-server reports them (one token computed, the rest read from the prefix cache)."""
    if "messages_cache_accounting" not in faults:
        return {"input_tokens": prompt_tokens}
    fresh = min(1, prompt_tokens)
    return {"cache_read_input_tokens": prompt_tokens - fresh, "input_tokens": fresh}


def _event(name: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _content(choice: generation.Choice, tool_uses: list[dict[str, Any]],
             faults: frozenset[str]) -> list[dict[str, Any]]:
    """The reply's blocks: thinking (when the fake reasons, signed unless `messages_thinking_unsigned`),
    then the text or the tool_use blocks."""
    blocks: list[dict[str, Any]] = []
    if choice.reasoning:
        blocks.append({"type": "thinking", "thinking": "".join(choice.reasoning)})
        if "messages_thinking_unsigned" not in faults:
            blocks[0]["signature"] = SIGNATURE
    return blocks + (tool_uses or [{"type": "text", "text": choice.text}])


SIGNATURE = "fake-signature"
"""What the fake signs its thinking blocks with (a client sends it back unread by the fake)."""


async def _stream_block(resp: web.StreamResponse, index: int, block: Mapping[str, Any],
                        pieces: list[str], cfg: FakeConfig) -> None:
    """One content block as content_block_start, its deltas and content_block_stop."""
    kind = block["type"]
    opened = {"type": kind, "text": ""} if kind == "text" else \
        {"type": kind, "thinking": ""} if kind == "thinking" else {**block, "input": {}}
    await resp.write(_event("content_block_start", {"type": "content_block_start", "index": index,
                                                    "content_block": opened}))
    if index == 0:
        await resp.write(_event("ping", {"type": "ping"}))
    deltas: list[dict[str, Any]] = (
        [{"type": "text_delta", "text": p} for p in pieces] if kind == "text"
        else [{"type": "thinking_delta", "thinking": p} for p in pieces] if kind == "thinking"
        else [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}])
    if kind == "thinking" and "signature" in block:
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    for delta in deltas:
        if cfg.itl:
            await asyncio.sleep(cfg.itl)
        await resp.write(_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                        "delta": delta}))
    await resp.write(_event("content_block_stop", {"type": "content_block_stop", "index": index}))


async def _read_json(request: web.Request) -> Any:
    """The request body as JSON, or the Messages API's 400 for a body that is not JSON."""
    try:
        return json.loads(await request.read())
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _bad("the request body is not valid JSON") from None


async def create_message(request: web.Request) -> web.StreamResponse:
    """POST /v1/messages."""
    cfg = _config(request)
    try:
        body = validate(await _read_json(request), (cfg.model,), cfg.faults)
    except MessagesError as err:
        return error_response(err, cfg.faults)
    choice, input_tokens, tool_uses = plan(body, cfg)
    stop_reason, stop_sequence = _stop_reason(choice, cfg.faults)
    if tool_uses and "messages_tool_use_end_turn" not in cfg.faults:
        stop_reason = "tool_use"
    prompt_usage = _prompt_usage(input_tokens, cfg.faults)
    usage = {**prompt_usage, "output_tokens": choice.completion_tokens}
    content = _content(choice, tool_uses, cfg.faults)
    message: dict[str, Any] = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                               "model": cfg.model, "content": content,
                               "stop_reason": stop_reason, "stop_sequence": stop_sequence, "usage": usage}
    if not body.get("stream"):
        if "messages_content_string" in cfg.faults:
            message["content"] = choice.text
        return web.json_response(message)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**prompt_usage, "output_tokens": 0}}
    await resp.write(_event("message_start", {"type": "message_start", "message": start}))
    pieces = [p for p in choice.pieces if p]
    if "messages_stream_delta_repeated" in cfg.faults and pieces:
        pieces.insert(0, pieces[0])
    if cfg.ttft:
        await asyncio.sleep(cfg.ttft)
    for index, block in enumerate(content):
        shown = choice.reasoning if block["type"] == "thinking" else pieces
        await _stream_block(resp, index, block, shown, cfg)
    await resp.write(_event("message_delta", {
        "type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
        "usage": {"output_tokens": choice.completion_tokens}}))
    if "messages_stream_no_stop" not in cfg.faults:
        await resp.write(_event("message_stop", {"type": "message_stop"}))
    await resp.write_eof()
    return resp


async def count_tokens(request: web.Request) -> web.Response:
    """POST /v1/messages/count_tokens: the prompt's input_tokens, as the message's usage counts them
    (under `messages_count_tokens_off` without the system prompt)."""
    cfg = _config(request)
    try:
        body = validate(await _read_json(request), (cfg.model,), counting=True)
    except MessagesError as err:
        return error_response(err, cfg.faults)
    return web.json_response({"input_tokens": prompt_tokens(_turns(body, cfg.faults, counting=True))})
