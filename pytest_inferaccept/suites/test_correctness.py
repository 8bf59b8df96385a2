"""Correctness: the known-answer set answered twice, graded, and judged (docs/correctness.md).

Accuracy with its exact interval is always recorded; --correctness-min judges it against a floor
(pass, fail, or not enough data); with --inferaccept-baseline each item is compared with its own
baseline answer by the paired gate (`baseline.correctness`), when the run ends.
"""

from __future__ import annotations

import pytest

from pytest_inferaccept.checks import fail
from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.plugin.keys import CORRECTNESS_KEY
from pytest_inferaccept.server import ServerUnderTest
from pytest_inferaccept.settings import Settings


@pytest.mark.capability("chat")
def test_known_answers_are_graded_against_the_floor(request: pytest.FixtureRequest,
                                                    inferaccept_server: ServerUnderTest, model: str,
                                                    inferaccept_settings: Settings,
                                                    inferaccept_evidence: Evidence) -> None:
    from pytest_inferaccept.correctness.items import ItemSetError, load_bundled, load_items
    from pytest_inferaccept.correctness.record import measure

    chosen = inferaccept_settings.correctness
    try:
        items = load_bundled() if chosen.set_path is None else load_items(chosen.set_path)
    except ItemSetError as exc:
        why = f"the known-answer set cannot be used: {exc}"
        inferaccept_evidence.mark_invalid(why)
        fail(f"INVALID: {why}", "fix the line named above; docs/correctness.md gives the keys of an item")
    source = "bundled" if chosen.set_path is None else str(chosen.set_path)
    measured = measure(inferaccept_server.base_url, model, items, source=source, tolerance=chosen.tolerance,
                       floor=chosen.floor, drift_tolerance=chosen.drift_tolerance,
                       api_key=inferaccept_settings.api_key,
                       timeout=inferaccept_settings.request_timeout)
    request.node.stash[CORRECTNESS_KEY] = measured.section
    inferaccept_evidence.note(measured.headline())
    failed = [a for a in measured.section["answers"] if a["error"]]
    if failed:
        inferaccept_evidence.warn(f"{len(failed)} of {len(items)} known-answer requests failed (counted as "
                                  f"unanswered); the first: {failed[0]['error'][:200]}")
    floor = measured.floor
    if floor is None or floor.status == "pass":
        return
    if floor.status == "fail":
        fail(f"the known-answer set's accuracy is below the floor: {floor.message}",
             "the whole interval lies below --correctness-min")
    why = (f"{floor.message}; about {_more_items(measured.accuracy.n)} items or a floor outside the interval "
           "would decide")
    inferaccept_evidence.mark_invalid(why)
    fail(f"INVALID: the known-answer set cannot judge the floor: {why}")


def _more_items(n: int) -> str:
    """A rough size that would narrow the interval enough (four times the items halve its width)."""
    return f"{4 * n}"
