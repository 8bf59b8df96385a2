"""Shared test helpers: a fake server per test and a runner for the bundled suites."""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Imported here, once: pytester removes modules a test imported when that test ends, and code
# run later would then load a second copy of them: the fake server would have two ApiError
# classes, and httpx (which imports httpcore only when a transport is made) would no longer
# recognise httpcore's errors and let them escape unmapped.
import httpcore  # noqa: F401
import pytest

import pytest_inferaccept.fake.app
from pytest_inferaccept.fake import FakeServer

pytest_plugins = ["pytester"]

_HEAVY_LIBRARIES = ("hypothesis", "hypothesis.strategies", "jsonschema", "openai", "jinja2", "pydantic",
                    "prometheus_client.parser",
                    # matplotlib's compiled parts stay loaded when an inner run drops its Python
                    # modules; a second copy of those then fails its own type checks mid-chart
                    # ("Invalid arguments to set_clip_path, of type Rectangle").
                    "matplotlib", "matplotlib.figure", "matplotlib.backends.backend_svg")


def _preload() -> None:
    """Import the package and the libraries an inner pytest run loads, once, at collection.

    pytester's in-process runs drop every module imported during the run when it ends, so each
    inner run would import them again, and assertion-rewrite again those of pytest plugins
    (hypothesis and this package are): 2-3 s of CPU per run, hypothesis most of it, where no
    bytecode cache is written. Imported before any snapshot, they stay. The bundled suite modules
    are left out: each inner run imports them afresh, as a user's run does. A module that does not
    import is left to its own tests to report.
    """
    for name in _HEAVY_LIBRARIES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    for info in pkgutil.walk_packages(pytest_inferaccept.__path__, "pytest_inferaccept."):
        if info.name.endswith(".__main__") or info.name.startswith("pytest_inferaccept.suites"):
            continue
        with contextlib.suppress(Exception):  # a broken module is reported by its own tests
            importlib.import_module(info.name)


_preload()

OWN_WORKERS = 4
"""xdist workers for this project's own tests when no -n is given (-n 0: one process).

The suite waits far more than it computes (about 3 CPU minutes in a 7-minute serial run on 2
cores: fake servers' timed answers, servers starting, deadlines), so 4 workers on 2 cores
finish it in under 3 minutes. Set here rather than in addopts, which would also apply to the
bundled suites run from this checkout (`pytest --pyargs pytest_inferaccept.suites`).
"""


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which turns -n into workers
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Run this project's own tests on OWN_WORKERS xdist workers unless told otherwise."""
    option = config.option
    if (not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER")
            or getattr(option, "numprocesses", 0) is not None or option.collectonly
            or getattr(option, "usepdb", False) or not _only_own_tests(config)):
        return
    option.numprocesses = OWN_WORKERS
    if getattr(option, "dist", "no") == "no":
        # An idle worker takes pending tests from a busy one: the long capacity tests no longer
        # leave the run waiting on one worker at the end (2 min 36-40 s against 2 min 55 s-3 min
        # 13 s with xdist's default `load`, measured here).
        option.dist = "worksteal"


def _only_own_tests(config: pytest.Config) -> bool:
    """Does the run collect this folder's tests and nothing else (and not single tests by node id)?

    pytest loads this conftest for other runs from the checkout too (`pytest --pyargs
    pytest_inferaccept.suites --server-preset llama-cpp`, `pytest suites/`): those must stay in
    one process, as a user's run of the bundled suites does.
    """
    if config.option.pyargs or not config.args or any("::" in arg for arg in config.args):
        return False  # a test given by its node id starts faster in one process than 4 workers do
    here = Path(__file__).parent.resolve()
    for arg in config.args:
        path = (config.invocation_params.dir / arg).resolve()
        if not path.is_relative_to(here):
            return False
    return True


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
    failures: dict[str, str] = field(default_factory=dict)
    """Test function name -> the text of its failure or error reports (empty when it passed)."""

    def outcome(self, name: str) -> str:
        """The outcome of the test whose name (with parameters) is `name`."""
        if name not in self.outcomes:
            raise KeyError(f"{name} did not run; ran: {sorted(self.outcomes)}\n{self.output[-3000:]}")
        return self.outcomes[name]

    def failure(self, name: str) -> str:
        """What the failure of test `name` says (its own report, not another test's of the same run)."""
        self.outcome(name)
        return self.failures.get(name, "")


RunSuite = Callable[..., SuiteRun]
_RUNS: dict[tuple[object, ...], SuiteRun] = {}
"""Every inner run, by what makes it: the same run asked for by several rows is made once."""


def one_run_per_fault(rows: Iterable[tuple[Hashable, str]]) -> dict[Hashable, str]:
    """For rows of (run key, -k selection), the -k expression that selects all of a key's checks.

    The checks one fault breaks run together, in one inner run against one fake server, and each
    row reads its own check's outcome and failure text from it: one run per (module, fault)
    instead of one per row. Only checks that share the fault share a run; faults never mix.
    """
    selections: dict[Hashable, list[str]] = {}
    for key, select in rows:
        chosen = selections.setdefault(key, [])
        if select not in chosen:
            chosen.append(select)
    return {key: " or ".join(f"({s})" if " " in s else s for s in sorted(chosen))
            for key, chosen in selections.items()}


@pytest.fixture
def run_suite(pytester: pytest.Pytester) -> RunSuite:
    """Run bundled suite modules against a fake server with the given faults."""

    def run(modules: str | Sequence[str], *, faults: Sequence[str] = (),
            args: Sequence[str] = (), select: str | None = None, **config: object) -> SuiteRun:
        mods = [modules] if isinstance(modules, str) else list(modules)
        if not faults:
            # A run against the correct fake is the same for every row of a fault table:
            # run the whole module once and answer every later clean run from it.
            select = None
        key = (tuple(mods), tuple(sorted(faults)), tuple(args), select,
               tuple(sorted((k, repr(v)) for k, v in config.items())))
        if key not in _RUNS:
            _RUNS[key] = _run(mods, faults, args, select, config)
        return _RUNS[key]

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
        failures: dict[str, str] = {}
        for rep in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
            name = rep.nodeid.split("::")[-1]
            if rep.failed:
                failures[name] = failures.get(name, "") + rep.longreprtext + "\n"
            if rep.when == "call" or rep.outcome != "passed":
                if rep.outcome == "failed" and rep.when != "call":
                    outcomes[name] = "error"
                elif outcomes.get(name) != "error":
                    outcomes[name] = rep.outcome
        return SuiteRun(outcomes=outcomes, ret=int(result.ret), output=str(result.stdout), failures=failures)

    return run
