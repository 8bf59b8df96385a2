"""The plugin's side of the upgrade gate: compare the finished run with --inferaccept-baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_inferaccept.compare.policy import GateSettings


def unusable(path: Path, message: str, gate: GateSettings) -> dict[str, Any]:
    """The `baseline` section when the baseline could not be read."""
    return {"path": str(path), "error": message, "status": "not compared", "regressions": [],
            "improvements": [], "trusted": False, "untrusted_because": [], "conditions": [],
            "changes": [], "answers": None, "policy": gate.describe()}


def compare_with_baseline(document: dict[str, Any], gate: GateSettings) -> tuple[dict[str, Any], list[str],
                                                                              list[str], str | None]:
    """Compare a run's document (its body: no verdict yet) with the baseline file.

    Returns the `baseline` section, the verdict's regressions, its warnings, and a problem (the
    baseline could not be used: the run's verdict becomes INVALID, its results are still written).
    """
    from pytest_inferaccept.compare.baseline import BaselineError, read_document
    from pytest_inferaccept.compare.diff import compare
    from pytest_inferaccept.model import load_body

    path = gate.baseline_path
    if path is None:
        raise ValueError("no baseline was given")
    try:
        old = read_document(path)
    except BaselineError as exc:
        problem = f"the baseline could not be compared: {exc}"
        return unusable(path, str(exc), gate), [], [], problem
    from pydantic import ValidationError

    try:
        new = load_body(document)
    except ValidationError as exc:  # a bug, not the user's: say so rather than lose the run
        problem = f"the baseline could not be compared: this run's own results do not validate ({exc})"
        return unusable(path, problem, gate), [], [], problem
    comparison = compare(old, new, gate, path=str(path))
    return comparison.to_json(), comparison.verdict_reasons(), comparison.warnings(), None
