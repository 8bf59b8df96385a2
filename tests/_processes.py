"""Helpers for tests that launch servers: the fake server's command and process checks."""

from __future__ import annotations

import os
import re
import sys
import time

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
