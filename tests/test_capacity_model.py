"""Capacity scenarios build the run model's own types: every key typed, the SLO they were judged with
recorded, their entries read back as written, and an older document still loaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.markers import LatencyLimit, SloSpec
from pytest_inferaccept.model import (
    CapacityScenario,
    CapacityStep,
    InterferenceStep,
    LengthNotRun,
    LengthStep,
    TurnStep,
    WholeRun,
)
from tests._stubs import NullSampler

DATA = Path(__file__).with_name("data")
SLO = SloSpec(latency=(LatencyLimit(metric="ttft", stat="p95", limit=0.5),), error_rate=0.05)


def _records(n: int) -> list[RequestRecord]:
    return [RequestRecord(index=i, send=i * 0.1, end=i * 0.1 + 0.2, status=200, first_content=i * 0.1 + 0.05,
                          first_token_any=i * 0.1 + 0.05, content_events=4, finish_reason="stop",
                          completion_tokens=8) for i in range(n)]


def _measure(slo: SloSpec | None) -> Any:
    """A `measure` over made-up answers, each step judged with `slo` as the loadgen judges it."""
    from pytest_inferaccept.load import LoadRun
    from pytest_inferaccept.run.load import LoadResult
    from pytest_inferaccept.stats import evaluate, summarize

    def measure(tag: str, **kw: Any) -> LoadResult:
        records = _records(40)
        run = LoadRun(spec={"concurrency": kw.get("concurrency")}, records=records, window=(0.0, 10.0),
                      server_metrics={}, stopped_by="requests", selfcheck={"total": {}})
        summary = summarize(records, run.window, slo=slo)
        return LoadResult(label=tag, run=run, summary=summary, slo=slo,
                          evaluation=evaluate(summary, slo) if slo is not None else None)
    return measure


def test_each_scenario_records_the_slo_it_was_judged_with() -> None:
    from pytest_inferaccept.capacity.ladder import ladder
    from pytest_inferaccept.capacity.push import push

    climbed = ladder(_measure(SLO), NullSampler(), levels=(1, 2), requests=40, duration=10.0, settle=0,  # type: ignore[arg-type]
                     slo=SLO, breaker_errors=0.1, breaker_latency_s=30.0, label="stub")
    assert climbed.slo == {"ttft_p95": 0.5, "error_rate": 0.05}
    pushed = push(_measure(SLO), lambda: (True, "HTTP 200"), levels=(1,), requests=40, duration=10.0,
                  breaker_errors=0.1, breaker_latency_s=30.0, request_timeout=5.0, label="stub")
    assert pushed.slo == {"ttft_p95": 0.5, "error_rate": 0.05}  # the SLO its steps were judged with
    unjudged = push(_measure(None), lambda: (True, "HTTP 200"), levels=(1,), requests=40, duration=10.0,
                    breaker_errors=0.1, breaker_latency_s=30.0, request_timeout=5.0, label="stub")
    entry = unjudged.model_dump(mode="json", exclude_unset=True)
    assert entry["slo"] is None and list(entry)[-1] == "slo"  # written, after every key written before it


def test_a_capacity_entry_with_a_key_its_kind_does_not_write_is_refused() -> None:
    step = {"level": 4, "label": "c=4", "measured": 40, "failed": 0}
    plain = CapacityScenario.model_validate({"kind": "ladder", "status": "pass", "steps": [step]})
    assert type(plain.steps[0]) is CapacityStep
    for wrong in ({"steps": [{**step, "tttf_p95": 0.1}]},  # a producer's typo
                  {"steps": [{**step, "short_measured": 12}]},  # an interference figure on a ladder step
                  {"findings": {"knee": {"level": 4, "confident": True}}},
                  {"findings": {"checks": {"errors": {"status": "pass", "onset": 3.0}}}},
                  {"params": {"levels": [1, 2], "ladder_levels": [1, 2]}}):
        with pytest.raises(ValidationError):
            CapacityScenario.model_validate({"kind": "ladder", "status": "pass", **wrong})
    mixed = CapacityScenario.model_validate({"kind": "interference", "status": "pass",
                                             "steps": [{**step, "step": "mixed", "short_measured": 12}]})
    assert isinstance(mixed.steps[0], InterferenceStep) and mixed.steps[0].short_measured == 12


def test_each_kinds_entry_is_read_back_as_its_own_types_and_written_back_byte_for_byte() -> None:
    document = json.loads((DATA / "capacity_effects.json").read_text(encoding="utf-8"))
    entries = [c for t in document["tests"] for c in t["capacity"]]
    for entry in entries:
        read = CapacityScenario.model_validate(entry)
        written = read.model_dump(mode="json", exclude_unset=True)
        assert json.dumps(written) == json.dumps(entry), entry["kind"]
    by_kind = {c["kind"]: CapacityScenario.model_validate(c) for c in entries}
    lengths = by_kind["length"].steps
    assert [type(s) for s in lengths].count(LengthNotRun) == 1
    assert all(isinstance(s, (LengthStep, LengthNotRun)) for s in lengths)
    turns = by_kind["multi_turn"]
    assert all(isinstance(s, TurnStep) for s in turns.steps)
    assert isinstance(turns.findings.overall, WholeRun) and turns.findings.overall.failures is not None


def test_a_document_of_an_earlier_version_still_loads() -> None:
    from pytest_inferaccept.model import load

    old = json.loads((DATA / "capacity_results.json").read_text(encoding="utf-8"))
    assert [c.kind for t in load(old).tests for c in t.capacity] == [
        "ladder", "sweep", "soak", "push", "push_length"]
    # The first capacity release wrote the recovery's failed requests as `requests_lost`.
    first = CapacityScenario.model_validate({"kind": "recovery", "status": "pass",
                                             "findings": {"killed_at_s": 1.5, "requests_lost": 12}})
    assert first.findings.requests_lost == 12 and first.slo is None
