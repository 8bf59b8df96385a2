"""The end of a run, once: its document built and scrubbed, read into the model, the baseline
compared, the verdict decided.

Every output reads what `finish` returns: the JSON file is its `document`, the HTML page, the
pytest-html summary and the terminal summary read its `run` (the same document in the typed model).
The body is validated once; the baseline comparison reads that validation, and the verdict and the
comparison join it as the model's own objects, so nothing is validated twice. Nothing after
`finish` decides the verdict again or rebuilds the document.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel

    from pytest_inferaccept.baseline.gate import Findings
    from pytest_inferaccept.model import BaselineComparison, RunBody, RunDocument, Verdict
    from pytest_inferaccept.run.session import AcceptanceSession

Part = TypeVar("Part", bound="BaseModel")


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


def finish(session: AcceptanceSession, exit_status: Callable[[Verdict], int]) -> FinishedRun:
    """Build the document once, scrub it, validate it once, compare it with the baseline, decide the verdict.

    `exit_status` turns the verdict into the run's exit status (pytest's own may be higher); the
    document records it. The baseline is `session.settings.gate.baseline_path`, when one is given.
    """
    from pydantic import ValidationError

    from pytest_inferaccept.model import RunBody
    from pytest_inferaccept.run import document as results

    scrub = session.scrubber.data
    body: dict[str, Any] = scrub(results.build_body(session))
    new: RunBody | None = None
    invalid = None
    try:
        new = RunBody.model_validate(body)
    except ValidationError as exc:
        invalid = exc
    found = _compare(session, new, invalid)
    if found is not None and found.problem:
        # What the comparison finds is part of the decision: it comes before the verdict.
        session.ledger.problems.append(found.problem)
        body["problems"] = scrub(list(session.ledger.problems))
    verdict = session.verdict(found)
    session.ledger.exit_status = body["exit_status"] = exit_status(verdict)
    written_verdict, verdict_json = _scrubbed(verdict, scrub, mode="json")
    baseline: BaselineComparison | None = None
    baseline_json: dict[str, Any] | None = None
    if found is not None:
        # Only the keys the comparison gave: a baseline that could not be compared has no `run`.
        baseline, baseline_json = _scrubbed(found.section, scrub, exclude_unset=True)
    document = results.assemble(body, verdict_json, baseline_json)
    if new is None:
        return FinishedRun(verdict=verdict, document=document, run=None,
                           invalid_because=f"the results document does not validate: {invalid}")
    # Set after the body was validated: the baseline's problem and the exit status.
    new.problems, new.exit_status = list(body["problems"]), body["exit_status"]
    return FinishedRun(verdict=verdict, document=document, run=_decided(new, written_verdict, baseline))


def _compare(session: AcceptanceSession, new: RunBody | None, invalid: Exception | None) -> Findings | None:
    """The comparison with the baseline, None without one; a body that did not validate cannot be compared."""
    gate = session.settings.gate
    if gate.baseline_path is None:
        return None
    from pytest_inferaccept.baseline.gate import against_baseline, not_compared

    if new is None:  # a bug, not the user's: say so rather than lose the run
        problem = f"the baseline could not be compared: this run's own results do not validate ({invalid})"
        return not_compared(gate, problem, problem)
    return against_baseline(new, gate)


def _scrubbed(part: Part, scrub: Callable[[Any], Any], **dump: Any) -> tuple[Part, dict[str, Any]]:
    """A typed part of the document and its JSON as written, secrets masked; the part is read again
    from that JSON only where masking changed it, so that the model says what the file says."""
    dumped = part.model_dump(**dump)
    written: dict[str, Any] = scrub(dumped)
    return (part if written == dumped else type(part).model_validate(written)), written


def _decided(new: RunBody, verdict: Verdict, baseline: BaselineComparison | None) -> RunDocument:
    """The validated body with its decision: the whole document in the model, without validating it again."""
    from pytest_inferaccept.model import RunDocument

    return RunDocument.model_construct(_fields_set=new.model_fields_set | {"verdict", "baseline"},
                                       **dict(new), verdict=verdict, baseline=baseline)
