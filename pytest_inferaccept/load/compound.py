"""Workloads made of others or of several turns: short prompts mixed with long ones, and conversations.

Both follow the engine's Workload protocol (`item(position, uid)`, `describe()`), so any load
run may use them; the capacity scenarios `interference` and `multi_turn` do. No pytest here.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Any

from pytest_inferaccept.load.workloads import WORDS, WorkItem, Workload


@dataclass(frozen=True)
class MixedWorkload:
    """Short requests with a share of long ones, picked by position and tagged "short" or "long".

    Position p is long when floor((p + 1) * share) > floor(p * share): the long requests are spread
    evenly through the schedule (share 0.25: positions 3, 7, 11, ...), the same in every run.
    """

    short: Workload
    long: Workload
    long_share: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.long_share < 1.0:
            raise ValueError(f"long_share must lie in [0, 1), got {self.long_share!r}")

    def is_long(self, position: int) -> bool:
        """True when request `position` is one of the long ones."""
        return math.floor((position + 1) * self.long_share) > math.floor(position * self.long_share)

    def item(self, position: int, uid: int) -> WorkItem:
        """The short or the long workload's item for `position`, with its tag added."""
        long = self.is_long(position)
        item = (self.long if long else self.short).item(position, uid)
        return replace(item, tags=(*item.tags, "long" if long else "short"))

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description."""
        return {"type": "mixed", "long_share": self.long_share, "short": self.short.describe(),
                "long": self.long.describe()}


@dataclass(frozen=True)
class ConversationWorkload:
    """`conversations` chats of `turns` turns each; every turn resends the whole history.

    Position p is turn t = p // conversations of conversation k = p % conversations (turn-major:
    every conversation's first turn, then every second turn, ...), so on a closed loop with no
    more slots than conversations a turn goes out after the conversation's previous turn was sent.
    The engine builds each request before earlier answers are known, so an earlier answer is
    resent as a fixed stand-in of `answer_tokens` words, not the server's real text. Each
    conversation begins with its own head (`Conversation <seed>-<k>:`) and its history is the same
    text at every turn, so a prefix cache can serve it; items are tagged `turn=<t+1>`.
    """

    conversations: int
    turns: int
    user_tokens: int = 96
    answer_tokens: int = 64
    max_tokens: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("conversations", "turns", "user_tokens", "answer_tokens", "max_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

    def turn_of(self, position: int) -> tuple[int, int]:
        """(conversation k, turn t), both from 0, of request `position`."""
        return position % self.conversations, (position // self.conversations) % self.turns

    def _words(self, k: int, i: int, salt: int, n: int) -> str:
        rng = random.Random((self.seed * 1_000_003 + k) * 7919 + i * 2 + salt)
        return " ".join(rng.choices(WORDS, k=max(n, 1)))

    def messages(self, k: int, t: int) -> list[dict[str, Any]]:
        """The chat of conversation k at turn t: user, assistant (stand-in), ..., user."""
        head = f"Conversation {self.seed}-{k}:"
        out: list[dict[str, Any]] = []
        for i in range(t + 1):
            text = self._words(k, i, 0, self.user_tokens - (3 if i == 0 else 0))
            out.append({"role": "user", "content": f"{head} {text}" if i == 0 else text})
            if i < t:
                out.append({"role": "assistant", "content": self._words(k, i, 1, self.answer_tokens)})
        return out

    def prompt_tokens(self, t: int) -> int:
        """About how many prompt tokens turn t sends (words; the chat template adds a few per message)."""
        return (t + 1) * self.user_tokens + t * self.answer_tokens

    def item(self, position: int, uid: int) -> WorkItem:
        """Turn t of conversation k, with the history before it."""
        k, t = self.turn_of(position)
        return WorkItem(messages=self.messages(k, t), max_tokens=self.max_tokens,
                        tags=(f"turn={t + 1}", f"conversation={k}"), input_tokens=self.prompt_tokens(t))

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description."""
        return {"type": "conversations", "conversations": self.conversations, "turns": self.turns,
                "user_tokens": self.user_tokens, "answer_tokens": self.answer_tokens,
                "max_tokens": self.max_tokens, "seed": self.seed, "order": "turn-major",
                "history": "earlier answers resent as fixed stand-ins of answer_tokens words"}
