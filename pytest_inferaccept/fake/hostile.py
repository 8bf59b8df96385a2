"""Faults of the robustness kind: how real servers answered bad input wrongly, or died of it."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any

from aiohttp import web

from pytest_inferaccept.fake import textgen
from pytest_inferaccept.fake.validation import ApiError

SAMPLING_PARAMS = frozenset({"max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stop"})


def error_response(err: ApiError, faults: frozenset[str]) -> web.Response:
    """The answer to an ApiError, bent by the error faults when they are on."""
    if "bad_input_500" in faults and err.status == 400 and err.param in SAMPLING_PARAMS:
        # a sampling value out of range reaches the engine and blows up there
        return web.json_response(ApiError(500, f"engine error: {err.message}", type="server_error").body(),
                                 status=500)
    if "accept_invalid_200" in faults and 400 <= err.status < 500 and err.status not in (401, 403):
        return web.json_response({}, status=200)  # TGI 2.4.0 #2749: 200 and no message
    if "error_shape_flat" in faults:
        return web.json_response({"error": err.message, "error_type": err.type}, status=err.status)
    return web.json_response(err.body(), status=err.status)


def crash_after(err: ApiError, faults: frozenset[str]) -> bool:
    """True when this error kills the server (crash_on_bad_request): as a process it exits now;
    in-process it drops every later connection."""
    if "crash_on_bad_request" not in faults or not 400 <= err.status < 500 or err.status in (401, 403):
        return False
    if threading.current_thread() is threading.main_thread():
        asyncio.get_running_loop().call_later(0.05, os._exit, 3)
    return True


def drop_connection(request: web.Request) -> None:
    """Behave like a dead process: close the connection without an answer."""
    if request.transport is not None:
        request.transport.abort()
    raise ConnectionResetError("the fake server has crashed (crash_on_bad_request)")


def not_json(faults: frozenset[str]) -> None:
    """Called when a body is not JSON: error_plain_text answers 500 in plain text (SGLang #3805)."""
    if "error_plain_text" in faults:
        raise web.HTTPInternalServerError(text="Internal Server Error")


def prompt_tokens(body: dict[str, Any]) -> int:
    """Prompt tokens of a chat body, counted as the fake counts them."""
    messages = body["messages"]
    return textgen.count_tokens(textgen.prompt_text(messages)) + 3 * len(messages)


async def over_context(request: web.Request, body: dict[str, Any], context_window: int,
                       faults: frozenset[str]) -> web.StreamResponse | None:
    """Misbehave on a prompt beyond the context window when a fault asks for it; None otherwise."""
    if not faults & {"hang_on_long_prompt", "long_prompt_stream_200"}:
        return None
    limit = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    if prompt_tokens(body) + limit <= context_window:
        return None
    if "hang_on_long_prompt" in faults:
        await asyncio.sleep(3600)
    if "long_prompt_stream_200" in faults and body.get("stream"):
        # SGLang #19996: the validation error arrives inside a 200 stream
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        err = ApiError(400, f"input is longer than the context window of {context_window} tokens",
                       code="context_length_exceeded")
        await resp.write(f"data: {json.dumps(err.body())}\n\ndata: [DONE]\n\n".encode())
        await resp.write_eof()
        return resp
    return None


async def unbounded(request: web.Request, body: dict[str, Any],
                    faults: frozenset[str]) -> web.StreamResponse | None:
    """Answer without bound when a fault asks for it (drip, endless stream, huge body); else None."""
    streamed = bool(body.get("stream"))
    if streamed and "stream_drip" in faults:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk = {"id": "chatcmpl-drip", "object": "chat.completion.chunk", "created": 0,
                 "model": body.get("model"), "choices": [{"index": 0, "delta": {"content": "drip"},
                                                          "finish_reason": None}]}
        data = f"data: {json.dumps(chunk)}\n\n".encode()
        for _ in range(3600):
            for i in range(len(data)):
                await resp.write(data[i:i + 1])
                await asyncio.sleep(0.5)
        return resp
    if streamed and "stream_forever" in faults:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        piece = {"id": "chatcmpl-forever", "object": "chat.completion.chunk", "created": 0,
                 "model": body.get("model"),
                 "choices": [{"index": 0, "delta": {"content": " and so on"}, "finish_reason": None}]}
        event = f"data: {json.dumps(piece)}\n\n".encode() * 200
        while True:  # ended only by the client going away
            await resp.write(event)
            await asyncio.sleep(0)
    if not streamed and "huge_json" in faults:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(b'{"id": "chatcmpl-huge", "object": "chat.completion", "padding": "')
        block = b"x" * 2**20
        for _ in range(300):
            await resp.write(block)
        await resp.write(b'", "choices": []}')
        await resp.write_eof()
        return resp
    return None
