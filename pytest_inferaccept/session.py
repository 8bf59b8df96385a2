"""The acceptance session: starts or finds the server, probes capabilities, gathers outcomes.

No pytest here; the plugin's hooks hand off to this object.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capabilities import CAPABILITIES, ProbeResult
from pytest_inferaccept.launcher import LaunchError, ServerProcess, StopSignals, free_port
from pytest_inferaccept.scrub import Scrubber, url_password
from pytest_inferaccept.server import ServerUnavailable, ServerUnderTest, list_models, version_info
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.verdict import CheckOutcome, Verdict, decide

if TYPE_CHECKING:
    import httpx

Log = Callable[[str], None]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class AcceptanceSession:
    """State of one acceptance run."""

    def __init__(self, settings: Settings, log_dir: Path, log: Log = print) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.scrubber = Scrubber([settings.api_key, url_password(settings.server_url or ""),
                                  url_password(settings.embedding_url or "")])
        self._log = log
        self.processes: list[ServerProcess] = []
        self.signals = StopSignals()
        self.other_failures: list[str] = []
        """Tests outside the acceptance verdict that failed or errored, and collection errors."""
        self.exit_status: int | None = None
        self._server: ServerUnderTest | None = None
        self._failure: str | None = None
        self.problems: list[str] = []
        self.probes: dict[str, ProbeResult] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.started_at = _now()
        self.finished_at: str | None = None
        self.death: str | None = None

    def log(self, line: str) -> None:
        """Show a progress line to the user, scrubbed."""
        self._log(self.scrubber.text(line))

    # --- the server -------------------------------------------------------------------------

    def server(self) -> ServerUnderTest:
        """Start or reach the server once; raise ServerUnavailable (the same each time) if not."""
        if self._server is not None:
            return self._server
        if self._failure is not None:
            raise ServerUnavailable(self._failure)
        try:
            self._server = self._connect()
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
        return self._server

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
        self.log(f"inferaccept: started {name} server (pid {proc.pid}), log {log_path}")
        ready = proc.wait_ready(base, timeout=timeout, paths=ready_paths)
        self.log(f"inferaccept: {name} server ready at {base} after {ready:.1f}s")
        return base, proc, ready

    def _connect(self) -> ServerUnderTest:
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
            cmd = f"{sys.executable} -m pytest_inferaccept.fake --port {{port}}"
            base, _, ready = self._launch("chat", cmd, {}, ("/health",), s.ready_timeout)
            launched = "preset fake"
            embedding_model = embedding_model or "fake-embed"
        elif s.server_preset:
            from pytest_inferaccept.servers import PrepareError, prepare

            started = time.monotonic()
            try:
                recipe = prepare(s.server_preset, log=self.log)
            except (PrepareError, OSError) as exc:
                raise ServerUnavailable(f"could not prepare preset {s.server_preset}: {exc}") from None
            self.log(f"inferaccept: {s.server_preset} prepared in {time.monotonic() - started:.0f}s")
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
        with self._client(min(s.request_timeout, 10.0)) as client:
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
        return ServerUnderTest(
            base_url=base, model=model, embedding_url=embedding_url,
            embedding_model=embedding_model, served_models=served, required=s.capabilities,
            version_info=info,
            log_paths=tuple(p.log_path for p in self.processes if p.log_path is not None),
            launched=launched, ready_seconds=ready,
        )

    def _client(self, read_timeout: float) -> httpx.Client:
        """A client with the key and timeouts of the settings, for the session's own requests."""
        from pytest_inferaccept.http import make_client

        s = self.settings
        return make_client("", api_key=s.api_key, request_timeout=read_timeout,
                           connect_timeout=s.connect_timeout, evidence=lambda: None,
                           max_bytes=s.max_response_bytes)

    def check_alive(self) -> str | None:
        """None while every launched process runs; else a message (full the first time)."""
        for proc in self.processes:
            if proc.returncode is not None:
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
            self.log(f"inferaccept: {failure}")

    # --- capabilities -----------------------------------------------------------------------

    def probe(self, capability: str) -> ProbeResult:
        """Probe a capability once per session."""
        if capability not in self.probes:
            from pytest_inferaccept.probes import PROBES

            server = self.server()
            with self._client(self.settings.request_timeout) as client:
                result = PROBES[capability](client, server)
            if result.transient:
                return result  # a refused or reset connection may pass: probe again next time
            self.probes[capability] = result
        return self.probes[capability]

    def is_required(self, capability: str) -> bool:
        """True when the team requires this capability."""
        return capability in self.settings.capabilities

    # --- outcomes and verdict ---------------------------------------------------------------

    def record(self, nodeid: str, phase: str, outcome: str, payload: dict[str, Any],
               message: str, duration: float) -> None:
        """Merge one report phase into the test's outcome."""
        entry = self.outcomes.setdefault(nodeid, {"nodeid": nodeid, "outcome": "passed",
                                                  "duration_s": 0.0, "message": ""})
        entry["duration_s"] = round(entry["duration_s"] + duration, 6)
        for key, value in payload.items():
            if key == "evidence" and not value:
                continue
            entry[key] = value
        if outcome == "skipped":
            entry["outcome"] = "skipped"
            entry["message"] = message
        elif outcome == "failed":
            entry["outcome"] = "failed" if phase == "call" else "error"
            entry["message"] = entry["message"] or message
        elif outcome in ("xfailed", "xpassed"):
            entry["outcome"] = outcome

    def capability_matrix(self) -> dict[str, dict[str, Any]]:
        """Per capability: required or probed, what the probe saw, and how its tests went."""
        matrix: dict[str, dict[str, Any]] = {}
        for name in CAPABILITIES:
            tests: dict[str, int] = {}
            for entry in self.outcomes.values():
                if name in entry.get("capabilities", ()):
                    tests[entry["outcome"]] = tests.get(entry["outcome"], 0) + 1
            probe = self.probes.get(name)
            if not tests and probe is None and not self.is_required(name):
                continue
            if tests.get("failed") or tests.get("error"):
                status = "broken"
            elif probe is not None and probe.status != "supported":
                status = probe.status
            elif tests.get("passed"):
                status = "supported"
            else:
                status = probe.status if probe else "not exercised"
            matrix[name] = {"required": self.is_required(name), "status": status,
                            "probe": probe.to_json() if probe else None, "tests": tests}
        return matrix

    def verdict(self) -> Verdict:
        """The go/no-go decision for this run."""
        outcomes = [
            CheckOutcome(nodeid=e["nodeid"], outcome=e["outcome"], message=e.get("message", ""),
                        invalid=bool(e.get("evidence", {}).get("invalid")),
                        invalid_reason=str(e.get("evidence", {}).get("invalid") or ""),
                        warnings=tuple(e.get("evidence", {}).get("warnings", ())))
            for e in self.outcomes.values()
        ]
        warnings = [
            f"optional capability {name} is broken (its tests were skipped): {probe.detail}"
            for name, probe in self.probes.items()
            if probe.status == "broken" and not self.is_required(name)
        ]
        return decide(outcomes, self.problems, extra_warnings=warnings)
