"""The loadgen fixture and the slo marker as a team meets them: runs, verdicts, records, bad input."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests._processes import fake_process

_fake = fake_process


@pytest.fixture(scope="module")
def fast_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fake server with 20 ms to the first token and 2 ms between tokens."""
    yield from _fake(tmp_path_factory.mktemp("fast"), "--ttft", "0.02", "--itl", "0.002")


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fake server with 300 ms to the first token."""
    yield from _fake(tmp_path_factory.mktemp("slow"), "--ttft", "0.3", "--itl", "0.002")


# These tests are about the SLO logic; on a busy machine the client's own self-check may call a
# short run client-bound (correctly), which is shown in its own test below.
LOGIC_ONLY = ("--client-check", "warn")

SLO_TEST = """
import pytest

@pytest.mark.slo(ttft_p95=LIMIT, error_rate=0.05)
def test_our_chat_traffic(loadgen):
    result = loadgen.run(concurrency=4, requests=REQUESTS)
    assert result.summary.counts.measured == REQUESTS
"""


def _results(pytester: pytest.Pytester) -> dict:  # type: ignore[type-arg]
    return json.loads((pytester.path / "r.json").read_text())


def test_an_slo_met_by_the_server_passes(pytester: pytest.Pytester, fast_server: str) -> None:
    pytester.makepyfile(SLO_TEST.replace("REQUESTS", "120").replace("LIMIT", "0.2"))
    result = pytester.runpytest_inprocess("--server-url", fast_server, "--inferaccept-json", "r.json",
                                          *LOGIC_ONLY)
    assert result.ret == 0, result.stdout.str()
    (test,) = _results(pytester)["tests"]
    (load,) = test["load"]
    assert load["slo"]["status"] == "pass"
    assert {row["key"] for row in load["slo"]["rows"]} == {"ttft_p95", "error_rate"}
    ttft = load["summary"]["metrics"]["ttft"]["p95"]
    assert 0.02 <= ttft["value"] < 0.2
    # --client-check warn: on a busy machine the self-check may list reasons; they are warnings here
    assert all(r in str(test["evidence"].get("warnings", [])) for r in load["selfcheck"]["client_bound"])


def test_an_slo_the_server_misses_fails_with_the_figure_against_the_limit(
        pytester: pytest.Pytester, slow_server: str) -> None:
    pytester.makepyfile(SLO_TEST.replace("REQUESTS", "80").replace("LIMIT", "0.2"))
    result = pytester.runpytest_inprocess("--server-url", slow_server, "--inferaccept-json", "r.json",
                                          *LOGIC_ONLY)
    out = result.stdout.str()
    assert result.ret == 1, out
    result.stdout.re_match_lines([r".*ttft_p95 = 0\.3\d s \(95% CI 0\.3\d–0\.\d+, n=80\) > 0\.20 s.*"])
    assert "VERDICT: NO-GO" in out
    (test,) = _results(pytester)["tests"]
    assert test["load"][0]["slo"]["status"] == "fail"


def test_too_few_requests_for_the_percentile_is_not_enough_data_and_invalid(
        pytester: pytest.Pytester, slow_server: str) -> None:
    # A count this small is refused before anything is sent (tests/test_run_sizing.py); a run
    # bounded by time alone may still end with too few requests, and is not enough data.
    pytester.makepyfile(SLO_TEST.replace("requests=REQUESTS", "duration=1.0")
                        .replace("assert result.summary.counts.measured == REQUESTS", "")
                        .replace("LIMIT", "0.6"))
    result = pytester.runpytest_inprocess("--server-url", slow_server, "--inferaccept-json", "r.json",
                                          *LOGIC_ONLY)
    out = result.stdout.str()
    assert result.ret == 6, out
    assert "not enough data to judge the SLO" in out
    assert "VERDICT: INVALID" in out
    (load,) = _results(pytester)["tests"][0]["load"]
    row = next(r for r in load["slo"]["rows"] if r["key"] == "ttft_p95")
    assert row["status"] == "not_enough_data" and row["needed_n"] > load["summary"]["counts"]["measured"]


def test_judging_on_the_point_estimate_is_an_option_and_the_results_say_so(
        pytester: pytest.Pytester, slow_server: str) -> None:
    pytester.makepyfile(SLO_TEST.replace("REQUESTS", "20").replace("LIMIT", "0.6"))
    result = pytester.runpytest_inprocess("--server-url", slow_server, "--slo-judge", "point",
                                          "--inferaccept-json", "r.json", *LOGIC_ONLY)
    assert result.ret == 0, result.stdout.str()
    evaluation = _results(pytester)["tests"][0]["load"][0]["slo"]
    assert evaluation["point_estimate"] is True
    assert all(row["basis"] == "point_estimate" for row in evaluation["rows"])


def test_an_slo_marker_on_a_test_that_ran_no_load_is_an_error_not_a_pass(
        pytester: pytest.Pytester, fast_server: str) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.slo(ttft_p95=0.5)
        def test_health(http_client):
            assert http_client.get("/health").status_code == 200
    """)
    result = pytester.runpytest_inprocess("--server-url", fast_server, *LOGIC_ONLY)
    out = result.stdout.str()
    assert result.ret == 6, out
    assert "@pytest.mark.slo is on a test that ran no load" in out


def test_a_malformed_trace_stops_the_load_with_its_line_number_and_sends_nothing(
        pytester: pytest.Pytester, fast_server: str) -> None:
    pytester.path.joinpath("trace.jsonl").write_text(
        '{"prompt": "hi", "max_tokens": 8}\n{"prompt": "there", "max_tokens": 0}\n')
    pytester.makepyfile("""
        def test_traffic(loadgen):
            loadgen.run(concurrency=2, requests=10, workload="trace.jsonl")
    """)
    result = pytester.runpytest_inprocess("--server-url", fast_server, "--inferaccept-json", "r.json",
                                          *LOGIC_ONLY)
    out = result.stdout.str()
    assert result.ret == 6, out
    assert "trace.jsonl:2: max_tokens" in out
    (test,) = _results(pytester)["tests"]
    assert "load" not in test


def test_the_bundled_load_suite_judges_the_slo_given_on_the_command_line(
        pytester: pytest.Pytester, fast_server: str) -> None:
    good = pytester.runpytest_inprocess("--pyargs", "pytest_inferaccept.suites.test_load",
                                        "--server-url", fast_server, "--slo", "ttft_p95=0.5",
                                        "--load-requests", "80", *LOGIC_ONLY)
    assert good.ret == 0, good.stdout.str()
    assert "VERDICT: GO" in good.stdout.str()
    bad = pytester.runpytest_inprocess("--pyargs", "pytest_inferaccept.suites.test_load",
                                       "--server-url", fast_server, "--slo", "ttft_p95=0.001",
                                       "--load-requests", "80", *LOGIC_ONLY)
    out = bad.stdout.str()
    assert bad.ret == 1, out
    assert "VERDICT: NO-GO" in out
    bad.stdout.re_match_lines([r".*ttft_p95 = \d+\.\d ms \(95% CI .*, n=80\) > 1\.0 ms.*"])


def test_without_an_slo_the_load_is_measured_and_recorded_not_judged(
        pytester: pytest.Pytester, fast_server: str) -> None:
    result = pytester.runpytest_inprocess("--pyargs", "pytest_inferaccept.suites.test_load",
                                          "--server-url", fast_server, "--load-requests", "30",
                                          "--load-concurrency", "2", "--inferaccept-json", "r.json",
                                          "--inferaccept-records", "records.jsonl", *LOGIC_ONLY)
    assert result.ret == 0, result.stdout.str()
    (test,) = _results(pytester)["tests"]
    assert test["load"][0]["slo"] is None
    assert "measured, not judged" in " ".join(test["evidence"]["notes"])
    lines = (pytester.path / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len([r for r in records if not r["warmup"]]) == 30
    assert all(r["run"].endswith("test_service_levels_hold_under_load") for r in records)
    assert all(r["first_content"] >= r["send"] for r in records if r["first_content"] is not None)


def test_an_slo_profile_is_validated_and_names_unknown_keys(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("slo.json").write_text('{"name": "chat", "slo": {"ttft_p96": 0.5}}')
    result = pytester.runpytest_inprocess("--server-url", "http://127.0.0.1:9", "--slo-profile", "slo.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--slo-profile slo.json: unknown key(s) ttft_p96; allowed: ttft_p50*"])


def test_an_slo_profile_applies_to_load_tests_without_their_own_marker(
        pytester: pytest.Pytester, fast_server: str) -> None:
    pytester.path.joinpath("slo.json").write_text('{"name": "chat", "slo": {"ttft_p95": 0.001}}')
    pytester.makepyfile("""
        def test_traffic(loadgen):
            loadgen.run(concurrency=2, requests=80)
    """)
    result = pytester.runpytest_inprocess("--server-url", fast_server, "--slo-profile", "slo.json",
                                          "--inferaccept-json", "r.json", *LOGIC_ONLY)
    assert result.ret == 1, result.stdout.str()
    settings = _results(pytester)["conditions"]["settings"]["load"]
    assert settings["slo_source"] == "profile chat (slo.json)"


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_the_async_twin_runs_in_both_pytest_asyncio_modes(
        pytester: pytest.Pytester, fast_server: str, mode: str) -> None:
    pytest.importorskip("pytest_asyncio")
    marker = "@pytest.mark.asyncio" if mode == "strict" else ""
    pytester.makepyfile(f"""
        import pytest
        {marker}
        async def test_async_traffic(loadgen):
            result = await loadgen.arun(concurrency=2, requests=12)
            assert result.summary.counts.ok == 12
    """)
    result = pytester.runpytest_inprocess("--server-url", fast_server, "-p", "asyncio",
                                          "-o", f"asyncio_mode={mode}",
                                          "-o", "asyncio_default_fixture_loop_scope=function", *LOGIC_ONLY)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)


# A client that cannot keep up, whatever the machine: a thread in the test's own process holds
# the interpreter for 50 ms at a time, so the load engine's event loop (which runs in this
# process for one worker) wakes late by about that much, far past the 20 ms loop-lag limit.
HOGGED_TEST = """
import contextlib
import sys
import threading
import time

import pytest


@contextlib.contextmanager
def hogged_interpreter():
    done = threading.Event()

    def hog():
        while not done.is_set():
            until = time.perf_counter() + 0.05
            while time.perf_counter() < until:
                pass

    before = sys.getswitchinterval()
    sys.setswitchinterval(0.05)
    thread = threading.Thread(target=hog, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        sys.setswitchinterval(before)


@pytest.mark.slo(ttft_p95=LIMIT, error_rate=0.05)
def test_our_chat_traffic(loadgen):
    with hogged_interpreter():
        result = loadgen.run(concurrency=4, requests=REQUESTS)
    assert result.summary.counts.measured == REQUESTS
"""


def test_a_run_the_client_limited_is_invalid_not_a_verdict_on_the_server(
        pytester: pytest.Pytester, fast_server: str) -> None:
    pytester.makepyfile(HOGGED_TEST.replace("REQUESTS", "80").replace("LIMIT", "0.5"))
    result = pytester.runpytest_inprocess("--server-url", fast_server, "--inferaccept-json", "r.json")
    out = result.stdout.str()
    assert result.ret == 6, out
    assert "INVALID: the client was the bottleneck, so the run cannot judge the server" in out
    assert "VERDICT: INVALID" in out
    (test,) = _results(pytester)["tests"]
    selfcheck = test["load"][0]["selfcheck"]
    assert selfcheck["client_bound"]
    assert "client event loop ran" in out, out


def test_warn_mode_judges_a_client_limited_run_and_says_so(
        pytester: pytest.Pytester, fast_server: str) -> None:
    # Enough requests for a verdict, and a limit the inflated latencies still meet.
    pytester.makepyfile(HOGGED_TEST.replace("REQUESTS", "80").replace("LIMIT", "5.0"))
    result = pytester.runpytest_inprocess("--server-url", fast_server, "--inferaccept-json", "r.json",
                                          "--client-check", "warn")
    assert result.ret == 0, result.stdout.str()
    warnings = _results(pytester)["verdict"]["warnings"]
    assert any("judged although the client limited the run" in w for w in warnings)
