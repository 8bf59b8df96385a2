"""A server that stopped: spot a failed connection, confirm it with a probe, and name the cause.

No pytest here. The session asks these functions after a test failed; once a probe confirms
that the server no longer answers, later failures are that cause's consequences, not findings.
The cause itself is the run model's `Cause` (model.py): what the session holds is what the
results document's `causes[]` writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pytest_inferaccept.model import Cause, Exchange

__all__ = ["Cause", "ConnectionFailure", "answers", "connection_failure", "origin"]

Kind = Literal["exited", "stopped answering"]


def __getattr__(name: str) -> Any:
    """`Cause` is the run model's own class, imported when first asked for (pydantic is not loaded before)."""
    if name == "Cause":
        from pytest_inferaccept.model import Cause

        return Cause
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# Matched by class name, not by class: the openai SDK may be built on its own copy of httpx,
# and other clients (aiohttp) have their own classes for the same events. Timeouts are left
# out on purpose: a slow answer is a finding about the server, not a sign that it is gone.
CONNECTION_ERRORS = frozenset({
    "ConnectError", "ConnectTimeout", "ReadError", "WriteError", "RemoteProtocolError",
    "APIConnectionError", "ClientConnectorError", "ServerDisconnectedError", "ClientOSError",
})
PROBE_TIMEOUT = 3.0
SLOW_PROBE_PAUSE = 10.0
"""After a probe that timed out (rather than being refused), the next waits this long."""


@dataclass(frozen=True)
class ConnectionFailure:
    """A request of a failed test whose connection failed: what was asked and what it got."""

    error: str
    method: str | None = None
    url: str | None = None

    @property
    def origin(self) -> str | None:
        """scheme://host:port of the request, when known."""
        return origin(self.url) if self.url else None

    def describe(self) -> str:
        """'POST /v1/chat/completions: ConnectError: ...' (the path only: the server is known)."""
        if not self.method or not self.url:
            return self.error
        parts = urlsplit(self.url)
        error = self.error if len(self.error) <= 120 else self.error[:119] + "…"
        return f"{self.method} {parts.path or '/'}: {error}"


def origin(url: str) -> str:
    """scheme://host:port of a URL, without credentials."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{host}"


def _is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, ConnectionError) or type(exc).__name__ in CONNECTION_ERRORS


def _request_of(exc: BaseException) -> tuple[str | None, str | None]:
    try:
        request: Any = getattr(exc, "request", None)  # httpx raises RuntimeError when it has none
    except RuntimeError:
        return None, None
    if request is None:
        return None, None
    return str(getattr(request, "method", "") or "") or None, str(getattr(request, "url", "") or "") or None


def connection_failure(exc: BaseException | None,
                       exchanges: Sequence[Exchange] = ()) -> ConnectionFailure | None:
    """The failed connection behind a test failure: in the exception's chain, or its last exchange."""
    seen: set[int] = set()
    found: ConnectionFailure | None = None
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if _is_connection_error(exc):
            method, url = _request_of(exc)
            # The innermost error names what happened on the wire; an outer wrapper may know the request.
            found = ConnectionFailure(error=f"{type(exc).__name__}: {exc}".strip().rstrip(":"),
                                      method=method or (found.method if found else None),
                                      url=url or (found.url if found else None))
        exc = exc.__cause__ or exc.__context__
    if found is not None:
        return found
    last = exchanges[-1] if exchanges else None
    if last is not None and last.error and last.error.split(":", 1)[0] in CONNECTION_ERRORS:
        return ConnectionFailure(error=last.error, method=last.method, url=last.url)
    return None


PROBE_MAX_BYTES = 64 * 1024
"""The most of a /health answer the outage probe reads (any answer at all is what it asks)."""


def answers(root: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """None when the server at `root` answers an HTTP request at all (any status); else what was seen."""
    import httpx

    from pytest_inferaccept.http import make_client

    url = f"{root.rstrip('/')}/health"
    try:
        # Bounded like every plugin request: a server that drips bytes cannot hold the run here.
        with make_client("", api_key=None, request_timeout=timeout, connect_timeout=timeout,
                         evidence=lambda: None, max_bytes=PROBE_MAX_BYTES) as client:
            client.get(url)
    except httpx.HTTPError as exc:
        return f"GET {urlsplit(url).path}: {type(exc).__name__}: {exc}".rstrip(": ")
    return None
