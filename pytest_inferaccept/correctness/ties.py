"""Near tie or real change at the first differing token, and logprob drift between two greedy runs.

Logprobs are in the OpenAI chat shape: a list of {"token", "logprob", "top_logprobs": [{"token",
"logprob"}, ...]}, one entry per generated token (`choices[0].logprobs.content`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

TIE_NATS = 0.5
"""Two picks within this many nats of each other (in both runs) are a near tie."""

TieKind = Literal["same", "near_tie", "real_change", "not_classifiable"]
TokenLogprobs = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class TieCheck:
    """How two answers to the same prompt part: at which token, and whether it was a near tie."""

    kind: TieKind
    position: int | None
    """Index of the first differing token (None when the answers agree or it cannot be found)."""
    tokens: tuple[str, str] | None
    """The two picks at that position (first run, second run)."""
    reason: str


def _top(entry: Mapping[str, Any]) -> dict[str, float]:
    """A position's top alternatives, token → logprob, the pick itself included."""
    top = {str(t["token"]): float(t["logprob"]) for t in entry.get("top_logprobs") or ()}
    top.setdefault(str(entry["token"]), float(entry["logprob"]))
    return top


def first_difference(a: TokenLogprobs, b: TokenLogprobs) -> int | None:
    """Index of the first position where the two token sequences differ (None: identical)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x["token"] != y["token"]:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def classify(a: TokenLogprobs | None, b: TokenLogprobs | None, *, text_a: str | None = None,
             text_b: str | None = None, top_k: int = 5, nats: float = TIE_NATS) -> TieCheck:
    """Classify how two answers differ: a near tie, a real change, the same, or not classifiable."""
    if text_a is not None and text_b is not None and text_a == text_b:
        return TieCheck("same", None, None, "the two answers are identical")
    if not a or not b:
        return TieCheck("not_classifiable", None, None, "the server returned no logprobs for "
                        f"{'either answer' if not a and not b else 'one answer'}")
    i = first_difference(a, b)
    if i is None:
        if text_a is not None and text_b is not None:
            return TieCheck("not_classifiable", None, None, "the answers differ after the tokens whose "
                            f"logprobs were kept ({len(a)})")
        return TieCheck("same", None, None, "the two token sequences are identical")
    if i >= len(a) or i >= len(b):
        return TieCheck("not_classifiable", i, None, f"one answer ends (or its kept logprobs end) at "
                        f"token {i} where the other goes on: the end token's logprob is not returned")
    pick_a, pick_b = str(a[i]["token"]), str(b[i]["token"])
    top_a = dict(sorted(_top(a[i]).items(), key=lambda kv: -kv[1])[:top_k])
    top_b = dict(sorted(_top(b[i]).items(), key=lambda kv: -kv[1])[:top_k])
    if pick_b not in top_a or pick_a not in top_b:
        missing = pick_b if pick_b not in top_a else pick_a
        return TieCheck("real_change", i, (pick_a, pick_b),
                        f"at token {i} {pick_a!r} became {pick_b!r}; {missing!r} is not in the other run's "
                        f"top-{top_k}")
    gap = max(abs(top_a[pick_a] - top_a[pick_b]), abs(top_b[pick_b] - top_b[pick_a]))
    if gap <= nats:
        return TieCheck("near_tie", i, (pick_a, pick_b),
                        f"at token {i} {pick_a!r} and {pick_b!r} were {gap:.2f} nats apart (≤ {nats}): "
                        "a small numeric change (batching, kernels or quantization) tipped a near-even pick")
    return TieCheck("real_change", i, (pick_a, pick_b),
                    f"at token {i} {pick_a!r} became {pick_b!r}, {gap:.2f} nats apart (> {nats})")


@dataclass(frozen=True)
class Drift:
    """Logprob drift between two greedy runs of the same prompts."""

    prompts: int
    diverged_real: int
    """Prompts whose greedy path diverges at a non-tie."""
    diverged_tie: int
    """Prompts whose greedy path diverges at a near tie."""
    unclassified: int
    """Prompts without logprobs on one side."""
    matched_tokens: int
    mean_abs_delta: float | None
    """Mean |Δ logprob| of the chosen tokens up to the first divergence (None: no matched token)."""
    max_abs_delta: float | None

    @property
    def real_share(self) -> float:
        """Share of the classifiable prompts that diverge at a non-tie."""
        usable = self.prompts - self.unclassified
        return self.diverged_real / usable if usable else math.nan

    def describe(self) -> str:
        """One line with every figure."""
        deltas = ("no matched tokens" if self.mean_abs_delta is None else
                  f"mean |Δ logprob| {self.mean_abs_delta:.4f}, max {self.max_abs_delta:.4f} nats over "
                  f"{self.matched_tokens} matched tokens")
        return (f"{self.diverged_real} of {self.prompts - self.unclassified} prompts diverge at a non-tie "
                f"({self.real_share:.1%}), {self.diverged_tie} at a near tie, {self.unclassified} without "
                f"logprobs; {deltas}")


def drift(pairs: Sequence[tuple[TokenLogprobs | None, TokenLogprobs | None]], *, top_k: int = 5,
          nats: float = TIE_NATS) -> Drift:
    """Drift over (baseline, candidate) logprobs of the same prompts' greedy answers."""
    real = tie = unclassified = 0
    deltas: list[float] = []
    for a, b in pairs:
        if not a or not b:
            unclassified += 1
            continue
        i = first_difference(a, b)
        stop = min(len(a), len(b)) if i is None else i
        deltas += [abs(float(a[j]["logprob"]) - float(b[j]["logprob"])) for j in range(stop)]
        if i is None:
            continue
        kind = classify(a, b, top_k=top_k, nats=nats).kind
        real += kind == "real_change"
        tie += kind == "near_tie"
        # an answer that only ends earlier (or whose kept logprobs do) is neither tie nor change
    mean = math.fsum(deltas) / len(deltas) if deltas else None
    return Drift(prompts=len(pairs), diverged_real=real, diverged_tie=tie, unclassified=unclassified,
                 matched_tokens=len(deltas), mean_abs_delta=mean,
                 max_abs_delta=max(deltas) if deltas else None)
