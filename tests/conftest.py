"""Shared test helpers: a fake server per test and a runner for the bundled suites."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

# Imported here, once: pytester removes modules a test imported when that test ends, and code
# run later would then load a second copy of them: the fake server would have two ApiError
# classes, and httpx (which imports httpcore only when a transport is made) would no longer
# recognise httpcore's errors and let them escape unmapped.
import httpcore  # noqa: F401
import pytest

import pytest_inferaccept.fake.app  # noqa: F401
from pytest_inferaccept.fake import FakeServer

pytest_plugins = ["pytester"]


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A correct fake server on a free loopback port (reconfigure() it to inject faults)."""
    with FakeServer() as server:
        yield server


@dataclass
class SuiteRun:
    """What one inner pytest run of a bundled suite module produced."""

    outcomes: dict[str, str]
    """Test function name (with parameters) -> passed/failed/skipped/error."""
    ret: int
    output: str

    def outcome(self, name: str) -> str:
        """The outcome of the test whose name (with parameters) is `name`."""
        if name not in self.outcomes:
            raise KeyError(f"{name} did not run; ran: {sorted(self.outcomes)}\n{self.output[-3000:]}")
        return self.outcomes[name]


RunSuite = Callable[..., SuiteRun]
_CLEAN_RUNS: dict[tuple[object, ...], SuiteRun] = {}


@pytest.fixture
def run_suite(pytester: pytest.Pytester) -> RunSuite:
    """Run bundled suite modules against a fake server with the given faults."""

    def run(modules: str | Sequence[str], *, faults: Sequence[str] = (),
            args: Sequence[str] = (), select: str | None = None, **config: object) -> SuiteRun:
        mods = [modules] if isinstance(modules, str) else list(modules)
        if not faults:
            # A run against the correct fake is the same for every row of a fault table:
            # run the whole module once and answer every later clean run from it.
            key = (tuple(mods), tuple(args), tuple(sorted((k, repr(v)) for k, v in config.items())))
            if key not in _CLEAN_RUNS:
                _CLEAN_RUNS[key] = _run(mods, faults, args, None, config)
            return _CLEAN_RUNS[key]
        return _run(mods, faults, args, select, config)

    def _run(mods: list[str], faults: Sequence[str], args: Sequence[str], select: str | None,
             config: dict[str, object]) -> SuiteRun:
        with FakeServer(faults=list(faults), **config) as server:
            argv = ["-p", "no:cacheprovider", "--server-url", server.url, "--model", server.config.model,
                    "--embedding-model", server.config.embedding_model, *args]
            if select:
                argv += ["-k", select]
            for mod in mods:
                argv += ["--pyargs", f"pytest_inferaccept.suites.{mod}"]
            result = pytester.runpytest_inprocess(*argv)
        outcomes: dict[str, str] = {}
        for rep in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
            name = rep.nodeid.split("::")[-1]
            if rep.when == "call" or rep.outcome != "passed":
                if rep.outcome == "failed" and rep.when != "call":
                    outcomes[name] = "error"
                elif outcomes.get(name) != "error":
                    outcomes[name] = rep.outcome
        return SuiteRun(outcomes=outcomes, ret=int(result.ret), output=str(result.stdout))

    return run
