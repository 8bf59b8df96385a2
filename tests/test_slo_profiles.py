"""--slo-profile by name: MLPerf's published LLM latency limits, and a clear error for a wrong name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.slo_profile import NAMED_PROFILES, SloProfileError, resolve

# Ground truth, in milliseconds as MLPerf writes them (inference_rules.adoc, loadgen mlperf.conf).
MLPERF_LIMITS_MS = {
    "mlperf-llama3.1-8b-server": (2000, 100),
    "mlperf-llama3.1-8b-interactive": (500, 30),
    "mlperf-llama2-70b-server": (2000, 200),
    "mlperf-llama2-70b-interactive": (450, 40),
    "mlperf-llama3.1-405b-server": (6000, 175),
    "mlperf-llama3.1-405b-interactive": (4500, 80),
    "mlperf-mixtral-8x7b-server": (2000, 200),
    "mlperf-deepseek-r1-server": (2000, 80),
    "mlperf-deepseek-r1-interactive": (1500, 15),
    "mlperf-gpt-oss-120b-server": (3000, 80),
}


@pytest.mark.parametrize(("name", "limits_ms"), MLPERF_LIMITS_MS.items(), ids=list(MLPERF_LIMITS_MS))
def test_a_named_mlperf_profile_sets_ttft_and_tpot_at_the_99th_percentile(
        name: str, limits_ms: tuple[int, int]) -> None:
    spec, source = resolve(None, name)
    assert spec is not None and source is not None
    assert spec.to_json() == {"ttft_any_p99": pytest.approx(limits_ms[0] / 1000),
                              "tpot_p99": pytest.approx(limits_ms[1] / 1000)}
    assert source.startswith(f"profile {name} (MLPerf Inference v")
    assert "rules" in NAMED_PROFILES[name].description


def test_every_named_profile_is_checked_against_the_published_numbers() -> None:
    assert list(NAMED_PROFILES) == list(MLPERF_LIMITS_MS)


def test_slo_entries_override_a_named_profile_and_both_sources_are_named() -> None:
    spec, source = resolve("ttft_any_p99=1.0", "mlperf-llama2-70b-server")
    assert spec is not None and spec.to_json() == {"ttft_any_p99": 1.0, "tpot_p99": 0.2}
    assert source is not None and source.endswith("; --slo ttft_any_p99=1.0")


def test_a_wrong_name_is_an_error_listing_the_known_names() -> None:
    with pytest.raises(SloProfileError) as caught:
        resolve(None, "mlperf-llama3-8b-server")
    message = str(caught.value)
    assert message.startswith("--slo-profile 'mlperf-llama3-8b-server' is neither a file nor a known profile")
    assert all(name in message for name in NAMED_PROFILES)


def test_a_missing_file_is_still_reported_as_a_file(tmp_path: Path) -> None:
    with pytest.raises(SloProfileError, match=r"--slo-profile .*slo\.json: cannot read it"):
        resolve(None, str(tmp_path / "slo.json"))


def test_a_wrong_name_on_the_command_line_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--server-url", "http://127.0.0.1:9",
                                          "--slo-profile", "mlperf-llama-9-server")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--slo-profile 'mlperf-llama-9-server' is neither a file nor a known "
                                 "profile; known profiles: mlperf-llama3.1-8b-server, *"])


def test_the_profiles_name_shows_in_the_header_the_results_and_the_reports_conditions(
        pytester: pytest.Pytester, fake_server: FakeServer) -> None:
    pytester.makepyfile("""
        def test_traffic(loadgen):
            loadgen.run(concurrency=2, requests=10, warmup=0)
    """)
    result = pytester.runpytest_inprocess("--server-url", fake_server.url, "--slo-profile",
                                          "mlperf-llama3.1-8b-server", "--inferaccept-json", "r.json",
                                          "--inferaccept-html", "r.html", "--client-check", "warn",
                                          "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*inferaccept: SLO: ttft_any_p99=2, tpot_p99=0.1 (from profile "
                                 "mlperf-llama3.1-8b-server (MLPerf Inference v5.1 rules*"])
    load = json.loads((pytester.path / "r.json").read_text())["conditions"]["settings"]["load"]
    assert load["slo"] == {"ttft_any_p99": 2.0, "tpot_p99": 0.1}
    assert load["slo_source"].startswith("profile mlperf-llama3.1-8b-server (MLPerf Inference v5.1")
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert "from profile mlperf-llama3.1-8b-server" in html
