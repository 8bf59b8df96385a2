"""Configuration of the fake server: timing, limits, model names and injected faults."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class FakeConfig:
    """How the fake server behaves; every field has a correct, fast default."""

    model: str = "fake-chat"
    embedding_model: str = "fake-embed"
    embedding_dim: int = 16
    ttft: float = 0.0
    """Seconds from request to the first content token."""
    itl: float = 0.0
    """Seconds between content tokens."""
    slots: int | None = None
    """How many requests generate at once; the rest queue (None: unlimited)."""
    context_window: int = 2048
    max_natural_tokens: int = 48
    """A generation ends by itself (finish_reason stop) after at most this many tokens."""
    api_key: str | None = field(default=None, repr=False)
    faults: frozenset[str] = frozenset()
    exit_after: int | None = None
    """Exit the process after this many completion requests (subprocess mode only)."""
    version: str = "fake 0.1.0"
    gzip_streams: bool = False
    """Send streamed chat answers with Content-Encoding: gzip (a gateway's habit; not a fault)."""
    timing_log: str | None = None
    """Append the server's own timestamps of each streamed chat answer to this JSONL file (off: None)."""
