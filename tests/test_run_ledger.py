"""The run ledger: each test's report phases merged into one entry of the typed model."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from pytest_inferaccept.model import load
from pytest_inferaccept.run.ledger import RunLedger


def _ledger(*phases: tuple[str, str, dict[str, Any], str]) -> RunLedger:
    ledger = RunLedger()
    for phase, outcome, payload, message in phases:
        ledger.record("t.py::test_x", phase, outcome, payload, message, 0.5)
    return ledger


def test_phases_merge_into_one_entry_with_the_keys_the_payloads_gave() -> None:
    given = {"file": "t.py", "capabilities": ["chat"], "slo": {"ttft_p95": 1}}
    ledger = _ledger(("call", "passed", given, ""), ("teardown", "failed", {"evidence": {}}, "boom"))
    entry = ledger.outcomes["t.py::test_x"]
    assert (entry.outcome, entry.message, entry.capabilities) == ("error", "boom", ["chat"])
    (written,) = ledger.entries()
    # An integer stays one; a key no payload gave (load, capacity, caused_by) is not written.
    assert written == {"nodeid": "t.py::test_x", "outcome": "error", "duration_s": 1.0, "message": "boom",
                       "file": "t.py", "capabilities": ["chat"], "slo": {"ttft_p95": 1}}


def test_an_entry_the_model_cannot_read_keeps_its_outcome_and_is_written_as_given() -> None:
    # A defect of the plugin (a payload the model does not describe) must not stop the run: readers
    # get the outcome, the document keeps everything, and its validation at the end names the defect.
    bad = {"file": "t.py", "capacity": [{"kind": "ladder", "status": 5}]}
    ledger = _ledger(("call", "failed", bad, "slow"))
    entry = ledger.outcomes["t.py::test_x"]
    assert (entry.outcome, entry.message, entry.capacity) == ("failed", "slow", [])
    (written,) = ledger.entries()
    assert written["capacity"] == bad["capacity"] and written["file"] == "t.py"
    with pytest.raises(ValidationError, match=r"tests\.0\.capacity\.0\.status"):
        load({"schema": "pytest-inferaccept/results/1", "verdict": {"status": "NO-GO"}, "tests": [written]})


def test_a_cause_renumbered_from_a_worker_is_renumbered_in_the_document_too() -> None:
    ledger = _ledger(("call", "failed", {"caused_by": 0}, "gone"))
    ledger.shift_cause("t.py::test_x", 2)
    assert ledger.outcomes["t.py::test_x"].caused_by == 2
    assert ledger.entries()[0]["caused_by"] == 2
