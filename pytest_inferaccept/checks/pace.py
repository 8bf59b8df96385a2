"""How long a streamed check waits for its stream: sized from the pace the stream itself is measured at.

A fixed limit ("no end in 60 s") calls a slow server endless: a stream that is still sending
tokens at the server's own pace when the limit runs out has not failed, the check has run out of
time. So a streamed check reads its stream under these rules:

- it waits at least `base_s` (the run's --request-timeout), as every other request does;
- past that, it waits as long as a whole answer of `max_tokens` (plus `SLACK` events) takes at the
  pace measured on this stream so far, `MARGIN` times over, and never more than `ceiling_s`;
- a stream that reaches that limit still delivering raises `CouldNotFinish`: the check could not
  judge the server (INVALID for that check), never a finding;
- a stream that sends no event for `stall_s` (--stall-timeout) stalled: a finding;
- a stream that sends more than `RUNAWAY_FACTOR` x max_tokens + `SLACK` events without ending is
  endless: a finding, whatever its pace.

An event is one `data:` line of the stream ([DONE] aside); a server sends at most one per
generated token, plus a few for the role, the finish and the usage, which `SLACK` covers. An SDK's
stream is judged by the same rules, one chunk or event an event (`paced`).

A paced request on a plugin client takes `Pace.request_options`: each byte is waited for `stall_s`
(a silent stream is a stall at --stall-timeout), the whole exchange beyond the ceiling (the transport's
deadline extension, pytest_inferaccept/http.py), so the paced read decides first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pytest_inferaccept.checks._base import fail

DEADLINE_EXTENSION = "inferaccept_deadline_s"
"""A request extension holding the whole exchange's deadline in seconds, apart from its read timeout: a
paced stream read waits --stall-timeout for each byte and far longer for the end (the plugin's
client, pytest_inferaccept.http, reads it)."""
CEILING_FACTOR = 4.0
"""The longest a paced read waits, in multiples of the base limit (--request-timeout)."""
MARGIN = 1.5
"""How far over the time a whole answer takes at the measured pace the read still waits."""
SLACK = 16
"""Events beyond max_tokens a correct stream may send (role, finish, usage, keep-alive chunks)."""
RUNAWAY_FACTOR = 2
"""A stream with more than this many times max_tokens events (plus SLACK) is endless."""
T = TypeVar("T")


class CouldNotFinish(Exception):
    """A stream still delivering at its own pace did not end within the time the check can wait."""


@dataclass(frozen=True)
class Pace:
    """The limits a paced read runs under, in seconds."""

    base_s: float
    """The least a stream is waited for (--request-timeout)."""
    stall_s: float
    """The longest a stream may send no event (--stall-timeout)."""
    ceiling_s: float
    """The most a stream is waited for, whatever its pace (CEILING_FACTOR x base_s in a run)."""

    @property
    def byte_wait_s(self) -> float:
        """The request's own timeout, for each byte and for the whole exchange: beyond the ceiling, so
        the paced read decides first."""
        return self.ceiling_s + self.stall_s

    def request_options(self, connect_s: float) -> dict[str, Any]:
        """The keyword arguments of a paced httpx request on a plugin client: each byte (the headers
        too) waited for up to stall_s, so a silent stream is a stall at --stall-timeout, and the whole
        exchange up to byte_wait_s, so the paced read decides before the transport's deadline."""
        import httpx

        return {"timeout": httpx.Timeout(self.stall_s, connect=connect_s),
                "extensions": {DEADLINE_EXTENSION: self.byte_wait_s}}


@dataclass
class _Progress:
    """What a stream has sent so far."""

    events: int = 0
    first: float | None = None
    last: float | None = None

    def rate(self) -> float | None:
        """Events per second between the first and the latest event (None before two events)."""
        if self.first is None or self.last is None or self.events < 2 or self.last <= self.first:
            return None
        return (self.events - 1) / (self.last - self.first)


def allowed_s(pace: Pace, max_tokens: int, first_s: float | None, rate: float | None) -> float:
    """How long (from the request) a stream may run: the base limit, or as long as a whole answer takes
    at `rate` events/s after its first event at `first_s`, MARGIN times over, within the ceiling."""
    if first_s is None or rate is None:
        return pace.base_s
    needed = first_s + (max_tokens + SLACK) / rate
    return min(pace.ceiling_s, max(pace.base_s, MARGIN * needed))


class _Watch:
    """Judges a stream as its events arrive: stalled, endless, or still within the time its pace allows."""

    def __init__(self, *, max_tokens: int, pace: Pace) -> None:
        self.max_tokens = max_tokens
        self.pace = pace
        self.seen = _Progress()
        self.runaway = RUNAWAY_FACTOR * max_tokens + SLACK

    def arrived(self, now: float, fresh: int, tail: Callable[[], str], what: str = "") -> None:
        """`fresh` events (maybe none: bytes of a partial one) arrived `now` seconds after the request."""
        seen, pace = self.seen, self.pace
        quiet = now - (seen.last if seen.last is not None else 0.0)
        if quiet > pace.stall_s:
            fail(f"the stream stalled: no event for {quiet:.1f} s (stall limit {pace.stall_s:g} s, "
                 f"--stall-timeout) after {seen.events} events{what if fresh == 0 else ''}", tail())
        if fresh:
            seen.events += fresh
            seen.first = now if seen.first is None else seen.first
            seen.last = now
        if seen.events > self.runaway:
            fail(f"the stream sent {seen.events} events in {now:.1f} s for max_tokens={self.max_tokens} and "
                 f"had not ended: more than {self.runaway} ({RUNAWAY_FACTOR} x max_tokens + {SLACK}) "
                 "is an endless stream, whatever its pace", tail())
        limit = allowed_s(pace, self.max_tokens, seen.first, seen.rate())
        if now > limit:
            raise CouldNotFinish(_unfinished(seen, now, limit, self.max_tokens, pace))


def read_paced(byte_chunks: Iterable[bytes], *, max_tokens: int, pace: Pace, started: float | None = None,
               clock: Callable[[], float] = time.monotonic) -> bytes:
    """Read a whole SSE stream under the paced limits; CheckFailed when it stalls or runs away,
    CouldNotFinish when it is still delivering at the limit its pace allows. `started`: the clock
    when the request was sent (the wait for the headers counts, as it does for the transport)."""
    import httpx

    start = clock() if started is None else started
    raw = bytearray()
    partial = b""
    watch = _Watch(max_tokens=max_tokens, pace=pace)
    try:
        for piece in byte_chunks:
            now = clock() - start
            raw.extend(piece)
            *lines, partial = (partial + piece).split(b"\n")
            fresh = sum(1 for line in lines if line.startswith(b"data:") and line[5:].strip() != b"[DONE]")
            watch.arrived(now, fresh, lambda: _tail(raw), f", while {len(raw)} bytes trickled in")
    except httpx.ReadTimeout as exc:
        from pytest_inferaccept._bound_errors import BoundError

        if isinstance(exc, BoundError):
            raise  # the transport's own deadline: the read is sized to end before it
        waited = clock() - start - (watch.seen.last or 0.0)
        fail(f"the stream stalled: no byte for {waited:.1f} s after {watch.seen.events} events "
             f"(stall limit {pace.stall_s:g} s, --stall-timeout; the read's wait for a byte ran out)",
             _tail(raw))
    return bytes(raw)


def paced(items: Iterable[T], *, max_tokens: int, pace: Pace, started: float | None = None,
          clock: Callable[[], float] = time.monotonic) -> Iterator[T]:
    """Yield the items of an already parsed stream (an SDK's chunks or events, one per event) under the
    paced limits: CheckFailed when it stalls or runs away, CouldNotFinish when still delivering at the
    limit its pace allows."""
    start = clock() if started is None else started
    watch = _Watch(max_tokens=max_tokens, pace=pace)
    last: list[T] = []
    for item in items:
        last[:] = [item]
        watch.arrived(clock() - start, 1, lambda: repr(last[0])[-800:])
        yield item


def _unfinished(seen: _Progress, now: float, limit: float, max_tokens: int, pace: Pace) -> str:
    rate = seen.rate() or 0.0
    whole = (max_tokens + SLACK) / rate if rate else float("inf")
    return (f"could not finish in time: {seen.events} tokens in {now:.1f} s at {rate:.1f} tok/s, still "
            f"delivering (a whole answer of max_tokens={max_tokens} takes about {whole:.0f} s at this pace; "
            f"the check waits {limit:.1f} s at most, {CEILING_FACTOR:g} x --request-timeout "
            f"{pace.base_s:g} s): the check cannot judge this server, which is slow, not endless")


def _tail(raw: bytearray) -> str:
    return bytes(raw[-800:]).decode("utf-8", "replace")
