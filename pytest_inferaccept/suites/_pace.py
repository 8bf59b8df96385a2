"""Streamed checks whose stream could not finish in time: INVALID for that check, never a finding."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pytest_inferaccept.checks.pace import CEILING_FACTOR, CouldNotFinish, Pace
from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.settings import Settings


def pace_of(settings: Settings) -> Pace:
    """A run's limits for a streamed check: --request-timeout as the base, --stall-timeout as the stall
    limit, CEILING_FACTOR x --request-timeout at most."""
    return Pace(base_s=settings.request_timeout, stall_s=settings.load_stall_timeout,
                ceiling_s=CEILING_FACTOR * settings.request_timeout)


@contextmanager
def unfinished_is_invalid(evidence: Evidence) -> Iterator[None]:
    """Turn a stream that was still delivering when the paced limit ran out into an undecided check."""
    try:
        yield
    except CouldNotFinish as exc:
        # The server was slow, not endless: the check ran out of time, so it cannot judge (INVALID).
        evidence.mark_invalid(str(exc))
        pytest.skip(f"not judged: {exc}")
