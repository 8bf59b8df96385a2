"""The known-answer item schema and the JSONL loader (the bundled set and a team's own)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

Grader = Literal["number", "choice", "fact", "copy", "json"]
GRADERS: tuple[str, ...] = ("choice", "copy", "fact", "json", "number")

DEFAULT_MAX_TOKENS: dict[str, int] = {"number": 96, "choice": 48, "fact": 48, "copy": 96, "json": 128}
"""Enough for a direct answer with a short preamble; an item's own max_tokens overrides it."""

BUNDLED = "known_answers.jsonl"


class Message(BaseModel):
    """One chat message of an item."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


class Item(BaseModel):
    """One known-answer item: what to ask, how to grade the answer, and its tags."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    id: str = Field(min_length=1)
    prompt: str | None = None
    messages: tuple[Message, ...] | None = None
    grader: Grader
    answers: tuple[str, ...] = ()
    """Accepted answers (number, choice, fact, copy); any one of them is correct."""
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    """For the json grader: the JSON Schema the first JSON object of the answer must satisfy."""
    max_tokens: int | None = Field(default=None, gt=0)
    tags: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _one_answer_is_a_list(cls, data: Any) -> Any:
        # `"answer": 42` is the natural way to write one answer; numbers become their text.
        if isinstance(data, dict):
            data = dict(data)
            if "answer" in data:
                if "answers" in data:
                    raise ValueError("give either 'answer' or 'answers', not both")
                data["answers"] = [data.pop("answer")]
            if isinstance(data.get("answers"), list):
                data["answers"] = [str(a) if isinstance(a, (int, float)) and not isinstance(a, bool) else a
                                   for a in data["answers"]]
        return data

    @model_validator(mode="after")
    def _complete(self) -> Item:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of 'prompt' or 'messages'")
        if self.messages is not None and not self.messages:
            raise ValueError("'messages' is empty")
        if self.grader == "json":
            if self.json_schema is None:
                raise ValueError("grader 'json' needs a 'schema' (a JSON Schema for the answer)")
            from jsonschema.validators import validator_for

            validator_for(self.json_schema).check_schema(self.json_schema)
        elif not self.answers or not all(a.strip() for a in self.answers):
            raise ValueError(f"grader {self.grader!r} needs 'answer' or 'answers' (non-empty)")
        if self.grader == "number":
            from pytest_inferaccept.correctness.text import parse_number

            bad = [a for a in self.answers if parse_number(a) is None]
            if bad:
                raise ValueError(f"grader 'number' needs numeric answers, got {bad!r}")
        if self.grader == "choice":
            bad = [a for a in self.answers if a.strip().upper() not in ("A", "B", "C", "D")]
            if bad:
                raise ValueError(f"grader 'choice' needs letters A-D as answers, got {bad!r}")
        return self

    def chat_messages(self) -> list[dict[str, str]]:
        """The item as chat messages (a prompt becomes one user message)."""
        if self.messages is not None:
            return [m.model_dump() for m in self.messages]
        return [{"role": "user", "content": self.prompt or ""}]

    def token_budget(self) -> int:
        """max_tokens for this item: its own, or its grader's default."""
        return self.max_tokens or DEFAULT_MAX_TOKENS[self.grader]


class ItemSetError(ValueError):
    """A known-answer file that cannot be used, naming the file and the line."""

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        where = f"{path} line {line}" if line is not None else path
        super().__init__(f"{where}: {problem}")
        self.path, self.line, self.problem = path, line, problem


def _problem(err: ValidationError) -> str:
    """A validation error in a few words: the field and what is wrong with it."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        if e["type"] == "literal_error" and e["loc"][:1] == ("grader",):
            parts.append(f"unknown grader {e['input']!r} (use one of: {', '.join(GRADERS)})")
        elif e["type"] == "extra_forbidden":
            parts.append(f"unknown key {loc!r}")
        elif e["type"] == "missing":
            parts.append(f"missing {loc!r}")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def parse_items(lines: Sequence[str], source: str) -> list[Item]:
    """Items from JSONL lines (blank lines skipped); `source` names the file in errors."""
    items: list[Item] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ItemSetError(source, number, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(data, dict):
            raise ItemSetError(source, number, f"an item must be a JSON object, got {type(data).__name__}")
        try:
            item = Item.model_validate(data)
        except ValidationError as exc:
            raise ItemSetError(source, number, _problem(exc)) from None
        except Exception as exc:  # a schema jsonschema itself rejects
            raise ItemSetError(source, number, f"invalid schema: {str(exc).splitlines()[0]}") from None
        if item.id in seen:
            raise ItemSetError(source, number, f"duplicate id {item.id!r} (first on line {seen[item.id]})")
        seen[item.id] = number
        items.append(item)
    if not items:
        raise ItemSetError(source, None, "no items")
    return items


def load_items(path: str | Path) -> list[Item]:
    """A team's known-answer set from a JSONL file, validated item by item."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ItemSetError(str(p), None, f"cannot be read ({exc.strerror})") from None
    return parse_items(text.splitlines(), str(p))


def load_bundled() -> list[Item]:
    """The project's bundled known-answer set."""
    data = resources.files("pytest_inferaccept.correctness").joinpath("data")
    text = data.joinpath(BUNDLED).read_text("utf-8")
    return parse_items(text.splitlines(), f"(bundled) {BUNDLED}")
