"""One test's evidence as the page shows it: exchanges with a curl command that reproduces each."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from pytest_inferaccept.model import Evidence, Exchange
from pytest_inferaccept.robustness.curl import render_curl
from pytest_inferaccept.scrub import strip_userinfo

_CUT = re.compile(r"… \[\d+ more chars\]$")


@dataclass(frozen=True)
class ExchangeView:
    """One HTTP exchange, ready to print."""

    title: str
    status: str
    status_class: str
    elapsed: str
    error: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: str
    response_headers: tuple[tuple[str, str], ...]
    response_body: str
    curl: str
    curl_note: str


@dataclass(frozen=True)
class EvidenceView:
    """Everything a test recorded, ready to print."""

    exchanges: tuple[ExchangeView, ...]
    dropped: int
    notes: tuple[str, ...]
    warnings: tuple[str, ...]
    values: str
    invalid: str

    @property
    def empty(self) -> bool:
        """True when the test recorded nothing worth a section."""
        return not (self.exchanges or self.notes or self.warnings or self.values or self.invalid)


def _status_class(exchange: Exchange) -> str:
    if exchange.error or exchange.status is None:
        return "error"
    return {2: "ok", 3: "redirect", 4: "client"}.get(exchange.status // 100, "server")


def _pretty(body: str) -> str:
    """Indent a JSON body for reading; anything else (SSE, text, a cut body) stays as it came."""
    try:
        return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # a robustness check's deeply nested body is shown as sent
        return body


def curl_for(exchange: Exchange, *, authenticated: bool, max_time: float | None) -> tuple[str, str]:
    """A curl command re-sending the exchange's request (key as $INFERACCEPT_API_KEY), and a caveat."""
    parts = urlsplit(strip_userinfo(exchange.url))
    if not parts.scheme or not parts.netloc:
        return "", "no absolute URL was recorded"
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    headers = dict(exchange.request_headers)
    body_text = exchange.request_body
    note = ""
    if body_text == "<streamed body>":
        body_text, note = "", "the request body was streamed and not recorded"
    elif _CUT.search(body_text):
        body_text = _CUT.sub("", body_text)
        note = "the recorded request body was cut to an excerpt; this command sends the excerpt"
    if body_text and "content-type" not in headers and body_text.lstrip()[:1] in ("{", "["):
        headers["content-type"] = "application/json"
    command = render_curl(base, exchange.method, path, headers, body_text.encode("utf-8"),
                          authenticated=authenticated, max_time=max_time)
    return command, note


def exchange_view(exchange: Exchange, *, authenticated: bool, max_time: float | None) -> ExchangeView:
    """Shape one exchange for the page."""
    curl, note = curl_for(exchange, authenticated=authenticated, max_time=max_time)
    return ExchangeView(
        title=f"{exchange.method} {strip_userinfo(exchange.url)}",
        status=str(exchange.status) if exchange.status is not None else "no answer",
        status_class=_status_class(exchange),
        elapsed=f"{exchange.elapsed_s * 1000:.0f} ms" if exchange.elapsed_s is not None else "—",
        error=exchange.error or "",
        request_headers=tuple(sorted(exchange.request_headers.items())),
        request_body=_pretty(exchange.request_body),
        response_headers=tuple(sorted(exchange.response_headers.items())),
        response_body=_pretty(exchange.response_body),
        curl=curl,
        curl_note=note,
    )


def evidence_view(evidence: Evidence, *, authenticated: bool, max_time: float | None) -> EvidenceView:
    """Shape a test's evidence for the page."""
    return EvidenceView(
        exchanges=tuple(exchange_view(e, authenticated=authenticated, max_time=max_time)
                        for e in evidence.exchanges),
        dropped=evidence.dropped_exchanges,
        notes=tuple(evidence.notes),
        warnings=tuple(evidence.warnings),
        values=json.dumps(evidence.values, indent=2, ensure_ascii=False, default=str)
        if evidence.values else "",
        invalid=evidence.invalid or "",
    )
