"""One request -> one RequestRecord: aiohttp on one event loop, SSE parsed from the raw reads.

Every request is bounded by a total deadline, a stall limit (no bytes mid-stream) and a size cap,
enforced by one watchdog timer per request rather than a timer per read, so the per-chunk cost
stays a clock read, a split and a `json.loads`.
"""

from __future__ import annotations

import asyncio
import json
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from pytest_inferaccept.load.records import ErrorClass, RequestKind, RequestRecord
from pytest_inferaccept.load.sse import EXCERPT, StreamParser, excerpt

PATHS: dict[str, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions",
                         "embeddings": "/v1/embeddings"}
_ERROR_BODY_CAP = 64 * 1024
_DONE_GRACE = 0.5
"""Seconds to wait for the end of the HTTP body after [DONE] before dropping the connection."""
_loads = json.loads
_TRACEBACK_CAP = 4000
"""Characters of the client's own traceback kept on a record it failed itself."""
_SERVER_FAULTS = (aiohttp.ClientError, OSError, asyncio.TimeoutError, EOFError)
"""Exceptions that say something about the server or the network: transport and protocol errors.
Anything else raised while sending or reading is a fault of the client's own code."""


@dataclass(frozen=True, kw_only=True)
class ClientLimits:
    """The bounds every request runs under."""

    request_timeout: float = 60.0
    """Total seconds from send to the end of the answer."""
    connect_timeout: float = 5.0
    stall_timeout: float | None = None
    """Seconds without a byte, once the headers are in, before the request counts as stalled
    (--stall-timeout); None: the request timeout, so only the total deadline bounds a quiet stream."""
    max_response_bytes: int = 16 * 2**20

    @property
    def stall_seconds(self) -> float:
        """The stall limit in force: never longer than the total deadline, which ends the request first."""
        stall = self.stall_timeout
        return self.request_timeout if stall is None else min(stall, self.request_timeout)


def api_root(base_url: str) -> str:
    """The server root: `http://h:8000`, `http://h:8000/` and `http://h:8000/v1` all give `http://h:8000`."""
    url = base_url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def make_session(*, limit: int, connect_timeout: float, api_key: str | None) -> aiohttp.ClientSession:
    """One session per worker: a pool of `limit` connections (0: unlimited), the key as a bearer token."""
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    connector = aiohttp.TCPConnector(limit=limit, limit_per_host=0, ttl_dns_cache=300)
    # Only the socket connect is bounded here; the total deadline and the stall limit are the
    # client's own watchdog, so they can be told apart in the record.
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers,
                                 cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=True)


def flatten(messages: list[dict[str, Any]]) -> str:
    """Chat messages as one text (for legacy completions and embeddings)."""
    parts = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        parts.append(f"{msg.get('role', 'user')}: {content or ''}")
    return "\n".join(parts)


def build_body(kind: RequestKind, model: str, *, prompt: str | None,
               messages: list[dict[str, Any]] | None, max_tokens: int,
               extra: Mapping[str, Any] | None = None) -> bytes:
    """The JSON request body for one request of `kind`."""
    body: dict[str, Any] = {"model": model}
    if kind == "chat":
        body["messages"] = messages if messages is not None else [{"role": "user", "content": prompt}]
    else:
        text = prompt if prompt is not None else flatten(messages or [])
        body["prompt" if kind == "completions" else "input"] = text
    if kind != "embeddings":
        body["max_tokens"] = max_tokens
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if extra:
        body.update(extra)
    return json.dumps(body, separators=(",", ":")).encode()


class StreamClient:
    """Sends requests of one kind to one server and fills one record per request."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, kind: RequestKind, *,
                 limits: ClientLimits, t0: float,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.session = session
        self._fresh: aiohttp.ClientSession | None = None
        """Made at the first resend: the pool may hold more closed connections than the one that failed."""
        self.kind = kind
        self.url = api_root(base_url) + PATHS[kind]
        self.limits = limits
        self.t0 = t0
        self.clock = clock

    async def send(self, rec: RequestRecord, body: bytes) -> None:
        """Send one request and record what happened; cancellation is recorded, then re-raised."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        clock, t0, limits = self.clock, self.t0, self.limits
        stall = limits.stall_seconds
        state = _Watch()
        start = clock()
        deadline = start + limits.request_timeout
        rec.send = start - t0

        def fire() -> None:
            now = clock()
            if state.finished:
                return
            if state.done:
                state.reason = "done"
            elif now >= deadline - 1e-3:
                state.reason = "timeout"
            elif state.headers and now - state.last >= stall - 1e-3:
                state.reason = "stall"
            else:
                wake = min(deadline, state.last + stall) if state.headers else min(deadline, now + stall)
                state.handle = loop.call_later(max(wake - now, 1e-3), fire)
                return
            task.cancel()

        state.handle = loop.call_later(min(limits.request_timeout, stall), fire)
        try:
            try:
                await self._exchange(rec, body, state, loop, fire)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                # A pooled keep-alive connection the server had already closed (llama.cpp closes
                # every one after a stream): the request never reached it. Resend once, on a new
                # connection: another pooled one may be closed too (resent through the pool, 7 of
                # 124 requests against llama.cpp at c=4 failed that way). The record keeps the
                # first send time and counts the resend.
                if state.headers or rec.retries or isinstance(exc, aiohttp.ClientConnectorError):
                    raise
                rec.retries += 1
                await self._exchange(rec, body, state, loop, fire, session=self._fresh_session())
        except asyncio.CancelledError:
            state.finished = True
            reason = state.reason
            if reason is None:
                rec.error = "cancelled"
                rec.error_detail = "the run ended while the request was in flight"
                rec.end = clock() - t0
                raise
            _uncancel(task)
            if reason != "done":
                rec.error = "timeout" if reason == "timeout" else "stall"
                rec.error_detail = (f"no answer within the total deadline of {limits.request_timeout:g} s"
                                    if reason == "timeout" else
                                    f"no bytes for {stall:g} s in the middle of the answer "
                                    "(--stall-timeout)")
            elif rec.error is None:
                _check_complete(rec)  # [DONE] came, the body did not close: judged as it stands
            if rec.end == 0.0 or reason != "done":
                rec.end = clock() - t0
            if _cancelling(task):
                raise  # the run ended at the same moment: that cancellation still stands
        except _SERVER_FAULTS as exc:  # transport and protocol errors: the server's record
            state.finished = True
            if not state.done:  # a connection dropped after [DONE] lost nothing
                rec.end = clock() - t0
            if rec.error is None and not state.done:
                rec.error = "stream_error" if state.headers else "connect"
                rec.error_detail = f"{type(exc).__name__}: {exc}"[:EXCERPT]
        except Exception:  # a fault in the client's own code: never counted against the server
            state.finished = True
            rec.end = clock() - t0
            rec.error = "client_error"
            rec.error_detail = traceback.format_exc()[-_TRACEBACK_CAP:]
        finally:
            state.finished = True
            if state.handle is not None:
                state.handle.cancel()

    def _fresh_session(self) -> aiohttp.ClientSession:
        """A session that opens a new connection for every request, with the pool's headers."""
        if self._fresh is None:
            s = self.session
            self._fresh = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, force_close=True), timeout=s.timeout,
                headers=s.headers, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=True)
        return self._fresh

    async def close(self) -> None:
        """Close what the client opened itself (the caller closes the session it gave)."""
        if self._fresh is not None:
            await self._fresh.close()
            self._fresh = None

    async def _exchange(self, rec: RequestRecord, body: bytes, state: _Watch,
                        loop: asyncio.AbstractEventLoop, fire: Callable[[], None],
                        session: aiohttp.ClientSession | None = None) -> None:
        clock, t0, cap = self.clock, self.t0, self.limits.max_response_bytes
        async with (session or self.session).post(self.url, data=body, allow_redirects=False) as resp:
            now_abs = clock()
            state.headers = True
            state.last = now_abs
            rec.headers = now_abs - t0
            rec.status = resp.status
            if resp.status >= 300:
                rec.retry_after = resp.headers.get("Retry-After")
                await self._error_body(rec, resp, state)
                return
            if self.kind == "embeddings":
                await self._whole_body(rec, resp, state, cap)
                return
            stream = StreamParser(rec)
            readany = resp.content.readany
            size = 0
            now = rec.headers
            while True:
                data = await readany()
                now_abs = clock()
                now = now_abs - t0
                if not data:
                    break
                state.last = now_abs
                if rec.first_byte is None:
                    rec.first_byte = now
                size += len(data)
                if size > cap:
                    rec.error = "too_large"
                    rec.error_detail = f"the answer passed {cap} bytes"
                    break
                stream.feed(data, now)
                if stream.problem is not None:
                    break
                if stream.done and state.handle is not None and not state.done:
                    state.done = True
                    rec.end = now
                    rec.done = True
                    rec.finish_reason = stream.finish
                    # Wait briefly for the end of the HTTP body, so the connection can be reused.
                    state.handle.cancel()
                    state.handle = loop.call_later(_DONE_GRACE, fire)
            if rec.error is None and stream.problem is None:
                stream.finish_input(now)
            rec.done = stream.done
            rec.finish_reason = stream.finish
            rec.end = stream.done_at if stream.done_at is not None else now
            if rec.error is not None or stream.problem is not None:
                if rec.error is None:
                    rec.error = "stream_error"
                    rec.error_detail = stream.problem or ""
                resp.close()
            elif not stream.done and stream.finish is None:
                rec.error = "stream_error"
                rec.error_detail = "the stream ended before a finish_reason or data: [DONE]"
            else:
                _check_complete(rec)

    async def _read_capped(self, resp: aiohttp.ClientResponse, state: _Watch, rec: RequestRecord,
                           cap: int) -> tuple[bytes, bool]:
        """The body up to `cap` bytes, and whether it went past the cap."""
        clock, t0 = self.clock, self.t0
        out = bytearray()
        readany = resp.content.readany
        while True:
            data = await readany()
            if not data:
                return bytes(out), False
            now_abs = clock()
            state.last = now_abs
            rec.reads += 1
            if rec.first_byte is None:
                rec.first_byte = now_abs - t0
            out += data
            if len(out) > cap:
                resp.close()
                return bytes(out[:cap]), True

    async def _error_body(self, rec: RequestRecord, resp: aiohttp.ClientResponse, state: _Watch) -> None:
        data, _ = await self._read_capped(resp, state, rec, _ERROR_BODY_CAP)
        rec.end = self.clock() - self.t0
        rec.error = _status_class(resp.status)
        rec.error_detail = f"HTTP {resp.status}: {excerpt(data)}"

    async def _whole_body(self, rec: RequestRecord, resp: aiohttp.ClientResponse, state: _Watch,
                          cap: int) -> None:
        data, too_large = await self._read_capped(resp, state, rec, cap)
        rec.end = self.clock() - self.t0
        if too_large:
            rec.error, rec.error_detail = "too_large", f"the answer passed {cap} bytes"
            return
        try:
            obj = _loads(data)
        except ValueError:
            obj = None
        if type(obj) is not dict or obj.get("error"):
            rec.error, rec.error_detail = "stream_error", f"not a valid answer: {excerpt(data)}"
            return
        # A non-streamed answer arrives whole: its first "token" is its end (TTFT = e2e).
        rec.first_event = rec.first_token_any = rec.first_content = rec.end
        usage = obj.get("usage")
        if isinstance(usage, dict) and type(usage.get("prompt_tokens")) is int:
            rec.prompt_tokens = usage["prompt_tokens"]
        rid = obj.get("id")
        if type(rid) is str:
            rec.response_id = rid


class _Watch:
    """What the watchdog of one request reads and writes."""

    __slots__ = ("done", "finished", "handle", "headers", "last", "reason")

    def __init__(self) -> None:
        self.headers = False
        self.last = 0.0
        self.done = False
        self.finished = False
        self.reason: str | None = None
        self.handle: asyncio.TimerHandle | None = None


def _check_complete(rec: RequestRecord) -> None:
    """Mark a finished stream `incomplete` when it has no finish_reason or generated nothing.

    Both arrive as HTTP 200 and a closed stream, so nothing else flags them: a server that
    breaks under concurrency may answer every request with the role chunk and [DONE] only.
    Usage alone is no answer: a stream that carried no content, reasoning or tool call is empty
    whatever completion_tokens it claims (as the conformance burst judges it). The one exception
    is reasoning the server keeps hidden: cut by max_tokens with every completion token reported
    as reasoning, the workload left no room for content (counted as an answer without content).
    """
    generated = rec.first_token_any is not None
    if rec.finish_reason is None:
        rec.error = "incomplete"
        rec.error_detail = ("the stream ended with data: [DONE] but no finish_reason"
                            + ("" if generated else ", and nothing was generated (no content, "
                               "reasoning or tool call)"))
    elif not generated and rec.max_tokens != 0 and not _hidden_reasoning_took_it_all(rec):
        # The usage claim first: a report keeps the start of a detail.
        claimed = (f" and usage claiming {rec.completion_tokens} completion tokens, but"
                   if rec.completion_tokens else " with")
        rec.error = "incomplete"
        rec.error_detail = (f"finish_reason {rec.finish_reason!r}{claimed} nothing generated (no content, "
                            "reasoning or tool call) although max_tokens allowed it")


def _hidden_reasoning_took_it_all(rec: RequestRecord) -> bool:
    """Cut by max_tokens with every completion token reported as reasoning the server did not stream."""
    n, thought = rec.completion_tokens, rec.reasoning_tokens
    return rec.finish_reason == "length" and n is not None and n > 0 and thought is not None and thought >= n


def _status_class(status: int) -> ErrorClass:
    # Redirects are not followed: a load target that redirects is misconfigured, like a 4xx.
    return "http_5xx" if status >= 500 else "http_4xx"


def _cancelling(task: asyncio.Task[Any]) -> bool:
    """True when a cancellation other than the watchdog's is pending (3.11+; never on 3.10)."""
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False


def _uncancel(task: asyncio.Task[Any]) -> None:
    """Undo our own watchdog's cancel, so an enclosing timeout or task group is not confused (3.11+)."""
    uncancel = getattr(task, "uncancel", None)
    if uncancel is not None:
        uncancel()
