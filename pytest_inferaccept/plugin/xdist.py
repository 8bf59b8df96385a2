"""pytest-xdist: one server for all workers, one verdict in the controller, load tests alone.

The controller (the process that runs no tests) starts or reaches the server once, before the
workers start, and hands its description to each worker in `workerinput`. Workers share one
directory: a probe runs once for all of them (under a file lock), and an exclusive lock keeps
every load test alone against the server. What a worker learnt that is not on a test report
(probes, deselected checks, server stops, load records) comes back in `workeroutput`.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_inferaccept.plugin.keys import ACCEPTANCE_KEY, SESSION_KEY
from pytest_inferaccept.run.session import AcceptanceSession
from pytest_inferaccept.server import ServerUnavailable

if TYPE_CHECKING:
    from pytest_inferaccept.model import Cause
    from pytest_inferaccept.model import Probe as ProbeResult

KEY = "inferaccept"
"""Our entry in xdist's workerinput and workeroutput."""
LOAD_FIXTURE = "loadgen"


def is_worker(config: pytest.Config) -> bool:
    """True in an xdist worker process."""
    return hasattr(config, "workerinput")


def register(config: pytest.Config) -> None:
    """Hook into xdist when it is installed (controller and workers alike)."""
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistPlugin(config), "inferaccept-xdist")


@contextlib.contextmanager
def _flock(path: Path, exclusive: bool) -> Iterator[None]:
    """Hold a lock on `path` shared with the other workers (released however the block ends)."""
    import fcntl

    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class SharedProbes:
    """Runs each capability probe once for every worker of the run; the others read its result."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def keep(self, result: ProbeResult) -> None:
        """Offer a probe the controller made (the auth probe at the start) to every worker."""
        (self.directory / f"probe-{result.capability}.json").write_text(result.model_dump_json(),
                                                                          encoding="utf-8")

    def __call__(self, capability: str, run: Callable[[], ProbeResult]) -> ProbeResult:
        """The probe's result: read when another worker made it, else made now and kept."""
        done = self.directory / f"probe-{capability}.json"
        with _flock(self.directory / f"probe-{capability}.lock", exclusive=True):
            if done.exists():
                from pytest_inferaccept.model import Probe

                return Probe.model_validate_json(done.read_text(encoding="utf-8"))
            result = run()
            if not result.transient:
                self.keep(result)
            return result


class XdistPlugin:
    """The xdist side of the plugin; each hook checks whether it runs in the controller or a worker."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.shared: Path | None = None
        self.failure: str | None = None
        self.ran_on: dict[str, str] = {}
        """Test id -> the worker that ran it (controller), to renumber that worker's causes."""
        if is_worker(config):
            self._join(config.workerinput)  # type: ignore[attr-defined]

    @property
    def state(self) -> AcceptanceSession:
        """The run's acceptance session."""
        return self.config.stash[SESSION_KEY]

    def _controls(self) -> bool:
        # Without a distributing session (-n 0, -p no:xdist) the run is an ordinary one.
        return not is_worker(self.config) and self.config.pluginmanager.has_plugin("dsession")

    # --- the controller ---------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Start or reach the server once, before xdist starts the workers."""
        if not self._controls() or not self.state.settings.targets_server:
            return
        self.shared = Path(tempfile.mkdtemp(prefix="inferaccept-xdist-"))
        try:
            self.state.servers.server()
        except ServerUnavailable as exc:
            # The workers then run nothing; the verdict (INVALID) names the problem.
            self.failure = str(exc)
            self.state.log(f"inferaccept: {str(exc).splitlines()[0]}")
        shared = SharedProbes(self.shared)
        for result in self.state.capabilities.probes.values():
            shared.keep(result)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Tell a worker where the server is (or why there is none) and where the run's locks live."""
        if self.shared is None:
            return
        server = None if self.failure else self.state.servers.server()
        processes = self.state.servers.processes
        pid = processes[0].pid if server is not None and processes else None
        node.workerinput[KEY] = {"server": server.model_dump(mode="json") if server else None,
                                 "failure": self.failure, "shared": str(self.shared), "pid": pid}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Remember which worker ran each test (its causes are numbered per worker)."""
        node = getattr(report, "node", None)
        if node is not None and self._controls():
            self.ran_on[report.nodeid] = str(node.gateway.id)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """Merge what a finished worker learnt into the one session the controller judges."""
        output = getattr(node, "workeroutput", {}).get(KEY)
        if not output or not self._controls():
            return
        from pytest_inferaccept.model import Probe

        state = self.state
        for data in output["probes"]:
            state.capabilities.probes.setdefault(data["capability"], Probe.model_validate(data))
        for test in output["deselected"]:
            if test not in state.ledger.deselected:
                state.ledger.deselected.append(test)
        self._merge_causes(str(node.gateway.id), output["causes"])

    def _merge_causes(self, worker: str, causes: list[dict[str, Any]]) -> None:
        """Append a worker's causes and point its tests' `caused_by` at their new numbers."""
        if not causes:
            return
        from pytest_inferaccept.model import Cause

        state = self.state
        offset = len(state.outages.causes)
        state.outages.causes.extend(Cause.model_validate(data) for data in causes)
        for test in state.ledger.outcomes:
            if self._ran_on(test) == worker:
                state.ledger.shift_cause(test, offset)

    def _ran_on(self, test: str) -> str | None:
        # Outcomes are keyed by test id, which prefixes a --pyargs module's file to its node id.
        if test in self.ran_on:
            return self.ran_on[test]
        found = (w for nodeid, w in self.ran_on.items() if nodeid.startswith("::") and test.endswith(nodeid))
        return next(found, None)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Controller: append the workers' load records to the records file; workers: report back."""
        if is_worker(self.config):
            self._report_back()
            return
        if self.shared is None:
            return
        records = self.state.settings.load.records_path
        if records is not None:
            with records.open("a", encoding="utf-8") as out:
                for part in sorted(self.shared.glob("records-*.jsonl")):
                    out.write(part.read_text(encoding="utf-8"))
        shutil.rmtree(self.shared, ignore_errors=True)

    # --- a worker ---------------------------------------------------------------------------

    def _join(self, workerinput: dict[str, Any]) -> None:
        given = workerinput.get(KEY)
        if not given:
            return
        self.shared = Path(given["shared"])
        self.failure = given["failure"]
        state = self.state
        from pytest_inferaccept.model import Server

        server = Server.model_validate(given["server"]) if given["server"] else None
        state.servers.adopt(server, self.failure, pid=given.get("pid"))
        state.capabilities.share = SharedProbes(self.shared)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """A worker runs nothing when the controller could not start or reach the server."""
        if is_worker(self.config) and self.failure is not None:
            items.clear()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        """Hold the server lock: shared for a conformance check, exclusive for a load test."""
        if self.shared is None or not is_worker(self.config) or not item.stash.get(ACCEPTANCE_KEY, False):
            return (yield)
        # A load test's figures must be the server's alone: it waits until no other worker's
        # check runs, and no check starts until it ends.
        exclusive = LOAD_FIXTURE in getattr(item, "fixturenames", ())
        with _flock(self.shared / "server.lock", exclusive=exclusive):
            return (yield)

    def _report_back(self) -> None:
        state = self.state
        output: dict[str, Any] = {
            "probes": [p.model_dump(mode="json") for p in state.capabilities.probes.values()],
            "deselected": list(state.ledger.deselected),
            "causes": [_cause_data(c) for c in state.outages.causes],
        }
        records = state.settings.load.records_path
        if self.shared is not None and records is not None and state.ledger.load_runs:
            from pytest_inferaccept.load import write_records

            worker = self.config.workerinput["workerid"]  # type: ignore[attr-defined]
            write_records(self.shared / f"records-{worker}.jsonl", state.ledger.load_runs)
        self.config.workeroutput[KEY] = output  # type: ignore[attr-defined]


def _cause_data(cause: Cause) -> dict[str, Any]:
    """A cause as plain data that crosses to the controller and rebuilds the same Cause there."""
    # The summary is left to the controller (its consequences may grow there); `main` is never
    # written to a document but must cross; a monotonic time means nothing in another process.
    data = cause.model_dump(mode="json", exclude={"summary"})
    data["main"] = cause.main
    return data
