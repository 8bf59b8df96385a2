"""Statistics of a known-answer set: accuracy with its exact interval, the self-flip rate, and the
paired gate of a candidate against its baseline (pure functions, stdlib math only).

The paired gate. Each item is answered by the baseline and by the candidate; b items went
right→wrong, c wrong→right, out of n. The drop in accuracy is (b − c) / n.

* **Real drop** (exact McNemar, one-sided): under "no change", each discordant item is equally
  likely to have gone either way, so b ~ Binomial(b + c, ½) given b + c. The p-value is
  P(B ≥ b); below α the candidate is conclusively worse. Exact at any size; it assumes only that
  items are independent of each other.
* **Interval of the drop** (conservative): δ = p₁₀ − p₀₁, where p₁₀ and p₀₁ are the shares of
  items that go right→wrong and wrong→right. The upper bound is the Clopper–Pearson upper end of
  b / n minus the lower end of c / n, each at α/2 one-sided (Bonferroni), and the lower bound the
  other way round. Its coverage is at least 1 − α whatever the correlation between b and c
  (shown by a seeded simulation in tests/test_correctness_stats.py).

The verdict (three-way, like every row of this project):

* **NO-GO** when the drop is real (McNemar) and the interval does not show it within the
  tolerance (its upper end above the tolerance) — or, with `rule="beyond-tolerance"`, only when the
  whole interval lies above the tolerance;
* **GO** when the interval's upper end is within the tolerance and the self-flip rate of the
  unchanged server is low enough for the set to see the tolerance;
* **not enough data** otherwise, with the number of items that would decide if the rates stayed
  as measured — or **cannot decide** when the server's own noise is too high.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pytest_inferaccept.stats.percentiles import binom_sf, proportion_interval, smallest_settling

Rule = Literal["real-drop", "beyond-tolerance"]
Status = Literal["pass", "fail", "not_enough_data", "cannot_decide"]


@lru_cache(maxsize=4096)
def _interval(k: int, n: int, confidence: float) -> tuple[float, float]:
    return proportion_interval(k, n, confidence)


def one_sided_bounds(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Clopper–Pearson bounds for k of n, each end holding with probability ≥ 1 − alpha."""
    return _interval(k, n, 1.0 - 2.0 * alpha)


@dataclass(frozen=True)
class Accuracy:
    """Accuracy of one run: correct of n, with its exact interval, and the unanswered share."""

    correct: int
    n: int
    unanswered: int
    low: float
    high: float
    confidence: float

    @property
    def value(self) -> float:
        """Correct / n."""
        return self.correct / self.n

    def describe(self) -> str:
        """One line: accuracy, interval, counts and the unanswered share."""
        return (f"accuracy {self.value:.1%} ({self.confidence:.0%} CI {self.low:.1%}–{self.high:.1%}, "
                f"{self.correct} of {self.n} correct; {self.unanswered} unanswered, "
                f"{self.unanswered / self.n:.1%})")


def accuracy(outcomes: Sequence[str], confidence: float = 0.95) -> Accuracy:
    """Accuracy of graded outcomes ("correct" / "wrong" / "unanswered") with a Clopper–Pearson interval."""
    n = len(outcomes)
    if n == 0:
        raise ValueError("accuracy of no items")
    k = sum(o == "correct" for o in outcomes)
    low, high = _interval(k, n, confidence)
    return Accuracy(correct=k, n=n, unanswered=sum(o == "unanswered" for o in outcomes),
                    low=low, high=high, confidence=confidence)


def accuracy_by_tag(outcomes: Sequence[str], tags: Sequence[Mapping[str, str]],
                    confidence: float = 0.95) -> dict[str, Accuracy]:
    """Accuracy per "key=value" tag (items without a tag are left out of its group)."""
    groups: dict[str, list[str]] = {}
    for outcome, item_tags in zip(outcomes, tags, strict=True):
        for key, value in item_tags.items():
            groups.setdefault(f"{key}={value}", []).append(outcome)
    return {name: accuracy(group, confidence) for name, group in sorted(groups.items())}


@dataclass(frozen=True)
class FloorVerdict:
    """An accuracy floor judged on the interval: pass, fail or not enough data."""

    status: Literal["pass", "fail", "not_enough_data"]
    message: str


def judge_floor(acc: Accuracy, floor: float) -> FloorVerdict:
    """Pass when the interval's lower end reaches the floor, fail when its upper end is below it."""
    head = acc.describe()
    if acc.low >= floor:
        return FloorVerdict("pass", f"{head} ≥ floor {floor:.1%}")
    if acc.high < floor:
        return FloorVerdict("fail", f"{head} < floor {floor:.1%}")
    return FloorVerdict("not_enough_data", f"{head} vs floor {floor:.1%}: not enough data, the interval "
                                           "straddles the floor")


def discordant(before: Iterable[bool], after: Iterable[bool]) -> tuple[int, int, int]:
    """(b, c, n) for paired correctness: b right→wrong, c wrong→right, n items."""
    b = c = n = 0
    for x, y in zip(before, after, strict=True):
        n += 1
        b += x and not y
        c += y and not x
    return b, c, n


@dataclass(frozen=True)
class SelfFlip:
    """The noise of an unchanged server: items whose grade differed between two answers."""

    flips: int
    n: int

    @property
    def rate(self) -> float:
        """Flipped items / n."""
        return self.flips / self.n


def self_flip(first: Iterable[bool], second: Iterable[bool]) -> SelfFlip:
    """The self-flip count of the same items answered twice by the same server."""
    b, c, n = discordant(first, second)
    if n == 0:
        raise ValueError("self-flip rate of no items")
    return SelfFlip(b + c, n)


def mcnemar_p(b: int, c: int) -> float:
    """Exact one-sided McNemar p-value for "the candidate is worse": P(B ≥ b), B ~ Bin(b + c, ½)."""
    m = b + c
    return 1.0 if m == 0 else binom_sf(b, m, 0.5)


def drop_interval(b: int, c: int, n: int, alpha: float) -> tuple[float, float]:
    """A conservative interval (each end ≥ 1 − alpha) for the drop p₁₀ − p₀₁ (Bonferroni of two
    one-sided Clopper–Pearson bounds at alpha / 2)."""
    b_low, b_high = one_sided_bounds(b, n, alpha / 2)
    c_low, c_high = one_sided_bounds(c, n, alpha / 2)
    return b_low - c_high, b_high - c_low


@dataclass(frozen=True)
class PairedVerdict:
    """The paired gate's verdict with every figure it used."""

    status: Status
    message: str
    b: int
    c: int
    n: int
    drop: float
    low: float
    high: float
    p_value: float
    tolerance: float
    self_flip: SelfFlip | None
    needed_n: int | None
    """Items that would decide if the rates stayed as measured (only for not enough data)."""


def _decide(b: int, c: int, n: int, tolerance: float, alpha: float, rule: Rule) -> Status:
    low, high = drop_interval(b, c, n, alpha)
    if rule == "beyond-tolerance":
        if low > tolerance:
            return "fail"
    elif mcnemar_p(b, c) < alpha and high > tolerance:
        return "fail"
    return "pass" if high <= tolerance else "not_enough_data"


def items_to_decide(b: int, c: int, n: int, tolerance: float, alpha: float, rule: Rule,
                    ceiling: int = 1_000_000) -> int | None:
    """Fewest items at which the rates b/n and c/n would reach a verdict (None: none below ceiling)."""

    def decides(m: int) -> bool:
        return _decide(round(b * m / n), round(c * m / n), m, tolerance, alpha, rule) != "not_enough_data"

    # doubling from n, then bisecting (the rounded counts make this nearly, not exactly, monotone)
    found = smallest_settling(decides, n, ceiling)
    return None if found is None or found > ceiling else found


def paired_gate(before: Sequence[bool], after: Sequence[bool], *, tolerance: float = 0.05,
                self_flip_rate: SelfFlip | None = None, max_self_flip: float = 0.05,
                alpha: float = 0.05, rule: Rule = "real-drop") -> PairedVerdict:
    """The paired verdict of a candidate's correctness against its baseline's, item by item."""
    b, c, n = discordant(before, after)
    if n == 0:
        raise ValueError("paired comparison of no items")
    return judge_pairs(b, c, n, tolerance=tolerance, self_flip_rate=self_flip_rate,
                       max_self_flip=max_self_flip, alpha=alpha, rule=rule)


def judge_pairs(b: int, c: int, n: int, *, tolerance: float = 0.05, self_flip_rate: SelfFlip | None = None,
                max_self_flip: float = 0.05, alpha: float = 0.05, rule: Rule = "real-drop") -> PairedVerdict:
    """The paired verdict from the discordant counts (b right→wrong, c wrong→right, of n items)."""
    low, high = drop_interval(b, c, n, alpha)
    p = mcnemar_p(b, c)
    drop = (b - c) / n
    status = _decide(b, c, n, tolerance, alpha, rule)
    head = (f"accuracy fell by {drop * 100:.1f} points" if drop >= 0 else
            f"accuracy rose by {-drop * 100:.1f} points")
    head += (f" ({b} items right→wrong, {c} wrong→right, of {n}; drop between "
             f"{low * 100:+.1f} and {high * 100:+.1f} points, each bound at {1 - alpha:.0%}; "
             f"McNemar one-sided p = {p:.3g}; "
             f"tolerance {tolerance * 100:.1f} points)")
    if self_flip_rate is None:
        noise = "; the self-flip rate of the unchanged server was not measured"
    else:
        noise = (f"; self-flip rate {self_flip_rate.rate:.1%} ({self_flip_rate.flips} of "
                 f"{self_flip_rate.n} items changed grade when answered twice)")
    needed: int | None = None
    if status == "fail":
        why = ("the whole interval lies beyond the tolerance" if low > tolerance else
               "the drop is real and the data cannot show it within the tolerance")
        message = f"NO-GO: {head}: {why}{noise}"
    elif self_flip_rate is not None and self_flip_rate.rate > max_self_flip:
        status = "cannot_decide"
        message = (f"cannot decide: {head}{noise}, above {max_self_flip:.0%}: the server's own answers "
                   f"change too often for {n} items to tell a {tolerance * 100:.0f}-point drop from noise; "
                   "make answers deterministic (temperature 0, fixed seed, batch-invariant kernels) first")
    elif status == "pass":
        message = f"GO: {head}: the drop is within the tolerance{noise}"
    else:
        needed = items_to_decide(b, c, n, tolerance, alpha, rule)
        more = (f"about {needed} items would decide if the rates stayed as measured" if needed is not None
                else "no number of items would decide at these rates")
        message = f"not enough data: {head}: the interval straddles the tolerance; {more}{noise}"
    return PairedVerdict(status=status, message=message, b=b, c=c, n=n, drop=drop, low=low, high=high,
                         p_value=p, tolerance=tolerance, self_flip=self_flip_rate, needed_n=needed)


def flip_probability(rate: float) -> float:
    """Per-answer flip probability q giving a self-flip rate 2q(1 − q) (for simulations)."""
    if not 0 <= rate <= 0.5:
        raise ValueError("a self-flip rate lies in [0, 0.5]")
    return (1 - math.sqrt(1 - 2 * rate)) / 2
