"""The examples of docs/writing-tests.md run as written against the fake server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from tests._processes import fake_process

DOC = Path(__file__).resolve().parent.parent / "docs" / "writing-tests.md"
BLOCK = re.compile(r"<!-- example: (?P<name>\S+) -->\n```(?P<lang>\w+)\n(?P<body>.*?)```", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class Run:
    """One pytest run of example modules against the fake server, and what it must give."""

    modules: tuple[str, ...]
    args: tuple[str, ...] = ()
    passed: int = 1
    replace: tuple[tuple[str, str, str], ...] = ()
    """(module, old, new): lines the fake server cannot match as written; each must be there."""


TEAM_SLO = "test_our_traffic_under_the_team_slo.py"
RUNS: dict[str, Run] = {
    "trace-under-an-slo": Run(modules=("test_our_traffic.py",)),
    "open-loop": Run(modules=("test_our_peak_rate.py",)),
    # The contracts share one run: each is a request or two, and a run's start-up is most of its cost.
    "contracts": Run(
        modules=("test_our_tool.py", "test_our_schema.py", "test_our_embeddings.py"),
        args=("--capabilities", "chat,tools,json_schema,embeddings", "--embedding-model", "fake-embed"),
        passed=5,
        # The fake serves 16-dimensional vectors; the example's index expects 384.
        replace=(("test_our_embeddings.py", "VECTOR_DIMENSION = 384", "VECTOR_DIMENSION = 16"),)),
    "async": Run(modules=("test_our_async_traffic.py",), args=("-p", "asyncio", "-o", "asyncio_mode=strict")),
    "team-slo": Run(modules=(TEAM_SLO,), args=(
        "--slo-profile", "slo/chat.json", "--slo", "tpot_p95=0.04",
        "--inferaccept-json", "results.json", "--inferaccept-records", "records.jsonl")),
}


def _examples() -> dict[str, tuple[str, str]]:
    """Every marked block of the guide: name -> (language, text)."""
    found: dict[str, tuple[str, str]] = {}
    for match in BLOCK.finditer(DOC.read_text(encoding="utf-8")):
        name = match["name"]
        assert name not in found, f"two examples are named {name}"
        found[name] = (match["lang"], match["body"])
    return found


@pytest.fixture(scope="module")
def fake_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The fake server as its own process: 20 ms to the first token, 2 ms between tokens."""
    yield from fake_process(tmp_path_factory.mktemp("fake"), "--ttft", "0.02", "--itl", "0.002")


def test_every_python_example_of_the_guide_is_run_here() -> None:
    examples = _examples()
    modules = {name for name, (lang, _) in examples.items() if lang == "python"}
    run = [module for r in RUNS.values() for module in r.modules]
    assert sorted(run) == sorted(modules)
    files = {name for name, (lang, _) in examples.items() if lang != "python"}
    assert files == {"traces/ours.jsonl", "slo/chat.json"}


def _run_examples(pytester: pytest.Pytester, server: str, run: Run) -> pytest.RunResult:
    """Write the guide's files and the run's modules into the pytester directory, then run them."""
    examples = _examples()
    for file, (lang, body) in examples.items():
        if lang != "python":
            path = pytester.path / file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
    for module in run.modules:
        source = examples[module][1]
        for where, old, new in run.replace:
            if where == module:
                assert source.count(old) == 1, f"{module} no longer holds {old!r}"
                source = source.replace(old, new)
        pytester.path.joinpath(module).write_text(source, encoding="utf-8")
    quiet = ("-o", "asyncio_default_fixture_loop_scope=function") if find_spec("pytest_asyncio") else ()
    # The examples are judged on their SLO logic; the client self-check has its own tests
    # (tests/test_loadgen.py) and may rightly call a run on a busy machine client-bound.
    busy = ("--client-check", "warn")
    return pytester.runpytest_inprocess(*run.modules, "--server-url", server, *quiet, *busy, *run.args)


@pytest.mark.parametrize("name", sorted(set(RUNS) - {"team-slo"}))
def test_the_guide_examples_pass_against_the_fake_server(
        pytester: pytest.Pytester, fake_server: str, name: str) -> None:
    run = RUNS[name]
    if "asyncio" in run.args:
        pytest.importorskip("pytest_asyncio")
    result = _run_examples(pytester, fake_server, run)
    out = result.stdout.str()
    result.assert_outcomes(passed=run.passed)
    assert "VERDICT: GO" in out, out


def test_the_team_slo_example_writes_the_load_section_and_the_records_the_guide_describes(
        pytester: pytest.Pytester, fake_server: str) -> None:
    from pytest_inferaccept.load import read_records
    from pytest_inferaccept.stats import summarize
    from pytest_inferaccept.stats.summary import document_view

    result = _run_examples(pytester, fake_server, RUNS["team-slo"])
    result.assert_outcomes(passed=1)
    assert "VERDICT: GO" in result.stdout.str()
    document: dict[str, Any] = json.loads((pytester.path / "results.json").read_text(encoding="utf-8"))
    assert document["conditions"]["settings"]["load"]["slo_source"] == (
        "profile chat-interactive (slo/chat.json); --slo tpot_p95=0.04")
    (test,) = document["tests"]
    (load,) = test["load"]
    assert {"label", "spec", "stopped_by", "summary", "slo", "slo_limits", "selfcheck",
            "server_metrics"} <= set(load)
    assert load["slo_limits"] == {"ttft_p95": 0.5, "tpot_p95": 0.04, "error_rate": 0.05}
    assert {row["key"]: row["status"] for row in load["slo"]["rows"]} == dict.fromkeys(
        ("ttft_p95", "tpot_p95", "error_rate"), "pass")
    assert isinstance(load["selfcheck"]["client_bound"], list)  # on a busy machine it may hold reasons
    assert load["stopped_by"] == "requests"

    runs = read_records(pytester.path / "records.jsonl")
    records = runs[load["label"]]
    assert len([r for r in records if not r.warmup]) == 80
    again = summarize(records, (0.0, max(r.end for r in records)))
    again_ttft = document_view(again).model_dump(mode="json", exclude_unset=True)["metrics"]["ttft"]
    assert again_ttft["p95"] == load["summary"]["metrics"]["ttft"]["p95"]
