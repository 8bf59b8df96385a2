"""Launch a server command, wait until it is ready, keep its log, and stop it (no pytest here)."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

READY_PATHS: tuple[str, ...] = ("/health", "/v1/models")

# The watchdog: a tiny process that holds the read end of a pipe whose write end only this
# (the launching) process holds. When this process ends in any way, SIGKILL included, the pipe
# reads EOF and the watchdog ends the server's process group: SIGTERM, then SIGKILL.
_WATCHDOG = """
import os, signal, sys, time
pgid = int(sys.argv[1])
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
sys.stdin.buffer.read()
def alive():
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
    if not alive():
        break
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        break
    end = time.monotonic() + wait
    while alive() and time.monotonic() < end:
        time.sleep(0.05)
"""


class LaunchError(RuntimeError):
    """The server command exited, or never became ready; the message says which and shows its log."""


def free_port() -> int:
    """Return a loopback TCP port that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def probe_ready(base_url: str, paths: Sequence[str] = READY_PATHS, timeout: float = 2.0) -> str | None:
    """Return None when ready, else what was seen; the first path that is not a 404 decides."""
    seen = "no answer"
    for path in paths:
        try:
            with urllib.request.urlopen(base_url + path, timeout=timeout) as resp:
                if 200 <= resp.status < 300:
                    return None
                seen = f"{path} answered {resp.status}"
        except urllib.error.HTTPError as exc:
            seen = f"{path} answered {exc.code}"
            if exc.code == 404:
                continue
            return seen
        except urllib.error.URLError as exc:
            return f"{path}: {exc.reason}"  # "[Errno 111] Connection refused", not "<urlopen error ...>"
        except (OSError, ValueError) as exc:
            return f"{path}: {exc}"
    return seen


class ServerProcess:
    """One launched server process (its whole process group), with its log file.

    With `log_path=None` the process writes to this process's own stdout and stderr (a server
    run in the foreground).
    """

    def __init__(self, command: str | Sequence[str], *, log_path: Path | None,
                 env: Mapping[str, str] | None = None) -> None:
        self.command = command if isinstance(command, str) else shlex.join(command)
        self.argv: str | tuple[str, ...] = command if isinstance(command, str) else tuple(command)
        """The command exactly as given (a shell string or an argv), to start it again the same way."""
        self.env: dict[str, str] = dict(env or {})
        """The variables given on top of this process's environment (not the whole environment)."""
        self.ready_paths: tuple[str, ...] = READY_PATHS
        """The paths of the last `wait_ready` (the readiness a restart waits for)."""
        self.ready_timeout: float | None = None
        """The timeout of the last `wait_ready`, None before the first."""
        self.log_path = log_path
        self._log: BinaryIO | None = None
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(log_path, "ab")  # noqa: SIM115 - kept open for the life of the process
        full_env = dict(os.environ)
        full_env.update(env or {})
        argv: Sequence[str] = ["/bin/sh", "-c", command] if isinstance(command, str) else command
        self.started_at = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                list(argv), stdout=self._log, stderr=subprocess.STDOUT if self._log else None,
                stdin=subprocess.DEVNULL, env=full_env, start_new_session=True,
            )
        except OSError:
            if self._log is not None:
                self._log.close()
            raise
        self._watchdog = _start_watchdog(self.proc.pid)

    @property
    def pid(self) -> int:
        """PID of the launched process (leader of its process group)."""
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit status, or None while it runs."""
        return self.proc.poll()

    def tail(self, lines: int = 20) -> str:
        """Return the last lines of the server's log ("" when it has none)."""
        if self._log is None or self.log_path is None:
            return ""
        if not self._log.closed:
            self._log.flush()
        try:
            data = self.log_path.read_bytes()[-16384:]
        except OSError:
            return ""
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])

    def _log_section(self) -> str:
        if self.log_path is None:
            return ""
        return f"\n--- last log lines ({self.log_path}) ---\n{self.tail()}"

    def death_message(self) -> str:
        """Describe how the process ended, with the end of its log."""
        code = self.returncode
        how = f"exit code {code}" if code is None or code >= 0 else f"killed by signal {-code}"
        return (f"server command exited ({how}) after {time.monotonic() - self.started_at:.1f}s: "
                f"{self.command}{self._log_section()}")

    def wait_ready(self, base_url: str, *, timeout: float, paths: Sequence[str] = READY_PATHS,
                   on_wait: Callable[[str], None] | None = None) -> float:
        """Poll until the server answers ready; return seconds taken or raise LaunchError.

        `on_wait` gets what each poll saw while the server is not ready yet (for progress lines).
        """
        self.ready_paths, self.ready_timeout = tuple(paths), timeout
        deadline = time.monotonic() + timeout
        seen = "nothing yet"
        while True:
            if self.returncode is not None:
                raise LaunchError(self.death_message())
            seen = probe_ready(base_url, paths) or ""
            if not seen:
                return time.monotonic() - self.started_at
            if on_wait is not None:
                on_wait(seen)
            if time.monotonic() >= deadline:
                self.stop()
                raise LaunchError(
                    f"server not ready after {timeout:.0f}s at {base_url} (last seen: {seen}); "
                    f"stopped it: {self.command}{self._log_section()}"
                )
            time.sleep(0.2)

    def stop(self, grace: float = 10.0) -> int | None:
        """Stop the whole process group: SIGTERM, then SIGKILL after `grace` seconds."""
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(5)
        # Children that outlived the leader (sh -c forks the real server) must go too; wait
        # until the group is empty so that "stopped" means no process is left.
        deadline = time.monotonic() + grace
        killed = False
        while self._group_alive():
            if time.monotonic() >= deadline:
                if killed:
                    break  # only unreaped zombies can remain; nothing more a signal can do
                self._signal(signal.SIGKILL)
                killed, deadline = True, time.monotonic() + 5
            time.sleep(0.05)
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
        self._release_watchdog()
        return self.proc.returncode

    def _release_watchdog(self) -> None:
        """Close the watchdog's pipe: it finds the group gone (or ends it) and exits."""
        dog = self._watchdog
        if dog is None:
            return
        with contextlib.suppress(OSError):
            if dog.stdin is not None:
                dog.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            dog.wait(20)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)


def _start_watchdog(pgid: int) -> subprocess.Popen[bytes] | None:
    """Start the process that ends group `pgid` once this process is gone (None if it cannot)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(pgid)], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None


class StopSignals:
    """While active, SIGTERM and SIGHUP interrupt the run like Ctrl-C does.

    A cancelled CI job sends SIGTERM; without a handler Python dies at once and pytest's
    cleanup, which stops the launched servers and writes the results, never runs. Turning the
    signal into KeyboardInterrupt runs that cleanup; a second signal while it runs is ignored.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._previous: dict[int, object] = {}
        self.received: str | None = None

    def install(self) -> None:
        """Install the handlers (only the main thread may; elsewhere this does nothing)."""
        if self._previous or threading.current_thread() is not threading.main_thread():
            return
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        if self.received is not None:
            return
        self.received = signal.Signals(signum).name
        raise KeyboardInterrupt(f"{self.received} received")

    def uninstall(self) -> None:
        """Put the previous handlers back."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, handler in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()
