"""Graded answers inside load: known-answer items answered alone, among a load's traffic, and after it.

A server can be right alone and wrong when busy, or stay wrong once an overload is over. For a
load run (the bundled load test) or a capacity scenario (every ladder level, the soak, each push
step) this module

1. walks the known-answer set alone, one request at a time (the correctness baseline), until it
   has the items the server answers correctly alone (`count` of them, at most `SEARCH` times as
   many tried), then answers those once more alone: the second pass is the baseline each load is
   paired with, the first pass against it the server's own noise (the self-flip rate);
2. sends the items one at a time beside each load step, from shortly after the step starts until
   it ends, so they share the server's batches with the step's traffic; an item is compared only
   when load requests were in flight as it was sent and it was answered before the load ended
   (placed on the load engine's own clock). The items are graded, never counted in the step's
   latency or throughput figures, and add one request in flight beside the step's own;
3. answers them once more after the last step.

Each level (and the after-load pass) is judged as the correctness gate judges a candidate against
its baseline (`paired.judge_pairs`: an exact McNemar test on the items that changed grade), with
the 5% allowed for a false NO-GO shared among the level comparisons and the after-load one
(Bonferroni), and its answers compared token by token with the alone answers (`ties.classify`):
identical, a near tie, a real change, or changed without logprobs to tell. A level is a NO-GO when
its accuracy is conclusively below alone, or its real changes exceed their tolerance; the after-load
pass when its accuracy is: the server stayed broken. Nothing here imports pytest.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pytest_inferaccept.correctness.answerer import Answer, answer_items
from pytest_inferaccept.correctness.graders import grade
from pytest_inferaccept.correctness.paired import PairedVerdict, SelfFlip, judge_pairs, one_sided_bounds
from pytest_inferaccept.correctness.ties import classify
from pytest_inferaccept.load.blocking import run_blocking
from pytest_inferaccept.model import StepCorrectness, UnderLoadCorrectness

if TYPE_CHECKING:
    from pytest_inferaccept.correctness.items import Item
    from pytest_inferaccept.load import LoadRun
    from pytest_inferaccept.model import CapacityScenario

DEFAULT_ITEMS = 12
"""Items graded per run unless --correctness-under-load says otherwise."""
SEARCH = 4
"""At most this many times `count` items are answered alone to find those the server gets right."""
START_DELAY = 0.1
"""Seconds after a step starts before its first item is sent (its traffic in flight by then)."""
ALPHA = 0.05
"""The chance of a false NO-GO allowed for one run, shared among its comparisons."""
EXAMPLES = 3
"""Real changes named per comparison."""
LENGTH_SHARE = 0.10
"""An answer under load whose length is beyond this share of its alone answer's is counted (MLPerf
TEST06's output-length rule for greedy requests); counted and named, judged through the real
changes it comes with (a greedy answer of another length parts from alone somewhere)."""
Say = Callable[[str], None]


def _quiet(_: str) -> None:
    """Say nothing."""


def interleaved(items: Sequence[Item]) -> list[Item]:
    """The items kind by kind in turn (their `kind` tag, else their grader), each kind in file order:
    the first few items tried alone cover every kind."""
    groups: dict[str, list[Item]] = {}
    for item in items:
        groups.setdefault(item.tags.get("kind", item.grader), []).append(item)
    out: list[Item] = []
    queues = list(groups.values())
    while any(queues):
        for queue in queues:
            if queue:
                out.append(queue.pop(0))
    return out


@dataclass
class Asked:
    """One item answered beside a load: the answer and when it was sent and came back."""

    item: Item
    answer: Answer
    sent: float
    """time.perf_counter() at the send (the load engine's clock on this machine)."""
    ended: float
    in_flight: int | None = None
    """Load requests in flight when it was sent (None: the clocks could not be set side by side)."""
    inside: bool = True
    """Sent while load requests were in flight and answered before the load ended."""


def place(asked: Sequence[Asked], run: LoadRun) -> None:
    """Set each item beside the load's requests: how many were in flight at its send, and whether it was
    answered inside the load. Each worker's records are on its own clock from its t0 (perf_counter,
    shared by the processes of one machine); without a t0 for every worker nothing is placed."""
    starts: dict[int, float] = {}
    for check in run.selfcheck.get("per_worker") or ():
        if isinstance(check, Mapping) and isinstance(check.get("t0"), (int, float)) and check["t0"]:
            starts[int(check.get("worker") or 0)] = float(check["t0"])
    spans = [(starts[r.worker] + r.send, starts[r.worker] + r.end) for r in run.records
             if r.worker in starts and r.end >= r.send]
    if not spans or len(spans) != len(run.records):
        return
    last = max(end for _, end in spans)
    for a in asked:
        a.in_flight = sum(1 for start, end in spans if start <= a.sent < end)
        a.inside = a.in_flight > 0 and a.ended <= last


class Sender:
    """The items sent one at a time in a helper thread while a load step runs (a context manager):
    from START_DELAY after the step starts, `pace` seconds apart, until every item was answered or the
    step ends; an item still unanswered then is cancelled (it would have ended outside the load)."""

    def __init__(self, items: Sequence[Item], ask: Callable[[Item], Coroutine[Any, Any, Answer]], *,
                 label: str, level: float | None, pace: float = 0.0) -> None:
        self.items = list(items)
        self.label = label
        self.level = level
        self.pace = pace
        self.asked: list[Asked] = []
        self.cancelled = 0
        self._ask = ask
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="inferaccept-graded-items", daemon=True)

    def __enter__(self) -> Sender:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30.0)

    def _main(self) -> None:
        asyncio.run(self._send())

    async def _wait(self, seconds: float) -> bool:
        """Sleep `seconds` unless the step ends first; True when it did."""
        end = time.perf_counter() + seconds
        while not self._stop.is_set():
            left = end - time.perf_counter()
            if left <= 0:
                return False
            await asyncio.sleep(min(left, 0.02))
        return True

    async def _send(self) -> None:
        if await self._wait(START_DELAY):
            return
        for k, item in enumerate(self.items):
            if k and self.pace and await self._wait(self.pace):
                return
            if self._stop.is_set():
                return
            sent = time.perf_counter()
            task = asyncio.ensure_future(self._ask(item))
            while not task.done():
                if self._stop.is_set():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
                    self.cancelled += 1
                    return
                await asyncio.wait({task}, timeout=0.02)
            self.asked.append(Asked(item, task.result(), sent, time.perf_counter()))


# --- judging -------------------------------------------------------------------------------------------


def comparison_alpha(comparisons: int, alpha: float = ALPHA) -> float:
    """Each comparison's share of the false NO-GO allowed for the run (Bonferroni)."""
    return alpha / max(1, comparisons)


def accuracy_verdict(before: Sequence[bool], here: Sequence[bool], *, comparisons: int, tolerance: float,
                     self_flip_rate: SelfFlip | None, alpha: float = ALPHA) -> PairedVerdict:
    """The paired verdict of the items' correctness here against alone, at this comparison's alpha."""
    b = sum(x and not y for x, y in zip(before, here, strict=True))
    c = sum(y and not x for x, y in zip(before, here, strict=True))
    return judge_pairs(b, c, len(before), tolerance=tolerance, self_flip_rate=self_flip_rate,
                       alpha=comparison_alpha(comparisons, alpha))


def choose(first_pass: Sequence[bool], count: int) -> list[int]:
    """The indexes of the first `count` items answered correctly in the first alone pass."""
    return [i for i, ok in enumerate(first_pass) if ok][:count]


@dataclass
class _Graded:
    """One item's answer with its grade."""

    item: Item
    answer: Answer
    correct: bool
    outcome: str


def graded_answer(item: Item, answer: Answer) -> _Graded:
    """An answer with its grade."""
    g = grade(item, answer.text, answer.finish_reason)
    return _Graded(item, answer, g.correct, g.outcome)


def compare(alone: Mapping[str, _Graded], here: Sequence[Asked], *, when: Literal["under_load", "after_load"],
            comparisons: int, tolerance: float, real_change_tolerance: float, self_flip_rate: SelfFlip | None,
            logprobs: bool, judge_real_changes: bool = True) -> StepCorrectness:
    """The items answered here against their alone answers: accuracy, the paired verdict, and how the
    answers changed (identical, near tie, real change, or changed without logprobs to tell)."""
    failed = [a for a in here if a.answer.error is not None]
    outside = [a for a in here if a.answer.error is None and not a.inside]
    pairs = [(alone[a.item.id], graded_answer(a.item, a.answer)) for a in here
             if a.answer.error is None and a.inside and a.item.id in alone]
    placed = [a.in_flight for a in here if a.in_flight is not None and a.inside]
    n = len(pairs)
    out = StepCorrectness(when=when, sent=len(here), compared=n, outside=len(outside), failed=len(failed),
                          in_flight_min=min(placed) if placed else None,
                          in_flight_mean=round(sum(placed) / len(placed), 2) if placed else None,
                          alpha=comparison_alpha(comparisons), tolerance=tolerance,
                          real_change_tolerance=real_change_tolerance, logprobs=logprobs)
    if not n:
        out.text = (f"no item answered {'inside the load' if when == 'under_load' else 'after the load'} "
                    f"to compare ({len(here)} sent, {len(failed)} failed, {len(outside)} outside the load)")
        return out
    out.correct = sum(g.correct for _, g in pairs)
    out.unanswered = sum(g.outcome == "unanswered" for _, g in pairs)
    out.alone_correct = sum(a.correct for a, _ in pairs)
    out.accuracy_low, out.accuracy_high = one_sided_bounds(out.correct, n, 0.025)
    verdict = accuracy_verdict([a.correct for a, _ in pairs], [g.correct for _, g in pairs],
                               comparisons=comparisons, tolerance=tolerance, self_flip_rate=self_flip_rate)
    out.right_to_wrong, out.wrong_to_right = verdict.b, verdict.c
    out.drop, out.drop_low, out.drop_high = verdict.drop, verdict.low, verdict.high
    out.p_value = verdict.p_value
    out.status, out.verdict = verdict.status, verdict.message
    kinds: dict[str, int] = {}
    examples: list[str] = []
    for a, g in pairs:
        check = classify(a.answer.logprobs, g.answer.logprobs, text_a=a.answer.text, text_b=g.answer.text)
        kinds[check.kind] = kinds.get(check.kind, 0) + 1
        if check.kind == "real_change" and len(examples) < EXAMPLES:
            examples.append(f"{a.item.id}: {check.reason}")
    out.identical, out.near_ties = kinds.get("same", 0), kinds.get("near_tie", 0)
    out.real_changes, out.changed_unclassified = kinds.get("real_change", 0), kinds.get("not_classifiable", 0)
    out.real_change_examples = examples
    lengths = [(a.item.id, len(a.answer.text or ""), len(g.answer.text or "")) for a, g in pairs]
    beyond = [(i, x, y) for i, x, y in lengths if abs(y - x) > LENGTH_SHARE * max(x, 1)]
    out.length_outside = len(beyond)
    out.length_examples = [f"{i}: {y} characters against {x} alone" for i, x, y in beyond[:EXAMPLES]]
    out.real_change_share = out.real_changes / n if logprobs else None
    too_many = (judge_real_changes and out.real_change_share is not None
                and out.real_change_share > real_change_tolerance)
    out.held = verdict.status != "fail" and not too_many
    where = "under load" if when == "under_load" else "after the load"
    head = f"{out.correct} of {n} right {where} against {out.alone_correct} alone"
    changes = f"{out.identical} identical to alone"
    if logprobs:
        changes += f", {out.near_ties} near ties, {out.real_changes} real changes"
        if out.changed_unclassified:
            changes += (f", {out.changed_unclassified} changed where the logprobs cannot tell (one answer "
                        "ends where the other goes on)")
    else:
        changes += (f", {n - out.identical} changed (no logprobs: changed vs identical only, near ties not "
                    "told from real changes)")
    words = [head, changes]
    if out.length_outside:
        words.append(f"{out.length_outside} of {n} answers' length beyond ±{LENGTH_SHARE:.0%} of alone "
                     f"({'; '.join(out.length_examples)})")
    if verdict.status == "fail":
        words.append(f"NO-GO: {verdict.message.removeprefix('NO-GO: ')}")
    if too_many:
        words.append(f"NO-GO: {out.real_changes} of {n} answers ({out.real_change_share:.0%}) changed at a "
                     f"non-tie, above the {real_change_tolerance:.0%} allowed (--correctness-real-changes): "
                     + "; ".join(out.real_change_examples))
    if out.failed or out.outside:
        words.append(f"{out.failed} failed, {out.outside} answered outside the load (not compared)")
    out.text = "; ".join(words)
    return out


# --- the session -----------------------------------------------------------------------------------------


@dataclass
class UnderLoad:
    """The known-answer items of one load run or capacity scenario: `before()` the load, `beside()` each
    step (then `keep()`), `after()` it; `outcome()` says what they showed, `apply()` puts it on a
    scenario's result."""

    base_url: str
    model: str
    pool: Sequence[Item]
    count: int = DEFAULT_ITEMS
    tolerance: float = 0.05
    real_change_tolerance: float = 0.10
    comparisons: int = 1
    """Level comparisons planned (the after-load pass is one more)."""
    api_key: str | None = None
    timeout: float = 60.0
    spread_over: float | None = None
    """Seconds a single long step lasts (the soak): its items are spread over them."""
    say: Say = _quiet
    unit: str = "c"
    chosen: list[Item] = field(default_factory=list)
    alone: dict[str, _Graded] = field(default_factory=dict)
    first: dict[str, _Graded] = field(default_factory=dict)
    tried: int = 0
    steps: list[tuple[str, float | None, Sender]] = field(default_factory=list)
    after_answers: list[Asked] | None = None

    # -- asking

    async def _ask(self, item: Item) -> Answer:
        (answer,) = await answer_items(self.base_url, self.model, [item], concurrency=1, api_key=self.api_key,
                                       timeout=self.timeout)
        return answer

    def _alone(self, items: Sequence[Item]) -> list[Answer]:
        """The items answered one at a time, nothing else sent meanwhile."""
        return run_blocking(answer_items(self.base_url, self.model, items, concurrency=1,
                                         api_key=self.api_key, timeout=self.timeout))

    def before(self) -> None:
        """Find the items the server answers correctly alone, then answer them alone once more."""
        order = interleaved(self.pool)[: max(self.count, SEARCH * self.count)]
        found: list[_Graded] = []
        for start in range(0, len(order), self.count):
            batch = order[start:start + self.count]
            # The first item alone before the rest: a server that answers nothing (a stall, an
            # error) costs one request timeout here, not one per item of the search.
            answers = self._alone(batch[:1]) if start == 0 else []
            if answers and answers[0].error is not None:
                self.tried += 1
                self.say(f"inferaccept: answers under load not graded: the first item asked alone got no "
                         f"answer ({answers[0].error})")
                break
            answers += self._alone(batch[len(answers):])
            graded = [graded_answer(item, a) for item, a in zip(batch, answers, strict=True)]
            self.tried += len(batch)
            found += [g for g in graded if g.correct and g.answer.error is None]
            if len(found) >= self.count or all(g.answer.error is not None for g in graded):
                break
        found = found[: self.count]
        self.first = {g.item.id: g for g in found}
        self.chosen = [g.item for g in found]
        if self.chosen:
            again = self._alone(self.chosen)
            self.alone = {item.id: graded_answer(item, a) for item, a in zip(self.chosen, again, strict=True)
                          if a.error is None}
        self.say(f"inferaccept: answers under load: {len(self.chosen)} items answered correctly alone of "
                 f"{self.tried} tried; alone again: {sum(g.correct for g in self.alone.values())} right")

    def beside(self, label: str, level: float | None) -> Sender:
        """The items sent beside one load step (enter it around the load)."""
        pace = 0.0
        if self.spread_over and self.chosen:
            pace = max(0.0, (self.spread_over - START_DELAY) / (len(self.chosen) + 1))
        return Sender(self.chosen, self._ask, label=label, level=level, pace=pace)

    def keep(self, sender: Sender, run: LoadRun) -> None:
        """A step's items, placed beside its load's requests."""
        place(sender.asked, run)
        self.steps.append((sender.label, sender.level, sender))
        answered = [a for a in sender.asked if a.inside and a.answer.error is None]
        right = sum(graded_answer(a.item, a.answer).correct for a in answered)
        self.say(f"inferaccept: answers under load {sender.label}: {right} of {len(answered)} right "
                 f"({len(answered)} answered inside the load of {len(sender.items)} items)")

    def after(self) -> None:
        """The items answered alone once more, the load over."""
        if not self.chosen:
            self.after_answers = []
            return
        now = time.perf_counter()
        self.after_answers = [Asked(item, a, now, now) for item, a in
                              zip(self.chosen, self._alone(self.chosen), strict=True)]

    # -- judging

    def _self_flip(self) -> SelfFlip | None:
        ids = [i for i in self.first if i in self.alone]
        if not ids:
            return None
        return SelfFlip(sum(self.first[i].correct != self.alone[i].correct for i in ids), len(ids))

    def _logprobs(self) -> bool:
        return bool(self.alone) and all(g.answer.logprobs for g in self.alone.values())

    def levels(self) -> dict[str, StepCorrectness]:
        """Each step's comparison with alone, by the step's label."""
        flip, logprobs = self._self_flip(), self._logprobs()
        return {label: compare(self.alone, sender.asked, when="under_load",
                               comparisons=self.comparisons + 1, tolerance=self.tolerance,
                               real_change_tolerance=self.real_change_tolerance, self_flip_rate=flip,
                               logprobs=logprobs)
                for label, _, sender in self.steps}

    def outcome(self, failing: Collection[str] = ()) -> UnderLoadCorrectness:
        """What the items showed: per level, after the load, the highest level where they held. The steps
        labelled in `failing` failed as a whole (their own answers broken): that is their finding, and
        their items are figures, not judged again."""
        flip, logprobs = self._self_flip(), self._logprobs()
        levels = self.levels()
        after = None
        if self.after_answers is not None:
            after = compare(self.alone, self.after_answers, when="after_load",
                            comparisons=self.comparisons + 1, tolerance=self.tolerance,
                            real_change_tolerance=self.real_change_tolerance, self_flip_rate=flip,
                            logprobs=logprobs, judge_real_changes=False)
        out = UnderLoadCorrectness(
            items=[i.id for i in self.chosen], tried=self.tried, asked=self.count,
            alone_correct=sum(g.correct for g in self.alone.values()),
            self_flips=flip.flips if flip is not None else 0,
            self_flip_rate=flip.rate if flip is not None else None, logprobs=logprobs,
            tolerance=self.tolerance, real_change_tolerance=self.real_change_tolerance,
            comparisons=self.comparisons + 1, after=after)
        held_up_to: float | None = None
        counting = True
        reasons: list[str] = []
        for label, level, _ in self.steps:
            step = levels[label]
            if label in failing:
                counting = False
                continue
            if not step.held:
                if out.failed_at is None:
                    out.failed_at = level
                counting = False
                reasons.append(f"answers under load at {self._level(level, label)}: {step.text}")
            elif counting and step.compared:
                held_up_to = level
        out.held_up_to = held_up_to
        if after is not None and not after.held:
            reasons.append(f"answers after the load, worse than before it (the server stayed broken): "
                           f"{after.text}")
        out.reasons = reasons
        if len(self.steps) == 1:
            out.under_load = levels[self.steps[0][0]]
        judged = [label for label, _, _ in self.steps if label not in failing and levels[label].compared]
        out.status = "fail" if reasons else "pass" if judged else "not_enough_data"
        out.text = self._finding(out, levels, judged)
        return out

    def _level(self, level: float | None, label: str) -> str:
        if level is None:
            return label
        return f"{level:g} req/s" if self.unit == "rate" else f"{self.unit}={level:g}"

    def _finding(self, out: UnderLoadCorrectness, levels: Mapping[str, StepCorrectness],
                 judged: Sequence[str]) -> str:
        if not self.chosen:
            return (f"answers under load not graded: none of the {self.tried} known-answer items tried was "
                    "answered correctly alone")
        n = len(self.chosen)
        parts: list[str] = []
        several = len(self.steps) > 1
        if out.failed_at is not None:
            bad = next(levels[label] for label, level, _ in self.steps if level == out.failed_at)
            parts.append(f"answers went wrong at {self._level(out.failed_at, '')}: {bad.correct} of "
                         f"{bad.compared} right against {bad.alone_correct} alone"
                         + (f", {bad.real_changes} real changes" if bad.logprobs else ""))
            if out.held_up_to is not None and several:
                parts.append(f"they held up to {self._level(out.held_up_to, '')}")
        elif out.held_up_to is not None:
            last = levels[self.steps[-1][0]]
            if several:
                parts.append(f"answers held up to {self._level(out.held_up_to, '')} ({n} items a level, each "
                             "right alone)")
            else:
                parts.append(f"answers held under load: {last.correct} of {last.compared} right against "
                             f"{last.alone_correct} alone, {last.identical} identical")
        elif not self.steps:
            parts.append("no load with more than one request in flight to grade beside (c=1 is the alone "
                         "baseline itself)")
        elif not judged and all(levels[label].compared for label, _, _ in self.steps):
            parts.append("no level judged: each load failed as a whole")
        else:
            parts.append("no item was answered inside the load to compare (the steps ended first: "
                         "longer steps would hold them)")
        if out.after is not None and out.after.compared:
            stayed = "" if out.after.held else ": the server stayed broken (NO-GO)"
            parts.append(f"after the load {out.after.correct} of {out.after.compared} right{stayed}")
        return "; ".join(parts)

    # -- results

    def apply(self, result: CapacityScenario) -> CapacityScenario:
        """Put the items' figures on a scenario's steps and findings; a NO-GO fails the scenario."""
        levels = self.levels()
        found = self.outcome(failing={step.label or "" for step in result.steps if step.failing})
        for step in result.steps:
            graded = levels.get(step.label or "")
            if graded is not None:
                step.correctness = graded
        result.findings.correctness = found
        if found.status != "not_enough_data":  # nothing judged: the finding is in the findings alone
            result.headline = f"{result.headline}; {found.text}" if result.headline else found.text
        if found.status == "fail":
            result.status = "fail"
            result.reasons.extend(found.reasons)
        return result
