"""The go/no-go decision: one pure function over test outcomes and session problems."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["GO", "NO-GO", "INVALID"]
Outcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]

EXIT_CODES: dict[Status, int] = {"GO": 0, "NO-GO": 1, "INVALID": 6}
"""Process exit status per verdict (6 is not used by pytest itself)."""


@dataclass(frozen=True, kw_only=True)
class CheckOutcome:
    """One acceptance test's outcome as the verdict sees it."""

    nodeid: str
    outcome: Outcome
    message: str = ""
    invalid: bool = False  # the test could not judge the server (e.g. the client was the bottleneck)
    invalid_reason: str = ""
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """GO, NO-GO or INVALID, with the reasons that decided it."""

    status: Status
    reasons: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """Process exit status for this verdict."""
        return EXIT_CODES[self.status]

    def to_json(self) -> dict[str, object]:
        """Return a JSON-ready form."""
        return {"status": self.status, "reasons": list(self.reasons),
                "warnings": list(self.warnings), "counts": dict(self.counts)}


def decide(outcomes: Sequence[CheckOutcome], problems: Sequence[str] = (),
           extra_warnings: Sequence[str] = ()) -> Verdict:
    """Decide the verdict.

    INVALID when the run could not judge the server: a session problem (unreachable, never
    ready), a test flagged invalid, or no test ran to a pass or fail. NO-GO when any test failed
    or errored. GO otherwise; warnings never change the status.
    """
    counts: dict[str, int] = {}
    for item in outcomes:
        counts[item.outcome] = counts.get(item.outcome, 0) + 1
    warnings = tuple(w for item in outcomes for w in item.warnings) + tuple(extra_warnings)
    if problems:
        return Verdict(status="INVALID", reasons=tuple(problems), warnings=warnings, counts=counts)
    invalid = [f"{o.nodeid}: {o.invalid_reason or o.message}" for o in outcomes if o.invalid]
    if invalid:
        return Verdict(status="INVALID", reasons=tuple(invalid), warnings=warnings, counts=counts)
    judged = [o for o in outcomes if o.outcome in ("passed", "failed", "error", "xpassed")]
    if not judged:
        return Verdict(status="INVALID", reasons=("no acceptance check ran to a result",),
                       warnings=warnings, counts=counts)
    bad = [o for o in outcomes if o.outcome in ("failed", "error")]
    if bad:
        reasons = tuple(f"{o.nodeid} {o.outcome}: {o.message}".rstrip(": ") for o in bad)
        return Verdict(status="NO-GO", reasons=reasons, warnings=warnings, counts=counts)
    return Verdict(status="GO", reasons=(f"{counts.get('passed', 0)} checks passed",),
                   warnings=warnings, counts=counts)
