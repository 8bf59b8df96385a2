"""The terminal summary says each warning once, with how many checks gave it."""

from __future__ import annotations

from pytest_inferaccept.model import Verdict
from pytest_inferaccept.plugin.summary import MAX_REASONS, lines
from pytest_inferaccept.run.finish import FinishedRun


def _texts(verdict: Verdict) -> list[str]:
    return [text for text, _ in lines(FinishedRun(verdict=verdict, document={}, run=None))]


def test_a_warning_five_checks_gave_is_one_line_with_its_count() -> None:
    same = "response usage has no output_tokens_details.reasoning_tokens"
    verdict = Verdict(status="GO", reasons=["9 checks passed"], warnings=[same] * 5 + ["a lone one"])
    warned = [t for t in _texts(verdict) if t.startswith("  warning: ")]
    assert warned == [f"  warning: {same} (5 checks)", "  warning: a lone one"]


def test_more_distinct_warnings_than_shown_are_counted() -> None:
    verdict = Verdict(status="GO", warnings=[f"w{i}" for i in range(MAX_REASONS + 3)])
    texts = _texts(verdict)
    assert sum(t.startswith("  warning: ") for t in texts) == MAX_REASONS
    assert "  … and 3 more warnings" in texts


def test_the_baseline_and_the_other_failures_are_read_from_the_run_model_not_the_document() -> None:
    from pytest_inferaccept.model import SCHEMA_ID, load

    run = load({"schema": SCHEMA_ID, "verdict": {"status": "GO", "reasons": ["1 check passed"]},
                "conditions": {"plugin_version": "1", "python": "3.11", "client_host": "ci",
                               "client_platform": "Linux", "started_at": "2026-01-02T00:00:00+00:00",
                               "finished_at": "2026-01-02T00:01:00+00:00", "settings": {}},
                "other_failures": ["test_plain.py::test_sum failed"], "exit_status": 1,
                "baseline": {"path": "accepted.json", "error": None, "status": "no regression",
                             "run": {"started_at": "2026-01-01T00:00:00+00:00", "verdict": "GO"},
                             "trusted": True}})
    texts = [text for text, _ in lines(FinishedRun(verdict=run.verdict, document={}, run=run))]
    assert "changed since the baseline (accepted.json, 2026-01-01T00:00:00+00:00, verdict GO): no " \
           "regression" in texts
    assert "outside the acceptance verdict: test_plain.py::test_sum failed" in texts
    assert run.exit_status == 1
