"""One record per request: what the load engine saw, on the worker's monotonic clock.

Times are seconds since the run's common start (`t0`, the moment the schedule began in this
worker), so records from several worker processes can be merged; they are durations on one
process's clock each, never wall-clock times. No pytest and no statistics here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any, Literal

ErrorClass = Literal["connect", "timeout", "http_4xx", "http_5xx", "stream_error", "stall",
                     "incomplete", "cancelled", "too_large", "client_error"]
ERROR_CLASSES: tuple[str, ...] = ("connect", "timeout", "http_4xx", "http_5xx", "stream_error",
                                  "stall", "incomplete", "cancelled", "too_large")
"""Every error class counted against the server (`error`), in the order reports list them.

`incomplete`: an answer the server called finished (HTTP 200, the stream closed) that ended
without a finish_reason, or with nothing generated although max_tokens allowed it.
"""
HARNESS_ERROR = "client_error"
"""The class of a request the client itself failed (a fault in its own code, not the server's):
it never counts against the server, and it makes the run INVALID."""

RequestKind = Literal["chat", "completions", "embeddings"]
TpotBasis = Literal["usage", "usage_streamed", "content_events"]
"""What a request's TPOT divides by: the server's usage.completion_tokens; that count less the
reasoning tokens it reported but never streamed; or the content events the client counted."""


@dataclass(slots=True, kw_only=True)
class RequestRecord:
    """One request of a load run, from send to end, with every timestamp the engine took.

    Timestamps are seconds since the worker's t0 (monotonic); None means the moment never
    came (no headers before a connect error, no content in an empty answer).
    """

    index: int
    """Position of the request in the schedule (unique within one run, across workers)."""
    worker: int = 0
    """Which worker process sent it (0 for a single-process run)."""
    kind: RequestKind = "chat"
    warmup: bool = False
    """Warm-up requests are run and recorded but excluded from every statistic."""
    tags: tuple[str, ...] = ()
    scheduled: float | None = None
    """When the schedule meant to send it (open loop); `send - scheduled` is the schedule lag."""
    send: float = 0.0
    headers: float | None = None
    first_byte: float | None = None
    first_event: float | None = None
    """First SSE event of any kind (the role-only chunk included)."""
    first_token_any: float | None = None
    """First event that carried generated text of any kind (content, reasoning, a tool call) with at
    least one character that is not whitespace; an answer that is whitespace throughout takes its
    first generated event. A blank reasoning delta sent at once does not count as a first token."""
    first_content: float | None = None
    """First event that carried content text (TTFT is measured here)."""
    end: float = 0.0
    content_times: list[float] = field(default_factory=list)
    """Arrival time of every event that carried content text (ITL = the gaps)."""
    status: int | None = None
    error: ErrorClass | None = None
    error_detail: str = ""
    retry_after: str | None = None
    """The Retry-After header of an error answer (a server shedding load says when to come back)."""
    response_id: str | None = None
    prompt_tokens: int | None = None
    """usage.prompt_tokens as the server reported it (None: no usage sent)."""
    completion_tokens: int | None = None
    """usage.completion_tokens as the server reported it (None: no usage sent)."""
    reasoning_tokens: int | None = None
    """usage.completion_tokens_details.reasoning_tokens as the server reported it (None: not sent)."""
    reasoning_events: int = 0
    """Events that carried reasoning text: none while reasoning_tokens > 0 means the reasoning was
    hidden (generated and counted in usage, never streamed)."""
    content_events: int = 0
    chunks: int = 0
    """SSE data events received (the [DONE] sentinel not counted)."""
    coalesced: int = 0
    """Content events that arrived in the same network read as the content event before them.

    Their inter-token gap is the client's read batching, not the server's pacing; the trailing
    finish, usage and [DONE] events are not counted (they often share a read on a healthy client).
    """
    reads: int = 0
    output_chars: int = 0
    retries: int = 0
    """Resends after a stale keep-alive connection failed before the request reached the server."""
    max_tokens: int | None = None
    input_tokens_target: int | None = None
    """The prompt length the workload asked for (the server's prompt_tokens is the truth)."""
    finish_reason: str | None = None
    """The last finish_reason the stream carried (None: the server sent none)."""
    finish_reasons: int = 0
    """How many finish_reason values the stream carried, over all its choices (a sound answer sends
    one per choice; two for one choice is a protocol fault the last value alone would hide)."""
    finished_choices: int = 0
    """How many distinct choices (by index) carried a finish_reason."""
    done: bool = False
    """True when the stream ended with `data: [DONE]` (always False for embeddings)."""
    node: str | None = None
    """The Ray node that sent it (--load-cluster); None for a run on this machine."""

    @property
    def ok(self) -> bool:
        """True when the request completed without an error."""
        return self.error is None

    @property
    def ttft(self) -> float | None:
        """Seconds from send to the first content token."""
        return None if self.first_content is None else self.first_content - self.send

    @property
    def e2e(self) -> float:
        """Seconds from send to the end of the answer."""
        return self.end - self.send

    @property
    def output_tokens(self) -> int:
        """The server's completion token count, else the content events counted by the client."""
        return self.completion_tokens if self.completion_tokens is not None else self.content_events

    @property
    def usage_reported(self) -> bool:
        """True when the server sent usage for this request."""
        return self.completion_tokens is not None

    def itls(self) -> list[float]:
        """Gaps between successive content events, in seconds."""
        t = self.content_times
        return [b - a for a, b in pairwise(t)]

    @property
    def harness_error(self) -> bool:
        """True when the client's own code failed on this request (not the server's fault)."""
        return self.error == HARNESS_ERROR

    @property
    def hidden_reasoning_tokens(self) -> int:
        """Reasoning tokens the server counted in usage but never streamed (0 when it streamed any)."""
        if self.reasoning_events or not self.reasoning_tokens or self.completion_tokens is None:
            return 0
        return max(0, min(self.reasoning_tokens, self.completion_tokens))

    def tpot_basis(self) -> TpotBasis | None:
        """Which token count TPOT divides by: `usage`, `usage_streamed` (usage less the reasoning tokens
        the server never streamed) or `content_events`; None when the request has no TPOT."""
        if self.completion_tokens is None:
            basis: TpotBasis = "content_events"
        else:
            basis = "usage_streamed" if self.hidden_reasoning_tokens else "usage"
        return basis if self.tpot() is not None else None

    def tpot(self) -> float | None:
        """(end - first token) / (streamed output tokens - 1); None with fewer than two tokens or no token.

        The span is the streamed one, so the count is of streamed tokens only. With the server's
        usage (which counts reasoning and tool-call tokens too) the clock starts at the first
        generated token of any kind, and reasoning tokens the server reported
        (completion_tokens_details.reasoning_tokens) but never streamed are left out of the count:
        they were spent before the first streamed token, not between streamed ones. With content
        events counted by the client, the clock starts at the first content token.
        """
        if self.completion_tokens is not None:
            first = self.first_token_any if self.first_token_any is not None else self.first_content
            n = self.completion_tokens - self.hidden_reasoning_tokens
        else:
            first, n = self.first_content, self.content_events
        if first is None or n < 2:
            return None
        return (self.end - first) / (n - 1)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (one line of --inferaccept-records)."""
        out = asdict(self)
        out["tags"] = list(self.tags)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RequestRecord:
        """Rebuild a record from its JSON form."""
        data = dict(data)
        data["tags"] = tuple(data.get("tags", ()))
        return cls(**data)
