"""One rule says which SLO judges a test (its marker, else the session's), and the judge and the
report both ask it; repeated --slo values are each parsed once, as given, never joined and re-read."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from pytest_inferaccept import slo_profile
from pytest_inferaccept.markers import parse_slo, slo_in_force
from pytest_inferaccept.model import load
from pytest_inferaccept.plugin.options import settings_from_config
from pytest_inferaccept.report.words import slo_by_test, slo_in_force_for
from pytest_inferaccept.settings import resolve
from pytest_inferaccept.slo_profile import SloProfileError, parse_values
from tests._processes import fake_process

# A test with a loose marker, one whose marker gives no limit, one without a marker.
THREE_TESTS = """
import pytest

@pytest.mark.slo(ttft_p95=10.0)
def test_marked(loadgen):
    loadgen.run(concurrency=8, requests=80)

@pytest.mark.slo(ttft_p95=None)
def test_marked_without_a_limit(loadgen):
    loadgen.run(concurrency=8, requests=80)

def test_unmarked(loadgen):
    loadgen.run(concurrency=8, requests=80)
"""


@pytest.fixture(scope="module")
def quick_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fake server with 20 ms to the first token."""
    yield from fake_process(tmp_path_factory.mktemp("quick"), "--ttft", "0.02", "--itl", "0.001")


def test_a_marker_wins_over_the_session_slo_and_the_session_slo_stands_in_without_one() -> None:
    marker, session = parse_slo((), {"ttft_p95": 1.0}), parse_slo((), {"ttft_p95": 0.5})
    assert (slo_in_force(marker, session).slo, slo_in_force(marker, session).from_marker) == (marker, True)
    assert (slo_in_force(None, session).slo, slo_in_force(None, session).from_marker) == (session, False)
    assert (slo_in_force(None, None).slo, slo_in_force(None, None).from_marker) == (None, False)
    # The report asks the same rule over the limits a results document keeps.
    assert slo_in_force({"ttft_p95": 1.0}, {"ttft_p95": 0.5}).slo == {"ttft_p95": 1.0}
    assert slo_in_force({}, {"ttft_p95": 0.5}).from_marker is True


@pytest.mark.parametrize("session", [("--slo", "ttft_p95=5"), ()], ids=["session-slo", "no-session-slo"])
def test_the_report_names_the_slo_the_judge_used_for_every_test(
        pytester: pytest.Pytester, quick_server: str, session: tuple[str, ...]) -> None:
    pytester.makepyfile(THREE_TESTS)
    result = pytester.runpytest_inprocess("--server-url", quick_server, *session, "--client-check", "warn",
                                          "--inferaccept-json", "r.json")
    assert result.ret == 0, result.stdout.str()
    doc = load(json.loads((pytester.path / "r.json").read_text()))
    judged = {test.nodeid.rpartition("::")[2]: test for test in doc.tests}
    # What the judge used (each run's slo_limits) is what the report's rule says, test by test.
    for test in doc.tests:
        (run,) = test.load
        assert slo_in_force_for(doc, test).slo == run.slo_limits, test.nodeid
    session_slo = {"ttft_p95": 5.0} if session else None
    assert [judged[name].load[0].slo_limits for name in ("test_marked", "test_marked_without_a_limit",
                                                         "test_unmarked")] == [
        {"ttft_p95": 10.0}, {}, session_slo]
    lines = slo_by_test(doc)
    assert "test_marked: ttft_p95 ≤ 10 s (its @slo marker)" in lines
    assert "test_marked_without_a_limit: no limit (its @slo marker gives none)" in lines
    assert (("test_unmarked: ttft_p95 ≤ 5 s (from --slo ttft_p95=5.0)" if session else
             "test_unmarked: none given (measured, not judged)") in lines), lines


def test_repeated_slo_values_each_give_their_rows_and_a_bad_second_value_names_itself() -> None:
    assert parse_values(("ttft_p95=0.5", "error_rate=0.01,ttft_p95=0.4")) == (
        ("ttft_p95", 0.5), ("error_rate", 0.01), ("ttft_p95", 0.4))
    with pytest.raises(SloProfileError, match=r"^--slo error_rate: 'lots' is not a number$"):
        parse_values(("ttft_p95=0.5", "error_rate=lots"))
    with pytest.raises(SloProfileError, match=r"^--slo 'tpot_p95' is not KEY=VALUE"):
        parse_values(("ttft_p95=0.5", "tpot_p95"))
    # Merged once: a later value for a key wins, the source names what was given.
    load_settings = resolve(lambda key: None, environ={},
                            slo_values=("ttft_p95=0.5", "error_rate=0.01", "ttft_p95=0.4")).load
    assert load_settings.slo is not None
    assert load_settings.slo.to_json() == {"ttft_p95": 0.4, "error_rate": 0.01}
    assert load_settings.slo_source == "--slo ttft_p95=0.4,error_rate=0.01"


def test_each_slo_value_from_the_ini_and_the_command_line_is_parsed_once_as_given(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\ninferaccept_slo =\n    ttft_p95=0.9\n    e2e_p99=8\n")
    seen: list[str] = []
    parse = slo_profile.parse_value

    def spy(value: str) -> tuple[slo_profile.SloRow, ...]:
        seen.append(value)
        return parse(value)

    monkeypatch.setattr(slo_profile, "parse_value", spy)
    config = pytester.parseconfig("--slo", "ttft_p95=0.5", "--slo", "error_rate=0.01,tpot_p95=0.05")
    spec = settings_from_config(config).load.slo
    assert seen == ["ttft_p95=0.9", "e2e_p99=8", "ttft_p95=0.5", "error_rate=0.01,tpot_p95=0.05"]
    assert spec is not None
    assert spec.to_json() == {"ttft_p95": 0.5, "e2e_p99": 8.0, "tpot_p95": 0.05, "error_rate": 0.01}


def test_a_bad_second_slo_value_on_the_command_line_stops_the_run_naming_it(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess("--server-url", "http://127.0.0.1:9",
                                          "--slo", "ttft_p95=0.5", "--slo", "error_rate=lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --slo error_rate: 'lots' is not a number"])
