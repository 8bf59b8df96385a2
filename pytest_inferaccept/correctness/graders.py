"""Graders: pure functions from (item, answer text, finish_reason) to correct / wrong / unanswered."""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pytest_inferaccept.correctness.text import parse_number

if TYPE_CHECKING:
    from pytest_inferaccept.correctness.items import Item

Outcome = Literal["correct", "wrong", "unanswered"]


@dataclass(frozen=True)
class Grade:
    """The grade of one answer: the outcome, what the grader read from it, and why."""

    outcome: Outcome
    read: str | None
    """The value the grader took from the answer (None when it found none)."""
    reason: str

    @property
    def correct(self) -> bool:
        """True for a correct answer."""
        return self.outcome == "correct"


# A number: optional sign, digits with optional thousands commas, optional decimals. A comma
# only joins groups of exactly three digits, so "3,4" reads as two numbers, not 34.
_NUMBER = re.compile(r"(?<![\w.])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d])")
_ANSWER_MARK = re.compile(r"(?i)\b(?:final answer|answer|result)\b\s*(?:is|=|:)?\s*[:=]?")
_EQUALS = re.compile(r"(?i)(?:=|\bequals\b)\s*")


def read_number(text: str) -> str | None:
    """The number an answer gives: the first after "answer is/Answer:" when it says so, else a first
    line that is a bare number, else the one right after the last "=" or "equals", else the last.

    A worked answer ("12 + 30 = 42") states its result after the equals sign, and a small model
    often goes on in prose with other numbers ("2 * 5 = 10. ... by itself and 5"); a direct answer
    ("42.") has only one number.
    """
    mark = None
    for m in _ANSWER_MARK.finditer(text):
        mark = m  # the last marker: a model may say "the answer" in passing before its final one
    if mark is not None:
        after = _NUMBER.search(text, mark.end())
        if after is not None:
            return after.group(0)
    stripped = text.strip()
    first_line = stripped.splitlines()[0].strip() if stripped else ""
    bare = _NUMBER.fullmatch(first_line.rstrip("."))
    if bare is not None:
        return bare.group(0)  # "Answer with the number only" obeyed; what follows is rambling
    result = None
    for m in _EQUALS.finditer(text):
        right = _NUMBER.match(text, m.end())
        result = right.group(0) if right is not None else result
    if result is not None:
        return result
    found = _NUMBER.findall(text)
    return found[-1] if found else None


def _grade_number(item: Item, text: str) -> Grade:
    raw = read_number(text)
    if raw is None:
        return Grade("wrong", None, "no number in the answer")
    value = parse_number(raw)
    expected = [parse_number(a) for a in item.answers]
    if value is not None and value in expected:
        return Grade("correct", raw, f"read {raw}")
    return Grade("wrong", raw, f"read {raw}, expected {' or '.join(item.answers)}")


# Letter choice, most explicit first: "Answer: C" / "answer is (C)", then "(B)" or "B)" or a bare
# "B" on its own; "A" followed by a lowercase word is the article, not a choice.
_CHOICE_MARKED = re.compile(r"(?i)\banswer\b[^A-Za-z0-9]{0,12}(?:is\s*)?[(\[]?([A-D])\b")
_CHOICE_BRACKET = re.compile(r"[(\[]([A-D])[)\]]")
_CHOICE_BARE = re.compile(r"(?<![A-Za-z0-9'])([A-D])(?![A-Za-z0-9'])(?!\s+[a-z])")


def read_choice(text: str) -> str | None:
    """The letter an answer picks: after "Answer:", else the first "(B)", else the first standalone A-D."""
    for pattern in (_CHOICE_MARKED, _CHOICE_BRACKET, _CHOICE_BARE):
        m = pattern.search(text)
        if m is not None:
            return m.group(1).upper()
    return None


def _grade_choice(item: Item, text: str) -> Grade:
    letter = read_choice(text)
    if letter is None:
        return Grade("wrong", None, "no letter A-D in the answer")
    accepted = {a.strip().upper() for a in item.answers}
    if letter in accepted:
        return Grade("correct", letter, f"picked {letter}")
    return Grade("wrong", letter, f"picked {letter}, expected {' or '.join(sorted(accepted))}")


_ARTICLES = {"a", "an", "the"}


def normalise(text: str) -> str:
    """Lowercase, accents and punctuation removed, articles dropped, whitespace collapsed."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).lower()
    words = re.sub(r"[^\w\s]|_", " ", plain).split()
    return " ".join(w for w in words if w not in _ARTICLES)


def _answer_line(text: str) -> str:
    """The first non-empty line that is not the question repeated (a line ending in "?")."""
    for line in text.splitlines():
        if line.strip() and not line.rstrip().endswith("?"):
            return line.strip()
    return ""


def _grade_fact(item: Item, text: str) -> Grade:
    first_line = _answer_line(text)
    said = normalise(first_line)
    padded = f" {said} "
    for accepted in item.answers:
        want = normalise(accepted)
        # equal, or contained as whole words in the first line ("The capital is Paris.")
        if want and (said == want or f" {want} " in padded):
            return Grade("correct", first_line, f"matched {accepted!r}")
    return Grade("wrong", first_line, f"expected {' or '.join(repr(a) for a in item.answers)}")


def _grade_copy(item: Item, text: str) -> Grade:
    said = text.strip()
    if any(said == a.strip() for a in item.answers):
        return Grade("correct", said, "exact copy")
    return Grade("wrong", said, f"expected exactly {item.answers[0].strip()!r}")


def first_json_object(text: str) -> Any | None:
    """The first JSON object in a text (fences and prose around it ignored), or None."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _grade_json(item: Item, text: str) -> Grade:
    from jsonschema.validators import validator_for

    value = first_json_object(text)
    if value is None:
        return Grade("wrong", None, "no JSON object in the answer")
    schema = item.json_schema or {}
    errors = sorted(validator_for(schema)(schema).iter_errors(value), key=lambda e: list(e.path))
    shown = json.dumps(value, ensure_ascii=False)[:200]
    if errors:
        return Grade("wrong", shown, f"JSON does not match the schema: {errors[0].message}")
    return Grade("correct", shown, "JSON matches the schema")


_GRADERS = {"number": _grade_number, "choice": _grade_choice, "fact": _grade_fact,
            "copy": _grade_copy, "json": _grade_json}


def grade(item: Item, text: str | None, finish_reason: str | None) -> Grade:
    """Grade one answer; an answer cut by max_tokens that is not already correct is unanswered."""
    if text is None:
        return Grade("unanswered", None, "no answer (the request failed)")
    result = _GRADERS[item.grader](item, text)
    if finish_reason == "length" and not result.correct:
        return Grade("unanswered", result.read, f"cut by max_tokens ({item.token_budget()}) before a correct "
                                                 f"answer: {result.reason}")
    if not text.strip() and result.outcome == "wrong":
        return Grade("wrong", None, "empty answer")
    return result
