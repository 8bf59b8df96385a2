"""Run a coroutine to its end from blocking code, whether or not this thread already runs an event loop.

Blocking callers (a capacity scenario, a telemetry scrape, the graded items) may be reached from an
async test, whose thread runs a loop that `asyncio.run` refuses to nest in: there the coroutine
runs on a fresh loop in a helper thread instead. Nothing here imports pytest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)`, from a helper thread when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
