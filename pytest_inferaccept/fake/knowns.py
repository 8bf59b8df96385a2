"""Known answers the fake model gets right: sums, products and "repeat exactly" prompts.

The fake's other answers are seeded words, wrong for any question. A correctness gate is
self-referential (it needs items the baseline answers, not a strong model), so the fake answers
the few kinds of question it can work out from the prompt itself, and `quality_drop` spoils a
seeded share of them the way a broken template or kernel would.
"""

from __future__ import annotations

import hashlib
import re

_SUM = re.compile(r"What is (\d+) ([+×x*]) (\d+)\? Answer with the number only\.")
_COPY = re.compile(r"Repeat exactly, with nothing else: (.+?)\s*$")

QUALITY_DROP_SHARE = 1 / 3
"""The share of known-answer prompts `quality_drop` answers wrongly (chosen by a hash of the prompt)."""


def known_answer(prompt: str) -> str | None:
    """The correct answer to a prompt the fake can work out, or None."""
    found = _SUM.search(prompt)
    if found is not None:
        a, op, b = int(found.group(1)), found.group(2), int(found.group(3))
        return str(a + b if op == "+" else a * b)
    found = _COPY.search(prompt)
    if found is not None:
        return found.group(1)
    return None


def spoiled(prompt: str, share: float = QUALITY_DROP_SHARE) -> bool:
    """True for the seeded share of prompts a quality drop answers wrongly (the same ones each run)."""
    digest = hashlib.sha256(f"quality_drop\x00{prompt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < share


def wrong_answer(answer: str) -> str:
    """A wrong answer near the right one: a number one off, a copy with its last word dropped."""
    if answer.isdigit():
        return str(int(answer) + 1)
    words = answer.split(" ")
    return " ".join(words[:-1]) if len(words) > 1 else answer[::-1] + "?"


def pieces(text: str) -> list[str]:
    """The answer as fake tokens: each word with the space before it."""
    words = text.split(" ")
    return [words[0], *(f" {w}" for w in words[1:])]
