"""Under pytest-xdist: one launched server, one verdict and results file, load tests alone."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("xdist")

ACCEPTANCE = """
import time

import pytest


@pytest.mark.parametrize("n", range(4))
def test_chat_answers(openai_client, model, n):
    answer = openai_client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": f"hello {n}"}], max_tokens=4)
    assert answer.choices[0].message.content


def test_a_check_that_fails(inferaccept_server):
    assert inferaccept_server.model == "another-model"


@pytest.mark.capability("tools")
def test_tools_probe_gates_me(model):
    pass


def test_plain_test_outside_the_verdict():
    pass
"""

TIMED = """
import json
import os
import time

import pytest

LOG = os.environ["TIMES_LOG"]


def _note(name, start, **more):
    with open(LOG, "a") as fh:
        fh.write(json.dumps({"name": name, "start": start, "end": time.time(),
                             "worker": os.environ.get("PYTEST_XDIST_WORKER"), **more}) + "\\n")


@pytest.mark.parametrize("n", range(6))
def test_conformance_check(inferaccept_server, n):
    start = time.time()
    time.sleep(0.4)
    _note(f"check{n}", start)


def test_load_runs_alone(loadgen):
    start = time.time()
    loadgen.run(concurrency=2, requests=6)
    _note("load", start, sampled_pid=loadgen.sampler().pid)
"""


def _server_cmd(tmp: Path) -> str:
    # `exec` keeps the shell's pid, so the pid the command writes is the server's own.
    return f"echo $$ >> {tmp / 'pids.txt'}; exec {sys.executable} -m pytest_inferaccept.fake --port {{port}}"


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = pytester.path / "results.json"
    # In-process: xdist's controller runs here, its workers are processes of their own anyway.
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--server-cmd",
                                          _server_cmd(pytester.path), "--inferaccept-json", str(out), *args)
    return result, json.loads(out.read_text())


@dataclass
class Parallel:
    """The -n 2 run of the acceptance checks and the timed tests together, and where it ran."""

    result: pytest.RunResult
    doc: dict[str, Any]
    path: Path

    def tests(self, module: str) -> list[dict[str, Any]]:
        """The results' entries of the tests of one module."""
        return [t for t in self.doc["tests"] if t["nodeid"].startswith(f"{module}::")]


_PARALLEL: list[Parallel] = []


@pytest.fixture
def parallel(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Parallel:
    """One run under two workers that several tests read: made by the first test that asks."""
    if not _PARALLEL:
        pytester.makepyfile(test_acceptance=ACCEPTANCE, test_timed=TIMED)
        monkeypatch.setenv("TIMES_LOG", str(pytester.path / "times.jsonl"))
        result, doc = _run(pytester, "-n", "2", "--inferaccept-records", str(pytester.path / "records.jsonl"))
        _PARALLEL.append(Parallel(result=result, doc=doc, path=pytester.path))
    return _PARALLEL[0]


def test_two_workers_share_one_launched_server_and_give_the_verdict_of_a_serial_run(
        pytester: pytest.Pytester, parallel: Parallel) -> None:
    text = parallel.result.stdout.str()
    pids = (parallel.path / "pids.txt").read_text().split()
    assert len(pids) == 1, text
    started = re.findall(r"started chat server \(pid (\d+)\)", text)
    assert started == pids, text
    assert len(re.findall(rf"\b{pids[0]}\b", text)) == 1

    # The serial run of the acceptance checks alone (the parallel run may have left the timed
    # tests in this directory): they are what both verdicts rest on.
    pytester.makepyfile(test_acceptance=ACCEPTANCE)
    serial, alone = _run(pytester, "-n", "0", "test_acceptance.py")
    assert parallel.result.ret == serial.ret == 1
    assert parallel.doc["verdict"]["status"] == alone["verdict"]["status"] == "NO-GO"
    outcomes = {t["nodeid"]: t["outcome"] for t in parallel.tests("test_acceptance.py")}
    assert outcomes == {t["nodeid"]: t["outcome"] for t in alone["tests"]}
    assert len(outcomes) == 6
    assert parallel.doc["capabilities"]["tools"] == alone["capabilities"]["tools"]
    assert parallel.doc["capabilities"]["tools"]["probe"]["status"] == "supported"
    assert text.count("VERDICT: NO-GO") == 1


def test_a_load_test_under_two_workers_runs_while_no_other_check_does(parallel: Parallel) -> None:
    # The run's one failure is the acceptance module's failing check (its exit status 1, not an
    # invalid run's 6); every timed test, the load test among them, passed.
    failed = [t["nodeid"] for t in parallel.doc["tests"] if t["outcome"] != "passed"]
    assert parallel.result.ret == 1 and failed == ["test_acceptance.py::test_a_check_that_fails"], \
        parallel.result.stdout.str()
    spans = [json.loads(line) for line in (parallel.path / "times.jsonl").read_text().splitlines()]
    load = next(s for s in spans if s["name"] == "load")
    others = [s for s in spans if s["name"] != "load"]
    assert {s["worker"] for s in spans} == {"gw0", "gw1"}
    overlapping = [s["name"] for s in others if s["start"] < load["end"] and load["start"] < s["end"]]
    assert overlapping == []
    assert len(parallel.tests("test_timed.py")) == 7
    # A worker's telemetry reads the memory of the server the controller launched.
    assert load["sampled_pid"] == int((parallel.path / "pids.txt").read_text().split()[0])
    # The worker's load records reach the one records file the controller writes.
    records = (parallel.path / "records.jsonl").read_text().splitlines()
    assert len([line for line in records if '"run"' in line]) >= 6


def test_a_server_that_cannot_start_makes_the_parallel_run_invalid_without_running_checks(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_acceptance=ACCEPTANCE)
    out = pytester.path / "results.json"
    # One worker is enough: the controller decides before any worker starts.
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-n", "1", "--server-cmd",
                                           "echo broken; exit 3 # {port}", "--inferaccept-json", str(out))
    doc = json.loads(out.read_text())
    assert result.ret == 6, result.stdout.str()
    assert doc["verdict"]["status"] == "INVALID"
    assert "exit code 3" in doc["problems"][0]
    assert doc["tests"] == []
