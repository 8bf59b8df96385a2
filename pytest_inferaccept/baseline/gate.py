"""The plugin's side of the upgrade gate: a finished run's body against --inferaccept-baseline."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_inferaccept.gate_settings import GateSettings
from pytest_inferaccept.model import BaselineComparison, GatePolicy, RunBody


@dataclass(frozen=True, kw_only=True)
class Findings:
    """What the comparison with the baseline gives the verdict, and the results' `baseline` section."""

    section: BaselineComparison
    regressions: list[str] = field(default_factory=list)
    """One reason each for a NO-GO ("since the baseline: ...")."""
    warnings: list[str] = field(default_factory=list)
    problem: str | None = None
    """Why the baseline could not be used: the run's verdict becomes INVALID, its results still written."""


def unusable(path: Path, message: str, gate: GateSettings) -> BaselineComparison:
    """The `baseline` section when the baseline could not be compared."""
    return BaselineComparison(path=str(path), error=message, status="not compared", regressions=[],
                              improvements=[], trusted=False, untrusted_because=[], conditions=[], changes=[],
                              answers=None, policy=GatePolicy.model_validate(gate.describe()))


def not_compared(gate: GateSettings, error: str, problem: str) -> Findings:
    """The findings when the baseline could not be compared: the section's `error`, the run's problem."""
    path = gate.baseline_path
    if path is None:
        raise ValueError("no baseline was given")
    return Findings(section=unusable(path, error, gate), problem=problem)


def against_baseline(new: RunBody, gate: GateSettings) -> Findings:
    """Compare a run's body (no verdict yet) with the baseline file `gate.baseline_path`."""
    from pytest_inferaccept.baseline.diff import compare, verdict_reasons, warnings
    from pytest_inferaccept.baseline.read import BaselineError, read_document

    path = gate.baseline_path
    if path is None:
        raise ValueError("no baseline was given")
    try:
        old = read_document(path)
    except BaselineError as exc:
        return not_compared(gate, str(exc), f"the baseline could not be compared: {exc}")
    section = compare(old, new, gate, path=str(path))
    return Findings(section=section, regressions=verdict_reasons(section), warnings=warnings(section))
