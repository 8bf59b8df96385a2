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
