"""The server under test's lifecycle: launched or reached once, watched, stopped, restarted on purpose.

No pytest here. The session owns one `ServerManager`; the outage ledger reads its processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.launcher import LaunchError, ServerProcess, StopSignals, free_port
from pytest_inferaccept.outage import origin
from pytest_inferaccept.progress import Progress
from pytest_inferaccept.scrub import Scrubber
from pytest_inferaccept.server import ServerUnavailable, list_models, version_info
from pytest_inferaccept.settings import Settings

if TYPE_CHECKING:
    import httpx

    from pytest_inferaccept.model import Cause, Server

Log = Callable[[str], None]


class ServerManager:
    """Starts or reaches the server under test once, and owns the processes the run launched."""

    def __init__(self, settings: Settings, log_dir: Path, scrubber: Scrubber, *, log: Log,
                 progress_line: Log, progress: Callable[[str], Progress], problems: list[str]) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.scrubber = scrubber
        self._log = log
        self._progress_line = progress_line
        self._progress = progress
        self.processes: list[ServerProcess] = []
        self.adopted_pid: int | None = None
        """The chat server's pid when another process of the run launched it (an xdist controller)."""
        self.signals = StopSignals()
        self.current: Server | None = None
        """The server once reached (None before, or when it could not be)."""
        self._failure: str | None = None
        self.problems = problems
        """The run's problems: why the server could not be used goes there."""
        self.death: str | None = None
        """The full message of the first launched process found dead (its log's tail included)."""
        self.killed_on_purpose: list[ServerProcess] = []
        """Processes `restart_chat_server` killed: their exit is no outage."""
        self.last_test: str | None = None
        """The last test that started (a cause found between tests names it)."""
        self.on_ready: Callable[[], None] = lambda: None
        """Called once the server is first reached (the session probes the key then)."""
        self.on_cause: Callable[[Cause], None] = lambda _: None
        """Where a failed restart is recorded as the cause of what fails after it."""

    def server(self) -> Server:
        """Start or reach the server once; raise ServerUnavailable (the same each time) if not."""
        if self.current is not None:
            return self.current
        if self._failure is not None:
            raise ServerUnavailable(self._failure)
        try:
            self.current = self._connect()
        except (ServerUnavailable, LaunchError) as exc:
            self._failure = self.scrubber.text(str(exc))
            self.problems.append(self._failure.splitlines()[0])
            self.stop()
            raise ServerUnavailable(self._failure) from None
        except OSError as exc:
            # An unwritable log, a missing binary: the run cannot judge the server, once.
            self._failure = self.scrubber.text(f"could not launch the server: {exc}")
            self.problems.append(self._failure.splitlines()[0])
            self.stop()
            raise ServerUnavailable(self._failure) from None
        self.on_ready()
        return self.current

    def adopt(self, server: Server | None, failure: str | None = None,
              pid: int | None = None) -> None:
        """Use a server another process started or reached (an xdist worker gets the controller's)."""
        self.current = server
        self._failure = failure
        self.adopted_pid = pid

    def _launch(self, name: str, argv_or_cmd: str | tuple[str, ...], env: dict[str, str],
                ready_paths: tuple[str, ...], timeout: float,
                url: str | None = None) -> tuple[str, ServerProcess, float]:
        port = free_port()
        if isinstance(argv_or_cmd, str):
            command: str | tuple[str, ...] = argv_or_cmd.replace("{port}", str(port))
        else:
            command = tuple(a.replace("{port}", str(port)) for a in argv_or_cmd)
        base = url or f"http://127.0.0.1:{port}"
        log_path = self.settings.server_log if (name == "chat" and self.settings.server_log) \
            else self.log_dir / f"server-{name}.log"
        self.signals.install()
        proc = ServerProcess(command, log_path=log_path, env=env)
        self.processes.append(proc)
        self._log(f"inferaccept: started {name} server (pid {proc.pid}), log {log_path}")
        waiting = self._progress(f"{name} server")

        def still_waiting(seen: str) -> None:
            waiting.update(f"waiting for the server at {base} to be ready (up to {timeout:.0f} s; "
                           f"last seen: {seen})")

        ready = proc.wait_ready(base, timeout=timeout, paths=ready_paths, on_wait=still_waiting)
        self._log(f"inferaccept: {name} server ready at {base} after {ready:.1f}s")
        return base, proc, ready

    def _connect(self) -> Server:
        s = self.settings
        if not s.targets_server:
            raise ServerUnavailable(
                "no server under test: give --server-url URL, --server-cmd CMD or "
                "--server-preset NAME (see pytest --help, group inferaccept)"
            )
        launched: str | None = None
        ready: float | None = None
        base = s.server_url
        embedding_url = s.embedding_url
        model = s.model
        embedding_model = s.embedding_model
        if s.server_preset == "fake":
            # Known, realistic timing (20 ms to the first token, 2 ms between tokens): a load run
            # against an instant server would only measure the client.
            cmd = f"{sys.executable} -m pytest_inferaccept.fake --port {{port}} --ttft 0.02 --itl 0.002"
            base, _, ready = self._launch("chat", cmd, {}, ("/health",), s.ready_timeout)
            launched = "preset fake"
            embedding_model = embedding_model or "fake-embed"
        elif s.server_preset:
            from pytest_inferaccept.servers import PrepareError, prepare

            started = time.monotonic()
            preset = s.server_preset

            def preparing(line: str) -> None:
                # A first build takes minutes; its steps and heartbeats are the progress.
                self._progress_line(f"inferaccept: preparing {preset}: {line}")

            try:
                recipe = prepare(preset, log=preparing)
            except (PrepareError, OSError) as exc:
                raise ServerUnavailable(f"could not prepare preset {s.server_preset}: {exc}") from None
            self._progress_line(f"inferaccept: {preset} prepared in {time.monotonic() - started:.0f}s")
            chat = recipe.chat
            base, _, ready = self._launch("chat", tuple(chat.argv), dict(chat.env),
                                          (chat.ready_path,), max(chat.ready_timeout, s.ready_timeout))
            model = model or chat.served_model
            if recipe.embeddings is not None:
                emb = recipe.embeddings
                embedding_url, _, _ = self._launch(
                    "embeddings", tuple(emb.argv), dict(emb.env), (emb.ready_path,),
                    max(emb.ready_timeout, s.ready_timeout))
                embedding_model = embedding_model or emb.served_model
            launched = f"preset {s.server_preset} ({recipe.version})"
        elif s.server_cmd:
            base, proc, ready = self._launch("chat", s.server_cmd, {},
                                             ("/health", "/v1/models"), s.ready_timeout, s.server_url)
            launched = self.scrubber.text(proc.command)
        assert base is not None
        with self.client(min(s.request_timeout, 10.0)) as client:
            served = list_models(client, base)
            if served is None and not model:
                raise ServerUnavailable(
                    f"{base}/v1/models is missing (404), so the model cannot be discovered: "
                    "give --model NAME"
                )
            served = served or ()
            if not model:
                if not served:
                    raise ServerUnavailable(f"{base}/v1/models lists no model: give --model NAME")
                model = served[0]
            embedding_url = embedding_url or base
            if not embedding_model and embedding_url != base:
                listed = list_models(client, embedding_url)
                embedding_model = listed[0] if listed else None
            info = version_info(client, base)
        from pytest_inferaccept.model import Server

        return Server(
            base_url=base, model=model, embedding_url=embedding_url,
            embedding_model=embedding_model, served_models=list(served),
            required_capabilities=list(s.capabilities), version_info=info,
            log_paths=[str(p.log_path) for p in self.processes if p.log_path is not None],
            launched=launched, ready_seconds=ready,
        )

    def client(self, read_timeout: float) -> httpx.Client:
        """A client with the key and timeouts of the settings, for the session's own requests."""
        from pytest_inferaccept.http import client_for

        return client_for(self.settings, read_timeout=read_timeout)

    def check_alive(self) -> str | None:
        """None while every launched process runs; else a message (full the first time)."""
        for proc in self.processes:
            if proc.returncode is not None and proc not in self.killed_on_purpose:
                if self.death is None:
                    self.death = self.scrubber.text(proc.death_message())
                    return self.death
                return f"server under test is gone ({self.death.splitlines()[0]})"
        return None

    def stop(self) -> None:
        """Stop every process this session launched, each even when stopping another failed."""
        failures: list[str] = []
        for proc in self.processes:
            try:
                if proc.returncode is None:
                    proc.stop()
                else:
                    proc.stop(grace=0)
            except Exception as exc:  # the others must still be stopped
                failures.append(f"could not stop pid {proc.pid}: {type(exc).__name__}: {exc}")
        self.signals.uninstall()
        for failure in failures:
            self._log(f"inferaccept: {failure}")

    def restart_chat_server(self, command: str | tuple[str, ...] | None = None,
                            why: str = "failure recovery", drill: bool = False) -> dict[str, Any]:
        """Kill the launched chat server on purpose (SIGKILL to its process group) and start it again.

        The same command starts on the same port with the same environment, its output appended
        to the same log, and the session waits for it as it did at launch (same readiness paths
        and timeout). `command` starts another command in its place instead (the rollback drill's
        baseline, or the candidate again after it; '{port}' in it becomes the server's port); `why`
        names the restart in the log. `argv_killed` in the answer is the command that was stopped.
        With `drill`, a command that does not become ready is the drill's finding, not an outage:
        no cause is recorded, and the next restart may start from the stopped server.
        The new process takes the old one's place in `processes`, so the session
        stops it at the end; the kill is no outage cause. Times are `time.monotonic()` readings:
        `killed_at`, `ready_at` (None when not ready again), `ready_s` (kill to ready),
        `pid_killed`, `pid` (the new process, None when none started) and `error` (None, or why
        it is not ready again: then nothing of it is left running, and the failure to come back
        is recorded as the cause of what fails after it).
        """
        server = self.current
        if server is None or not server.launched or not self.processes:
            raise RuntimeError("no launched chat server to restart: the plugin did not start it")
        old = self.processes[0]
        if old.returncode is not None and old not in self.killed_on_purpose:
            # a crash of its own is an outage, not something to restart
            raise RuntimeError(f"the chat server is not running: {old.death_message().splitlines()[0]}")
        base = server.base_url
        timeout = old.ready_timeout if old.ready_timeout is not None else self.settings.ready_timeout
        out: dict[str, Any] = {"pid_killed": old.pid, "pid": None, "killed_at": None, "ready_at": None,
                               "ready_s": None, "error": None, "argv_killed": old.argv}
        argv = old.argv if command is None else _on_port(command, base)
        self.killed_on_purpose.append(old)
        self._log(f"inferaccept: killing the chat server (pid {old.pid}) on purpose ({why})")
        out["killed_at"] = time.monotonic()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(old.pid, signal.SIGKILL)
        old.stop(grace=5.0)  # reaps it, waits for the group to be empty, closes its log
        if old.log_path is not None:
            with contextlib.suppress(OSError), open(old.log_path, "ab") as log:
                again = "starting it again" if command is None else "starting another command"
                log.write(f"\n--- inferaccept: killed on purpose ({why}); {again} ---\n".encode())
        new: ServerProcess | None = None
        try:
            new = ServerProcess(argv, log_path=old.log_path, env=old.env)
            self.processes[0] = new
            out["pid"] = new.pid
            which = "the same command" if command is None else self.scrubber.text(
                argv if isinstance(argv, str) else " ".join(argv))
            self._log(f"inferaccept: restarted chat server (pid {new.pid}) with {which}, log {old.log_path}")
            new.wait_ready(base, timeout=timeout, paths=old.ready_paths)
        except (LaunchError, OSError) as exc:
            if new is not None:
                new.stop(grace=5.0)  # never leave a half-started server behind
                if drill:
                    self.killed_on_purpose.append(new)
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            out["error"] = self.scrubber.text(
                f"the chat server was not ready again after a deliberate restart"
                f"{'' if why == 'failure recovery' else f' ({why})'}: {first}")
            self._log(f"inferaccept: {out['error']}")
            if drill:
                return out
            from pytest_inferaccept.model import Cause

            self.on_cause(Cause(kind="exited", server=origin(base),
                                  reason=f"not ready again after the {why.replace(' ', '-')} restart",
                                  during=self.last_test,
                                  detail=self.scrubber.text(f"{out['error']}\n{exc}")))
            return out
        out["ready_at"] = time.monotonic()
        out["ready_s"] = out["ready_at"] - out["killed_at"]
        self._log(f"inferaccept: chat server ready again at {base}, {out['ready_s']:.1f}s after the kill")
        return out


def _on_port(command: str | tuple[str, ...], base: str) -> str | tuple[str, ...]:
    """`command` with '{port}' replaced by the port of `base` (the launched server's URL)."""
    from urllib.parse import urlsplit

    port = str(urlsplit(base).port or "")
    if isinstance(command, str):
        return command.replace("{port}", port)
    return tuple(a.replace("{port}", port) for a in command)
