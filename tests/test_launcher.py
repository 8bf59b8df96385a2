"""The launcher starts a command, waits for readiness, keeps its log and leaves nothing behind."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from pytest_inferaccept.launcher import LaunchError, ServerProcess, free_port


def _gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_fake_server_command_becomes_ready_and_stops_with_its_children(tmp_path: Path) -> None:
    port = free_port()
    proc = ServerProcess(f"{sys.executable} -m pytest_inferaccept.fake --port {port}",
                         log_path=tmp_path / "s.log")
    took = proc.wait_ready(f"http://127.0.0.1:{port}", timeout=20)
    assert 0 < took < 20
    proc.stop()
    assert _gone(proc.pid)
    assert "fake server listening" in (tmp_path / "s.log").read_text()


def test_a_command_that_exits_reports_its_exit_code_and_log_tail(tmp_path: Path) -> None:
    proc = ServerProcess("echo 'cannot load model'; exit 4", log_path=tmp_path / "s.log")
    with pytest.raises(LaunchError, match=r"(?s)exit code 4.*cannot load model"):
        proc.wait_ready("http://127.0.0.1:9", timeout=10)


def test_a_command_that_never_becomes_ready_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    proc = ServerProcess("sleep 100 & sleep 101", log_path=tmp_path / "s.log")
    start = time.monotonic()
    with pytest.raises(LaunchError, match="not ready after 1s"):
        proc.wait_ready("http://127.0.0.1:9", timeout=1)
    assert time.monotonic() - start < 20  # a bound for a loaded machine: far below the 100 s sleep
    assert _gone(proc.pid)


def test_a_process_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    proc = ServerProcess("trap '' TERM; echo trapped; sleep 100", log_path=tmp_path / "s.log")
    # Stop only once the trap is set (a fixed sleep may be too short on a loaded machine, and a
    # SIGTERM before the trap would end the shell without testing the SIGKILL that follows).
    deadline = time.monotonic() + 30
    while "trapped" not in (tmp_path / "s.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "trapped" in (tmp_path / "s.log").read_text()
    proc.stop(grace=0.5)
    assert _gone(proc.pid)
