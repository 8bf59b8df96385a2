"""One run of the known-answer set: answered twice, graded, summarized into the results' section.

Pytest-free: the correctness suite calls `measure`, judges the floor it returns, and hands the
section (plain JSON, `model.Correctness`) to the plugin, which carries it on the test's report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_inferaccept.correctness.answerer import Answer, answer_items
from pytest_inferaccept.correctness.drift import DEFAULT_TOLERANCE, score
from pytest_inferaccept.correctness.graders import grade
from pytest_inferaccept.correctness.items import Item
from pytest_inferaccept.correctness.paired import (
    Accuracy,
    FloorVerdict,
    SelfFlip,
    accuracy,
    accuracy_by_tag,
    judge_floor,
    self_flip,
)

TEXT_CHARS = 300
"""An answer's text is kept to this many characters: enough to read it beside the baseline's."""
KEPT_TOKENS = 16
"""Logprobs are kept for this many first answer tokens: enough to find where two answers part."""
CONCURRENCY = 4
"""Items in flight at once: a small bound, so the set costs seconds and never loads the server."""


@dataclass(frozen=True)
class Measured:
    """The set answered twice: the results' section, and the figures the suite judges."""

    section: dict[str, Any]
    accuracy: Accuracy
    noise: SelfFlip
    floor: FloorVerdict | None

    def headline(self) -> str:
        """One line: accuracy with its interval, and the self-flip rate."""
        return (f"{self.accuracy.describe()}; self-flip rate {self.noise.rate:.1%} ({self.noise.flips} of "
                f"{self.noise.n} items changed grade when answered twice)")


def _logprobs(answer: Answer) -> list[dict[str, Any]] | None:
    """The first tokens' logprobs in the model's shape: "piece" for the token's text (the scrubber masks
    any key ending in "token"), its logprob, and the top 5 alternatives; bytes left out."""
    if not answer.logprobs:
        return None
    out = []
    for entry in answer.logprobs[:KEPT_TOKENS]:
        try:
            top = [{"piece": str(t["token"]), "logprob": float(t["logprob"])}
                   for t in entry.get("top_logprobs") or ()][:5]
            out.append({"piece": str(entry["token"]), "logprob": float(entry["logprob"]), "top": top})
        except (KeyError, TypeError, ValueError):
            return out or None  # a malformed entry ends what can be compared
    return out


def _acc_json(acc: Accuracy) -> dict[str, Any]:
    return {"correct": acc.correct, "n": acc.n, "unanswered": acc.unanswered, "low": acc.low,
            "high": acc.high, "confidence": acc.confidence}


def _self_drift(first: Answer, second: Answer) -> dict[str, Any] | None:
    """How far the second pass's greedy answer sits from the first's, over the kept tokens (the noise
    the drift tier judges the baseline comparison against)."""
    found = score(as_openai(_logprobs(first)), as_openai(_logprobs(second)))
    if found is None:
        return None
    return {"mean_abs_delta": found.mean_abs_delta, "real_change": found.real_change}


def summarize(items: Sequence[Item], first: Sequence[Answer], second: Sequence[Answer], *, source: str,
              tolerance: float, floor: float | None, drift_tolerance: float | None = DEFAULT_TOLERANCE
              ) -> Measured:
    """Grade both passes, and build the section with accuracy, per-tag accuracy, noise and the floor."""
    grades = [grade(i, a.text, a.finish_reason) if a.error is None else grade(i, None, None)
              for i, a in zip(items, first, strict=True)]
    again = [grade(i, a.text, a.finish_reason) if a.error is None else grade(i, None, None)
             for i, a in zip(items, second, strict=True)]
    outcomes = [g.outcome for g in grades]
    acc = accuracy(outcomes)
    noise = self_flip([g.correct for g in grades], [g.correct for g in again])
    verdict = judge_floor(acc, floor) if floor is not None else None
    answers = []
    for item, answer, answer2, g, g2 in zip(items, first, second, grades, again, strict=True):
        answers.append({"id": item.id, "grade": g.outcome, "grade_again": g2.outcome,
                        "text": None if answer.text is None else answer.text[:TEXT_CHARS],
                        "finish_reason": answer.finish_reason, "read": g.read, "reason": g.reason[:300],
                        "error": answer.error, "logprobs": _logprobs(answer),
                        "self_drift": _self_drift(answer, answer2)})
    section = {
        "set": source, "accuracy": _acc_json(acc),
        "by_tag": {k: _acc_json(v) for k, v in accuracy_by_tag(outcomes, [i.tags for i in items]).items()},
        "self_flips": noise.flips, "self_flip_rate": noise.rate, "tolerance": tolerance,
        "drift_tolerance": drift_tolerance,
        "floor": None if verdict is None else {"floor": floor, "status": verdict.status,
                                               "message": verdict.message},
        "logprobs": any(a.logprobs for a in first), "answers": answers}
    return Measured(section=section, accuracy=acc, noise=noise, floor=verdict)


def measure(base_url: str, model: str, items: Sequence[Item], *, source: str, tolerance: float,
            floor: float | None, drift_tolerance: float | None = DEFAULT_TOLERANCE,
            api_key: str | None = None, timeout: float = 60.0, concurrency: int = CONCURRENCY) -> Measured:
    """Answer the items twice (noise first) at a small bounded concurrency and summarize both passes."""

    async def both() -> tuple[list[Answer], list[Answer]]:
        first = await answer_items(base_url, model, items, concurrency=concurrency, api_key=api_key,
                                   timeout=timeout)
        second = await answer_items(base_url, model, items, concurrency=concurrency, api_key=api_key,
                                    timeout=timeout)
        return first, second

    first, second = asyncio.run(both())
    return summarize(items, first, second, source=source, tolerance=tolerance, floor=floor,
                     drift_tolerance=drift_tolerance)


def as_openai(logprobs: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Kept logprobs back in the OpenAI chat shape that `ties.classify` and `ties.drift` read."""
    if not logprobs:
        return None
    return [{"token": e["piece"], "logprob": e["logprob"],
             "top_logprobs": [{"token": t["piece"], "logprob": t["logprob"]} for t in e.get("top", ())]}
            for e in logprobs]
