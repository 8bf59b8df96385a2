"""What a load run sends: JSONL traces (replayed or resampled) and synthetic length distributions.

Every workload answers `item(position, uid)` deterministically, so several worker processes can
build their own share of one run without shipping prompts between processes. `position` picks
the trace entry or the lengths; `uid` is the request's unique number, written at the start of
synthetic prompts so a server's prefix cache cannot turn every request into a cache hit.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

BUCKETS: tuple[tuple[str, int | None], ...] = (("short", 128), ("medium", 1024), ("long", 8192),
                                                ("very_long", None))
"""Length buckets: short < 128, medium 128-1023, long 1024-8192, very long > 8192 tokens."""

# Common short English words, each one token (with its leading space) in the usual BPE
# vocabularies; a prompt of n of them is about n tokens without loading any tokenizer.
WORDS: tuple[str, ...] = (
    "the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "with", "as", "was", "be",
    "at", "by", "this", "have", "from", "or", "one", "had", "but", "not", "what", "all", "were",
    "we", "when", "your", "can", "said", "there", "use", "an", "each", "which", "she", "do",
    "how", "their", "if", "will", "up", "other", "about", "out", "many", "then", "them", "these",
    "so", "some", "her", "would", "make", "like", "him", "into", "time", "has", "look", "two",
    "more", "go", "see", "no", "way", "could", "my", "than", "first", "been", "call", "who",
    "its", "now", "find", "long", "down", "day", "did", "get", "come", "made", "may", "part",
)


class WorkloadError(ValueError):
    """A trace file or workload description that cannot be used; the message names file and line."""


def bucket(tokens: int) -> str:
    """The length bucket of a token count: short, medium, long or very_long."""
    if tokens < 128:
        return "short"
    if tokens < 1024:
        return "medium"
    return "long" if tokens <= 8192 else "very_long"


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 4 characters a token); the server's usage is the truth."""
    return max(1, round(len(text) / 4))


@dataclass(frozen=True, kw_only=True)
class WorkItem:
    """One request's content: a prompt or chat messages, and its output limit."""

    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    max_tokens: int
    tags: tuple[str, ...] = ()
    arrival: float | None = None
    input_tokens: int | None = None
    """The prompt length asked for (a hint; None when unknown)."""


@runtime_checkable
class Workload(Protocol):
    """Anything that can say what request number `position` sends."""

    def item(self, position: int, uid: int) -> WorkItem:
        """The content of the request at `position` of the schedule; `uid` is unique per request."""

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description for reports."""


# ---------------------------------------------------------------------------------------------
# Trace files


class TraceEntry(BaseModel):
    """One line of a JSONL trace file."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    messages: list[dict[str, Any]] | None = Field(default=None, min_length=1)
    prompt: str | None = Field(default=None, min_length=1)
    max_tokens: int = Field(gt=0)
    arrival: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    tags: list[str] = Field(default_factory=list)
    input_tokens: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_input(self) -> TraceEntry:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("give exactly one of messages or prompt")
        for i, msg in enumerate(self.messages or []):
            if not isinstance(msg.get("role"), str):
                raise ValueError(f"messages[{i}] has no role")
        return self

    def text(self) -> str:
        """The prompt, or the messages' text contents joined."""
        if self.prompt is not None:
            return self.prompt
        return "\n".join(str(m.get("content") or "") for m in self.messages or [])


_TYPE_WORDS = {"int_type": "an integer", "float_type": "a number", "string_type": "a string",
               "list_type": "a list", "dict_type": "an object", "bool_type": "true or false"}


def _plain(err: ValidationError) -> str:
    """The first problem of a validation error in plain words (`max_tokens must be > 0`)."""
    # A misspelt field is the cause of the "missing" error that comes with it: name it first.
    first = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
    loc = ".".join(str(p) for p in first["loc"])
    kind = first["type"]
    ctx = first.get("ctx") or {}
    if kind == "missing":
        return f"{loc} is required"
    if kind == "extra_forbidden":
        allowed = ", ".join(TraceEntry.model_fields)
        return f"unknown field {loc!r} (allowed: {allowed})"
    if kind == "greater_than":
        return f"{loc} must be > {ctx.get('gt'):g}"
    if kind == "greater_than_equal":
        return f"{loc} must be >= {ctx.get('ge'):g}"
    if kind in ("too_short", "string_too_short"):
        return f"{loc} must not be empty"
    if kind == "finite_number":
        return f"{loc} must be a finite number"
    if kind in _TYPE_WORDS:
        return f"{loc} must be {_TYPE_WORDS[kind]}"
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{loc}: {message}" if loc else message


def read_trace_text(path: Path) -> str:
    """A trace file's text; a WorkloadError naming the file when it cannot be read as UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkloadError(f"{path.name}: cannot read the trace file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path.name}: the trace file is not UTF-8 text ({exc.reason})") from None


def json_objects(name: str, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL text; a WorkloadError `name:line:
    problem` on a line that is not a JSON object."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue  # blank lines (a trailing newline, spacing) carry nothing
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            problem = f"not valid JSON ({exc.msg} at column {exc.colno})"
            raise WorkloadError(f"{name}:{number}: {problem}") from None
        if not isinstance(data, dict):
            kind = type(data).__name__
            raise WorkloadError(f"{name}:{number}: each line must be a JSON object, got {kind}")
        yield number, data


def load_trace(path: str | os.PathLike[str]) -> list[TraceEntry]:
    """Read and validate a JSONL trace; a WorkloadError `name:line: problem` on the first bad line."""
    p = Path(path)
    name = p.name
    entries: list[TraceEntry] = []
    for number, data in json_objects(name, read_trace_text(p)):
        try:
            entries.append(TraceEntry.model_validate(data))
        except ValidationError as exc:
            raise WorkloadError(f"{name}:{number}: {_plain(exc)}") from None
    if not entries:
        raise WorkloadError(f"{name}: the trace file is empty (no request lines)")
    return entries


def _seeded(seed: int, position: int, salt: int) -> random.Random:
    return random.Random((seed * 1_000_003 + position) * 7 + salt)


@dataclass(frozen=True)
class TraceWorkload:
    """Requests taken from a trace: in file order (wrapping around) or resampled with a seed."""

    entries: tuple[TraceEntry, ...]
    order: Literal["replay", "resample"] = "replay"
    seed: int = 0
    unique_prefix: bool = False
    """Write the request number at the start of the last user message (breaks exact repeats)."""
    source: str = ""

    def __post_init__(self) -> None:
        if not self.entries:
            raise WorkloadError("a trace workload needs at least one entry")
        if self.order not in ("replay", "resample"):
            raise WorkloadError(f"order must be 'replay' or 'resample', got {self.order!r}")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, order: Literal["replay", "resample"] = "replay",
                  seed: int = 0, unique_prefix: bool = False) -> TraceWorkload:
        """Load and validate a JSONL trace file."""
        return cls(tuple(load_trace(path)), order=order, seed=seed, unique_prefix=unique_prefix,
                   source=str(path))

    @property
    def has_arrivals(self) -> bool:
        """True when every entry has an arrival offset (needed to replay at recorded times)."""
        return all(e.arrival is not None for e in self.entries)

    def item(self, position: int, uid: int) -> WorkItem:
        """The entry for `position`, as a work item."""
        if self.order == "resample":
            entry = self.entries[_seeded(self.seed, position, 1).randrange(len(self.entries))]
        else:
            entry = self.entries[position % len(self.entries)]
        messages = entry.messages
        prompt = entry.prompt
        if self.unique_prefix:
            prompt, messages = _mark(prompt, messages, uid)
        return WorkItem(prompt=prompt, messages=messages, max_tokens=entry.max_tokens,
                        tags=tuple(entry.tags), arrival=entry.arrival, input_tokens=entry.input_tokens)

    def lengths(self, which: Literal["input", "output"]) -> list[int]:
        """Input (hint, else estimated) or output (max_tokens) lengths of every entry."""
        if which == "output":
            return [e.max_tokens for e in self.entries]
        return [e.input_tokens or estimate_tokens(e.text()) for e in self.entries]

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description."""
        return {"type": "trace", "source": self.source, "entries": len(self.entries),
                "order": self.order, "seed": self.seed, "unique_prefix": self.unique_prefix}


def _mark(prompt: str | None, messages: list[dict[str, Any]] | None,
          uid: int) -> tuple[str | None, list[dict[str, Any]] | None]:
    """Put `Request <uid>:` in front of the last user text, keeping a shared system prompt cacheable."""
    marker = f"Request {uid}: "
    if prompt is not None:
        return marker + prompt, messages
    out = [dict(m) for m in messages or []]
    for msg in reversed(out):
        if msg.get("role") == "user" and isinstance(msg.get("content"), str):
            msg["content"] = marker + msg["content"]
            break
    return prompt, out


# ---------------------------------------------------------------------------------------------
# Length distributions and synthetic prompts


@dataclass(frozen=True)
class Fixed:
    """Always `n` tokens."""

    n: int

    def __post_init__(self) -> None:
        _positive("fixed length", self.n)

    def sample(self, rng: random.Random) -> int:
        """Draw one length."""
        return self.n

    def describe(self) -> str:
        """As text, parseable again."""
        return f"fixed({self.n})"


@dataclass(frozen=True)
class Uniform:
    """Uniform integers in [lo, hi]."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        _positive("uniform lower bound", self.lo)
        if self.hi < self.lo:
            raise WorkloadError(f"uniform({self.lo}, {self.hi}): the upper bound is below the lower")

    def sample(self, rng: random.Random) -> int:
        """Draw one length."""
        return rng.randint(self.lo, self.hi)

    def describe(self) -> str:
        """As text, parseable again."""
        return f"uniform({self.lo}, {self.hi})"


@dataclass(frozen=True)
class Normal:
    """Normal(mean, sd) rounded and clipped to [lo, hi] (lo defaults to 1)."""

    mean: float
    sd: float
    lo: int = 1
    hi: int | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean) and math.isfinite(self.sd)) or self.sd < 0:
            raise WorkloadError(f"normal({self.mean}, {self.sd}): the mean must be finite and sd >= 0")
        _positive("normal lower clip", self.lo)
        if self.hi is not None and self.hi < self.lo:
            raise WorkloadError(f"normal clip [{self.lo}, {self.hi}] is empty")

    def sample(self, rng: random.Random) -> int:
        """Draw one length."""
        value = max(self.lo, round(rng.gauss(self.mean, self.sd)))
        return value if self.hi is None else min(self.hi, value)

    def describe(self) -> str:
        """As text, parseable again."""
        return f"normal({self.mean:g}, {self.sd:g})"


@dataclass(frozen=True)
class Sampled:
    """Lengths drawn from observed values (e.g. a trace's), with replacement."""

    values: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.values:
            raise WorkloadError("sampled lengths need at least one value")
        for v in self.values:
            _positive("sampled length", v)

    @classmethod
    def from_trace(cls, trace: TraceWorkload, which: Literal["input", "output"]) -> Sampled:
        """The input or output lengths of a trace."""
        return cls(tuple(trace.lengths(which)))

    def sample(self, rng: random.Random) -> int:
        """Draw one length."""
        return rng.choice(self.values)

    def describe(self) -> str:
        """As text (the values themselves are not repeated)."""
        return f"sampled({len(self.values)} values)"


Distribution = Fixed | Uniform | Normal | Sampled


def _positive(what: str, n: object) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise WorkloadError(f"{what} must be a positive integer, got {n!r}")


_DIST = re.compile(r"^\s*(fixed|uniform|normal)\s*\(([^)]*)\)\s*$")


def parse_distribution(text: str | int) -> Distribution:
    """`128`, `fixed(128)`, `uniform(64, 256)` or `normal(512, 128)` as a distribution."""
    if isinstance(text, int):
        return Fixed(text)
    stripped = text.strip()
    if stripped.isdigit():
        return Fixed(int(stripped))
    match = _DIST.match(stripped)
    if not match:
        raise WorkloadError(f"cannot read length distribution {text!r}; use 128, fixed(128), "
                            "uniform(64, 256) or normal(512, 128)")
    name, args = match.group(1), [a.strip() for a in match.group(2).split(",") if a.strip()]
    try:
        if name == "fixed" and len(args) == 1:
            return Fixed(int(args[0]))
        if name == "uniform" and len(args) == 2:
            return Uniform(int(args[0]), int(args[1]))
        if name == "normal" and len(args) in (2, 3, 4):
            bounds = [int(a) for a in args[2:]]
            return Normal(float(args[0]), float(args[1]), *bounds)
    except ValueError as exc:
        if isinstance(exc, WorkloadError):
            raise
        raise WorkloadError(f"cannot read length distribution {text!r}: {exc}") from None
    raise WorkloadError(f"wrong number of arguments in length distribution {text!r}")


def make_prompt(tokens: int, rng: random.Random, *, uid: int | None, shared: str = "") -> str:
    """A prompt of about `tokens` tokens: an optional shared prefix, `Request <uid>:`, then words."""
    head = f"Request {uid}:" if uid is not None else ""
    # "Request" and ":" are a token each; digits go about three to a token.
    used = (2 + math.ceil(len(str(uid)) / 3)) if uid is not None else 0
    used += len(shared.split())
    words = rng.choices(WORDS, k=max(tokens - used, 1))
    return " ".join(part for part in (shared, head, " ".join(words)) if part)


@dataclass(frozen=True)
class SyntheticWorkload:
    """Prompts of drawn lengths made of common words, each with its own request number."""

    input: Distribution = field(default_factory=lambda: Fixed(64))
    output: Distribution = field(default_factory=lambda: Fixed(32))
    seed: int = 0
    shared_prefix: int = 0
    """Tokens of one common prefix every prompt starts with (a shared system prompt); 0: none."""
    chat: bool = True
    """Chat messages (a user message) rather than a bare prompt."""

    def __post_init__(self) -> None:
        if not isinstance(self.shared_prefix, int) or self.shared_prefix < 0:
            raise WorkloadError(f"shared_prefix must be a number of tokens >= 0, got {self.shared_prefix!r}")

    def item(self, position: int, uid: int) -> WorkItem:
        """Lengths drawn for `position`; the text is unique to `uid`."""
        rng = _seeded(self.seed, position, 2)
        n_in = self.input.sample(rng)
        n_out = self.output.sample(rng)
        prompt = make_prompt(n_in, rng, uid=uid, shared=self._shared)
        if self.chat:
            return WorkItem(messages=[{"role": "user", "content": prompt}], max_tokens=n_out,
                            input_tokens=n_in)
        return WorkItem(prompt=prompt, max_tokens=n_out, input_tokens=n_in)

    @cached_property
    def _shared(self) -> str:
        if not self.shared_prefix:
            return ""
        return " ".join(random.Random(self.seed).choices(WORDS, k=self.shared_prefix))

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description."""
        return {"type": "synthetic", "input": self.input.describe(), "output": self.output.describe(),
                "seed": self.seed, "shared_prefix": self.shared_prefix}


DEFAULT_MAX_TOKENS = 32
"""The default workload's max_tokens against a server that answers without reasoning first."""
REASONING_MAX_TOKENS = 1024
"""The default workload's max_tokens against a server seen to reason: max_tokens counts the
reasoning tokens too, and 32 of them are spent before a reasoning model writes any content."""


def default_workload(*, reasoning: bool = False) -> SyntheticWorkload:
    """Short chat prompts (64 tokens), max_tokens 32; 1,024 for a server seen to reason, so that
    its answers have room for content after the reasoning."""
    return SyntheticWorkload(output=Fixed(REASONING_MAX_TOKENS if reasoning else DEFAULT_MAX_TOKENS))


def realised(lengths: Sequence[int]) -> dict[str, int]:
    """How many of `lengths` fall in each bucket (for showing the realised distribution)."""
    out = {name: 0 for name, _ in BUCKETS}
    for n in lengths:
        out[bucket(n)] += 1
    return out
