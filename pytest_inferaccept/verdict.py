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

    Ranked by evidence: a session problem (unreachable, never ready) makes it INVALID, since
    nothing the tests saw can be trusted. Then any test that failed or errored, or a finding of the
    session, makes it NO-GO, whatever else could not be judged: the tests flagged invalid (not
    enough data, a client that limited the run) are listed after the findings as undecided, never
    in their place. With no finding, a test flagged invalid, or no test run to a pass or fail,
    makes it INVALID. GO otherwise; warnings never change the status.

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
    # A check flagged invalid could not judge the server (not enough data, the client was the
    # bottleneck): it is undecided, and it never hides a finding made elsewhere in the run.
    undecided = [o for o in outcomes if o.evidence.invalid]
    bad = [o for o in outcomes if o.outcome in ("failed", "error") and not o.evidence.invalid]
    if bad or failures:
        used = sorted({o.caused_by for o in bad
                       if o.caused_by is not None and 0 <= o.caused_by < len(causes)})
        own = [f"{o.nodeid} {o.outcome}: {o.message}".rstrip(": ") for o in bad if o.caused_by not in used]
        beside = [f"{o.nodeid} undecided (could not judge the server): {o.evidence.invalid}"
                  for o in undecided]
        reasons = [*failures, *(causes[i] for i in used), *own, *beside]
        return Verdict(status="NO-GO", reasons=reasons, warnings=warnings, counts=counts)
    if undecided:
        return Verdict(status="INVALID", reasons=[f"{o.nodeid}: {o.evidence.invalid}" for o in undecided],
                       warnings=warnings, counts=counts)
    judged = [o for o in outcomes if o.outcome in ("passed", "failed", "error", "xpassed")]
    if not judged:
        return Verdict(status="INVALID", reasons=["no acceptance check ran to a result"],
                       warnings=warnings, counts=counts)
    subset = f" (a subset: {deselected} acceptance checks were deselected)" if deselected else ""
    return Verdict(status="GO", reasons=[f"{counts.get('passed', 0)} checks passed{subset}"],
                   warnings=warnings, counts=counts)
