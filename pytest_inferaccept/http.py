"""httpx clients for raw protocol probes, recording every exchange as evidence."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pytest_inferaccept.evidence import BODY_EXCERPT, Evidence, Exchange, excerpt

if TYPE_CHECKING:
    import httpx

EvidenceGetter = Callable[[], "Evidence | None"]


def timeout_for(request_timeout: float, connect_timeout: float) -> httpx.Timeout:
    """The timeout every plugin client uses: no request can hang a run."""
    import httpx

    return httpx.Timeout(request_timeout, connect=connect_timeout)


def make_client(base_url: str, *, api_key: str | None, request_timeout: float,
                connect_timeout: float, evidence: EvidenceGetter) -> httpx.Client:
    """An httpx client on `base_url` whose exchanges land in the current test's evidence."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=base_url, headers=headers,
                        timeout=timeout_for(request_timeout, connect_timeout),
                        transport=_recording_transport(evidence))


def _fresh_connections() -> httpx.HTTPTransport:
    """A transport that opens a new connection per request.

    Servers differ in how they end keep-alive connections after a stream (llama.cpp was seen
    closing one that the client then reused); a probe must not fail on a stale connection.
    """
    import httpx

    return httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))


def _recording_transport(evidence: EvidenceGetter) -> httpx.BaseTransport:
    import httpx

    class RecordingStream(httpx.SyncByteStream):
        def __init__(self, inner: httpx.SyncByteStream, exchange: Exchange) -> None:
            self.inner = inner
            self.exchange = exchange
            self.buffer = bytearray()

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.inner:
                if len(self.buffer) < BODY_EXCERPT * 2:
                    self.buffer.extend(chunk[: BODY_EXCERPT * 2])
                yield chunk

        def close(self) -> None:
            self.exchange.response_body = excerpt(bytes(self.buffer))
            self.inner.close()
            ev = evidence()
            if ev is not None:
                ev.add_exchange(self.exchange)

    class RecordingTransport(httpx.BaseTransport):
        def __init__(self) -> None:
            self.inner = _fresh_connections()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            try:
                body = request.content
            except httpx.RequestNotRead:
                body = b"<streamed body>"
            exchange = Exchange(method=request.method, url=str(request.url),
                                request_body=excerpt(body))
            start = time.monotonic()
            try:
                response = self.inner.handle_request(request)
            except httpx.HTTPError as exc:
                exchange.error = f"{type(exc).__name__}: {exc}"
                exchange.elapsed_s = round(time.monotonic() - start, 6)
                ev = evidence()
                if ev is not None:
                    ev.add_exchange(exchange)
                raise
            exchange.status = response.status_code
            exchange.elapsed_s = round(time.monotonic() - start, 6)
            assert isinstance(response.stream, httpx.SyncByteStream)
            return httpx.Response(status_code=response.status_code, headers=response.headers,
                                  stream=RecordingStream(response.stream, exchange),
                                  extensions=response.extensions)

        def close(self) -> None:
            self.inner.close()

    return RecordingTransport()
