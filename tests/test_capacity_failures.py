"""Capacity steps that failed are reported as failing, with the ways they failed named.

Against a fake server whose concurrent streams are empty (`empty_under_concurrency`: the role
chunk and [DONE], nothing else), a ladder step's answers are `incomplete` failures, not a knee;
the push names them as the way the server breaks. The judgement itself (`describe`) is checked
on made-up records, and its claim (a step fails only when its failures are conclusively a
majority) by a seeded simulation.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.capacity.failures import describe
from pytest_inferaccept.load.records import RequestRecord
from tests._processes import fake_process

EMPTY = "no content, no finish_reason"


@pytest.fixture(scope="module")
def empty_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server that answers a chat stream alone, and concurrent ones with nothing in them."""
    yield from fake_process(tmp_path_factory.mktemp("empty"), "--fault", "empty_under_concurrency",
                            "--ttft", "0.02", "--itl", "0.002")


Run = tuple[subprocess.CompletedProcess[str], dict[str, Any]]


def _suite(where: Path, url: str, test: str, *args: str) -> Run:
    """Run one bundled capacity test in its own process; its output and its capacity entry."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "pytest_inferaccept.suites.test_capacity", "-k", test,
         "--server-url", url, "--capacity", "--inferaccept-json", "r.json", "--client-check", "warn",
         "-p", "no:cacheprovider", "-n", "0", "-s", *args],
        cwd=where, capture_output=True, text=True, timeout=300, check=False)
    doc = json.loads((where / "r.json").read_text())
    (entry,) = [c for t in doc["tests"] for c in t.get("capacity", [])]
    return proc, entry


@pytest.fixture(scope="module")
def ladder_run(empty_server: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The bundled ladder at c=1, 2, 4 against the empty-under-concurrency server (run once)."""
    return _suite(tmp_path_factory.mktemp("ladder"), empty_server, "test_concurrency_ladder",
                  "--ladder", "1,2,4", "--capacity-step-requests", "12")


def test_a_ladder_step_whose_answers_came_back_empty_is_failing_and_names_them(
        ladder_run: Run) -> None:
    proc, ladder = ladder_run
    steps = {s["level"]: s for s in ladder["steps"]}
    assert list(steps) == [1, 2], (proc.stdout, ladder["findings"])  # the breaker stopped the climb
    alone, crowded = steps[1], steps[2]
    assert alone["failed"] == 0 and not alone["failing"] and alone["failure_text"] == "", alone
    n = crowded["measured"]
    assert crowded["failed"] == n >= 12, crowded
    assert crowded["failing"] and crowded["failures"]["broken_low"] > 0.5, crowded["failures"]
    assert crowded["failures"]["kinds"] == {f"incomplete ({EMPTY})": n}
    assert crowded["failure_text"] == f"under concurrency 2, {n} of {n} answers were incomplete: {EMPTY}"
    assert ladder["findings"]["stopped_early"].startswith("stopped climbing after c=2: error rate 100.0%")
    # Empty answers are failures, so their collapsed throughput is no knee.
    assert ladder["findings"]["knee"]["level"] is None, ladder["findings"]["knee"]


def test_a_ladder_with_a_failing_step_is_a_no_go_naming_the_incomplete_answers(
        ladder_run: Run) -> None:
    proc, ladder = ladder_run
    crowded = ladder["steps"][1]
    assert ladder["status"] == "fail", (ladder["status"], ladder["headline"])
    assert crowded["failure_text"] in ladder["reasons"], ladder["reasons"]
    assert f"answers were incomplete: {EMPTY}" in ladder["headline"], ladder["headline"]
    assert proc.returncode == 1 and "VERDICT: NO-GO" in proc.stdout, proc.stdout[-3000:]


def test_the_push_names_incomplete_answers_as_the_way_the_server_breaks(
        empty_server: str, tmp_path: Path) -> None:
    proc, push = _suite(tmp_path, empty_server, "test_push_to_failure", "--ladder", "1,2", "--push-max", "4")
    out = proc.stdout
    boundary = push["findings"]["boundary"]
    assert boundary is not None and boundary["level"] == 2, push
    n = push["steps"][0]["measured"]
    assert push["status"] == "fail", push
    assert push["headline"] == (f"falls over at c=2 instead of shedding load: {n} of {n} answers were "
                                f"incomplete: {EMPTY}"), push["headline"]
    assert "queues rather than rejecting" not in push["headline"] and "HTTP 200" not in push["headline"]
    assert not boundary["graceful"] and boundary["alive_after"], boundary
    assert f"push c=2: {n} measured, {n} failed (incomplete ×{n})" in out, out
    assert proc.returncode == 1 and "VERDICT: NO-GO" in out, out[-3000:]


# -- the judgement on made-up records -------------------------------------------------------


def _records(ok: int, **failed: int) -> list[RequestRecord]:
    """`ok` good answers, then failed ones by kind: empty, no_finish, nothing, http_503, http_500, timeout."""
    out = [RequestRecord(index=i, send=i * 0.1, end=i * 0.1 + 0.05, status=200, first_content=i * 0.1 + 0.01,
                         first_token_any=i * 0.1 + 0.01, content_events=4, finish_reason="stop")
           for i in range(ok)]
    for kind, n in failed.items():
        for _ in range(n):
            i = len(out)
            rec = RequestRecord(index=i, send=i * 0.1, end=i * 0.1 + 0.05, status=200)
            if kind == "empty":
                rec.error = "incomplete"
            elif kind == "no_finish":
                rec.error, rec.first_token_any, rec.content_events = "incomplete", rec.send + 0.01, 3
            elif kind == "nothing":
                rec.error, rec.finish_reason = "incomplete", "stop"
            elif kind.startswith("http_"):
                rec.status = int(kind[5:])
                rec.error = "http_5xx" if rec.status >= 500 else "http_4xx"
            else:
                rec.error, rec.status = kind, None  # type: ignore[assignment]
            out.append(rec)
    return out


def test_a_step_that_mostly_failed_is_failing_and_says_how() -> None:
    found = describe(_records(2, empty=38), {"concurrency": 2})
    assert found.failing and found.broken == 38 and found.shed == 0
    assert found.text == f"under concurrency 2, 38 of 40 answers were incomplete: {EMPTY}"
    mixed = describe(_records(4, empty=20, http_500=10, timeout=6), {"rate": 4.0})
    assert mixed.failing
    assert mixed.text == (f"at 4 requests/s, 36 of 40 requests failed: 20 incomplete ({EMPTY}), "
                             "10 HTTP 500, 6 timeout")
    lacking = describe(_records(0, no_finish=3, nothing=1))
    assert lacking.kinds == {"incomplete (no finish_reason)": 3, "incomplete (nothing generated)": 1}
    assert lacking.text == "4 of 4 requests failed: 3 incomplete (no finish_reason), 1 incomplete " \
                              "(nothing generated)"


def test_a_few_failures_or_load_shed_do_not_make_a_failing_step_but_are_named() -> None:
    few = describe(_records(37, empty=3), {"concurrency": 8})
    assert not few.failing
    assert few.text == f"under concurrency 8, 3 of 40 answers were incomplete: {EMPTY}"
    shed = describe(_records(0, http_503=40), {"concurrency": 64})
    assert not shed.failing and shed.shed == 40 and shed.broken == 0
    assert shed.text == "under concurrency 64, 40 of 40 requests failed (HTTP 503)"
    # A majority that the sample cannot show is no verdict; every request failing always is one.
    assert not describe(_records(9, empty=11)).failing
    assert describe(_records(0, empty=2)).failing
    harness = describe([*_records(5), RequestRecord(index=99, error="client_error")])
    assert harness.measured == 5 and harness.failed == 0 and not harness.failing


def test_a_step_is_called_failing_only_when_its_failures_are_conclusively_a_majority() -> None:
    # Seeded: steps of 40 requests whose true share of broken answers is p; how often "failing"?
    rng = random.Random(20261202)
    called: dict[float, float] = {}
    cache: dict[int, bool] = {}
    for p in (0.3, 0.5, 0.7, 0.85):
        hits = 0
        for _ in range(2000):
            k = sum(rng.random() < p for _ in range(40))
            if k not in cache:
                cache[k] = describe(_records(40 - k, empty=k)).failing
            hits += cache[k]
        called[p] = hits / 2000
    assert called[0.3] == 0.0 and called[0.5] <= 0.025, called  # the 95% interval's one-sided 2.5%
    assert called[0.85] >= 0.99, called
    assert 0.1 < called[0.7] < 0.9, called  # in between, 40 requests cannot always tell


def _result(tag: str, records: list[RequestRecord], concurrency: int) -> Any:
    """A LoadResult over made-up records, as `measure` returns it."""
    from pytest_inferaccept.load import LoadRun
    from pytest_inferaccept.loadgen import LoadResult
    from pytest_inferaccept.stats import summarize

    run = LoadRun(spec={"concurrency": concurrency}, records=records, window=(0.0, 10.0), server_metrics={},
                  stopped_by="requests", selfcheck={"total": {}})
    return LoadResult(label=tag, run=run, summary=summarize(records, run.window), slo=None, evaluation=None,
                      client_check="warn")


def test_a_few_incomplete_answers_below_the_breaker_end_the_push_and_fail_it() -> None:
    from pytest_inferaccept.capacity.push import push

    steps = {1: _records(40), 2: _records(38, empty=2), 4: _records(40)}
    out = push(lambda tag, **kw: _result(tag, steps[kw["concurrency"]], kw["concurrency"]),
               lambda: (True, "HTTP 200 in 0.01 s"), levels=(1, 2, 4), requests=40, duration=10.0,
               breaker_errors=0.10, breaker_latency_s=30.0, request_timeout=5.0, label="stub")
    assert [s.level for s in out.steps] == [1, 2]  # 5% failed: under the breaker, still a boundary
    assert out.status == "fail" and not out.steps[1].failing
    boundary = out.findings.boundary
    assert boundary is not None and boundary.why == f"2 of 40 answers were incomplete: {EMPTY}"
    assert out.headline == ("falls over at c=2 instead of shedding load: 2 of 40 answers were incomplete: "
                            f"{EMPTY}")
