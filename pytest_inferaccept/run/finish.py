"""The end of a run, once: its document built, the baseline compared, the verdict decided, scrubbed.

Every output reads what `finish` returns: the JSON file is its `document`, the HTML page, the
pytest-html summary and the terminal summary read its `run` (the same document, validated once
into the typed model). Nothing after `finish` decides the verdict again or rebuilds the document.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_inferaccept.model import RunDocument, Verdict
    from pytest_inferaccept.run.session import AcceptanceSession


@dataclass(frozen=True)
class FinishedRun:
    """What a finished run is, for every reader."""

    verdict: Verdict
    document: dict[str, Any]
    """The results document as written (`--inferaccept-json`), secrets masked."""
    run: RunDocument | None
    """The same document in the typed model; None only when it failed to validate (a defect of the
    plugin, named in `invalid_because`), so that the JSON is still written and nothing is lost."""
    invalid_because: str | None = None


Comparison = Callable[[dict[str, Any]], tuple[dict[str, Any], list[str], list[str], str | None]]
"""A baseline comparison of the document's body: its section, regressions, warnings and a problem."""


def finish(session: AcceptanceSession, exit_status: Callable[[Verdict], int],
           compare: Comparison | None = None) -> FinishedRun:
    """Build the document once, compare it with the baseline, decide the verdict once, scrub once.

    `exit_status` turns the verdict into the run's exit status (pytest's own may be higher); the
    document records it. `compare` is the baseline gate (`compare.gate`), given when a baseline is.
    """
    from pydantic import ValidationError

    from pytest_inferaccept.model import load
    from pytest_inferaccept.run import document as results

    body = results.build_body(session)
    if compare is not None:
        # What the comparison finds is part of the decision: it comes before the verdict.
        section, regressions, warned, problem = compare(body)
        session.ledger.baseline, session.ledger.baseline_findings = section, (regressions, warned)
        if problem:
            session.ledger.problems.append(problem)
        body["problems"] = list(session.ledger.problems)
    verdict = session.verdict()
    session.ledger.exit_status = body["exit_status"] = exit_status(verdict)
    document: dict[str, Any] = session.scrubber.data(results.assemble(body, verdict, session.ledger.baseline))
    try:
        run = load(document)
    except ValidationError as exc:
        return FinishedRun(verdict=verdict, document=document, run=None,
                           invalid_because=f"the results document does not validate: {exc}")
    return FinishedRun(verdict=verdict, document=document, run=run)
