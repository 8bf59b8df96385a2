"""Answer consistency across upgrades: fixed prompts, a team's own prompts, and how answers compare.

The prompts are answered at temperature 0 with a fixed seed and a small token budget, so the
same server build gives the same text; an upgrade that changes kernels, templates or sampling
shows up as changed answers. Nothing here judges a single run: only a baseline gives a verdict.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEED = 1234
MAX_TOKENS = 24
EMBEDDING_MIN_COSINE = 0.99
"""Below this cosine an embedding counts as drifted (kernel changes move only the last digits)."""


@dataclass(frozen=True, kw_only=True)
class AnswerPrompt:
    """One fixed prompt: an id that stays stable across runs, and the chat messages to send."""

    id: str
    messages: tuple[dict[str, str], ...]
    max_tokens: int = MAX_TOKENS
    embed: str | None = None
    """Text to embed as well (None: this prompt has no embedding input)."""


def _user(pid: str, text: str, *, embed: bool = True) -> AnswerPrompt:
    return AnswerPrompt(id=pid, messages=({"role": "user", "content": text},), embed=text if embed else None)


# Short, varied prompts: arithmetic, a list, code, translation, a refusal-prone one and a system
# prompt, so that template and tokenizer changes touch at least one of them.
BUNDLED: tuple[AnswerPrompt, ...] = (
    _user("arithmetic", "What is 17 times 23? Answer with the number only."),
    _user("capital", "Name the capital of Australia in one word."),
    _user("list", "List three primary colours, separated by commas."),
    _user("code", "Write a Python function that returns the square of x."),
    _user("translate", "Translate 'good morning' into French."),
    _user("summary", "Summarise in one sentence: the cat sat on the mat because it was warm."),
    _user("unicode", "Repeat exactly: café, naïve, 日本語."),
    AnswerPrompt(id="system", messages=(
        {"role": "system", "content": "You answer in exactly one word."},
        {"role": "user", "content": "What colour is the sky on a clear day?"}), embed=None),
)


class AnswersFileError(ValueError):
    """A team's answers file that cannot be read; the message names the line."""


def load_answers_file(path: Path) -> list[AnswerPrompt]:
    """Read a JSONL file of prompts: {"id", "prompt" or "messages", optional "max_tokens"}."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AnswersFileError(f"--answers-file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise AnswersFileError(f"--answers-file {path}: not UTF-8 text (byte {exc.start})") from None
    prompts: list[AnswerPrompt] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"--answers-file {path}, line {number}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AnswersFileError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(entry, dict):
            raise AnswersFileError(f"{where}: expected an object with 'prompt' or 'messages'")
        prompts.append(_prompt_of(entry, where))
    ids = [p.id for p in prompts]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise AnswersFileError(f"--answers-file {path}: duplicate ids {', '.join(duplicates)}")
    # Answers are compared with the baseline's by id: a team id equal to a bundled one would
    # compare one prompt's answer with another's.
    taken = sorted({p.id for p in BUNDLED} & set(ids))
    if taken:
        raise AnswersFileError(f"--answers-file {path}: ids {', '.join(taken)} are taken by the bundled "
                               "prompts; give your prompts other ids")
    return prompts


def _prompt_of(entry: dict[str, Any], where: str) -> AnswerPrompt:
    pid = entry.get("id")
    if not isinstance(pid, str) or not pid.strip():
        # No default by line number: one line added above would shift every id, and each answer
        # would be compared with another prompt's.
        raise AnswersFileError(f"{where}: give 'id' (a non-empty string): answers are compared with the "
                               "baseline's by id")
    max_tokens = entry.get("max_tokens", MAX_TOKENS)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise AnswersFileError(f"{where}: max_tokens must be a whole number >= 1")
    if isinstance(entry.get("prompt"), str):
        return AnswerPrompt(id=pid, messages=({"role": "user", "content": entry["prompt"]},),
                            max_tokens=max_tokens, embed=entry["prompt"])
    messages = entry.get("messages")
    if (not isinstance(messages, list) or not messages
            or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages)):
        raise AnswersFileError(f"{where}: give 'prompt' (a string) or 'messages' (role/content objects)")
    return AnswerPrompt(id=pid, messages=tuple({"role": str(m.get("role", "user")), "content": m["content"]}
                                               for m in messages), max_tokens=max_tokens)


def similarity(before: str, after: str) -> float:
    """How alike two answers are, 0 to 1 (difflib's ratio over characters; 1.0 when identical)."""
    if before == after:
        return 1.0
    return difflib.SequenceMatcher(None, before, after, autojunk=False).ratio()


def cosine(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cosine similarity of two vectors; None when their lengths differ or one is all zeros."""
    if len(a) != len(b) or not a:
        return None
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    if norm == 0:
        return None
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / norm


@dataclass(frozen=True, kw_only=True)
class AnswerChange:
    """One prompt whose answer (or embedding) differs from the baseline's."""

    id: str
    before: str
    after: str
    similarity: float
    drifted: bool
    """Below the threshold: counts under --answer-drift."""


@dataclass(frozen=True, kw_only=True)
class AnswerComparison:
    """Answers of two runs side by side: how many were compared, how many matched exactly."""

    compared: int = 0
    identical: int = 0
    changes: list[AnswerChange] = field(default_factory=list)

    @property
    def exact_match_rate(self) -> float | None:
        """Identical answers / answers compared."""
        return self.identical / self.compared if self.compared else None


def compare_answers(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]],
                    threshold: float) -> AnswerComparison:
    """Compare answers by prompt id; only prompts answered in both runs count."""
    old = {str(a.get("id")): str(a.get("text", "")) for a in before if a.get("error") is None}
    compared = identical = 0
    changes: list[AnswerChange] = []
    for answer in after:
        pid = str(answer.get("id"))
        if pid not in old or answer.get("error") is not None:
            continue
        compared += 1
        text = str(answer.get("text", ""))
        ratio = similarity(old[pid], text)
        if ratio == 1.0:
            identical += 1
            continue
        changes.append(AnswerChange(id=pid, before=old[pid], after=text, similarity=round(ratio, 4),
                                    drifted=ratio < threshold))
    return AnswerComparison(compared=compared, identical=identical, changes=changes)


def compare_embeddings(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]],
                       min_cosine: float = EMBEDDING_MIN_COSINE) -> list[tuple[str, float | None, bool]]:
    """Cosine per input id present in both runs: (id, cosine, drifted)."""
    old = {str(e.get("id")): e.get("vector") for e in before}
    out: list[tuple[str, float | None, bool]] = []
    for entry in after:
        pid = str(entry.get("id"))
        prev, vector = old.get(pid), entry.get("vector")
        if not isinstance(prev, list) or not isinstance(vector, list):
            continue
        value = cosine(prev, vector)
        out.append((pid, None if value is None else round(value, 6), value is None or value < min_cosine))
    return out
