"""The engine API: spec validation, runs in and out of event loops, workers, metrics, records files."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.load.engine import (
    LoadInterrupted,
    LoadRun,
    LoadSpec,
    read_records,
    run_load,
    run_load_async,
    write_records,
)
from pytest_inferaccept.load.workloads import Fixed, SyntheticWorkload, TraceWorkload, WorkItem

TINY = SyntheticWorkload(input=Fixed(8), output=Fixed(3))
URL = "http://127.0.0.1:9"


# -- the spec -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("changes", "words"), [
    ({"concurrency": 2, "rate": 3.0}, "exactly one of concurrency"),
    ({}, "exactly one of concurrency"),
    ({"concurrency": 0}, "concurrency must be an integer >= 1"),
    ({"rate": -1.0}, "rate must be a number > 0"),
    ({"concurrency": 2, "requests": None}, "every run needs a bound"),
    ({"concurrency": 2, "workers": 3}, "workers (3) cannot exceed concurrency (2)"),
    ({"concurrency": 2, "request_timeout": 0}, "request_timeout must be a number of seconds > 0"),
    ({"concurrency": 2, "base_url": "localhost:8000"}, "base_url must start with http://"),
    ({"concurrency": 2, "kind": "images"}, "kind must be chat, completions or embeddings"),
    ({"replay": True, "workload": TINY}, "replay needs a trace workload"),
    ({"concurrency": 1, "warmup": -1}, "warmup must be an integer >= 0"),
])
def test_a_bad_spec_is_refused_with_a_clear_message(changes: dict[str, Any], words: str) -> None:
    args: dict[str, Any] = {"base_url": URL, "model": "m", "requests": 5, **changes}
    with pytest.raises(ValueError, match="invalid load spec: .*" + re.escape(words)):
        LoadSpec(**args)


def test_the_spec_description_never_holds_the_api_key() -> None:
    spec = LoadSpec(base_url=URL, model="m", api_key="sk-secret", concurrency=2, duration=10)
    text = json.dumps(spec.describe())
    assert "sk-secret" not in text and "sk-secret" not in repr(spec)
    assert spec.describe()["api_key_set"] is True
    assert spec.describe()["workload"]["type"] == "synthetic"


def test_the_hard_bound_is_derived_from_the_schedule_when_not_given() -> None:
    by_duration = LoadSpec(base_url=URL, model="m", concurrency=4, duration=30, warmup=0, request_timeout=10)
    assert by_duration.hard_seconds() == pytest.approx(30 + 10 + 5)
    by_count = LoadSpec(base_url=URL, model="m", concurrency=4, requests=8, warmup=4, request_timeout=10)
    assert by_count.hard_seconds() == pytest.approx(10 + 2 * 10 + 5)
    assert LoadSpec(base_url=URL, model="m", rate=1, requests=5, max_seconds=3).hard_seconds() == 3


def test_workers_share_concurrency_requests_and_warm_up() -> None:
    spec = LoadSpec(base_url=URL, model="m", concurrency=5, requests=11, warmup=3, workers=2)
    plans = spec.plans()
    assert [p.concurrency for p in plans] == [3, 2]
    assert [p.requests for p in plans] == [6, 5]
    assert [p.warmup for p in plans] == [2, 1]
    rate = LoadSpec(base_url=URL, model="m", rate=10.0, duration=5, workers=2).plans()
    assert [p.rate for p in rate] == [5.0, 5.0]


# -- runs -----------------------------------------------------------------------------------------


def test_a_run_returns_records_window_selfcheck_and_server_metrics() -> None:
    with FakeServer(ttft=0.02, itl=0.005) as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=2, requests=6, warmup=2,
                                workload=TINY))
    measured = [r for r in run.records if not r.warmup]
    assert len(run.records) == 8 and len(measured) == 6
    assert run.window == (min(r.send for r in measured), max(r.end for r in measured))
    ttft = run.server_metrics["histograms"]["vllm:time_to_first_token_seconds"]
    assert ttft["count"] == 6 and ttft["role"] == "ttft"  # the window only: warm-up excluded
    assert ttft["mean"] == pytest.approx(0.02)
    assert run.server_metrics["counters"]["vllm:generation_tokens_total"] == 18
    assert "vllm:num_requests_running" in run.server_metrics["gauges"]
    data = run.to_json()
    json.dumps(data, allow_nan=False)
    assert "records" not in data and data["counts"] == {"records": 8, "warmup": 2, "errors": {}}
    assert set(run.selfcheck) == {"per_worker", "total"}


def test_without_a_metrics_endpoint_server_metrics_are_empty() -> None:
    with FakeServer(faults=["metrics_missing"]) as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=1, requests=1, warmup=0,
                                workload=TINY))
    assert run.server_metrics == {}
    assert run.records[0].ok


def test_failed_requests_stay_in_the_records() -> None:
    with FakeServer(faults=["chat_500"]) as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=2, requests=4, warmup=1))
    assert len(run.records) == 5
    assert {r.error for r in run.records} == {"http_5xx"}
    assert run.to_json()["counts"]["errors"] == {"http_5xx": 4}


def test_a_run_can_be_awaited_on_the_callers_event_loop() -> None:
    with FakeServer() as server:
        spec = LoadSpec(base_url=server.url, model="fake-chat", concurrency=2, requests=4, warmup=0,
                        workload=TINY, kind="completions")
        run = asyncio.run(run_load_async(spec))
    assert len(run.records) == 4 and all(r.ok and r.kind == "completions" for r in run.records)


def test_run_load_works_from_code_that_already_runs_an_event_loop() -> None:
    async def inside_a_loop(url: str) -> LoadRun:
        return run_load(LoadSpec(base_url=url, model="fake-chat", concurrency=1, requests=2, warmup=0,
                                 workload=TINY))

    with FakeServer() as server:
        run = asyncio.run(inside_a_loop(server.url))
    assert len(run.records) == 2 and all(r.ok for r in run.records)


def test_a_stop_request_ends_an_async_run_and_keeps_what_was_measured() -> None:
    # The clock starts at the run's first look at `stop`, not before the server and the event loop
    # are up: on a loaded machine that start alone can take longer than a fixed deadline.
    started: dict[str, float] = {}

    def stop() -> bool:
        first = started.setdefault("at", time.monotonic())
        return time.monotonic() > first + 1.0

    with FakeServer(ttft=0.1) as server:
        spec = LoadSpec(base_url=server.url, model="fake-chat", concurrency=2, duration=30, warmup=0,
                        workload=TINY)
        run = asyncio.run(run_load_async(spec, stop=stop))
    assert run.stopped_by == "interrupted"
    assert any(r.ok for r in run.records)
    assert 1 <= sum(r.error == "cancelled" for r in run.records) <= 2


class _CtrlC:
    """A workload that presses Ctrl-C (SIGINT to this process) `times` times when request 3 is built."""

    def __init__(self, times: int = 1) -> None:
        self.times = times

    def item(self, position: int, uid: int) -> WorkItem:
        if uid == 3:
            for _ in range(self.times):
                os.kill(os.getpid(), signal.SIGINT)
        return WorkItem(prompt="hello", max_tokens=2)

    def describe(self) -> dict[str, Any]:
        return {"type": "ctrl-c"}


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
def test_ctrl_c_stops_the_run_and_the_exception_carries_the_records() -> None:
    with FakeServer(ttft=0.05) as server:
        spec = LoadSpec(base_url=server.url, model="fake-chat", concurrency=1, requests=50, warmup=0,
                        workload=_CtrlC())
        with pytest.raises(LoadInterrupted) as info:
            run_load(spec)
    run = info.value.run
    assert isinstance(info.value, KeyboardInterrupt)
    assert run.stopped_by == "interrupted"
    assert [r.ok for r in run.records[:3]] == [True, True, True]
    assert len(run.records) <= 5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
def test_a_second_ctrl_c_stops_at_once_and_still_keeps_the_records() -> None:
    with FakeServer(ttft=0.05) as server:
        spec = LoadSpec(base_url=server.url, model="fake-chat", concurrency=2, requests=50, warmup=0,
                        workload=_CtrlC(times=2))
        with pytest.raises(LoadInterrupted) as info:
            run_load(spec)
    run = info.value.run
    assert run.stopped_by == "interrupted"
    assert sum(r.ok for r in run.records) >= 2
    assert all(r.ok or r.error == "cancelled" for r in run.records)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_two_worker_processes_merge_their_records() -> None:
    with FakeServer(ttft=0.02) as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=2, requests=6, warmup=2,
                                workers=2, workload=TINY))
    assert sorted(r.index for r in run.records) == list(range(8))
    assert {r.worker for r in run.records} == {0, 1}
    assert all(r.ok for r in run.records)
    assert [r.warmup for r in run.records] == [True, True] + [False] * 6
    per_worker = run.selfcheck["per_worker"]
    assert [w["worker"] for w in per_worker] == [0, 1] and [w["measured"] for w in per_worker] == [3, 3]
    assert run.selfcheck["total"]["asked_concurrency"] == 2
    assert run.server_metrics["histograms"]["vllm:time_to_first_token_seconds"]["count"] == 6


def test_the_worker_module_imports_without_pytest() -> None:
    code = ("import sys, pytest_inferaccept.load.workers, pytest_inferaccept.load.engine; "
            "import pytest_inferaccept.load as L; L.LoadSpec; "
            "sys.exit(1 if 'pytest' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_importing_the_load_package_is_cheap() -> None:
    code = ("import sys, pytest_inferaccept.load; "
            "heavy = [m for m in ('aiohttp', 'pydantic', 'prometheus_client') if m in sys.modules]; "
            "sys.exit(bool(heavy))")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# -- records files --------------------------------------------------------------------------------


def test_records_are_written_as_jsonl_with_their_run_label_and_read_back(tmp_path: Path) -> None:
    with FakeServer(api_key="sk-hidden") as server:
        spec = LoadSpec(base_url=server.url, model="fake-chat", api_key="sk-hidden", concurrency=1,
                        requests=2, warmup=1, workload=TINY)
        run = run_load(spec)
    path = tmp_path / "records.jsonl"
    write_records(path, {"tests/test_x.py::test_a": run, "tests/test_x.py::test_b": run})
    text = path.read_text()
    assert "sk-hidden" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 6 and lines[0]["run"] == "tests/test_x.py::test_a"
    back = read_records(path)
    assert back["tests/test_x.py::test_b"] == run.records


def test_a_replay_spec_needs_arrivals_on_every_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text('{"prompt": "a", "max_tokens": 1, "arrival": 0}\n{"prompt": "b", "max_tokens": 1}\n')
    with pytest.raises(ValueError, match="replay needs a trace workload"):
        LoadSpec(base_url=URL, model="m", replay=True, workload=TraceWorkload.from_file(path))


# -- server telemetry -----------------------------------------------------------------------------


def _sglang(count: int, total: float, running: int) -> str:
    return (f'sglang:time_to_first_token_seconds_bucket{{le="0.1"}} {count - 1}\n'
            f'sglang:time_to_first_token_seconds_bucket{{le="+Inf"}} {count}\n'
            f"sglang:time_to_first_token_seconds_count {count}\n"
            f"sglang:time_to_first_token_seconds_sum {total}\n"
            f"sglang:num_running_reqs {running}\n"
            f"sglang:generation_tokens_total {count * 10}\n")


def test_server_histograms_become_deltas_over_the_window_without_type_lines() -> None:
    from pytest_inferaccept.load.telemetry import deltas, parse

    out = deltas(parse(_sglang(5, 1.0, 0)), parse(_sglang(15, 3.5, 7)))
    ttft = out["histograms"]["sglang:time_to_first_token_seconds"]
    assert (ttft["role"], ttft["count"], ttft["sum"], ttft["mean"]) == ("ttft", 10, 2.5, 0.25)
    assert ttft["buckets"] == [[0.1, 10], ["+Inf", 10]]
    assert out["gauges"]["sglang:num_running_reqs"] == {"before": 0, "after": 7}
    assert out["counters"]["sglang:generation_tokens_total"] == 100


def test_a_server_restart_shows_as_a_reset_not_a_negative_delta() -> None:
    from pytest_inferaccept.load.telemetry import deltas, parse

    out = deltas(parse(_sglang(15, 3.5, 0)), parse(_sglang(3, 0.5, 0)))
    assert out["histograms"]["sglang:time_to_first_token_seconds"]["reset"] is True
    assert out["counters"]["sglang:generation_tokens_total"] is None
    assert deltas(None, parse(_sglang(3, 0.5, 0))) == {}
