"""Evidence a test gathers: HTTP exchanges, notes, warnings and measured values (JSON-ready)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

BODY_EXCERPT = 2000
MAX_EXCHANGES = 12
# Whole key names (or their last part) only: "hf_token" is a secret, "prompt_tokens" is not.
_SECRET_KEYS = re.compile(r"(^|[_-])(api[_-]?key|apikey|token|secret|password|passwd|authorization)$",
                          re.IGNORECASE)


def excerpt(data: str | bytes | None, limit: int = BODY_EXCERPT) -> str:
    """Return at most `limit` characters of a body, marking the cut."""
    if data is None:
        return ""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more chars]"


def redact(value: Any) -> Any:
    """Replace values under secret-looking keys in nested JSON data."""
    if isinstance(value, dict):
        return {k: ("***" if _SECRET_KEYS.search(str(k)) and v else redact(v)) for k, v in value.items()}
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

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}


@dataclass
class Evidence:
    """Everything one test recorded; secrets are scrubbed before anything is stored."""

    secrets: tuple[str, ...] = field(default=(), repr=False)
    exchanges: list[Exchange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    dropped_exchanges: int = 0
    invalid: str | None = None

    def scrub(self, text: str) -> str:
        """Remove every known secret from a text."""
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def add_exchange(self, exchange: Exchange) -> None:
        """Keep an exchange (the first few and the latest ones)."""
        exchange.url = self.scrub(exchange.url)
        exchange.request_body = self.scrub(exchange.request_body)
        exchange.response_body = self.scrub(exchange.response_body)
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
        self.values[key] = redact(value)

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
