"""Evidence a test gathers: HTTP exchanges, notes, warnings and measured values (JSON-ready)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_inferaccept.scrub import MASK, Scrubber, secret_key_name

BODY_EXCERPT = 2000
MAX_EXCHANGES = 12


def excerpt(data: str | bytes | None, limit: int = BODY_EXCERPT) -> str:
    """Return at most `limit` characters of a body, marking the cut."""
    if data is None:
        return ""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more chars]"


def redact(value: Any) -> Any:
    """Replace values under secret-looking keys in nested JSON data."""
    if isinstance(value, dict):
        return {k: (MASK if secret_key_name(k) and v else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


@dataclass
class Exchange:
    """One HTTP request and what came back."""

    method: str
    url: str
    request_body: str = ""
    status: int | None = None
    response_body: str = ""
    elapsed_s: float | None = None
    error: str | None = None
    request_headers: dict[str, str] = field(default_factory=dict)
    response_headers: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {k: v for k, v in self.__dict__.items() if v not in (None, "", {})}


# The headers a reader needs to act on a finding (framing, redirects, back-off, who answered);
# the rest (dates, cookies, the Authorization sent) only add noise or risk.
_HEADERS_THAT_MATTER = frozenset({
    "content-type", "content-length", "content-encoding", "transfer-encoding", "location",
    "retry-after", "server", "x-request-id", "request-id", "www-authenticate", "allow",
})


def headers_that_matter(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers worth keeping as evidence (rate-limit headers too), with lower-case names."""
    kept: dict[str, str] = {}
    for name, value in headers:
        low = name.lower()
        if low in _HEADERS_THAT_MATTER or low.startswith("x-ratelimit"):
            kept[low] = value
    return kept


@dataclass
class Evidence:
    """Everything one test recorded; secrets are scrubbed before anything is stored or cut."""

    secrets: tuple[str, ...] = field(default=(), repr=False)
    scrubber: Scrubber = field(default_factory=Scrubber, repr=False)
    exchanges: list[Exchange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    dropped_exchanges: int = 0
    invalid: str | None = None

    def __post_init__(self) -> None:
        for secret in self.secrets:
            self.scrubber.add(secret)

    def scrub(self, text: str) -> str:
        """Remove every known secret (and secret-shaped value) from a text."""
        return self.scrubber.text(text)

    def _cut(self, text: str) -> str:
        """Scrub, then cut to an excerpt; a huge body is first trimmed with a margin wider than
        any secret, so scrubbing stays cheap and nothing straddling the cut survives."""
        margin = BODY_EXCERPT + 4096 + max((len(x) for x in self.scrubber.secrets), default=0)
        if len(text) <= margin:
            return excerpt(self.scrub(text))
        kept = self.scrub(text[:margin])[:BODY_EXCERPT]
        return f"{kept}… [{len(text) - BODY_EXCERPT} more chars]"

    def add_exchange(self, exchange: Exchange) -> None:
        """Keep an exchange (the first few and the latest ones), scrubbed, then cut to size."""
        exchange.url = self.scrub(exchange.url)
        exchange.request_body = self._cut(exchange.request_body)
        exchange.response_body = self._cut(exchange.response_body)
        if exchange.error:
            exchange.error = self.scrub(exchange.error)
        exchange.request_headers = {k: excerpt(self.scrub(v), 300)
                                    for k, v in exchange.request_headers.items()}
        exchange.response_headers = {k: excerpt(self.scrub(v), 300)
                                     for k, v in exchange.response_headers.items()}
        if len(self.exchanges) >= MAX_EXCHANGES:
            self.exchanges.pop(MAX_EXCHANGES // 2)
            self.dropped_exchanges += 1
        self.exchanges.append(exchange)

    def note(self, text: str) -> None:
        """Record an observation for the report."""
        self.notes.append(self.scrub(text))

    def warn(self, text: str) -> None:
        """Record a deviation that does not fail the check (it reaches the verdict's warnings)."""
        self.warnings.append(self.scrub(text))

    def record(self, key: str, value: Any) -> None:
        """Record a JSON-serialisable measured value under a key."""
        json.dumps(value)  # fail early on values that cannot travel on a report
        self.values[key] = self.scrubber.data(redact(value))

    def mark_invalid(self, reason: str) -> None:
        """Say that this test could not judge the server (its result makes the verdict INVALID)."""
        self.invalid = self.scrub(reason)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        out: dict[str, Any] = {}
        if self.exchanges:
            out["exchanges"] = [e.to_json() for e in self.exchanges]
        if self.dropped_exchanges:
            out["dropped_exchanges"] = self.dropped_exchanges
        if self.notes:
            out["notes"] = list(self.notes)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.values:
            out["values"] = dict(self.values)
        if self.invalid:
            out["invalid"] = self.invalid
        return out
