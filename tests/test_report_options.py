"""--inferaccept-html and --condition: options with ini twins, resolved once, recorded in every output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.settings import SettingsError, parse_conditions, split_condition_list

ONE_CHECK = """
def test_health(http_client):
    assert http_client.get("/health").status_code == 200
"""


def test_conditions_parse_as_key_value_and_a_later_key_wins() -> None:
    assert parse_conditions("gpu=H100x2\ntp=2\n\ngpu=A100") == (("tp", "2"), ("gpu", "A100"))
    assert parse_conditions("flags=--max-model-len=4096 --enforce-eager") == (
        ("flags", "--max-model-len=4096 --enforce-eager"),)
    assert parse_conditions(None) == ()


@pytest.mark.parametrize("bad", ["gpu", "=H100", "2gpu=x", "g pu=x"])
def test_a_condition_that_is_not_key_value_is_refused_with_an_example(bad: str) -> None:
    with pytest.raises(SettingsError, match=r"is not KEY=VALUE \(e.g. gpu=H100x2\)"):
        parse_conditions(bad)


def test_an_ini_line_splits_on_commas_only_before_a_new_key() -> None:
    assert split_condition_list("gpu=H100x2, tp=2,flags=--a,--b") == ["gpu=H100x2", "tp=2", "flags=--a,--b"]


def test_ini_conditions_and_html_path_are_used_and_the_command_line_adds_to_them(
        pytester: pytest.Pytester) -> None:
    pytester.makeini("""
        [pytest]
        inferaccept_html_path = out/report.html
        inferaccept_json_path = out/results.json
        inferaccept_condition =
            gpu=H100x2, tp=2
            quant=fp8
    """)
    pytester.makepyfile(ONE_CHECK)
    with FakeServer() as server:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--server-url", server.url,
                                              "--condition", "tp=4", "--condition", "api_token=abc123")
    assert result.ret == 0
    document = json.loads((pytester.path / "out/results.json").read_text(encoding="utf-8"))
    assert document["conditions"]["declared"] == {"gpu": "H100x2", "quant": "fp8", "tp": "4",
                                                  "api_token": "***"}
    html = (pytester.path / "out/report.html").read_text(encoding="utf-8")
    assert "quant=fp8" in html and "tp=4" in html and "abc123" not in html


def test_a_bad_condition_stops_the_run_as_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--server-url", "http://127.0.0.1:9", "--condition", "gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--condition 'gpu' is not KEY=VALUE*"])


def test_help_lists_both_options_and_their_ini_twins(pytester: pytest.Pytester) -> None:
    text = pytester.runpytest("--help").stdout.str()
    for word in ("--inferaccept-html=PATH", "--condition=KEY=VALUE", "inferaccept_html_path",
                 "inferaccept_condition"):
        assert word in text


def test_loading_the_plugin_imports_no_template_engine_model_library_or_plotting() -> None:
    code = ("import sys, pytest_inferaccept.plugin, pytest_inferaccept.plugin.pytest_html; "
            "print(sorted(m for m in ('jinja2', 'pydantic', 'matplotlib', 'markupsafe') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
