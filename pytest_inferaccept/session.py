"""The acceptance session: starts or finds the server, probes capabilities, gathers outcomes.

No pytest here; the plugin's hooks hand off to this object.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capabilities import CAPABILITIES, ProbeResult
from pytest_inferaccept.launcher import LaunchError, ServerProcess, StopSignals, free_port
from pytest_inferaccept.outage import SLOW_PROBE_PAUSE, Cause, answers, connection_failure, origin
from pytest_inferaccept.progress import EVERY, FIRST_AFTER, Progress
from pytest_inferaccept.scrub import Scrubber, url_password
from pytest_inferaccept.server import ServerUnavailable, ServerUnderTest, list_models, version_info
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.verdict import CheckOutcome, Verdict, decide

if TYPE_CHECKING:
    import httpx

    from pytest_inferaccept.evidence import Exchange

Log = Callable[[str], None]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class AcceptanceSession:
    """State of one acceptance run."""

    def __init__(self, settings: Settings, log_dir: Path, log: Log = print,
                 progress: Log | None = None) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.scrubber = Scrubber([settings.api_key, url_password(settings.server_url or ""),
                                  url_password(settings.embedding_url or "")])
        self._log = log
        self._progress = log if progress is None else progress
        self.progress_timing = (FIRST_AFTER, EVERY)
        """(first line after, then at most one line every) seconds, for every Progress."""
        self.processes: list[ServerProcess] = []
        self.adopted_pid: int | None = None
        """The chat server's pid when another process of the run launched it (an xdist controller)."""
        self.signals = StopSignals()
        self.other_failures: list[str] = []
        """Tests outside the acceptance verdict that failed or errored, and collection errors."""
        self.exit_status: int | None = None
        self.load_runs: list[tuple[str, Any]] = []
        """(test id, LoadRun) of every load run, for --inferaccept-records."""
        self.capacity_results: list[Any] = []
        """Every capacity scenario of the session, in order (a soak reads the ladder's knee)."""
        self._server: ServerUnderTest | None = None
        self._failure: str | None = None
        self.problems: list[str] = []
        self.probes: dict[str, ProbeResult] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.started_at = _now()
        self.finished_at: str | None = None
        self.death: str | None = None
        self.causes: list[Cause] = []
        """Every time the server stopped during the run, with the failures it explains."""
        self.killed_on_purpose: list[ServerProcess] = []
        """Processes `restart_chat_server` killed: their exit is no outage (see `_exited`)."""
        self.caused_by: dict[str, tuple[int, str]] = {}
        """Test id -> (index in causes, the message that explains its failure)."""
        self._last_test: str | None = None
        self.deselected: list[str] = []
        """Acceptance tests deselected (-k, -m, --deselect): the verdict covers a subset."""
        self.written: list[tuple[str, Path]] = []
        """(what, where) of each file the run wrote at the end: results, report."""
        self.baseline: dict[str, Any] | None = None
        """The comparison with --inferaccept-baseline (the results' `baseline` section), once made."""
        self.baseline_findings: tuple[list[str], list[str]] = ([], [])
        """(regressions, warnings) the comparison adds to the verdict."""
        self.share_probe: Callable[[str, Callable[[], ProbeResult]], ProbeResult] | None = None
        """Runs a probe once for all processes of the run (set in xdist workers), else None."""

    def log(self, line: str) -> None:
        """Show a line to the user, scrubbed (always: use progress() for lines -q should hide)."""
        self._log(self.scrubber.text(line))

    def progress_line(self, line: str) -> None:
        """Show a progress line, scrubbed; nothing under -q."""
        self._progress(self.scrubber.text(line))

    def progress(self, phase: str) -> Progress:
        """Progress of one long phase: `update(text)` often, `done(text)` once (lines throttled)."""
        first_after, every = self.progress_timing
        return Progress(phase, self.progress_line, first_after=first_after, every=every)

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
        if self.settings.api_key:
            # Whether the server enforces the team's key is a finding of every run that gives one.
            self.probe("auth")
        return self._server

    def adopt(self, server: ServerUnderTest | None, failure: str | None = None,
              pid: int | None = None) -> None:
        """Use a server another process started or reached (an xdist worker gets the controller's)."""
        self._server = server
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
        self.log(f"inferaccept: started {name} server (pid {proc.pid}), log {log_path}")
        waiting = self.progress(f"{name} server")

        def still_waiting(seen: str) -> None:
            waiting.update(f"waiting for the server at {base} to be ready (up to {timeout:.0f} s; "
                           f"last seen: {seen})")

        ready = proc.wait_ready(base, timeout=timeout, paths=ready_paths, on_wait=still_waiting)
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
                self.progress_line(f"inferaccept: preparing {preset}: {line}")

            try:
                recipe = prepare(preset, log=preparing)
            except (PrepareError, OSError) as exc:
                raise ServerUnavailable(f"could not prepare preset {s.server_preset}: {exc}") from None
            self.progress_line(f"inferaccept: {preset} prepared in {time.monotonic() - started:.0f}s")
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
            if proc.returncode is not None and proc not in self.killed_on_purpose:
                if self.death is None:
                    self.death = self.scrubber.text(proc.death_message())
                    return self.death
                return f"server under test is gone ({self.death.splitlines()[0]})"
        return None

    # --- a server that stopped during the run: one cause, its consequences ------------------

    def before_test(self, test: str) -> str | None:
        """None when the server can serve this test; else why not (the test is then a consequence)."""
        for cause in self._open_causes(test):
            if cause.kind == "exited" or cause.main:
                return self._attribute(cause, test, consequence=True)[1]
        exited = self._exited(during=None)
        if exited is not None:
            return self._attribute(exited, test, consequence=True)[1]
        self._last_test = test
        return None

    def explain_failure(self, test: str, exc: BaseException | None,
                        exchanges: Sequence[Exchange] = ()) -> tuple[int, str] | None:
        """(index in causes, message) when the server's stop explains this failed test, else None.

        A launched process that exited explains it; so does a failed connection when a quick
        probe confirms that the server no longer answers at all.
        """
        if test in self.caused_by:
            return self.caused_by[test]
        cause = self._exited(during=test)
        if cause is not None:
            return self._attribute(cause, test, consequence=False)
        failure = connection_failure(exc, exchanges)
        root = self._root_of(failure.origin if failure else None)
        if failure is None or root is None:
            return None
        for known in self.causes:
            if known.answered_again_before is None and (known.kind == "exited"
                                                        or known.server == origin(root)):
                return self._attribute(known, test, consequence=True)
        seen = answers(root)
        if seen is None:
            return None  # it still answers: the failure is the test's own finding
        assert self._server is not None
        cause = Cause(kind="stopped answering", server=origin(root), reason=self.scrubber.text(seen),
                      main=origin(root) == origin(self._server.base_url), during=test,
                      last_request=self.scrubber.text(failure.describe()))
        self._add_cause(cause)
        return self._attribute(cause, test, consequence=False)

    def _root_of(self, seen_origin: str | None) -> str | None:
        """The root URL of the server under test a failed request went to (the main one when unknown).

        None for a request to anywhere else: another host refusing is not the server stopping.
        """
        server = self._server
        if server is None:
            return None
        for root in (server.base_url, server.embedding_url):
            if seen_origin is None or origin(root) == seen_origin:
                return root
        return None

    def _open_causes(self, test: str) -> list[Cause]:
        """The causes still in force; a server that answers again closes its cause."""
        still: list[Cause] = []
        for cause in self.causes:
            if cause.answered_again_before is not None:
                continue
            if cause.kind == "stopped answering" and cause.due_for_probe():
                started = time.monotonic()
                if answers(cause.server) is None:
                    cause.answered_again_before = test
                    self.log(f"inferaccept: {cause.who} answers again (before test {test})")
                    continue
                if time.monotonic() - started > 1.0:
                    # A probe that waited for its timeout is not repeated before every test.
                    cause.next_probe = time.monotonic() + SLOW_PROBE_PAUSE
            still.append(cause)
        return still

    def _exited(self, during: str | None) -> Cause | None:
        """A new cause when a launched process has exited (once: a process does not come back)."""
        if any(c.kind == "exited" for c in self.causes):
            return None
        proc = next((p for p in self.processes
                     if p.returncode is not None and p not in self.killed_on_purpose), None)
        if proc is None or proc.returncode is None:
            return None
        self.check_alive()  # keeps the full death message, log tail included, in self.death
        code = proc.returncode
        server = self._server.base_url if self._server else ""
        cause = Cause(kind="exited", server=origin(server) if server else "",
                      reason=f"exit code {code}" if code >= 0 else f"killed by signal {-code}",
                      during=during, after=None if during else self._last_test,
                      detail=self.death or self.scrubber.text(proc.death_message()))
        self._add_cause(cause)
        return cause

    def _add_cause(self, cause: Cause) -> None:
        self.causes.append(cause)
        # Said once, as it happens; the summary and the report give the final count.
        self.log(f"inferaccept: {cause.headline()}; the failures that follow from it are "
                 "reported as its consequences")

    def _attribute(self, cause: Cause, test: str, *, consequence: bool) -> tuple[int, str]:
        index = next(i for i, c in enumerate(self.causes) if c is cause)
        if not consequence:
            message = cause.detail if cause.kind == "exited" else cause.first_message()
        elif cause.kind == "exited" and not cause.during and not cause.consequences:
            message = cause.detail  # the first to notice a death between tests tells it whole
            cause.consequences.append(test)
        else:
            message = cause.consequence_message()
            cause.consequences.append(test)
        self.caused_by[test] = (index, message)
        return index, message

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

    def restart_chat_server(self) -> dict[str, Any]:
        """Kill the launched chat server on purpose (SIGKILL to its process group) and start it again.

        The same command starts on the same port with the same environment, its output appended
        to the same log, and the session waits for it as it did at launch (same readiness paths
        and timeout). The new process takes the old one's place in `processes`, so the session
        stops it at the end; the kill is no outage cause. Times are `time.monotonic()` readings:
        `killed_at`, `ready_at` (None when not ready again), `ready_s` (kill to ready),
        `pid_killed`, `pid` (the new process, None when none started) and `error` (None, or why
        it is not ready again: then nothing of it is left running, and the failure to come back
        is recorded as the cause of what fails after it).
        """
        server = self._server
        if server is None or not server.launched or not self.processes:
            raise RuntimeError("no launched chat server to restart: the plugin did not start it")
        old = self.processes[0]
        if old.returncode is not None:  # a crash of its own is an outage, not something to restart
            raise RuntimeError(f"the chat server is not running: {old.death_message().splitlines()[0]}")
        base = server.base_url
        timeout = old.ready_timeout if old.ready_timeout is not None else self.settings.ready_timeout
        out: dict[str, Any] = {"pid_killed": old.pid, "pid": None, "killed_at": None, "ready_at": None,
                               "ready_s": None, "error": None}
        self.killed_on_purpose.append(old)
        self.log(f"inferaccept: killing the chat server (pid {old.pid}) on purpose (failure recovery)")
        out["killed_at"] = time.monotonic()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(old.pid, signal.SIGKILL)
        old.stop(grace=5.0)  # reaps it, waits for the group to be empty, closes its log
        if old.log_path is not None:
            with contextlib.suppress(OSError), open(old.log_path, "ab") as log:
                log.write(b"\n--- inferaccept: killed on purpose (failure recovery); starting it again ---\n")
        new: ServerProcess | None = None
        try:
            new = ServerProcess(old.argv, log_path=old.log_path, env=old.env)
            self.processes[0] = new
            out["pid"] = new.pid
            self.log(f"inferaccept: restarted chat server (pid {new.pid}) with the same command, "
                     f"log {old.log_path}")
            new.wait_ready(base, timeout=timeout, paths=old.ready_paths)
        except (LaunchError, OSError) as exc:
            if new is not None:
                new.stop(grace=5.0)  # never leave a half-started server behind
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            out["error"] = self.scrubber.text(
                f"the chat server was not ready again after a deliberate restart: {first}")
            self.log(f"inferaccept: {out['error']}")
            self._add_cause(Cause(kind="exited", server=origin(base),
                                  reason="not ready again after the failure-recovery restart",
                                  during=self._last_test,
                                  detail=self.scrubber.text(f"{out['error']}\n{exc}")))
            return out
        out["ready_at"] = time.monotonic()
        out["ready_s"] = out["ready_at"] - out["killed_at"]
        self.log(f"inferaccept: chat server ready again at {base}, {out['ready_s']:.1f}s after the kill")
        return out

    # --- capabilities -----------------------------------------------------------------------

    def probe(self, capability: str) -> ProbeResult:
        """Probe a capability once per session."""
        if capability not in self.probes:
            from pytest_inferaccept.probes import PROBES

            server = self.server()

            def run() -> ProbeResult:
                with self._client(self.settings.request_timeout) as client:
                    return PROBES[capability](client, server)

            result = self.share_probe(capability, run) if self.share_probe else run()
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
        # A check that failed only because the server had already stopped says nothing about
        # the capability it exercises.
        aftermath = {test for cause in self.causes for test in cause.consequences}
        for name in CAPABILITIES:
            tests: dict[str, int] = {}
            judged_bad = 0
            for entry in self.outcomes.values():
                if name in entry.get("capabilities", ()):
                    tests[entry["outcome"]] = tests.get(entry["outcome"], 0) + 1
                    judged_bad += entry["outcome"] in ("failed", "error") and entry["nodeid"] not in aftermath
            probe = self.probes.get(name)
            if not tests and probe is None and not self.is_required(name):
                continue
            if judged_bad:
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
                        warnings=tuple(e.get("evidence", {}).get("warnings", ())),
                        caused_by=e.get("caused_by"))
            for e in self.outcomes.values()
        ]
        warnings = [
            f"optional capability {name} is broken (its tests were skipped): {probe.detail}"
            for name, probe in self.probes.items()
            if probe.status == "broken" and not self.is_required(name)
        ]
        from pytest_inferaccept.keycheck import key_findings

        warned, failures = key_findings(self.settings.api_key, self.probes.get("auth"),
                                        required=self.is_required("auth"))
        regressions, changed = self.baseline_findings  # what got worse since the baseline is a NO-GO
        return decide(outcomes, self.problems, extra_warnings=[*warnings, *warned, *changed],
                      causes=[cause.sentence() for cause in self.causes], deselected=len(self.deselected),
                      failures=[*failures, *regressions])
