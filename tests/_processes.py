"""Helpers for tests that launch servers: the fake server's command and process checks."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

FAKE_CMD = f"{sys.executable} -m pytest_inferaccept.fake --port {{port}}"
"""A --server-cmd that launches the fake server on the plugin's free port."""


def pids_started(output: str) -> list[int]:
    """PIDs of the servers a run said it started."""
    return [int(p) for p in re.findall(r"started \w+ server \(pid (\d+)\)", output)]


def group_gone(pgid: int, wait: float = 0.0) -> bool:
    """True once no process of group `pgid` is left (waiting up to `wait` seconds)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def fake_process(tmp: Path, *args: str) -> Iterator[str]:
    """A fake server as its own process (yields its URL): a server thread inside the test process
    would share the load client's GIL and CPU and make the client look like the bottleneck."""
    from pytest_inferaccept.launcher import ServerProcess, free_port

    port = free_port()
    proc = ServerProcess([sys.executable, "-m", "pytest_inferaccept.fake", "--port", str(port), *args],
                         log_path=tmp / f"fake-{port}.log")
    url = f"http://127.0.0.1:{port}"
    try:
        proc.wait_ready(url, timeout=30, paths=("/health",))
        yield url
    finally:
        proc.stop()
