"""Which requests the fake server treats differently: deterministic shares, and crowded arrivals.

The verdict knobs (`slow_fraction`, `error_fraction`) pick a known share of requests, spread
evenly rather than at random, so a test can count exactly what it will see. The fault
`empty_under_concurrency` needs to know whether a chat request shared the server with another.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from pytest_inferaccept.fake.validation import ApiError

CROWD_WINDOW = 0.1
"""Seconds a chat request waits, under `empty_under_concurrency`, before it decides whether it is
crowded: requests sent together by a client arrive a few milliseconds apart, and must see each other."""


def in_share(k: int, fraction: float) -> bool:
    """Is request number `k` (from 1) in a share of `fraction` spread evenly over the requests?

    Request k is chosen when floor(k * fraction) steps up at k, so the first N requests hold
    exactly floor(N * fraction) chosen ones, evenly spaced. The product is rounded to 9 places
    first so that, say, 100 x 0.29 counts 29 and not 28.
    """
    if fraction <= 0.0:
        return False
    return math.floor(round(k * fraction, 9)) > math.floor(round((k - 1) * fraction, 9))


def error_answer(status: int) -> ApiError:
    """The error a request in the `error_fraction` share gets: `status` in the OpenAI envelope."""
    if status == 429:
        return ApiError(429, "Too many requests; retry later", type="requests", code="rate_limit_exceeded")
    if status >= 500:
        return ApiError(status, "internal server error: the engine failed on this request",
                        type="server_error", code="internal_error")
    return ApiError(status, "the request was refused", code="request_refused")


@dataclass(eq=False)
class Flight:
    """One chat request in the server, and whether another was in the server with it."""

    crowded: bool = False


class Flights:
    """The chat requests in the server now (from arrival until their answer is written)."""

    def __init__(self) -> None:
        self._now: set[Flight] = set()

    def __len__(self) -> int:
        return len(self._now)

    def arrive(self) -> Flight:
        """A request arrives: it and every request in flight now have company."""
        flight = Flight()
        if self._now:
            flight.crowded = True
            for other in self._now:
                other.crowded = True
        self._now.add(flight)
        return flight

    def leave(self, flight: Flight) -> None:
        """The request's answer is written (or it failed)."""
        self._now.discard(flight)


async def crowded(flight: Flight) -> bool:
    """Wait the crowd window, then say whether another chat request was in the server meanwhile."""
    await asyncio.sleep(CROWD_WINDOW)
    return flight.crowded
