"""The fake model's tokenizer endpoints and prompt logprobs: /tokenize, /apply-template, echo.

The fake tokenizer is the one `textgen.count_tokens` describes (one token per whitespace-separated
piece) with a BOS token in front where a real engine puts one. Its chat template is chosen so
that the BOS plus the rendered template count exactly what the chat path reports as
usage.prompt_tokens (the prompt's words plus three tokens a message): /tokenize and the chat
answer agree on a correct fake, and the faults below make them disagree the way real servers do.

/tokenize answers both shapes in use: llama.cpp's ({"content", "add_special", "with_pieces"} →
{"tokens"}) and vLLM's ({"model", "prompt" or "messages", "add_special_tokens"} → {"count",
"max_model_len", "tokens"}).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from pytest_inferaccept.fake import textgen
from pytest_inferaccept.fake.config import FakeConfig
from pytest_inferaccept.fake.messages import CONFIG_KEY
from pytest_inferaccept.fake.validation import ApiError

BOS_TEXT = "<s>"
"""How the BOS token is written in a rendered template."""
BOS_ID = 1
"""The BOS token's id."""
START, END, SEP = "<|im_start|>", "<|im_end|>", "<|sep|>"
"""The fake chat template's markers: each one token."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def token_id(piece: str) -> int:
    """The id of one whitespace-separated piece: the BOS text is BOS_ID, every other piece a stable
    id from its hash (never one of the low ids kept for special tokens)."""
    if piece == BOS_TEXT:
        return BOS_ID
    return 1000 + int.from_bytes(hashlib.sha256(piece.encode()).digest()[:4], "big") % 48000


def pieces(text: str) -> list[str]:
    """The text cut into tokens that spell it back: each piece with the whitespace before it, any
    trailing whitespace on the last (one piece per `textgen.count_tokens` token)."""
    found = re.findall(r"\s*\S+", text)
    if not found:
        return [text] if text else []
    found[-1] += text[len("".join(found)):]
    return found


def tokenize(text: str, *, add_bos: bool) -> list[int]:
    """The ids of `text`, with a BOS id in front when `add_bos`."""
    ids = [token_id(piece) for piece in text.split()]
    return [BOS_ID, *ids] if add_bos else ids


def render(messages: Sequence[Mapping[str, Any]], *, bos_text: bool) -> str:
    """The fake chat template: `<|im_start|> role: content <|im_end|>` a message, `<|sep|>` between
    messages, the BOS text in front when `bos_text`.

    With the BOS, that is the words of `textgen.prompt_text` plus three tokens a message: the
    count the chat path reports.
    """
    parts = [f"{START} {textgen.prompt_text([msg])} {END}" for msg in messages]
    text = f"\n{SEP} ".join(parts)
    return f"{BOS_TEXT} {text}" if bos_text else text


def chat_tokens(config: FakeConfig, messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The ids of a chat prompt as the chat path sees it (one BOS; two with double_bos)."""
    faults = config.faults
    ids = tokenize(render(messages, bos_text="tokenize_without_bos" not in faults), add_bos=False)
    return [BOS_ID, *ids] if "double_bos" in faults else ids


def _messages(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise ApiError(400, "'messages' must be a non-empty list of message objects", param="messages")
    return messages


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ApiError(400, "The request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object")
    return body


def _missing(config: FakeConfig) -> web.Response | None:
    return web.Response(status=404, text="Not Found") if "no_tokenize" in config.faults else None


async def tokenize_handler(request: web.Request) -> web.Response:
    """POST /tokenize, in llama.cpp's shape (`content`) or vLLM's (`prompt` or `messages`)."""
    config = request.app[CONFIG_KEY]
    missing = _missing(config)
    if missing is not None:
        return missing
    body = await _body(request)
    faults = config.faults
    if "content" in body:
        text = body["content"]
        if not isinstance(text, str):
            raise ApiError(400, "'content' must be a string", param="content")
        add = bool(body.get("add_special", False)) and "tokenize_without_bos" not in faults
        ids = tokenize(text, add_bos=add)
        if body.get("with_pieces"):
            names = [BOS_TEXT] * add + text.split()
            listed = [{"id": i, "piece": p} for i, p in zip(ids, names, strict=True)]
            return web.json_response({"tokens": listed})
        return web.json_response({"tokens": ids})
    if "messages" in body:
        ids = chat_tokens(config, _messages(body))
        if body.get("add_special_tokens") and "tokenize_without_bos" not in faults:
            ids = [BOS_ID, *ids]  # as vLLM: the template's BOS and one more from the tokenizer
    elif isinstance(body.get("prompt"), str):
        add = bool(body.get("add_special_tokens", True)) and "tokenize_without_bos" not in faults
        ids = tokenize(body["prompt"], add_bos=add)
    else:
        raise ApiError(400, "give 'content' (llama.cpp), or 'prompt' or 'messages' (vLLM)")
    return web.json_response({"count": len(ids), "max_model_len": config.context_window, "tokens": ids})


async def apply_template_handler(request: web.Request) -> web.Response:
    """POST /apply-template (llama.cpp): the chat prompt as text, without the BOS the tokenizer adds
    (with it under double_bos, so that tokenizing it with specials on doubles it)."""
    config = request.app[CONFIG_KEY]
    missing = _missing(config)
    if missing is not None:
        return missing
    body = await _body(request)
    return web.json_response({"prompt": render(_messages(body), bos_text="double_bos" in config.faults)})


def with_double_bos(handler: Handler) -> Handler:
    """The chat handler under double_bos: non-streamed answers count one more prompt token (the
    second BOS)."""

    async def wrapped(request: web.Request) -> web.StreamResponse:
        resp = await handler(request)
        # A stream (StreamResponse) passes as it is: the fault shows on non-streamed answers.
        if not isinstance(resp, web.Response) or resp.status != 200 or resp.text is None:
            return resp
        try:
            data = json.loads(resp.text)
        except ValueError:
            return resp
        usage = data.get("usage") if isinstance(data, dict) else None
        if not isinstance(usage, dict):
            return resp
        usage["prompt_tokens"] += 1
        usage["total_tokens"] += 1
        return web.json_response(data, status=resp.status)

    return wrapped


def _prompt_logprob(piece: str, position: int) -> float:
    """A stable logprob for a prompt token: between -8 and -0.01 nats."""
    raw = int.from_bytes(hashlib.sha256(f"{position}\x00{piece}".encode()).digest()[:4], "big")
    return -round(0.01 + 7.99 * raw / 2**32, 4)


def completion_logprobs(prompt: str, generated: Sequence[str], *, echo: bool,
                        faults: frozenset[str]) -> dict[str, Any]:
    """The legacy completions logprobs object (tokens, token_logprobs, top_logprobs, text_offset)
    of one choice: the prompt's tokens first when `echo` (the first with no logprob: nothing comes
    before it), then the generated ones. echo_logprobs_generated_only leaves the prompt's out."""
    tokens: list[str] = []
    values: list[float | None] = []
    offset = 0
    if echo and "echo_logprobs_generated_only" not in faults:
        for i, piece in enumerate(pieces(prompt)):
            tokens.append(piece)
            values.append(None if i == 0 else _prompt_logprob(piece, i))
    if echo:
        offset = len(prompt) - len("".join(tokens))
    for i, piece in enumerate(generated):
        tokens.append(piece)
        values.append(-round(0.05 + 0.9 * (i % 7) / 7, 4))
    offsets = []
    for piece in tokens:
        offsets.append(offset)
        offset += len(piece)
    top = [None if v is None else {t: v} for t, v in zip(tokens, values, strict=True)]
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": top, "text_offset": offsets}
