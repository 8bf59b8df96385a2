"""The errors of an answer that crossed the plugin's time or size bound (imported with httpx)."""

from __future__ import annotations

import httpx


class BoundError(httpx.TransportError):
    """An answer crossed a bound the plugin sets; the message is the finding."""


class AnswerTooSlow(BoundError, httpx.ReadTimeout):
    """The whole exchange took longer than --request-timeout (a drip, an endless stream)."""


class AnswerTooLarge(BoundError, httpx.ReadError):
    """The body, or the data a stream sent so far, exceeded --max-response-mb."""
