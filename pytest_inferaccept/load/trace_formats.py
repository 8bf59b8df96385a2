"""Public LLM request traces read into the project's own trace (docs/trace-format.md).

Two formats that publish lengths and arrival times but no text:

- **Mooncake** (JSONL): `timestamp` (ms from the trace start), `input_length`, `output_length`
  (tokens) and `hash_ids`, one id per 512-token block of the prompt, equal ids at the same
  positions meaning a shared prefix. Each id becomes one fixed block of text made from the id
  alone, so requests that share ids share exactly those blocks of text, and a server's prefix
  cache sees the reuse the trace recorded.
- **Azure LLM inference** (CSV `TIMESTAMP,ContextTokens,GeneratedTokens`): a date-time per row;
  every prompt is unique (the trace records no prefix structure).

Converting writes a JSONL trace that `load_trace` reads and the headroom scenario replays:

    python -m pytest_inferaccept.load.trace_formats mooncake IN.jsonl OUT.jsonl [--limit N]
        [--start S] [--duration D] [--block-size 512] [--seed 0]
    python -m pytest_inferaccept.load.trace_formats azure IN.csv OUT.jsonl [...]

Nothing here imports pytest.
"""

from __future__ import annotations

import argparse
import calendar
import csv
import json
import math
import os
import random
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pytest_inferaccept.load.workloads import (
    WORDS,
    TraceEntry,
    WorkloadError,
    json_objects,
    make_prompt,
    read_trace_text,
)

Format = Literal["mooncake", "azure"]
FORMATS: tuple[Format, ...] = ("mooncake", "azure")

BLOCK_TOKENS = 512
"""Tokens per Mooncake hash id: the block size the published Mooncake traces were hashed with."""

_ID_WORDS = 4
"""Words at the head of every block that spell its id in base len(WORDS) (87**4, about 57 million
ids): two different ids differ within their first four words, so blocks share no text by chance."""


class MooncakeLine(BaseModel):
    """One line of a Mooncake trace; fields other than these four are ignored (and said)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    timestamp: float = Field(ge=0, allow_inf_nan=False)
    """Milliseconds since the start of the trace (an integer in the published traces)."""
    input_length: int = Field(gt=0)
    output_length: int = Field(ge=0)
    hash_ids: list[Annotated[int, Field(ge=0)]]


_AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

_WHEN = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
                   r"(Z|[+-]\d{2}:?\d{2})?$")


def parse_when(text: str) -> int:
    """Nanoseconds since 1970 of `2023-11-16 18:15:46.6805900` (an optional `Z` or `+00:00` too).

    Parsed by hand: the Azure traces carry seven fractional digits (100 ns ticks), more than
    `datetime.fromisoformat` reads before Python 3.11. Without an offset the time is taken as UTC;
    only differences between rows are used."""
    match = _WHEN.match(text.strip())
    if not match:
        raise ValueError(f"not a date-time like 2023-11-16 18:15:46.6805900 (got {text!r})")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    try:
        datetime(year, month, day, hour, minute, second)  # a 31 February is refused, not rolled over
    except ValueError as exc:
        raise ValueError(f"not a valid date-time ({exc}; got {text!r})") from None
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    fraction = match.group(7) or ""
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    offset = match.group(8)
    if offset and offset != "Z":
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        seconds -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return seconds * 1_000_000_000 + nanos


class AzureRow(BaseModel):
    """One row of an Azure LLM inference trace (CSV cells, so numbers arrive as text)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    at_ns: int = Field(alias="TIMESTAMP")
    """The row's TIMESTAMP in nanoseconds since 1970."""
    context_tokens: int = Field(alias="ContextTokens", ge=0)
    generated_tokens: int = Field(alias="GeneratedTokens", ge=0)

    @field_validator("at_ns", mode="before")
    @classmethod
    def _when(cls, value: object) -> int:
        if not isinstance(value, str):
            raise ValueError("must be a date-time string")
        return parse_when(value)


@dataclass(frozen=True)
class Row:
    """One request of a public trace, format-neutral: where it came from, when, and its lengths."""

    line: int
    arrival: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] | None = None
    """Mooncake's block ids; None for a format without prefix structure."""


@dataclass
class Parsed:
    """The validated rows of a public trace file and what was handled on the way (said, not hidden)."""

    format: Format
    source: str
    rows: list[Row]
    notes: list[str] = field(default_factory=list)


_TYPE_WORDS = {"int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
               "float_type": "a number", "float_parsing": "a number", "string_type": "a string",
               "list_type": "a list", "bool_type": "true or false"}


def _problem(err: ValidationError) -> str:
    """The first problem of a validation error in plain words (`output_length must be >= 0`)."""
    first = err.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".")
    kind = first["type"]
    ctx = first.get("ctx") or {}
    if kind == "missing":
        return f"{loc} is required"
    if kind == "greater_than":
        return f"{loc} must be > {ctx.get('gt'):g}"
    if kind == "greater_than_equal":
        return f"{loc} must be >= {ctx.get('ge'):g}"
    if kind == "finite_number":
        return f"{loc} must be a finite number"
    if kind in _TYPE_WORDS:
        return f"{loc} must be {_TYPE_WORDS[kind]}"
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{loc}: {message}" if loc else message


def _n(count: int, noun: str) -> str:
    """`1 request`, `3 requests`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def parse_mooncake(path: str | os.PathLike[str], *, block_size: int = BLOCK_TOKENS) -> Parsed:
    """Read and validate a Mooncake JSONL trace; a WorkloadError `name:line: problem` on a bad line."""
    p = Path(path)
    name = p.name
    rows: list[Row] = []
    ignored: dict[str, int] = {}
    mismatched: list[str] = []
    for number, data in json_objects(name, read_trace_text(p)):
        try:
            item = MooncakeLine.model_validate(data)
        except ValidationError as exc:
            raise WorkloadError(f"{name}:{number}: {_problem(exc)}") from None
        for key in set(data) - set(MooncakeLine.model_fields):
            ignored[key] = ignored.get(key, 0) + 1
        if len(item.hash_ids) != math.ceil(item.input_length / block_size):
            ids = len(item.hash_ids)
            mismatched.append(f"{name}:{number}: {ids} hash ids for {item.input_length} tokens")
        rows.append(Row(number, item.timestamp / 1000, item.input_length, item.output_length,
                        tuple(item.hash_ids)))
    if not rows:
        raise WorkloadError(f"{name}: the trace file is empty (no request lines)")
    parsed = Parsed("mooncake", str(path), rows)
    if ignored:
        fields = ", ".join(f"{k!r} ({_n(n, 'line')})" for k, n in sorted(ignored.items()))
        parsed.notes.append(f"fields other than timestamp, input_length, output_length and hash_ids were "
                            f"ignored: {fields}")
    if mismatched:
        parsed.notes.append(
            f"{_n(len(mismatched), 'request')}: the hash ids do not cover input_length in "
            f"{block_size}-token blocks (first: {mismatched[0]}); their prompts follow input_length: ids "
            f"past it are dropped, tokens past the last id are text of the request's own")
    _sort(parsed, name)
    return parsed


def parse_azure(path: str | os.PathLike[str]) -> Parsed:
    """Read and validate an Azure LLM inference CSV; a WorkloadError `name:line: problem` on a bad row."""
    p = Path(path)
    name = p.name
    reader = csv.reader(read_trace_text(p).splitlines())
    header: list[str] | None = None
    rows: list[Row] = []
    stamps: list[int] = []
    for cells in reader:
        number = reader.line_num
        if not cells or not "".join(cells).strip():
            continue
        if header is None:
            header = [c.strip() for c in cells]
            missing = [c for c in _AZURE_COLUMNS if c not in header]
            if missing:
                raise WorkloadError(f"{name}:{number}: the header must name {', '.join(_AZURE_COLUMNS)}; "
                                    f"missing {', '.join(missing)} (got {','.join(header)})")
            continue
        if len(cells) != len(header):
            raise WorkloadError(f"{name}:{number}: {len(cells)} fields where the header names {len(header)}")
        try:
            row = AzureRow.model_validate(dict(zip(header, cells, strict=True)))
        except ValidationError as exc:
            raise WorkloadError(f"{name}:{number}: {_problem(exc)}") from None
        stamps.append(row.at_ns)
        rows.append(Row(number, 0.0, row.context_tokens, row.generated_tokens))
    if not rows:
        raise WorkloadError(f"{name}: the trace file is empty (no request rows)")
    # Arrival: seconds since the earliest row (the first one, in a sorted trace), in integer
    # nanoseconds until the end so seven-digit fractions of an absolute time lose nothing.
    origin = min(stamps)
    rows = [Row(r.line, (ns - origin) / 1e9, r.input_tokens, r.output_tokens)
            for r, ns in zip(rows, stamps, strict=True)]
    parsed = Parsed("azure", str(path), rows)
    _sort(parsed, name)
    return parsed


def _sort(parsed: Parsed, name: str) -> None:
    """Put rows in arrival order, saying so when the file was not (the replay sends by arrival anyway)."""
    late = [b for a, b in zip(parsed.rows, parsed.rows[1:], strict=False) if b.arrival < a.arrival]
    if late:
        parsed.rows.sort(key=lambda r: r.arrival)
        parsed.notes.append(f"{_n(len(late), 'line')} arrived earlier than the line before (first: "
                            f"{name}:{late[0].line}); the requests were put in arrival order")


def parse(fmt: Format, path: str | os.PathLike[str], *, block_size: int = BLOCK_TOKENS) -> Parsed:
    """Read and validate a public trace of format `fmt` (mooncake or azure)."""
    if fmt == "mooncake":
        return parse_mooncake(path, block_size=block_size)
    if fmt == "azure":
        return parse_azure(path)
    raise WorkloadError(f"unknown trace format {fmt!r}; known: {', '.join(FORMATS)}")


def select(rows: Sequence[Row], *, limit: int | None = None, start: float | None = None,
           duration: float | None = None) -> list[Row]:
    """The rows in [start, start + duration), arrivals rebased to start; then the first `limit` of them.

    Without `start` and `duration` arrivals are kept as recorded."""
    if limit is not None and limit <= 0:
        raise WorkloadError(f"--limit must be a number of requests > 0, got {limit}")
    if (start is not None and start < 0) or (duration is not None and duration <= 0):
        raise WorkloadError("the window needs --start >= 0 and --duration > 0 seconds")
    chosen = list(rows)
    if start is not None or duration is not None:
        begin = start or 0.0
        end = math.inf if duration is None else begin + duration
        chosen = [Row(r.line, round(r.arrival - begin, 9), r.input_tokens, r.output_tokens, r.hash_ids)
                  for r in chosen if begin <= r.arrival < end]
    if limit is not None:
        chosen = chosen[:limit]
    if not chosen:
        raise WorkloadError("no request of the trace falls in the window asked for")
    return chosen


@lru_cache(maxsize=4096)
def block_words(hash_id: int, block_size: int = BLOCK_TOKENS) -> tuple[str, ...]:
    """The fixed text of one Mooncake block: its id spelt in words, then words seeded by the id."""
    base = len(WORDS)
    head = tuple(WORDS[(hash_id // base**i) % base] for i in range(_ID_WORDS))
    rng = random.Random(f"mooncake-block-{hash_id}")
    return (head + tuple(rng.choices(WORDS, k=max(block_size - _ID_WORDS, 0))))[:block_size]


def mooncake_prompt(hash_ids: Sequence[int], input_tokens: int, *, uid: int,
                    block_size: int = BLOCK_TOKENS, seed: int = 0) -> str:
    """A prompt of about `input_tokens` tokens: one block per hash id (the last trimmed), then, when
    the ids cover fewer tokens than that, words of the request's own (`Request <uid>:` first)."""
    words: list[str] = []
    for hash_id in hash_ids:
        room = input_tokens - len(words)
        if room <= 0:
            break
        words.extend(block_words(hash_id, block_size)[:room])
    text = " ".join(words)
    rest = input_tokens - len(words)
    if rest > 0:
        tail = make_prompt(rest, random.Random(f"mooncake-tail-{seed}-{uid}"), uid=uid)
        text = f"{text} {tail}" if text else tail
    return text


def entries(parsed: Parsed, rows: Iterable[Row] | None = None, *, block_size: int = BLOCK_TOKENS,
            seed: int = 0) -> Iterator[TraceEntry]:
    """The project's trace entries for `rows` (all of the parsed file by default), built one at a time."""
    for row in parsed.rows if rows is None else rows:
        tags: list[str] = [parsed.format]
        if row.output_tokens == 0:
            tags.append("zero-output")
        if row.input_tokens == 0:
            tags.append("zero-input")
        n_in = max(row.input_tokens, 1)
        if row.hash_ids is not None:
            prompt = mooncake_prompt(row.hash_ids, n_in, uid=row.line, block_size=block_size, seed=seed)
        else:
            prompt = make_prompt(n_in, random.Random(f"azure-{seed}-{row.line}"), uid=row.line)
        yield TraceEntry(prompt=prompt, max_tokens=max(row.output_tokens, 1), arrival=row.arrival,
                         tags=tags, input_tokens=n_in)


def read_public_trace(fmt: Format, path: str | os.PathLike[str], *, limit: int | None = None,
                      start: float | None = None, duration: float | None = None,
                      block_size: int = BLOCK_TOKENS, seed: int = 0) -> list[TraceEntry]:
    """A public trace as the project's trace entries (in memory; `convert` writes large ones line by line)."""
    parsed = parse(fmt, path, block_size=block_size)
    rows = select(parsed.rows, limit=limit, start=start, duration=duration)
    return list(entries(parsed, rows, block_size=block_size, seed=seed))


@dataclass(frozen=True)
class Summary:
    """What a conversion wrote, in figures."""

    format: Format
    requests: int
    span_s: float
    """Seconds from the first written arrival to the last."""
    input_tokens: int
    shared_tokens: int | None
    """Mooncake: prompt tokens in blocks an earlier written request already sent; None for Azure."""
    zero_output: int
    zero_input: int
    notes: tuple[str, ...]
    kept: str = ""
    """How the written requests were chosen from the file ('' for all of them)."""

    @property
    def mean_rate(self) -> float | None:
        """Arrivals a second over the span ((requests - 1) gaps / span); None for a zero span."""
        return (self.requests - 1) / self.span_s if self.span_s > 0 else None

    @property
    def shared_share(self) -> float | None:
        """The share of prompt tokens that repeat a prefix sent earlier (an unbounded cache's hit rate)."""
        if self.shared_tokens is None or not self.input_tokens:
            return None
        return self.shared_tokens / self.input_tokens

    def lines(self, target: str, block_size: int = BLOCK_TOKENS) -> list[str]:
        """The converter's report: what was written, its pace, and what was handled on the way."""
        rate = self.mean_rate
        pace = f"mean rate {rate:.2f} requests/s" if rate is not None else "all at the same instant"
        out = [f"wrote {_n(self.requests, 'request')} to {target}: arrivals span {self.span_s:.3f} s, {pace}"]
        if self.kept:
            out.append(self.kept)
        share = self.shared_share
        if share is not None:
            out.append(f"shared prefix: {share:.1%} of the {self.input_tokens} prompt tokens repeat a "
                       f"prefix sent by an earlier request of the written trace ({self.shared_tokens} "
                       f"tokens in {block_size}-token blocks: what an unbounded prefix cache would hit)")
        if self.zero_output:
            out.append(f"note: {_n(self.zero_output, 'request')} recorded 0 output tokens; sent with "
                       f"max_tokens 1 (the prefill still happens) and tagged zero-output")
        if self.zero_input:
            out.append(f"note: {_n(self.zero_input, 'request')} recorded 0 input tokens; sent with a "
                       f"1-token prompt and tagged zero-input")
        out.extend(f"note: {n}" for n in self.notes)
        return out


def _shared_tokens(rows: Sequence[Row], block_size: int) -> int:
    """Tokens of leading blocks whose id an earlier row sent: Mooncake ids name a whole prefix."""
    seen: set[int] = set()
    shared = 0
    for row in rows:
        ids = row.hash_ids or ()
        for i, hash_id in enumerate(ids):
            if hash_id not in seen:
                break
            shared += max(0, min(block_size, row.input_tokens - i * block_size))
        seen.update(ids)
    return shared


def _kept(total: int, kept: int, limit: int | None, start: float | None, duration: float | None) -> str:
    """How the written rows were chosen, in words ('' when all were)."""
    parts = []
    if start is not None or duration is not None:
        begin = start or 0.0
        end = "the end" if duration is None else f"{begin + duration:g} s"
        parts.append(f"the requests arriving from {begin:g} s to {end} of the trace, arrivals counted from "
                     f"{begin:g} s")
    if limit is not None:
        parts.append(f"the first {limit}")
    return f"kept {kept} of {total} requests: {'; then '.join(parts)}" if parts else ""


def summarise(parsed: Parsed, rows: Sequence[Row], *, block_size: int = BLOCK_TOKENS,
              kept: str = "") -> Summary:
    """The figures of `rows` (what a conversion writes)."""
    arrivals = [r.arrival for r in rows]
    return Summary(format=parsed.format, requests=len(rows), span_s=max(arrivals) - min(arrivals),
                   input_tokens=sum(max(r.input_tokens, 1) for r in rows),
                   shared_tokens=_shared_tokens(rows, block_size) if parsed.format == "mooncake" else None,
                   zero_output=sum(r.output_tokens == 0 for r in rows),
                   zero_input=sum(r.input_tokens == 0 for r in rows), notes=tuple(parsed.notes), kept=kept)


def _json_ready(entry: TraceEntry) -> dict[str, Any]:
    """An entry as its JSONL line's object (fields left unset are left out)."""
    return entry.model_dump(exclude_none=True)


def convert(fmt: Format, source: str | os.PathLike[str], target: str | os.PathLike[str], *,
            limit: int | None = None, start: float | None = None, duration: float | None = None,
            block_size: int = BLOCK_TOKENS, seed: int = 0) -> Summary:
    """Write a public trace as the project's JSONL trace, line by line; the figures of what was written."""
    if block_size <= 0:
        raise WorkloadError(f"--block-size must be a number of tokens > 0, got {block_size}")
    parsed = parse(fmt, source, block_size=block_size)
    rows = select(parsed.rows, limit=limit, start=start, duration=duration)
    out = Path(target)
    try:
        with out.open("w", encoding="utf-8") as fh:
            for entry in entries(parsed, rows, block_size=block_size, seed=seed):
                fh.write(json.dumps(_json_ready(entry)) + "\n")
    except OSError as exc:
        raise WorkloadError(f"{out.name}: cannot write the trace file ({exc.strerror or exc})") from None
    kept = _kept(len(parsed.rows), len(rows), limit, start, duration)
    return summarise(parsed, rows, block_size=block_size, kept=kept)


def main(argv: list[str] | None = None) -> int:
    """Convert a Mooncake or Azure trace into the project's JSONL trace; 0 when written, 2 on bad input."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_inferaccept.load.trace_formats",
        description="Convert a public LLM request trace (Mooncake JSONL or Azure LLM inference CSV) into "
                    "this project's JSONL trace (docs/trace-format.md), ready for the headroom scenario.")
    parser.add_argument("format", choices=FORMATS, help="the input's format")
    parser.add_argument("source", type=Path, help="the public trace file")
    parser.add_argument("target", type=Path, help="the JSONL trace to write")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="keep the first N requests")
    parser.add_argument("--start", type=float, default=None, metavar="S",
                        help="keep requests from S seconds into the trace on; arrivals rebased so S is 0")
    parser.add_argument("--duration", type=float, default=None, metavar="D",
                        help="keep requests arriving within D seconds of --start (0 by default)")
    parser.add_argument("--block-size", type=int, default=BLOCK_TOKENS, metavar="TOKENS",
                        help="Mooncake: tokens per hash id (default 512, the published traces')")
    parser.add_argument("--seed", type=int, default=0, help="seed of the text unique to each request")
    args = parser.parse_args(argv)
    try:
        summary = convert(args.format, args.source, args.target, limit=args.limit, start=args.start,
                          duration=args.duration, block_size=args.block_size, seed=args.seed)
    except WorkloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(summary.lines(str(args.target), args.block_size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
