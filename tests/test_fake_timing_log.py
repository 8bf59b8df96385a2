"""The fake server's timing log: its own account of each streamed answer, set against the engine's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.load.engine import LoadSpec, run_load
from pytest_inferaccept.load.workloads import Fixed, SyntheticWorkload


def _read(path: Path) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in map(json.loads, path.read_text().splitlines())}


def _run(tmp_path: Path) -> tuple[Any, dict[str, dict[str, Any]]]:
    log = tmp_path / "timing.jsonl"
    with FakeServer(ttft=0.02, itl=0.005, timing_log=str(log)) as server:
        run = run_load(LoadSpec(base_url=server.url, model="fake-chat", concurrency=2, requests=6,
                                warmup=0, scrape_metrics=False,
                                workload=SyntheticWorkload(input=Fixed(8), output=Fixed(5))))
    return run, _read(log)


def test_the_fake_logs_each_streamed_answer_in_the_order_it_wrote_it(tmp_path: Path) -> None:
    _, truth = _run(tmp_path)
    assert len(truth) == 6
    for entry in truth.values():
        assert len(entry["role"]) == 1 and entry["content"]
        times = [entry["received"], *entry["role"], *entry["content"], entry["end"]]
        assert times == sorted(times)
        # role + content + finish + usage chunks; [DONE] is not a chunk.
        assert entry["chunks"] == 1 + len(entry["content"]) + 2
        # The server's TTFT includes its configured wait for the first token.
        assert entry["content"][0] - entry["received"] >= 0.02


def test_engine_records_on_the_shared_clock_fall_between_the_servers_own_marks(tmp_path: Path) -> None:
    run, truth = _run(tmp_path)
    t0 = {w["worker"]: w["t0"] for w in run.selfcheck["per_worker"]}
    for rec in run.records:
        entry = truth[rec.response_id]
        base = t0[rec.worker]
        # The empty role-only chunk is not a content event.
        assert rec.content_events == len(entry["content"])
        # Stamped before the write, a chunk cannot reach the client before the server's stamp.
        assert base + rec.send <= entry["received"]
        assert base + rec.first_content >= entry["content"][0]
        assert all(base + c >= s for c, s in zip(rec.content_times, entry["content"], strict=True))


def test_without_a_timing_log_the_fake_writes_nothing(tmp_path: Path) -> None:
    with FakeServer() as server:
        assert server.config.timing_log is None
    assert not list(tmp_path.iterdir())
