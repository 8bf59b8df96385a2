"""The fake OpenAI-compatible server as an aiohttp application."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import os
import struct
import time
import uuid
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from pytest_inferaccept.fake import conformance, generation, hostile, messages, textgen, traffic, validation
from pytest_inferaccept.fake.config import RECOVERY_QUIET_S, SLOW_RECOVERY_FACTOR, FakeConfig
from pytest_inferaccept.fake.messages import create_message
from pytest_inferaccept.fake.metrics import MetricsState
from pytest_inferaccept.fake.responses import input_tokens_handler, responses_handler
from pytest_inferaccept.fake.timing import StreamMarks, TimingLog, clock
from pytest_inferaccept.fake.tokenize import (
    apply_template_handler,
    completion_logprobs,
    tokenize_handler,
    with_double_bos,
)
from pytest_inferaccept.fake.validation import ApiError


class _Generation:
    """One request holding a slot: its tokens (for the KV-cache gauge) and its first-token delay."""

    __slots__ = ("completion_tokens", "finished", "generated", "prompt_tokens", "ttft")

    def __init__(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.generated = 0
        """Tokens generated so far."""
        self.finished = False
        """Its answer was counted as finished (its tokens are in the generated-tokens counter)."""
        self.ttft = 0.0
        """Seconds from getting the slot to the first token (set when the slot is taken)."""

    def progress(self, done: int, steps: int) -> None:
        """`done` of the answer's `steps` token steps are out."""
        self.generated = self.completion_tokens * min(done, steps) // steps if steps else 0


class State:
    """Mutable server state shared by the handlers."""

    def __init__(self, config: FakeConfig) -> None:
        self.config = config
        self.metrics = MetricsState()
        self.slots = asyncio.Semaphore(config.slots) if config.slots else None
        self.slot_count = config.slots or 0
        """How many generations run at once (0: unlimited); fixed when the server starts."""
        self.active: set[_Generation] = set()
        """The requests generating now."""
        self.prefixes = generation.PrefixCache()
        self.born = time.monotonic()
        self.completions = 0
        self.started = int(time.time())
        self.crashed = False
        """Set by crash_on_bad_request: the server answers nothing any more."""
        self.timing = TimingLog(config.timing_log) if config.timing_log else None
        """The server's own timestamps of streamed chat answers, when asked for (off by default)."""
        self.flights = traffic.Flights()
        """The chat requests in the server now (for empty_under_concurrency)."""
        self.drawn = 0
        """Chat and completions requests numbered so far (for slow_fraction and error_fraction)."""
        self.queued_at = -math.inf
        """When a request last got its slot after waiting for it (for slow_recovery)."""
        self.broken = False
        """An overload left the known answers wrong for good (stays_wrong_after_overload)."""
        self.deadlocked = False
        """Set by cancel_deadlock at the first disconnect mid-stream: every later completion hangs."""
        self.unseen: set[asyncio.Task[None]] = set()
        """Answers generating after their client left (cancel_keeps_generating), kept until done."""

    def kv_usage(self) -> float:
        """The KV-cache gauge: prompt + generated tokens of the generating requests over the cache
        size, capped at 1.0 (0.0 when kv_cache_tokens is off)."""
        size = self.config.kv_cache_tokens
        if not size:
            return 0.0
        used = sum(g.prompt_tokens + g.generated for g in self.active)
        return min(used / size, 1.0)

    def overloaded(self) -> bool:
        """True when a request arriving now finds the slots and the queue full (max_queue)."""
        limit = self.config.max_queue
        if limit is None or not self.slot_count or self.config.spike_unbounded_queue:
            return False
        return self.metrics.running + self.metrics.waiting >= self.slot_count + limit

    def token_delay(self) -> float:
        """Seconds to the next token, for the generations in progress now."""
        return generation.token_delay(self.config, self.metrics.running) * self.recovering()

    def recovering(self) -> float:
        """SLOW_RECOVERY_FACTOR for `slow_recovery` seconds once no request has had to wait for a slot for
        RECOVERY_QUIET_S (the spike is over); else 1 (the spike itself is served at the usual pace)."""
        since = time.monotonic() - self.queued_at
        late = (self.config.slow_recovery and not self.metrics.waiting
                and RECOVERY_QUIET_S <= since < RECOVERY_QUIET_S + self.config.slow_recovery)
        return SLOW_RECOVERY_FACTOR if late else 1.0

    def draw(self) -> tuple[bool, bool]:
        """Number the next chat/completions request: is it (slow, failed)? Both shares are spread
        evenly over the same numbering (traffic.in_share)."""
        self.drawn += 1
        cfg = self.config
        return (traffic.in_share(self.drawn, cfg.slow_fraction),
                traffic.in_share(self.drawn, cfg.error_fraction))


STATE_KEY = web.AppKey("state", State)
CONFIG_KEY = messages.CONFIG_KEY


def _error(err: ApiError) -> web.Response:
    return web.json_response(err.body(), status=err.status)


def _state(request: web.Request) -> State:
    return request.app[STATE_KEY]


async def _json_body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        hostile.not_json(_state(request).config.faults)
        raise ApiError(400, "The request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object")
    return body


@web.middleware
async def _middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    state = _state(request)
    key = state.config.api_key
    if "auth_not_enforced" in state.config.faults:
        key = None
    if key and request.path.startswith("/v1/") and request.headers.get("Authorization") != f"Bearer {key}":
        return _error(ApiError(401, "Invalid or missing API key", type="authentication_error",
                               code="invalid_api_key"))
    if state.crashed:
        hostile.drop_connection(request)
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ConnectionError:
        # The client hung up mid-answer (a check stops reading an endless stream): the request ends
        # here as aiohttp ends one whose client went away, with no logged traceback. (A traceback
        # formatted on the server's thread while the test's thread parses source trips Python
        # 3.11's shared AST depth counter: a SystemError in the test process.)
        raise asyncio.CancelledError from None
    except ApiError as err:
        state.crashed = state.crashed or hostile.crash_after(err, state.config.faults)
        return hostile.error_response(err, state.config.faults)


async def health(request: web.Request) -> web.Response:
    """GET /health."""
    faults = _state(request).config.faults
    if "health_down" in faults:
        return web.json_response({"status": "unavailable"}, status=503)
    return web.json_response({"status": "ok"})


async def version(request: web.Request) -> web.Response:
    """GET /version."""
    if "version_missing" in _state(request).config.faults:
        return web.Response(status=404, text="Not Found")
    return web.json_response({"version": _state(request).config.version})


async def models(request: web.Request) -> web.Response:
    """GET /v1/models."""
    state = _state(request)
    cfg = state.config
    ids = [*cfg.chat_models, cfg.embedding_model]
    if "models_missing_served" in cfg.faults:
        ids = ["some-other-model"]
    data = [{"id": i, "object": "model", "created": state.started, "owned_by": "fake"} for i in ids]
    return web.json_response(conformance.models_payload(data, cfg.faults))


async def metrics(request: web.Request) -> web.Response:
    """GET /metrics in Prometheus text format."""
    state = _state(request)
    faults = state.config.faults
    if "metrics_missing" in faults:
        return web.Response(status=404, text="not found")
    if "metrics_redirect" in faults and not request.path.endswith("/"):
        raise web.HTTPTemporaryRedirect("/metrics/")
    if "metrics_invalid" in faults:
        return web.Response(text="vllm:num_requests_running{ 1 oops\n# TYPE\n",
                            content_type="text/plain")
    cfg = state.config
    text = state.metrics.render(cfg.model, reset="metrics_counter_reset" in faults, kv_usage=state.kv_usage(),
                                memory_growth=cfg.memory_growth, prefix_cache=cfg.prefix_cache,
                                cache_fill=cfg.cache_fill, cache_fill_requests=cfg.cache_fill_requests)
    text = conformance.metrics_text(text, faults, cfg.metrics_names)
    return web.Response(text=text, content_type="text/plain", charset="utf-8")


def _served(cfg: FakeConfig) -> tuple[str, ...]:
    # An unservable model is listed but refused like an unknown one: 404 model_not_found.
    return cfg.answered_models


def _response_model(cfg: FakeConfig) -> str:
    return "gpt-3.5-turbo" if "wrong_model_field" in cfg.faults else cfg.model


async def _hang_if_asked(state: State) -> None:
    faults = state.config.faults
    if "hang_completions" in faults or "health_lies" in faults or state.deadlocked:
        await asyncio.sleep(3600)


async def _overload_answer(state: State) -> web.Response:
    """The answer to a request that finds the server full: shed at once (429 or 503 with
    Retry-After), collapse (500, no Retry-After), or never answer (overload_hang)."""
    cfg = state.config
    if cfg.overload_hang:
        await asyncio.sleep(3600)  # a server that falls over: the client gives up first
    if cfg.overload_status == 500:
        err = ApiError(500, "internal server error: the engine ran out of capacity", type="server_error",
                       code="internal_error")
        return web.json_response(err.body(), status=500)
    if cfg.overload_status == 429:
        err = ApiError(429, "Too many requests: the server's queue is full; retry later", type="requests",
                       code="rate_limit_exceeded")
    else:
        err = ApiError(503, "The server is overloaded; retry later", type="server_error",
                       code="server_overloaded")
    return web.json_response(err.body(), status=err.status, headers={"Retry-After": "1"})


def _limit_of(body: Mapping[str, Any]) -> int | None:
    """The request's max_completion_tokens or max_tokens (None: not asked)."""
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    return limit if isinstance(limit, int) and limit > 0 else None


def _count_completion(state: State) -> None:
    limit = state.config.exit_after
    if limit is not None and state.completions >= limit:
        os._exit(3)  # the process dies mid-run, as a crashed server would
    state.completions += 1


def _usage(prompt_tokens: int, completion_tokens: int, reasoning: int | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
    if reasoning is not None:  # as reasoning servers report it (the knob reasoning_tokens is on)
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


def _chat_usage(cfg: FakeConfig, prompt_tokens: int, choices: list[generation.Choice]) -> dict[str, Any]:
    """The usage of a chat answer: completion tokens include reasoning tokens, also shown apart."""
    reasoning = sum(len(c.reasoning) for c in choices) if cfg.reasoning_tokens else None
    return _usage(prompt_tokens, sum(c.completion_tokens for c in choices), reasoning)


def _reasoning_tokens(cfg: FakeConfig, body: Mapping[str, Any]) -> int:
    """The reasoning tokens of a chat answer: none when the request switches thinking off
    (chat_template_kwargs.enable_thinking false, reasoning_effort none), unless a fault ignores it."""
    kwargs = body.get("chat_template_kwargs")
    if (isinstance(kwargs, Mapping) and kwargs.get("enable_thinking") is False
            and "reasoning_kwargs_off_ignored" not in cfg.faults):
        return 0
    if body.get("reasoning_effort") == "none" and "reasoning_effort_none_ignored" not in cfg.faults:
        return 0
    return cfg.reasoning_tokens


def _plan_chat(state: State, body: Mapping[str, Any]) -> tuple[list[generation.Choice], int]:
    cfg = state.config
    faults = cfg.faults
    if body.get("tools"):
        if "no_tools" in faults:
            raise ApiError(400, "tools are not supported by this server", param="tools")
        if "tools_500" in faults:
            raise ApiError(500, "internal error while rendering tools", type="server_error")
    messages = body["messages"]
    prompt = textgen.prompt_text(messages)
    prompt_tokens = textgen.count_tokens(prompt) + 3 * len(messages)
    if "answers_changed" in faults and hashlib.sha256(prompt.encode()).digest()[0] % 2:
        prompt += "\x00upgraded"  # another generator seed: the answer changes, and stays deterministic
    limit = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    if prompt_tokens + limit > cfg.context_window and "silent_truncation" in faults:
        prompt_tokens = max(cfg.context_window - limit, 1)  # Ollama #4967: cut the prompt, answer 200
    if prompt_tokens + limit > cfg.context_window:
        raise ApiError(400, f"This model's maximum context length is {cfg.context_window} tokens; "
                       f"the request asks for {prompt_tokens} prompt + {limit} completion tokens",
                       param="messages", code="context_length_exceeded")
    n = int(body.get("n") or 1)
    if "ignore_n" in faults:
        n = 1
    fmt = body.get("response_format") or {}
    schema = None
    if fmt.get("type") == "json_schema":
        schema = fmt["json_schema"].get("schema") or {}
    last_user = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    has_tool_result = messages[-1].get("role") == "tool"
    choices = []
    for index in range(n):
        calls = [] if has_tool_result else generation.tool_calls_for(body, last_user, prompt)
        if calls:
            choice = generation.tool_call_choice(index, calls, body)
        else:
            thinking, content_body = generation.think_first(body, _reasoning_tokens(cfg, body))
            choice = generation.generate_text(prompt, content_body, index, cfg.max_natural_tokens,
                                              json_schema=schema,
                                              json_mode=fmt.get("type") == "json_object")
            if thinking:
                generation.add_reasoning(choice, prompt, thinking)
        choices.append(choice)
    return choices, prompt_tokens


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/chat/completions."""
    state = _state(request)
    flight = state.flights.arrive()
    try:
        return await _chat_completions(request, flight)
    finally:
        state.flights.leave(flight)


async def _chat_completions(request: web.Request, flight: traffic.Flight) -> web.StreamResponse:
    received = clock()
    state = _state(request)
    cfg = state.config
    body = await _json_body(request)
    if "unknown_model_200" in cfg.faults:
        body["model"] = cfg.model
    validation.check_chat(body, _served(cfg))
    if "chat_500" in cfg.faults:
        raise ApiError(500, "internal server error", type="server_error")
    await _hang_if_asked(state)
    if "reject_bounds" in cfg.faults and body.get("top_p") in (0, 1):
        raise ApiError(422, "`top_p` must be > 0.0 and < 1.0", type="validation", param="top_p")  # TGI #2222
    early = await hostile.over_context(request, body, cfg.context_window, cfg.faults)
    if early is None:
        early = await hostile.unbounded(request, body, cfg.faults)
    if early is not None:
        return early
    body = generation.request_faults(body, cfg.faults)
    body = generation.load_request_faults(body, cfg.faults, len(state.flights))
    choices, prompt_tokens = _plan_chat(state, body)
    generation.choice_faults(choices, cfg.faults, body)
    remembered = cfg.prefix_cache or "prefix_cache_changes_output" in cfg.faults
    prefix = generation.prompt_prefix(body["messages"]) if remembered else None
    generation.load_faults(choices, cfg.faults, body, in_flight=len(state.flights),
                           warm_prefix=prefix is not None and prefix in state.prefixes)
    state.broken = generation.wrong_when_busy(choices, cfg, in_flight=len(state.flights), broken=state.broken)
    if "empty_under_concurrency" in cfg.faults and await traffic.crowded(flight):
        return await _empty_chat(request, state, body, prompt_tokens)
    if state.overloaded():
        return await _overload_answer(state)
    # From here to taking the slot nothing awaits: the overload check above stays true.
    slow, failed = state.draw()
    if failed:
        return _error(traffic.error_answer(cfg.error_status))
    _count_completion(state)
    want_logprobs = bool(body.get("logprobs")) and "no_logprobs" not in cfg.faults
    top = int(body.get("top_logprobs") or 0)
    cid = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    completion_tokens = sum(c.completion_tokens for c in choices)
    async with _slot(state, prompt_tokens, completion_tokens, prefix, limit=_limit_of(body),
                     stream=bool(body.get("stream"))) as gen:
        start = time.monotonic()
        if slow:
            gen.ttft += cfg.slow_ttft
        if body.get("stream"):
            marks = StreamMarks(received) if state.timing is not None else None
            return await _stream_chat(request, state, body, choices, prompt_tokens, cid, created,
                                      want_logprobs, top, start, gen, marks)
        longest = max((len(c.reasoning) + len(c.pieces) for c in choices), default=0)
        await _sleep_generation(state, gen, longest, request)
        out_choices = []
        for c in choices:
            message: dict[str, Any] = {"role": "assistant",
                                       "content": None if c.tool_calls else c.text}
            if c.reasoning:
                message.update(generation.reasoning_fields(cfg.reasoning_field, "".join(c.reasoning)))
            if c.tool_calls:
                message["tool_calls"] = c.tool_calls
                if "tool_args_object" in cfg.faults:
                    message["tool_calls"] = generation.args_as_objects(c.tool_calls)
            out_choices.append({
                "index": c.index, "message": message, "finish_reason": c.finish_reason,
                "logprobs": generation.logprobs_for(c, top) if want_logprobs else None,
            })
        gen.finished = True
        state.metrics.request_finished(prompt_tokens, completion_tokens,
                                       ttft=gen.ttft, e2e=time.monotonic() - start)
        return web.json_response(conformance.chat_response({
            "id": cid, "object": "chat.completion", "created": created,
            "model": _response_model(cfg), "choices": out_choices,
            "usage": _chat_usage(cfg, prompt_tokens, choices),
        }, cfg.faults))


async def _empty_chat(request: web.Request, state: State, body: Mapping[str, Any],
                      prompt_tokens: int) -> web.StreamResponse:
    """The answer of empty_under_concurrency: HTTP 200 and nothing generated. Streamed: the role
    chunk, then data: [DONE] (no content, no finish_reason); otherwise content "" and finish_reason
    null."""
    cid = f"chatcmpl-{uuid.uuid4().hex}"
    head = {"id": cid, "created": int(time.time()), "model": _response_model(state.config)}
    if not body.get("stream"):
        return web.json_response({**head, "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": None,
             "logprobs": None}], "usage": _usage(prompt_tokens, 0)})
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    await resp.write(conformance.encode({**head, "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
         "finish_reason": None}]}))
    await resp.write(conformance.encode("[DONE]"))
    await resp.write_eof()
    return resp


class _slot:
    """Hold one generation slot (or none when slots are unlimited): counted as waiting until the
    slot is free, then as running (with its tokens in the KV cache) until the answer is done."""

    def __init__(self, state: State, prompt_tokens: int, completion_tokens: int,
                 prefix: str | None = None, *, limit: int | None = None, stream: bool = False) -> None:
        self.state = state
        self.sem = state.slots
        self.gen = _Generation(prompt_tokens, completion_tokens)
        self.prefix = prefix
        self.limit = limit
        """The request's max_tokens (None: not asked), where cancel_keeps_generating stops."""
        self.stream = stream

    async def __aenter__(self) -> _Generation:
        state, metrics = self.state, self.state.metrics
        queued = time.monotonic()
        waited = self.sem is not None and self.sem.locked()
        metrics.request_queued()
        try:
            if self.sem is not None:
                await self.sem.acquire()
        finally:
            metrics.request_dequeued()
        metrics.request_started(time.monotonic() - queued if self.sem is not None else 0.0)
        cfg = state.config
        hit = False
        if self.prefix is not None:  # set with the prefix cache on, or to remember prefixes for a fault
            hit = state.prefixes.lookup(self.prefix)
            metrics.prefix_lookup(self.gen.prompt_tokens, hit)
        self.gen.ttft = generation.first_token_delay(cfg, running=metrics.running,
                                                     uptime=time.monotonic() - state.born,
                                                     prompt_tokens=self.gen.prompt_tokens, prefix_hit=hit)
        if waited:
            state.queued_at = time.monotonic()
        self.gen.ttft *= state.recovering()
        state.active.add(self.gen)
        return self.gen

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        state, gen, cfg = self.state, self.gen, self.state.config
        gone = kind is not None and issubclass(kind, (ConnectionError, asyncio.CancelledError))
        if gone and not gen.finished:
            # The client left mid-answer: an honest server stops here and counts what it generated.
            if cfg.cancel_deadlock and self.stream and gen.generated:
                state.deadlocked = True
            if cfg.cancel_leaks_slot:
                return  # the slot, its running count and its KV-cache tokens are never given back
            if cfg.cancel_keeps_generating:
                task = asyncio.get_running_loop().create_task(self._generate_unseen())
                state.unseen.add(task)
                task.add_done_callback(state.unseen.discard)
                return
            state.metrics.count_generated(gen.generated)
        self._release()

    def _release(self) -> None:
        self.state.active.discard(self.gen)
        self.state.metrics.request_ended()
        if self.sem is not None:
            self.sem.release()

    async def _generate_unseen(self) -> None:
        """cancel_keeps_generating: the answer goes on to max_tokens unread, then the slot is freed."""
        state, gen = self.state, self.gen
        state.metrics.count_generated(gen.generated)
        try:
            for _ in range(max((self.limit or gen.completion_tokens) - gen.generated, 0)):
                await asyncio.sleep(max(state.token_delay(), 0.01))
                gen.generated += 1
                state.metrics.count_generated(1)
        finally:
            self._release()


async def _sleep_generation(state: State, gen: _Generation, tokens: int,
                            request: web.Request | None = None) -> None:
    """Wait as long as a non-streamed answer of `tokens` tokens takes to generate; given the request,
    stop (ConnectionResetError) soon after its client disconnects, as a server checking between steps."""
    cfg = state.config
    if not (cfg.batch_slowdown or cfg.kv_cache_tokens):
        delay = gen.ttft + cfg.itl * max(tokens - 1, 0)
        started = time.monotonic()
        try:
            await _attended(request, delay)
        except ConnectionResetError:
            elapsed = time.monotonic() - started - gen.ttft
            done = 0 if elapsed < 0 else tokens if not cfg.itl else 1 + int(elapsed / cfg.itl)
            gen.progress(done, tokens)
            raise
        return
    # Token by token: each delay depends on the batch at that moment, and the KV gauge fills up.
    await _attended(request, gen.ttft)
    gen.progress(1, tokens)
    for done in range(2, tokens + 1):
        await _attended(request, state.token_delay())
        gen.progress(done, tokens)


DISCONNECT_CHECK_S = 0.05
"""How often a non-streamed answer looks whether its client is still connected."""


async def _attended(request: web.Request | None, seconds: float) -> None:
    """Sleep `seconds`, looking every DISCONNECT_CHECK_S whether the client left (ConnectionResetError)."""
    if request is None:
        if seconds > 0:
            await asyncio.sleep(seconds)
        return
    deadline = time.monotonic() + seconds
    while True:
        if request.transport is None or request.transport.is_closing():
            raise ConnectionResetError("the client disconnected before its answer")
        left = deadline - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(left, DISCONNECT_CHECK_S))


async def _send(resp: web.StreamResponse, payload: Mapping[str, Any] | str) -> None:
    for event in conformance.shape(resp, dict(payload) if not isinstance(payload, str) else payload):
        await resp.write(conformance.encode(event))


async def _stream_chat(request: web.Request, state: State, body: Mapping[str, Any],
                       choices: list[generation.Choice], prompt_tokens: int, cid: str,
                       created: int, want_logprobs: bool, top: int, start: float, gen: _Generation,
                       marks: StreamMarks | None = None) -> web.StreamResponse:
    cfg = state.config
    resp = web.StreamResponse(headers={"Content-Type": conformance.stream_content_type(cfg.faults),
                                       "Cache-Control": "no-cache"})
    if cfg.gzip_streams:
        resp.enable_compression(web.ContentCoding.gzip)  # as some gateways do: still valid SSE
    await resp.prepare(request)
    shaped, miscount = conformance.load_stream_faults(cfg, len(state.flights))
    if shaped:
        resp["inferaccept_shaper"] = conformance.StreamShaper(shaped,
                                                              _chat_usage(cfg, prompt_tokens, choices),
                                                              number=state.drawn)
    generation.stream_faults(choices, body, cfg.faults)
    model = _response_model(cfg)
    opts = body.get("stream_options") or {}
    include_usage = bool(opts.get("include_usage"))

    def chunk(choice_list: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created,
                               "model": model, "choices": choice_list}
        if include_usage:
            out["usage"] = None
        return out

    for c in choices:
        _mark(marks, "role")
        await _send(resp, chunk([{"index": c.index, "delta": {"role": "assistant", "content": ""},
                                  "logprobs": None, "finish_reason": None}]))
    if "stream_stall" in cfg.faults:
        await asyncio.sleep(3600)
    first = True
    steps = max(len(c.reasoning) + (len(c.pieces) if not c.tool_calls else 2) for c in choices)
    for step in range(steps):
        await asyncio.sleep(gen.ttft if first else state.token_delay())
        first = False
        gen.progress(step + 1, steps)
        for c in choices:
            thinking = step < len(c.reasoning)  # reasoning tokens come first, one per chunk
            delta = (generation.reasoning_fields(cfg.reasoning_field, c.reasoning[step]) if thinking
                     else _stream_delta(c, step - len(c.reasoning)))
            if delta is None:
                continue
            entry: dict[str, Any] = {"index": c.index, "delta": delta, "logprobs": None,
                                     "finish_reason": None}
            if want_logprobs and not c.tool_calls and not thinking:
                lp = generation.logprobs_for(c, top)
                entry["logprobs"] = {"content": [lp["content"][step - len(c.reasoning)]], "refusal": None}
            _mark(marks, "content" if "content" in delta else "other")
            await _send(resp, chunk([entry]))
    if generation.runs_away(body, cfg.faults):
        await conformance.run_away(resp, chunk, choices[0].tool_calls, state.token_delay)
    for c in choices:
        _mark(marks, "other")
        await _send(resp, chunk([{"index": c.index, "delta": {}, "logprobs": None,
                                  "finish_reason": c.finish_reason}]))
    completion_tokens = sum(c.completion_tokens for c in choices)
    if include_usage:
        final = chunk([])
        final["usage"] = _chat_usage(cfg, prompt_tokens, choices)
        if miscount:
            final["usage"] = conformance.miscounted(final["usage"])
        _mark(marks, "other")
        await _send(resp, final)
    end = clock()
    await _send(resp, "[DONE]")
    if marks is not None and state.timing is not None:
        state.timing.write(cid, marks, end)
    gen.finished = True
    state.metrics.request_finished(prompt_tokens, completion_tokens, ttft=gen.ttft,
                                   e2e=time.monotonic() - start)
    await resp.write_eof()
    return resp


def _mark(marks: StreamMarks | None, kind: str) -> None:
    """Note that a chunk of `kind` is written now, when the timing log is on (stamped just before
    the write, so a client can never see the chunk before the server's stamp)."""
    if marks is not None:
        marks.note(kind)


def _stream_delta(c: generation.Choice, step: int) -> dict[str, Any] | None:
    if c.tool_calls:
        if step == 0:
            return {"tool_calls": [
                {"index": i, "id": call["id"], "type": "function",
                 "function": {"name": call["function"]["name"], "arguments": ""}}
                for i, call in enumerate(c.tool_calls)]}
        if step == 1:
            return {"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}
                                   for i, call in enumerate(c.tool_calls)]}
        return None
    if step >= len(c.pieces):
        return None
    return {"content": c.pieces[step]}


async def completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/completions (legacy)."""
    state = _state(request)
    cfg = state.config
    if "no_completions" in cfg.faults:
        return web.Response(status=404, text="Not Found")
    body = await _json_body(request)
    prompt = body.get("prompt")
    if not isinstance(prompt, (str, list)) or prompt in ("", []):
        raise ApiError(400, "'prompt' must be a non-empty string or array", param="prompt")
    validation.check_common(body, _served(cfg))
    echo = bool(body.get("echo"))
    if echo and "echo_rejected" in cfg.faults:
        raise ApiError(400, "Only no echo is supported", param="echo")
    await _hang_if_asked(state)
    if state.overloaded():
        return await _overload_answer(state)
    # From here to taking the slot nothing awaits: the overload check above stays true.
    slow, failed = state.draw()
    if failed:
        return _error(traffic.error_answer(cfg.error_status))
    _count_completion(state)
    text_prompt = prompt if isinstance(prompt, str) else json.dumps(prompt)
    prompt_tokens = textgen.count_tokens(text_prompt)
    choices = [generation.generate_text(text_prompt, body, i, cfg.max_natural_tokens)
               for i in range(int(body.get("n") or 1))]
    cid = f"cmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    completion_tokens = sum(c.completion_tokens for c in choices)
    async with _slot(state, prompt_tokens, completion_tokens, limit=_limit_of(body),
                     stream=bool(body.get("stream"))) as gen:
        start = time.monotonic()
        if slow:
            gen.ttft += cfg.slow_ttft
        steps = max(len(c.pieces) for c in choices)
        if body.get("stream"):
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            if cfg.faults:
                resp["inferaccept_shaper"] = conformance.StreamShaper(
                    cfg.faults, _usage(prompt_tokens, completion_tokens))
            for step in range(steps):
                await asyncio.sleep(gen.ttft if step == 0 else state.token_delay())
                gen.progress(step + 1, steps)
                for c in choices:
                    if step < len(c.pieces):
                        await _send(resp, {"id": cid, "object": "text_completion",
                                           "created": created, "model": _response_model(cfg),
                                           "choices": [{"index": c.index, "text": c.pieces[step],
                                                        "logprobs": None, "finish_reason": None}]})
            for c in choices:
                await _send(resp, {"id": cid, "object": "text_completion", "created": created,
                                   "model": _response_model(cfg),
                                   "choices": [{"index": c.index, "text": "", "logprobs": None,
                                                "finish_reason": c.finish_reason}]})
            await _send(resp, "[DONE]")
            gen.finished = True
            state.metrics.request_finished(prompt_tokens, completion_tokens, ttft=gen.ttft,
                                           e2e=time.monotonic() - start)
            await resp.write_eof()
            return resp
        await _sleep_generation(state, gen, steps, request)
        gen.finished = True
        state.metrics.request_finished(prompt_tokens, completion_tokens, ttft=gen.ttft,
                                       e2e=time.monotonic() - start)
        return web.json_response(conformance.completion_response({
            "id": cid, "object": "text_completion", "created": created,
            "model": _response_model(cfg),
            "choices": [{"index": c.index, "text": text_prompt + c.text if echo else c.text,
                         "logprobs": None if body.get("logprobs") is None else completion_logprobs(
                             text_prompt, c.pieces, echo=echo, faults=cfg.faults),
                         "finish_reason": c.finish_reason} for c in choices],
            "usage": _usage(prompt_tokens, completion_tokens),
        }, cfg.faults))


def embed(text: str, dim: int) -> list[float]:
    """A deterministic unit vector for a text."""
    raw = hashlib.sha256(text.encode()).digest()
    while len(raw) < dim:
        raw += hashlib.sha256(raw).digest()
    vec = [(b - 127.5) / 127.5 for b in raw[:dim]]
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


async def embeddings(request: web.Request) -> web.Response:
    """POST /v1/embeddings."""
    state = _state(request)
    cfg = state.config
    if "no_embeddings" in cfg.faults:
        return web.Response(status=404, text="Not Found")
    body = await _json_body(request)
    inputs = validation.check_embeddings(body, (cfg.embedding_model,))
    faults = cfg.faults
    if body.get("encoding_format") == "base64" and "embeddings_base64_rejected" in faults:
        raise ApiError(400, "'encoding_format' must be float", param="encoding_format")
    dims = None if "dimensions_ignored" in faults else body.get("dimensions")
    if dims is not None and dims > cfg.embedding_dim:
        raise ApiError(400, f"'dimensions' must be <= {cfg.embedding_dim}", param="dimensions")
    dim = dims or cfg.embedding_dim
    data = []
    for i, text in enumerate(inputs):
        shrink = len(text) % 3 if "embeddings_dim_varies" in faults else 0
        vec = embed(text, cfg.embedding_dim)[:dim - shrink]
        if "answers_changed" in faults:  # a nudge, not a new vector: cosine about 0.97
            other = embed(text + "\x00upgraded", len(vec))
            vec = [0.8 * v + 0.2 * w for v, w in zip(vec, other, strict=True)]
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        vec = [v / norm for v in vec]
        if "embeddings_nan" in faults:
            vec[0] = math.nan
        value: Any = vec
        if body.get("encoding_format") == "base64":
            code = "d" if "embeddings_base64_wrong" in faults else "f"
            value = base64.b64encode(struct.pack(f"<{len(vec)}{code}", *vec)).decode()
        index = 0 if "embeddings_indices_wrong" in faults else i
        data.append({"object": "embedding", "index": index, "embedding": value})
    tokens = sum(textgen.count_tokens(t) for t in inputs)
    answer: dict[str, Any] = {"object": "list", "data": data, "model": cfg.embedding_model,
                              "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
    if "embeddings_usage_missing" in faults:
        del answer["usage"]
    return web.json_response(answer)


def make_app(config: FakeConfig) -> web.Application:
    """Build the aiohttp application for one fake server."""
    app = web.Application(middlewares=[_middleware], client_max_size=64 * 1024 * 1024)
    app[STATE_KEY] = State(config)
    app[CONFIG_KEY] = config
    app.on_cleanup.append(_close_timing)
    app.router.add_get("/health", health)
    app.router.add_get("/version", version)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/metrics/", metrics)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", with_double_bos(chat_completions)
                        if "double_bos" in config.faults else chat_completions)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_post("/v1/responses", responses_handler(STATE_KEY, _slot, _sleep_generation))
    app.router.add_post("/v1/responses/input_tokens", input_tokens_handler(STATE_KEY))
    app.router.add_post("/v1/messages", create_message)
    app.router.add_post("/v1/messages/count_tokens", messages.count_tokens)
    app.router.add_post("/tokenize", tokenize_handler)
    app.router.add_post("/apply-template", apply_template_handler)
    return app


async def _close_timing(app: web.Application) -> None:
    timing = app[STATE_KEY].timing
    if timing is not None:
        timing.close()
