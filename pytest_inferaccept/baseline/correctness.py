"""The known-answer set against the baseline's: the paired gate, each changed answer explained, drift.

Each item is compared with its own baseline answer (by id): the paired gate (exact McNemar on the
discordant items, with the tolerance and the self-flip rate this run recorded) decides; changed
answers are classified at their first differing token (near tie, real change, not classifiable);
the greedy logprobs give the drift. docs/correctness.md says what each figure means.
"""

from __future__ import annotations

from pytest_inferaccept.baseline.change import change
from pytest_inferaccept.model import (
    BaselineChange,
    Correctness,
    CorrectnessChange,
    CorrectnessComparison,
    CorrectnessDrift,
    RunBody,
)

MAX_CHANGED = 40
"""Changed answers listed in the results (real changes first); the counts cover all of them."""
ORDER = {"real_change": 0, "not_classifiable": 1, "near_tie": 2}


def _section(doc: RunBody) -> Correctness | None:
    return next((t.correctness for t in doc.tests if t.correctness is not None), None)


def compare_correctness(old: RunBody, new: RunBody) -> tuple[list[BaselineChange],
                                                              CorrectnessComparison | None]:
    """The correctness comparison: its changes for the verdict and the baseline's `correctness` section."""
    from pytest_inferaccept.correctness.drift import Score, judge_drift, score
    from pytest_inferaccept.correctness.paired import SelfFlip, judge_pairs
    from pytest_inferaccept.correctness.record import as_openai
    from pytest_inferaccept.correctness.ties import classify, drift

    after = _section(new)
    if after is None:
        return [], None
    before = _section(old)
    if before is None:
        message = ("the known-answer set was not compared: the baseline has no correctness results (run the "
                   "correctness suite for the baseline too)")
        return _not_compared(message)
    earlier = {a.id: a for a in before.answers}
    pairs = [(earlier[a.id], a) for a in after.answers if a.id in earlier]
    if not pairs:
        message = (f"the known-answer set was not compared: no item id of this run's set ({after.set}) is in "
                   f"the baseline's ({before.set})")
        return _not_compared(message)
    b = sum(x.grade == "correct" and y.grade != "correct" for x, y in pairs)
    c = sum(x.grade != "correct" and y.grade == "correct" for x, y in pairs)
    noise = SelfFlip(after.self_flips, after.accuracy.n)
    verdict = judge_pairs(b, c, len(pairs), tolerance=after.tolerance, self_flip_rate=noise)
    changed: list[CorrectnessChange] = []
    for x, y in pairs:
        if x.text == y.text:
            continue
        tie = classify(as_openai([t.model_dump() for t in x.logprobs or ()]),
                       as_openai([t.model_dump() for t in y.logprobs or ()]), text_a=x.text, text_b=y.text)
        kind = "not_classifiable" if tie.kind == "same" else tie.kind
        reason = tie.reason
        if x.text is not None and y.text is not None and _spaces_dropped(x.text, y.text):
            reason = f"the same answer with its spaces dropped (a tokenizer or detokenizer change); {reason}"
        changed.append(CorrectnessChange(id=x.id, before_grade=x.grade, after_grade=y.grade, before=x.text,
                                         after=y.text, kind=kind, reason=reason))
    # Real changes first, and among them the ones whose grade changed.
    changed.sort(key=lambda ch: (ORDER[ch.kind], ch.before_grade == ch.after_grade))
    openai = [(as_openai([t.model_dump() for t in x.logprobs or ()]),
               as_openai([t.model_dump() for t in y.logprobs or ()])) for x, y in pairs]
    found = drift(openai)
    own = [None if y.self_drift is None else
           Score(real_change=y.self_drift.real_change, mean_abs_delta=y.self_drift.mean_abs_delta)
           for _, y in pairs]
    tiered = judge_drift([score(p, q) for p, q in openai], own, tolerance=after.drift_tolerance)
    kept = [o for o in own if o is not None]
    kinds = {k: sum(ch.kind == k for ch in changed) for k in ORDER}
    explained = (f"{len(changed)} of {len(pairs)} answers changed text: {kinds['real_change']} real changes, "
                 f"{kinds['near_tie']} near ties, {kinds['not_classifiable']} not classifiable")
    dropped = sum(ch.reason.startswith("the same answer with its spaces dropped") for ch in changed)
    if dropped:
        explained += f"; {dropped} of them the same answer with its spaces dropped"
    message = f"known-answer set: {verdict.message}; {explained}"
    section = CorrectnessComparison(
        status=verdict.status, message=message, b=b, c=c, n=len(pairs), drop=verdict.drop, low=verdict.low,
        high=verdict.high, p_value=verdict.p_value, tolerance=verdict.tolerance, self_flip_rate=noise.rate,
        needed_n=verdict.needed_n, accuracy_before=before.accuracy.correct / before.accuracy.n,
        accuracy_after=after.accuracy.correct / after.accuracy.n, changed=changed[:MAX_CHANGED],
        drift=CorrectnessDrift(
            prompts=found.prompts, diverged_real=found.diverged_real, diverged_tie=found.diverged_tie,
            unclassified=found.unclassified, matched_tokens=found.matched_tokens,
            mean_abs_delta=found.mean_abs_delta, max_abs_delta=found.max_abs_delta,
            text=f"logprob drift: {found.describe()}", status=tiered.status, message=tiered.message,
            self_mean_abs_delta=(sum(o.mean_abs_delta for o in kept) / len(kept)) if kept else None,
            self_diverged_real=sum(o.real_change for o in kept) if kept else None, farther=tiered.farther,
            nearer=tiered.nearer, p_value=tiered.p_value, mean_excess=tiered.mean_excess,
            real_excess=tiered.real_excess, tolerance=tiered.tolerance))
    out = [change(kind="correctness", status="regression" if verdict.status == "fail" else "changed",
                  item="correctness", before=b, after=c, detail=message)]
    if tiered.status == "found":
        out.append(change(kind="correctness", status="regression", item="logprob drift",
                          detail=f"known-answer set: {tiered.message}"))
    return out, section


def _not_compared(message: str) -> tuple[list[BaselineChange], CorrectnessComparison]:
    """The set was not compared: a change that says why, and the section with only its status and message."""
    return ([change(kind="correctness", status="changed", item="correctness", detail=message)],
            CorrectnessComparison(status="not_compared", message=message))


def _spaces_dropped(before: str, after: str) -> bool:
    """True when the new answer is the old one with (some of) its spaces gone, and nothing else changed."""
    return before != after and " " in before and before.replace(" ", "") == after.replace(" ", "") \
        and after.count(" ") < before.count(" ")
