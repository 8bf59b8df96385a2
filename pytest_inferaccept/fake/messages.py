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
    """The text of a content field: a string, or a list of blocks whose text blocks are joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(f"{where}: content must be a string or a list of content blocks")
    parts = []
    for i, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise _bad(f"{where}.content.{i}: a content block must be an object with a type")
        if block["type"] == "text":
            if not isinstance(block.get("text"), str):
                raise _bad(f"{where}.content.{i}: a text block needs a string text")
            parts.append(block["text"])
    return " ".join(parts)


def validate(body: object, served: tuple[str, ...]) -> dict[str, Any]:
    """The request, checked against the Messages API contract; MessagesError when it breaks it."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model: field required (a string)")
    limit = body.get("max_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise _bad("max_tokens: field required (an integer >= 1)")
    messages = body.get("messages")
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
                                    or not 0 <= temperature <= 1):
        raise _bad("temperature: must be a number between 0 and 1")
    if not isinstance(body.get("stream", False), bool):
        raise _bad("stream: must be a boolean")
    if model not in served:
        raise MessagesError(404, "not_found_error", f"model: {model} not found")
    return body


def _stop_reason(choice: generation.Choice, faults: frozenset[str]) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence) for a generated text."""
    if "messages_stop_reason_end_turn" in faults:
        return "end_turn", None
    if choice.finish_reason == "length":
        return "max_tokens", None
    if choice.stop_hit is not None:
        return "stop_sequence", choice.stop_hit
    return "end_turn", None


def plan(body: Mapping[str, Any], cfg: FakeConfig) -> tuple[generation.Choice, int]:
    """The generated reply and the prompt's token count (usage.input_tokens)."""
    turns = [{"role": m["role"], "content": block_text(m["content"], "messages")} for m in body["messages"]]
    if body.get("system") is not None and "messages_system_ignored" not in cfg.faults:
        turns.insert(0, {"role": "system", "content": block_text(body["system"], "system")})
    prompt = textgen.prompt_text(turns)
    temperature = body.get("temperature")
    request = {"max_tokens": body["max_tokens"], "stop": body.get("stop_sequences") or None,
               "temperature": 1.0 if temperature is None else temperature}
    choice = generation.generate_text(prompt, request, 0, cfg.max_natural_tokens)
    return choice, textgen.count_tokens(prompt) + 3 * len(turns)


def _event(name: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


async def create_message(request: web.Request) -> web.StreamResponse:
    """POST /v1/messages."""
    cfg = _config(request)
    try:
        try:
            raw = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise _bad("the request body is not valid JSON") from None
        body = validate(raw, (cfg.model,))
    except MessagesError as err:
        return error_response(err, cfg.faults)
    choice, input_tokens = plan(body, cfg)
    stop_reason, stop_sequence = _stop_reason(choice, cfg.faults)
    usage = {"input_tokens": input_tokens, "output_tokens": choice.completion_tokens}
    message: dict[str, Any] = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                               "model": cfg.model, "content": [{"type": "text", "text": choice.text}],
                               "stop_reason": stop_reason, "stop_sequence": stop_sequence, "usage": usage}
    if not body.get("stream"):
        if "messages_content_string" in cfg.faults:
            message["content"] = choice.text
        return web.json_response(message)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": input_tokens, "output_tokens": 0}}
    await resp.write(_event("message_start", {"type": "message_start", "message": start}))
    await resp.write(_event("content_block_start", {"type": "content_block_start", "index": 0,
                                                    "content_block": {"type": "text", "text": ""}}))
    await resp.write(_event("ping", {"type": "ping"}))
    pieces = [p for p in choice.pieces if p]
    if "messages_stream_delta_repeated" in cfg.faults and pieces:
        pieces.insert(0, pieces[0])
    for i, piece in enumerate(pieces):
        delay = cfg.ttft if i == 0 else cfg.itl
        if delay:
            await asyncio.sleep(delay)
        await resp.write(_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                        "delta": {"type": "text_delta", "text": piece}}))
    await resp.write(_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    await resp.write(_event("message_delta", {
        "type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
        "usage": {"output_tokens": choice.completion_tokens}}))
    if "messages_stream_no_stop" not in cfg.faults:
        await resp.write(_event("message_stop", {"type": "message_stop"}))
    await resp.write_eof()
    return resp
