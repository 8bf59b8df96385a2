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
generated token, plus a few for the role, the finish and the usage, which `SLACK` covers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_inferaccept.checks._base import fail

if TYPE_CHECKING:
    import httpx

CEILING_FACTOR = 4.0
"""The longest a paced read waits, in multiples of the base limit (--request-timeout)."""
MARGIN = 1.5
"""How far over the time a whole answer takes at the measured pace the read still waits."""
SLACK = 16
"""Events beyond max_tokens a correct stream may send (role, finish, usage, keep-alive chunks)."""
RUNAWAY_FACTOR = 2
"""A stream with more than this many times max_tokens events (plus SLACK) is endless."""


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

    def transport_timeout(self, connect_s: float) -> httpx.Timeout:
        """The request's own timeout: beyond the ceiling, so the paced read decides first."""
        import httpx

        return httpx.Timeout(self.ceiling_s + self.stall_s, connect=connect_s)


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


def read_paced(byte_chunks: Iterable[bytes], *, max_tokens: int, pace: Pace, started: float | None = None,
               clock: Callable[[], float] = time.monotonic) -> bytes:
    """Read a whole SSE stream under the paced limits; CheckFailed when it stalls or runs away,
    CouldNotFinish when it is still delivering at the limit its pace allows. `started`: the clock
    when the request was sent (the wait for the headers counts, as it does for the transport)."""
    import httpx

    start = clock() if started is None else started
    raw = bytearray()
    partial = b""
    seen = _Progress()
    runaway = RUNAWAY_FACTOR * max_tokens + SLACK
    try:
        for piece in byte_chunks:
            now = clock() - start
            raw.extend(piece)
            *lines, partial = (partial + piece).split(b"\n")
            fresh = sum(1 for line in lines if line.startswith(b"data:") and line[5:].strip() != b"[DONE]")
            quiet = now - (seen.last if seen.last is not None else 0.0)
            if quiet > pace.stall_s:
                fail(f"the stream stalled: no event for {quiet:.1f} s (stall limit {pace.stall_s:g} s, "
                     f"--stall-timeout) after {seen.events} events"
                     + (f", while {len(raw)} bytes trickled in" if fresh == 0 else ""),
                     _tail(raw))
            if fresh:
                seen.events += fresh
                seen.first = now if seen.first is None else seen.first
                seen.last = now
            if seen.events > runaway:
                fail(f"the stream sent {seen.events} events in {now:.1f} s for max_tokens={max_tokens} and "
                     f"had not ended: more than {runaway} ({RUNAWAY_FACTOR} x max_tokens + {SLACK}) "
                     "is an endless stream, whatever its pace", _tail(raw))
            limit = allowed_s(pace, max_tokens, seen.first, seen.rate())
            if now > limit:
                raise CouldNotFinish(_unfinished(seen, now, limit, max_tokens, pace))
    except httpx.ReadTimeout as exc:
        from pytest_inferaccept._bound_errors import BoundError

        if isinstance(exc, BoundError):
            raise  # the transport's own deadline: the read is sized to end before it
        waited = clock() - start - (seen.last or 0.0)
        fail(f"the stream stalled: no byte for {waited:.1f} s after {seen.events} events "
             f"(the read waits up to {pace.ceiling_s + pace.stall_s:g} s for a byte)", _tail(raw))
    return bytes(raw)


def _unfinished(seen: _Progress, now: float, limit: float, max_tokens: int, pace: Pace) -> str:
    rate = seen.rate() or 0.0
    whole = (max_tokens + SLACK) / rate if rate else float("inf")
    return (f"could not finish in time: {seen.events} tokens in {now:.1f} s at {rate:.1f} tok/s, still "
            f"delivering (a whole answer of max_tokens={max_tokens} takes about {whole:.0f} s at this pace; "
            f"the check waits {limit:.1f} s at most, {CEILING_FACTOR:g} x --request-timeout "
            f"{pace.base_s:g} s): the check cannot judge this server, which is slow, not endless")


def _tail(raw: bytearray) -> str:
    return bytes(raw[-800:]).decode("utf-8", "replace")
