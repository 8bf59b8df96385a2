"""bench/replay_llama_cpp_findings.py judges a finding as its check does: reproduced against a fake
server that has the matching fault, not reproduced against a correct one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.fake import FakeServer

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "replay_llama_cpp_findings.py"
EXPECTATIONS = ROOT / "tests" / "expectations" / "llama-cpp.json"

ROWS = [
    ("test_chat.py::test_unknown_model_is_refused_with_404", "unknown_model_200"),
    ("test_embeddings.py::test_dimensions_is_honoured_or_refused", "dimensions_ignored"),
    ("test_messages.py::test_stop_sequence_ends_the_reply_with_stop_reason_stop_sequence[stream]",
     "messages_stop_reason_end_turn"),
    ("test_responses.py::test_stream_events_are_numbered_in_sequence", "responses_stream_no_indices"),
    ("test_robustness.py::test_request_is_answered_by_the_status_policy_and_the_server_survives[max_tokens_zero]",
     "accept_invalid_200"),
    # the fake calls a tool unprompted, so auto must be made quiet for a required choice treated as auto
    ("probe tool_choice_required", "tool_required_ignored,tools_unprompted_silent"),
]
"""A finding of the llama-cpp expectations and the fake's faults that make its check fail."""


def _replay(server: FakeServer, tmp_path: Path, *only: str) -> tuple[int, str, list[dict[str, Any]]]:
    """Run the script against the fake: (exit status, what it printed, its results)."""
    out = tmp_path / "replay.json"
    args = [sys.executable, str(SCRIPT), "--server-url", server.url, "--model", server.config.model,
            "--embedding-model", server.config.embedding_model, "--timeout", "20", "--json", str(out)]
    for finding in only:
        args += ["--only", finding]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert out.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    return done.returncode, done.stdout, json.loads(out.read_text())["results"]


@pytest.mark.parametrize(("finding", "fault"), ROWS, ids=[fault.split(",")[0] for _, fault in ROWS])
def test_a_finding_is_reproduced_when_the_server_has_its_fault(tmp_path: Path, finding: str,
                                                               fault: str) -> None:
    with FakeServer(faults=fault.split(",")) as server:
        status, printed, results = _replay(server, tmp_path, finding)
    assert [(r["finding"], r["reproduced"]) for r in results] == [(finding, True)], printed[-3000:]
    assert status == 0
    assert "curl -sS -i -X POST http://127.0.0.1" in printed
    assert all(req["status"] is not None for req in results[0]["requests"])
    assert f"{finding}  yes" in printed


@pytest.mark.parametrize(("finding", "fault"), ROWS, ids=[fault.split(",")[0] for _, fault in ROWS])
def test_a_finding_is_not_reproduced_on_a_server_without_the_fault(tmp_path: Path, finding: str,
                                                                    fault: str) -> None:
    with FakeServer() as server:
        status, printed, results = _replay(server, tmp_path, finding)
    assert [(r["finding"], r["reproduced"]) for r in results] == [(finding, False)], printed[-3000:]
    assert status == 1
    assert "0 of 1 findings reproduced" in printed


def test_every_finding_of_the_expectations_file_has_a_replay(tmp_path: Path) -> None:
    checks = json.loads(EXPECTATIONS.read_text())["checks"]
    failed = {name for name, row in checks.items() if row["outcome"] == "failed"}
    broken = {"probe " + row["skip"].removeprefix("broken: ") for row in checks.values()
              if row.get("skip", "").startswith("broken: ")}
    with FakeServer() as server:
        status, printed, results = _replay(server, tmp_path)
    assert {r["finding"] for r in results} == failed | broken
    unreplayed = [r["finding"] for r in results if "no replay" in r["said"] or not r["requests"]]
    assert unreplayed == [], printed[-3000:]
    assert status == 1  # a correct server reproduces none of llama-server's findings
    assert not any(r["reproduced"] for r in results), [r["finding"] for r in results if r["reproduced"]]
