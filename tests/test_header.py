"""The report header names what a run tests, before anything runs, without credentials."""

from __future__ import annotations

import pytest

from pytest_inferaccept.plugin.header import header_lines
from pytest_inferaccept.scrub import Scrubber
from pytest_inferaccept.settings import resolve


def _lines(**options: str) -> list[str]:
    settings = resolve(lambda key: options.get(key), environ={})
    return header_lines(settings, Scrubber([settings.api_key]))


def test_the_header_names_the_server_without_credentials_the_model_capabilities_and_slo() -> None:
    lines = _lines(server_url="http://ops:hunter2@gpu-box:8000/v1", model="my-model",
                   capabilities="chat,stream,tools", slo="ttft_p95=0.5\nerror_rate=0.01")
    text = "\n".join(lines)
    assert "inferaccept: server under test: http://gpu-box:8000" in lines
    assert "hunter2" not in text and "ops" not in text
    assert "inferaccept: model: my-model" in lines
    assert "inferaccept: required capabilities: chat, stream, tools" in lines
    assert "inferaccept: SLO: ttft_p95=0.5, error_rate=0.01 (from --slo ttft_p95=0.5,error_rate=0.01; " \
           "judged on the 95% interval)" in lines


def test_the_header_shows_a_launch_command_with_its_secrets_masked() -> None:
    lines = _lines(server_cmd="HF_TOKEN=hf_abc123 vllm serve m --port {port} --api-key sk-local")
    assert lines[0] == ("inferaccept: server under test: launched by the plugin: "
                        "HF_TOKEN=*** vllm serve m --port {port} --api-key ***")
    assert ("inferaccept: SLO: none given for the run "
            "(load tests without an @slo marker are measured, not judged)") in lines


def test_the_header_names_a_preset() -> None:
    assert _lines(server_preset="llama-cpp")[0] == (
        "inferaccept: server under test: preset llama-cpp (launched by the plugin)")


def test_a_run_without_a_server_gets_no_header_lines() -> None:
    assert _lines() == []


def test_pytest_prints_the_header_at_the_top_of_the_log(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_plain():\n    pass\n")
    result = pytester.runpytest_inprocess("--server-url", "http://127.0.0.1:9/v1", "--model", "m",
                                          "-p", "no:cacheprovider", "-k", "nothing-matches")
    head = result.stdout.str().split("collected", 1)[0]
    assert "inferaccept: server under test: http://127.0.0.1:9" in head
    assert "inferaccept: model: m" in head
    assert "inferaccept: required capabilities: chat" in head
