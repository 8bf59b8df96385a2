"""pytest hooks of pytest-inferaccept: each hands off to plain code in the package."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_inferaccept.checks._base import CheckFailed
from pytest_inferaccept.markers import (
    CAPABILITY_SIGNATURE,
    SLO_SIGNATURE,
    MarkerError,
    parse_capabilities,
    parse_slo,
    slo_in_force,
)
from pytest_inferaccept.plugin import options as _options
from pytest_inferaccept.plugin.fixtures import (  # noqa: F401 - registers the fixtures
    ACCEPTANCE_FIXTURES,
    SERVER_FIXTURES,
    embedding_http_client,
    embedding_model,
    http_client,
    inferaccept_evidence,
    inferaccept_server,
    inferaccept_settings,
    loadgen,
    model,
    openai_client,
)
from pytest_inferaccept.plugin.keys import (
    ACCEPTANCE_KEY,
    CAPABILITY_KEY,
    CAPACITY_KEY,
    CORRECTNESS_KEY,
    EVIDENCE_KEY,
    FINISHED_KEY,
    LOAD_KEY,
    SESSION_KEY,
    SLO_KEY,
)
from pytest_inferaccept.run.session import AcceptanceSession
from pytest_inferaccept.server import ServerUnavailable
from pytest_inferaccept.verdict import EXIT_CODES

if TYPE_CHECKING:
    from pytest_inferaccept.model import Verdict

_PAYLOAD_KEY = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the inferaccept options and ini twins."""
    _options.add_options(parser)


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser) -> None:
    """Default pytest-asyncio's fixture loop scope quietly, unless the user set one."""
    _options.default_asyncio_loop_scope(early_config, parser)


def pytest_configure(config: pytest.Config) -> None:
    """Register markers and resolve the settings once."""
    config.addinivalue_line("markers", SLO_SIGNATURE)
    config.addinivalue_line("markers", CAPABILITY_SIGNATURE)
    config.addinivalue_line("markers", "inferaccept_liveness: the test checks whether the server is "
                            "alive; it runs even after the server stopped answering")
    config.addinivalue_line("markers", "inferaccept_core: a core conformance check; with --all-models it "
                            "runs once for each chat model /v1/models lists")
    settings = _options.settings_from_config(config)
    # Each run logs into its own directory: a death message must never quote an earlier run.
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_dir = Path(tempfile.gettempdir()) / "pytest-inferaccept" / f"run-{stamp}-{os.getpid()}"

    def log(line: str) -> None:
        # Launch progress must reach the user even while pytest captures test output.
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capman = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        if capman is None:
            reporter.write_line(line)
            return
        with capman.global_and_fixture_disabled():
            reporter.write_line(line)

    def silent(line: str) -> None:
        return None

    quiet = int(config.getoption("verbose", 0) or 0) < 0
    config.stash[SESSION_KEY] = AcceptanceSession(settings, log_dir, log, progress=silent if quiet else log)
    config.pluginmanager.register(_OutcomeCollector(config), "inferaccept-outcomes")
    from pytest_inferaccept.plugin.pytest_html import register_if_wanted

    register_if_wanted(config)  # only when pytest-html is installed and writes a report
    from pytest_inferaccept.plugin import xdist

    xdist.register(config)  # only when pytest-xdist is installed
    try:
        # Loaded here, not at import: pytest-asyncio is needed only where pytest runs.
        from pytest_inferaccept.plugin import async_fixtures
    except ImportError:  # installed without its dependencies: the async fixtures are missing
        return
    config.pluginmanager.register(async_fixtures, "inferaccept-async-fixtures")


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Name the server under test, the model, the required capabilities and the SLO."""
    from pytest_inferaccept.plugin.header import header_lines

    session = config.stash[SESSION_KEY]
    lines = header_lines(session.settings, session.scrubber)
    implied = _options.capacity_implied_by(config)
    if implied:
        given = " and ".join(implied) if len(implied) < 3 else f"{', '.join(implied[:-1])} and {implied[-1]}"
        lines.append(f"inferaccept: {given} given, so the capacity scenarios run (--capacity implied)")
    return lines


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop any server the run launched, whatever happened."""
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.servers.stop()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """With --all-models, run each core check once for each chat model the server lists.

    The server is reached here, at collection. When it cannot be, the check stays as it is: its
    setup then ends the run INVALID, as without --all-models. Without the option nothing changes.
    """
    session = metafunc.config.stash.get(SESSION_KEY, None)
    if (session is None or not session.settings.all_models or not session.settings.targets_server
            or "model" not in metafunc.fixturenames
            or metafunc.definition.get_closest_marker("inferaccept_core") is None
            or _parametrizes(metafunc, "model")):
        return
    try:
        server = session.servers.server()
    except ServerUnavailable:
        return
    models = _chat_models(server.served_models, server.model, server.embedding_model)
    # Function scope: the session-scoped `model` takes each name in turn without reordering the run.
    metafunc.parametrize("model", models, indirect=True, ids=models, scope="function")


def _chat_models(served: Sequence[str], under_test: str, embedding: str | None) -> list[str]:
    """The models the core checks run against: those listed, less the embedding model, and the model
    under test (also when --model names one the list leaves out)."""
    chosen = [name for name in dict.fromkeys(served) if name != embedding or name == under_test]
    return chosen if under_test in chosen else [*chosen, under_test]


def _parametrizes(metafunc: pytest.Metafunc, name: str) -> bool:
    """Does the test parametrize `name` itself (a second parametrization would be an error)?"""
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [part.strip() for part in names.split(",")]
        if name in names:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Parse each test's markers once; a bad marker stops the run with a usage error."""
    for item in items:
        try:
            caps = parse_capabilities([(m.args, m.kwargs) for m in item.iter_markers("capability")])
            slo_marks = list(item.iter_markers("slo"))
            slo = parse_slo(slo_marks[0].args, slo_marks[0].kwargs) if slo_marks else None
        except MarkerError as exc:
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        item.stash[CAPABILITY_KEY] = caps
        item.stash[SLO_KEY] = slo
        fixtures = set(getattr(item, "fixturenames", ()))
        item.stash[ACCEPTANCE_KEY] = bool(caps.names or slo or fixtures & ACCEPTANCE_FIXTURES)


def pytest_report_collectionfinish(config: pytest.Config, items: Sequence[pytest.Item]) -> list[str]:
    """Under the header's session SLO: the SLO each collected test's own @slo marker gives."""
    from pytest_inferaccept.plugin.summary import marker_slo_lines

    marked = [(item.name, slo.to_json()) for item in items
              if (slo := item.stash.get(SLO_KEY, None)) is not None]
    return marker_slo_lines(marked)


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    """Count the acceptance checks -k, -m or --deselect left out: the verdict covers a subset."""
    if not items:
        return
    session = items[0].config.stash.get(SESSION_KEY, None)
    if session is None:
        return
    for item in items:
        # -k and -m may deselect before this plugin's own modifyitems has marked the item.
        marked = item.stash.get(ACCEPTANCE_KEY, None)
        fixtures = set(getattr(item, "fixturenames", ()))
        if marked or (marked is None and (any(item.iter_markers("capability"))
                                          or any(item.iter_markers("slo"))
                                          or fixtures & ACCEPTANCE_FIXTURES)):
            session.ledger.deselected.append(_test_id(item))


def _test_id(item: pytest.Item) -> str:
    """The test's id as the results name it (a --pyargs module outside the rootdir gets its file)."""
    return f"{item.path.name}{item.nodeid}" if item.nodeid.startswith("::") else item.nodeid


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Reach the server, stop on an unusable one, and gate the test on its capabilities."""
    if not item.stash.get(ACCEPTANCE_KEY, False):
        return
    session = item.config.stash[SESSION_KEY]
    from pytest_inferaccept.evidence import Evidence

    item.stash[EVIDENCE_KEY] = Evidence(scrubber=session.scrubber)
    caps = item.stash[CAPABILITY_KEY]
    if not (caps.names or set(getattr(item, "fixturenames", ())) & SERVER_FIXTURES):
        return
    try:
        session.servers.server()
    except ServerUnavailable as exc:
        pytest.exit(f"inferaccept: {exc}", returncode=EXIT_CODES["INVALID"])
    # A liveness check asks the server itself whether it is alive: it runs and judges even after
    # the run saw the server stop answering (its own failure then names what it found).
    liveness = item.get_closest_marker("inferaccept_liveness")
    gone = None if liveness else session.outages.before_test(_test_id(item))
    if gone:
        pytest.fail(gone, pytrace=False)
    for name in caps.names:
        if session.capabilities.is_required(name):
            continue
        probe = session.capabilities.probe(name)
        if probe.status != "supported":
            pytest.skip(f"{probe.status}: {name}: {probe.detail}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """After the test body: judge the load it ran against its SLO (a failure is the test's)."""
    from pytest_inferaccept.loadgen import NotApplicable

    try:
        yield
    except NotApplicable as exc:
        pytest.skip(str(exc))
    if not item.stash.get(ACCEPTANCE_KEY, False):
        return
    from pytest_inferaccept.loadgen import SloJudgement, judge

    load = item.config.stash[SESSION_KEY].settings.load
    in_force = slo_in_force(item.stash.get(SLO_KEY, None), load.slo)
    scenarios = item.stash.get(CAPACITY_KEY, [])
    _judge_capacity(item, scenarios)
    verdict = judge(item.stash.get(LOAD_KEY, []), in_force.slo,
                    from_marker=in_force.from_marker and not scenarios, client_check=load.client_check)
    for warning in verdict.warnings:
        item.stash[EVIDENCE_KEY].warn(warning)
    if verdict.status == "invalid":
        item.stash[EVIDENCE_KEY].mark_invalid(verdict.message)
        raise SloJudgement(f"INVALID: {verdict.title}", verdict.lines)
    if verdict.status == "fail":
        raise SloJudgement(verdict.title, verdict.lines)


def _judge_capacity(item: pytest.Item, scenarios: list[Any]) -> None:
    """A failing capacity scenario fails the test, with any undecided one listed beside it; one
    that could not judge, with none failing, makes it INVALID."""
    from pytest_inferaccept.loadgen import SloJudgement

    invalid = [s for s in scenarios if s.status == "invalid"]
    failed = [s for s in scenarios if s.status == "fail"]
    undecided = tuple(f"{s.kind} undecided (could not judge the server): {r}"
                      for s in invalid for r in s.reasons)
    if failed:
        raise SloJudgement("capacity scenario failed",
                           tuple(f"{s.kind}: {r}" for s in failed for r in s.reasons) + undecided)
    if invalid:
        lines = tuple(f"{s.kind}: {r}" for s in invalid for r in s.reasons)
        item.stash[EVIDENCE_KEY].mark_invalid("; ".join(lines))
        raise SloJudgement("INVALID: the capacity scenario could not judge the server", lines)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, pytest.TestReport]:
    """Attach the test's inferaccept data to its report, so it survives xdist and junitxml."""
    report: pytest.TestReport = yield
    session = item.config.stash[SESSION_KEY]
    if item.stash.get(ACCEPTANCE_KEY, False):
        _attach_payload(item, call, report)
    _scrub_report(report, session.scrubber)
    return report


def _attach_payload(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    decisive = report.when == "call" or report.outcome != "passed"
    if decisive:
        evidence = item.stash.get(EVIDENCE_KEY, None)
        slo = item.stash.get(SLO_KEY, None)
        payload: dict[str, Any] = {
            "file": item.path.name,
            "capabilities": list(item.stash[CAPABILITY_KEY].names),
            "slo": slo.to_json() if slo else None,
            # Defaults left out: the document keeps only what the test recorded.
            "evidence": evidence.model_dump(mode="json", exclude_defaults=True) if evidence else {},
        }
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "model" in callspec.params:
            payload["model"] = str(callspec.params["model"])
        runs = item.stash.get(LOAD_KEY, [])
        if runs:
            payload["load"] = [r.entry().model_dump(mode="json", exclude_unset=True) for r in runs]
            if report.passed:
                # Hundreds of answered load requests exercise chat as surely as one check does; a
                # failed load test is about its SLO, not the capability, so it names none.
                payload["capabilities"] = _with_load_capabilities(payload["capabilities"], runs)
        scenarios = item.stash.get(CAPACITY_KEY, [])
        if scenarios:
            payload["capacity"] = [s.model_dump(mode="json", exclude_unset=True) for s in scenarios]
        correctness = item.stash.get(CORRECTNESS_KEY, None)
        if correctness is not None:
            payload["correctness"] = correctness
        if call.excinfo is not None and report.outcome == "failed":
            from pytest_inferaccept.http import bound_finding
            from pytest_inferaccept.loadgen import LoadInputError, SloJudgement

            finding = call.excinfo.errisinstance((CheckFailed, LoadInputError, SloJudgement))
            bound = bound_finding(call.excinfo.value)
            text = str(call.excinfo.value) if finding else bound or call.excinfo.exconly()
            payload["message"] = text
            if (finding or bound) and item.config.option.tbstyle == "auto":
                # A finding about the server, not a bug in the test code: show the finding and
                # where it was checked, without the traceback.
                frames = [e for e in call.excinfo.traceback if e.path == item.path]
                where = frames[-1] if frames else call.excinfo.traceback[-1]
                report.longrepr = f"{text}\n\n(checked at {where.path}:{where.lineno + 1})"
                if isinstance(call.excinfo.value, SloJudgement):
                    report.longrepr = call.excinfo.value.long() + (
                        "\n\n(the SLO is judged when the test ends, over every loadgen run it made)")
            explained = item.config.stash[SESSION_KEY].outages.explain_failure(
                _test_id(item), call.excinfo.value, evidence.exchanges if evidence else ())
            if explained is not None:
                # A connection error is only a symptom; the cause is the server's stop.
                payload["caused_by"], why = explained
                saw = payload["message"]
                payload["message"] = why if why in saw else f"{why}\n(the test saw: {saw[:500]})"
                report.longrepr = payload["message"]
        scrubber = item.config.stash[SESSION_KEY].scrubber
        payload = scrubber.data(payload)
        payload["message"] = str(payload.get("message", ""))[:2000] or None
        if payload["message"] is None:
            del payload["message"]
        item.stash[_PAYLOAD_KEY] = payload
        report.user_properties.append(("inferaccept", payload))
    if report.when == "teardown" and _PAYLOAD_KEY in item.stash:
        # junitxml writes the properties of the teardown report: the payload goes there as JSON.
        report.user_properties.append(("inferaccept_json", json.dumps(item.stash[_PAYLOAD_KEY],
                                                                      default=str)))


def _with_load_capabilities(marked: list[str], runs: list[Any]) -> list[str]:
    """The test's marker capabilities, then those its load runs' answers exercised."""
    from pytest_inferaccept.capabilities import exercised_by_load

    found = [name for r in runs for name in exercised_by_load(
        r.run.spec.get("kind"), answered=r.summary.counts.ok, with_usage=r.summary.usage.with_usage)]
    return list(dict.fromkeys([*marked, *found]))


def _scrub_report(report: pytest.TestReport, scrubber: Any) -> None:
    """Remove secrets from what pytest prints and writes of a report: failure text, output."""
    longrepr = report.longrepr
    if longrepr is not None and report.failed:
        text = report.longreprtext
        clean = scrubber.text(text)
        if clean != text:
            report.longrepr = clean
    elif isinstance(longrepr, tuple) and len(longrepr) == 3:
        report.longrepr = (longrepr[0], longrepr[1], scrubber.text(str(longrepr[2])))
    report.sections = [(title, scrubber.text(content)) for title, content in report.sections]


class _OutcomeCollector:
    """Collects outcomes from reports (in the main process, also under xdist).

    pytest_runtest_logreport receives no config, so this small plugin object carries it.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Merge one report phase into the session's outcomes."""
        payloads = [v for k, v in report.user_properties if k == "inferaccept" and isinstance(v, dict)]
        if not payloads:
            if report.failed and not any(k == "inferaccept_json" for k, _ in report.user_properties):
                # Outside the verdict, but a failure all the same: the exit status keeps it.
                what = "failed" if report.when == "call" else f"error in {report.when}"
                self.config.stash[SESSION_KEY].ledger.other_failures.append(f"{report.nodeid} {what}")
            return
        payload = dict(payloads[-1])
        outcome: str = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        message = str(payload.pop("message", "") or "")
        if report.skipped and isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2]).removeprefix("Skipped: ")
        if not message and report.failed:
            message = report.longreprtext.strip().splitlines()[-1] if report.longreprtext else ""
        nodeid = report.nodeid
        if nodeid.startswith("::"):
            # A module given with --pyargs from outside the rootdir has no path in its node id;
            # without one, same-named tests of two modules would merge.
            nodeid = f"{payload.get('file', '')}{nodeid}"
        self.config.stash[SESSION_KEY].ledger.record(nodeid, report.when, outcome, payload,
                                              message, report.duration)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A collection error is a failure outside the verdict (kept in the exit status)."""
        if report.failed:
            self.config.stash[SESSION_KEY].ledger.other_failures.append(
                f"{report.nodeid or '<session>'} could not be collected")


def _active(config: pytest.Config) -> bool:
    session = config.stash[SESSION_KEY]
    return session.settings.targets_server or bool(session.ledger.outcomes or session.ledger.problems)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Finish the run once (document, baseline, verdict), set the exit status, write the results.

    First among the plugins' hooks, so that pytest-html renders from the finished run.
    """
    config = session.config
    state = config.stash[SESSION_KEY]
    state.servers.stop()
    if not _active(config) or hasattr(config, "workerinput"):
        return
    from pytest_inferaccept.run.finish import finish
    from pytest_inferaccept.run.ledger import now as _now

    state.ledger.finished_at = _now()
    if int(exitstatus) == pytest.ExitCode.INTERRUPTED:
        why = f" ({state.servers.signals.received})" if state.servers.signals.received else ""
        state.ledger.problems.append(f"the run was interrupted{why} before every check ran")

    def exit_status(verdict: Verdict) -> int:
        if int(exitstatus) in (0, 1, 5, EXIT_CODES["INVALID"]):
            # The verdict may raise pytest's status, never lower it: a failure outside the
            # acceptance checks still fails the run.
            own = 0 if int(exitstatus) == pytest.ExitCode.NO_TESTS_COLLECTED else int(exitstatus)
            session.exitstatus = max(EXIT_CODES[verdict.status], own)
        return int(session.exitstatus)

    finished = finish(state, exit_status)
    config.stash[FINISHED_KEY] = finished
    records = state.settings.load.records_path
    if records is not None:
        from pytest_inferaccept.load import write_records

        records.parent.mkdir(parents=True, exist_ok=True)
        write_records(records, state.ledger.load_runs)
    path = state.settings.json_path
    if path is not None:
        from pytest_inferaccept.run import document as results

        results.write(path, finished.document)
        state.ledger.written.append(("results", path))
    if state.settings.html_path is not None and finished.run is not None:
        from pytest_inferaccept.report import write_html

        write_html(state.settings.html_path, finished.run, secrets=state.scrubber.secrets)
        state.ledger.written.append(("report", state.settings.html_path))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Print the capability matrix and the verdict."""
    finished = config.stash.get(FINISHED_KEY, None)
    if finished is None:
        return
    from pytest_inferaccept.plugin.summary import lines

    terminalreporter.section("inferaccept")
    state = config.stash[SESSION_KEY]
    for text, markup in lines(finished):
        terminalreporter.write_line(state.scrubber.text(text), **markup)
    for what, where in state.ledger.written:
        # The last lines of the run: where to look next.
        terminalreporter.write_line(f"inferaccept: {what} written to {where.resolve()}")
