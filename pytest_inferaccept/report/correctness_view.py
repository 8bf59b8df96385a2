"""The report's Correctness section: accuracy alone, the noise, and the paired verdict with its changes."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_inferaccept.model import RunDocument

MAX_SHOWN = 20
"""Changed answers shown in the page (real changes first); the results file keeps more."""
KIND_WORDS = {"real_change": "real change", "near_tie": "near tie", "not_classifiable": "not classifiable"}
STATUS_WORDS = {"pass": "GO", "fail": "NO-GO", "not_enough_data": "not enough data",
                "cannot_decide": "cannot decide", "not_compared": "not compared"}


@dataclass(frozen=True)
class ChangedAnswer:
    """One item whose answer changed since the baseline, both texts beside each other."""

    id: str
    kind: str
    grades: str
    before: str
    after: str
    reason: str


@dataclass(frozen=True)
class CorrectnessView:
    """What the Correctness section prints (server text is escaped by the template, never trusted)."""

    accuracy: str
    noise: str
    floor: str
    tags: tuple[tuple[str, str], ...]
    verdict: str
    verdict_class: str
    paired: str
    drift: str
    changed: tuple[ChangedAnswer, ...]
    more_changed: int
    headline: str = ""
    """One line for the verdict box: accuracy, noise, and the verdicts against the baseline."""
    headline_class: str = ""


def correctness_view(doc: RunDocument) -> CorrectnessView | None:
    """The section, or None when the correctness suite did not run."""
    found = next((t.correctness for t in doc.tests if t.correctness is not None), None)
    if found is None:
        return None
    acc = found.accuracy
    tags = tuple((name, f"{a.correct} of {a.n} ({a.correct / a.n:.0%}, {a.low:.0%}–{a.high:.0%})")
                 for name, a in found.by_tag.items())
    paired = doc.baseline.correctness if doc.baseline is not None else None
    changed: tuple[ChangedAnswer, ...] = ()
    more = 0
    if paired is not None:
        changed = tuple(ChangedAnswer(id=c.id, kind=KIND_WORDS[c.kind],
                                      grades=f"{c.before_grade} → {c.after_grade}",
                                      before=c.before or "(no answer)", after=c.after or "(no answer)",
                                      reason=c.reason) for c in paired.changed[:MAX_SHOWN])
        more = max(0, len(paired.changed) - MAX_SHOWN)
    head = (f"{acc.correct} of {acc.n} known answers right ({acc.correct / acc.n:.1%}, 95% CI "
            f"{acc.low:.1%}–{acc.high:.1%}), self-flip rate {found.self_flip_rate:.1%}")
    if found.floor is not None:
        head += f"; floor {found.floor.floor:.0%}: {STATUS_WORDS[found.floor.status]}"
    if paired is not None:
        head += f"; against the baseline: {STATUS_WORDS[paired.status]}"
        if paired.drop is not None:
            head += (f" (drop {paired.drop * 100:+.1f} points, {(paired.low or 0) * 100:+.1f} to "
                     f"{(paired.high or 0) * 100:+.1f})")
        if paired.drift is not None and paired.drift.status != "not_measured":
            head += ("; logprob drift found beyond the server's own" if paired.drift.status == "found"
                     else "; no logprob drift beyond the server's own")
    bad = ((paired is not None and (paired.status == "fail" or (paired.drift is not None
                                                                 and paired.drift.status == "found")))
           or (found.floor is not None and found.floor.status == "fail"))
    return CorrectnessView(
        headline=head, headline_class="regression" if bad else "",
        accuracy=(f"{acc.correct} of {acc.n} correct: {acc.correct / acc.n:.1%} (95% CI {acc.low:.1%}–"
                  f"{acc.high:.1%}); {acc.unanswered} unanswered ({acc.unanswered / acc.n:.1%}), "
                  f"set: {found.set}"),
        noise=(f"self-flip rate {found.self_flip_rate:.1%}: {found.self_flips} of {acc.n} items changed "
               "grade when the same server answered them twice"),
        floor="" if found.floor is None else found.floor.message,
        tags=tags,
        verdict="" if paired is None else STATUS_WORDS[paired.status],
        verdict_class="" if paired is None else {"pass": "go", "fail": "nogo"}.get(paired.status, "invalid"),
        paired="" if paired is None else paired.message,
        drift="" if paired is None or paired.drift is None else
        paired.drift.text + (f". {paired.drift.message}" if paired.drift.message else ""),
        changed=changed, more_changed=more)
