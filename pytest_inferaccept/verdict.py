"""The go/no-go decision: one pure function over test outcomes and session problems.

It returns the run model's `Verdict` (model.py), the same object the results document holds;
pydantic loads when a verdict is decided, not when the plugin is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pytest_inferaccept.model import CheckResult, Verdict

Status = Literal["GO", "NO-GO", "INVALID"]

EXIT_CODES: dict[Status, int] = {"GO": 0, "NO-GO": 1, "INVALID": 6}
"""Process exit status per verdict (6 is not used by pytest itself)."""


def decide(outcomes: Sequence[CheckResult], problems: Sequence[str] = (),
           extra_warnings: Sequence[str] = (), causes: Sequence[str] = (),
           deselected: int = 0, failures: Sequence[str] = ()) -> Verdict:
    """Decide the verdict over the run's checks (the ledger's entries, as the document holds them).

    INVALID when the run could not judge the server: a session problem (unreachable, never
    ready), a test flagged invalid, or no test ran to a pass or fail. NO-GO when any test failed
    or errored. GO otherwise; warnings never change the status.

    `causes` are one sentence each (the server stopped during the run): the failures they
    explain give one reason per cause, ahead of the other failures. `deselected` acceptance
    checks did not run: a GO says it covers a subset. `failures` are findings of the session
    itself (the server ignored a required API key): each makes a NO-GO, tests or not.
    """
    from pytest_inferaccept.model import Verdict

    counts: dict[str, int] = {}
    for item in outcomes:
        counts[item.outcome] = counts.get(item.outcome, 0) + 1
    warnings = [w for item in outcomes for w in item.evidence.warnings] + list(extra_warnings)
    if problems:
        return Verdict(status="INVALID", reasons=list(problems), warnings=warnings, counts=counts)
    # A check flagged invalid could not judge the server (e.g. the client was the bottleneck).
    invalid = [f"{o.nodeid}: {o.evidence.invalid}" for o in outcomes if o.evidence.invalid]
    if invalid:
        return Verdict(status="INVALID", reasons=invalid, warnings=warnings, counts=counts)
    judged = [o for o in outcomes if o.outcome in ("passed", "failed", "error", "xpassed")]
    if not judged and not failures:
        return Verdict(status="INVALID", reasons=["no acceptance check ran to a result"],
                       warnings=warnings, counts=counts)
    bad = [o for o in outcomes if o.outcome in ("failed", "error")]
    if bad or failures:
        used = sorted({o.caused_by for o in bad
                       if o.caused_by is not None and 0 <= o.caused_by < len(causes)})
        own = [f"{o.nodeid} {o.outcome}: {o.message}".rstrip(": ") for o in bad if o.caused_by not in used]
        reasons = [*failures, *(causes[i] for i in used), *own]
        return Verdict(status="NO-GO", reasons=reasons, warnings=warnings, counts=counts)
    subset = f" (a subset: {deselected} acceptance checks were deselected)" if deselected else ""
    return Verdict(status="GO", reasons=[f"{counts.get('passed', 0)} checks passed{subset}"],
                   warnings=warnings, counts=counts)
