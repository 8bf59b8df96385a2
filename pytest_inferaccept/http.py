"""httpx clients for the plugin: every exchange bounded in time and size, and kept as evidence.

The bounds live in the transport, so they hold for every caller (the checks' raw probes, the
official SDK clients, the robustness harness): `request_timeout` covers the whole exchange, not
one read, and a body (or the data a stream has sent so far) larger than `max_bytes` ends the
exchange. Crossing either raises an httpx error whose message is the finding.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.checks.pace import DEADLINE_EXTENSION
from pytest_inferaccept.evidence import BODY_EXCERPT, Evidence, Exchange, headers_that_matter

if TYPE_CHECKING:
    import httpx

    from pytest_inferaccept.settings import Settings

EvidenceGetter = Callable[[], "Evidence | None"]
DEFAULT_MAX_BYTES = 16 * 2**20
"""Largest body (or streamed data) the plugin reads from one answer (--max-response-mb)."""


def timeout_for(request_timeout: float, connect_timeout: float) -> httpx.Timeout:
    """The timeout every plugin client uses: no request can hang a run."""
    import httpx

    return httpx.Timeout(request_timeout, connect=connect_timeout)


def bound_finding(exc: BaseException | None) -> str | None:
    """The finding of a bound error found in an exception's chain (the SDKs wrap it), or None."""
    if exc is None:
        return None
    from pytest_inferaccept import _bound_errors

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, _bound_errors.BoundError):
            return str(exc)
        exc = exc.__cause__ or exc.__context__
    return None


def make_client(base_url: str, *, api_key: str | None, request_timeout: float,
                connect_timeout: float, evidence: EvidenceGetter,
                max_bytes: int = DEFAULT_MAX_BYTES) -> httpx.Client:
    """An httpx client on `base_url` whose exchanges are bounded and land in the test's evidence."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=base_url, headers=headers,
                        timeout=timeout_for(request_timeout, connect_timeout),
                        transport=bounded_transport(request_timeout, max_bytes, evidence))


def _no_evidence() -> Evidence | None:
    return None


def client_for(settings: Settings, base_url: str = "", *, read_timeout: float | None = None,
               evidence: EvidenceGetter = _no_evidence) -> httpx.Client:
    """The client every plugin request goes through: the settings' key, timeouts and size bound;
    `read_timeout` shortens the request timeout for a quick question (is it alive?)."""
    return make_client(base_url, api_key=settings.api_key,
                       request_timeout=read_timeout or settings.request_timeout,
                       connect_timeout=settings.connect_timeout, evidence=evidence,
                       max_bytes=settings.max_response_bytes)


def sdk_httpx() -> ModuleType:
    """The httpx module the installed openai SDK is built on (httpx, or httpx2 in SDK 3)."""
    from openai import _base_client

    module = getattr(_base_client, "httpx2", None) or getattr(_base_client, "httpx", None)
    if isinstance(module, ModuleType):
        return module
    import httpx

    return httpx


def make_sdk_clients(*, request_timeout: float, connect_timeout: float, max_bytes: int,
                     asynchronous: bool) -> Any:
    """An http client for the openai SDK, built on its own httpx, with the plugin's bounds."""
    hx = sdk_httpx()
    timeout = hx.Timeout(request_timeout, connect=connect_timeout)
    if asynchronous:
        return hx.AsyncClient(timeout=timeout,
                              transport=async_bounded_transport(request_timeout, max_bytes, hx))
    return hx.Client(timeout=timeout, transport=bounded_transport(request_timeout, max_bytes, None, hx))


def make_openai_client(settings: Settings, api_base: str, *, asynchronous: bool) -> Any:
    """The official SDK client (sync or async) for the server: no retries, the plugin's timeouts,
    and reads through the plugin's bounded transport, so SDK calls hold the same deadline and
    size cap as the raw probes."""
    import openai

    s = settings
    http_client = make_sdk_clients(request_timeout=s.request_timeout, connect_timeout=s.connect_timeout,
                                   max_bytes=s.max_response_bytes, asynchronous=asynchronous)
    kind = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return kind(base_url=api_base, api_key=s.api_key or "none",
                timeout=openai.Timeout(s.request_timeout, connect=s.connect_timeout),
                max_retries=0, http_client=http_client)




def _total_limit(request: httpx.Request, default: float) -> float:
    """The exchange's total deadline: the request's own deadline extension, else its read timeout (one
    value for the wait for each byte and the whole exchange), else the client's."""
    own = request.extensions.get(DEADLINE_EXTENSION)
    if isinstance(own, (int, float)) and not isinstance(own, bool) and own > 0:
        return float(own)
    timeout = request.extensions.get("timeout") or {}
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return float(read) if isinstance(read, (int, float)) and read > 0 else default


class _Meter:
    """Counts the bytes and watches the clock of one answer; raises the bound errors."""

    def __init__(self, response: Any, started: float, limit_s: float, max_bytes: int) -> None:
        # Looked up once per answer, not per chunk: check() runs on every read of every stream.
        from pytest_inferaccept._bound_errors import AnswerTooLarge, AnswerTooSlow

        self.slow, self.large = AnswerTooSlow, AnswerTooLarge
        self.deadline = started + limit_s
        self.limit_s = limit_s
        self.max_bytes = max_bytes
        self.size = 0
        self.streamed = "text/event-stream" in response.headers.get("content-type", "")

    def check(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise self.large(f"the answer exceeded {_mb(self.max_bytes)} (read {_mb(self.size)}, then "
                        "stopped; --max-response-mb sets the limit)")
        if time.monotonic() > self.deadline:
            what = "the stream sent no end" if self.streamed else "the answer was not complete"
            raise self.slow(f"{what} in {self.limit_s:g} s ({_mb(self.size)} received; "
                       "--request-timeout covers the whole exchange)")


def _mb(size: int) -> str:
    return f"{size / 2**20:.0f} MB" if size >= 2**20 else f"{size} bytes"


def bounded_transport(request_timeout: float, max_bytes: int, evidence: EvidenceGetter | None = None,
                      hx: ModuleType | None = None) -> httpx.BaseTransport:
    """A sync transport that bounds each answer in time and size and records it as evidence.

    `hx` is the httpx module to build on (the SDK may use its own copy); httpx by default.
    """
    if hx is None:
        import httpx as hx
    httpx: Any = hx

    class BoundedStream(httpx.SyncByteStream):  # type: ignore[misc]  # httpx or the SDK's copy
        def __init__(self, inner: httpx.SyncByteStream, meter: _Meter, exchange: Exchange) -> None:
            self.inner = inner
            self.meter = meter
            self.exchange = exchange
            self.buffer = bytearray()

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.inner:
                if len(self.buffer) < BODY_EXCERPT * 2:
                    self.buffer.extend(chunk[: BODY_EXCERPT * 2])
                self.meter.check(chunk)
                yield chunk

        def close(self) -> None:
            self.exchange.response_body = bytes(self.buffer).decode("utf-8", "replace")
            self.inner.close()
            _keep(evidence, self.exchange)

    class BoundedTransport(httpx.BaseTransport):  # type: ignore[misc]  # httpx or the SDK's copy
        def __init__(self) -> None:
            self.inner = _fresh_connections(httpx)

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            exchange = _exchange(request, httpx)
            start = time.monotonic()
            try:
                response = self.inner.handle_request(request)
            except httpx.HTTPError as exc:
                exchange.error = f"{type(exc).__name__}: {exc}"
                exchange.elapsed_s = round(time.monotonic() - start, 6)
                _keep(evidence, exchange)
                raise
            exchange.status = response.status_code
            exchange.response_headers = headers_that_matter(response.headers.multi_items())
            exchange.elapsed_s = round(time.monotonic() - start, 6)
            assert isinstance(response.stream, httpx.SyncByteStream)
            meter = _Meter(response, start, _total_limit(request, request_timeout), max_bytes)
            return httpx.Response(status_code=response.status_code, headers=response.headers,
                                  stream=BoundedStream(response.stream, meter, exchange),
                                  extensions=response.extensions)

        def close(self) -> None:
            self.inner.close()

    return BoundedTransport()


def async_bounded_transport(request_timeout: float, max_bytes: int,
                            hx: ModuleType | None = None) -> httpx.AsyncBaseTransport:
    """An async transport with the same time and size bounds (no evidence: the SDK's own calls)."""
    if hx is None:
        import httpx as hx
    httpx: Any = hx

    class AsyncBoundedStream(httpx.AsyncByteStream):  # type: ignore[misc]  # httpx or the SDK's copy
        def __init__(self, inner: httpx.AsyncByteStream, meter: _Meter) -> None:
            self.inner = inner
            self.meter = meter

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self.inner:
                self.meter.check(chunk)
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class AsyncBoundedTransport(httpx.AsyncBaseTransport):  # type: ignore[misc]  # httpx or the SDK's copy
        def __init__(self) -> None:
            self.inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            start = time.monotonic()
            response = await self.inner.handle_async_request(request)
            assert isinstance(response.stream, httpx.AsyncByteStream)
            meter = _Meter(response, start, _total_limit(request, request_timeout), max_bytes)
            return httpx.Response(status_code=response.status_code, headers=response.headers,
                                  stream=AsyncBoundedStream(response.stream, meter),
                                  extensions=response.extensions)

        async def aclose(self) -> None:
            await self.inner.aclose()

    return AsyncBoundedTransport()


def _exchange(request: Any, httpx: Any) -> Exchange:
    try:
        body: Any = request.content
    except httpx.RequestNotRead:
        body = b"<streamed body>"
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    # Kept whole until the evidence scrubs it; only then is it cut to an excerpt.
    return Exchange(method=request.method, url=str(request.url), request_body=text,
                    request_headers=headers_that_matter(request.headers.multi_items()))


def _keep(evidence: EvidenceGetter | None, exchange: Exchange) -> None:
    ev = evidence() if evidence is not None else None
    if ev is not None:
        ev.add_exchange(exchange)


def _fresh_connections(httpx: Any) -> Any:
    """A transport that opens a new connection per request.

    Servers differ in how they end keep-alive connections after a stream (llama.cpp was seen
    closing one that the client then reused); a probe must not fail on a stale connection.
    """
    return httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
