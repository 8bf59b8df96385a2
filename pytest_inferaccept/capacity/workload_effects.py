"""How the workload itself moves latency: prompt and answer length, long prompts beside short ones,
a shared prefix, and conversations that resend their history.

Four informational scenarios on the load engine, each returning a `CapacityResult`:

- `lengths`: one bounded closed-loop step per input length bucket (short, medium, long, very long,
  capped by the context window) and per output length bucket;
- `interference`: short prompts' TTFT alone, then with a share of long prompts mixed in;
- `prefix_cache`: the same requests with one shared long prefix and with unique prompts, beside
  the server's own prefix-cache counters;
- `multi_turn`: conversations whose every turn resends the history, TTFT per turn index.

The workload classes they use (`MixedWorkload`, `ConversationWorkload`) follow the engine's
Workload protocol and may be used on their own. Nothing here imports pytest.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pytest_inferaccept.capacity.sampler import Sampler
from pytest_inferaccept.capacity.scenarios import CapacityResult, Measure, step_row
from pytest_inferaccept.load.workloads import (
    WORDS,
    Fixed,
    SyntheticWorkload,
    Uniform,
    WorkItem,
    Workload,
    bucket,
)
from pytest_inferaccept.stats.percentiles import quantile

if TYPE_CHECKING:
    from pytest_inferaccept.load.records import RequestRecord
    from pytest_inferaccept.run.load import LoadResult

Say = Callable[[str], None]
Direction = Literal["input", "output"]

BUCKET_BOUNDS: dict[str, tuple[int, int | None]] = {
    "short": (1, 127),
    "medium": (128, 1023),
    "long": (1024, 8192),
    "very_long": (8193, None),
}
"""Token bounds of each length bucket (as `load.workloads.bucket` draws them)."""

INPUT_LENGTHS: dict[str, tuple[int, int]] = {
    "short": (32, 96),
    "medium": (256, 768),
    "long": (1536, 6144),
    "very_long": (12288, 24576),
}
"""Representative prompt lengths inside each bucket (drawn uniformly), before the window caps them."""

OUTPUT_LENGTHS: dict[str, tuple[int, int]] = {
    "short": (16, 64),
    "medium": (256, 512),
    "long": (1024, 1536),
    "very_long": (9000, 12000),
}
"""Representative max_tokens inside each bucket (drawn uniformly), before the window caps them."""

PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"


def _quiet(_: str) -> None:
    """The default `say`: print nothing."""


# ---------------------------------------------------------------------------------------------
# Workloads


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


# ---------------------------------------------------------------------------------------------
# Shared helpers


def fresh_seed(seed: int | None) -> int:
    """`seed`, else a new one: prompts from an earlier run must not be cache hits in this one."""
    return seed if seed is not None else random.SystemRandom().randrange(1, 2**31)


def usable_input(window: int | None, output: int) -> int | None:
    """Prompt tokens that fit beside `output` answer tokens, leaving room for the chat template."""
    if window is None:
        return None
    return window - output - max(64, window // 32)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _measured_ok(result: LoadResult, tag: str | None = None) -> list[RequestRecord]:
    return [r for r in result.records if not r.warmup and r.ok and (tag is None or tag in r.tags)]


def _pct(values: Sequence[float | int | None], p: float) -> float | None:
    data = sorted(float(v) for v in values if v is not None)
    return quantile(data, p) if data else None


def _ttft(records: Sequence[RequestRecord], p: float) -> float | None:
    return _pct([r.ttft for r in records], p)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _statuses(row: dict[str, Any]) -> str:
    """' (HTTP 400 ×16)' for a step's failed answers by status, or ''."""
    counts = row.get("error_statuses") or {}
    return f" ({', '.join(f'HTTP {s} ×{n}' for s, n in sorted(counts.items()))})" if counts else ""


def _bound(rows: Sequence[dict[str, Any]]) -> list[str]:
    """'step: reason' for every step the client limited (as --client-check strict counts it)."""
    return [f"{r.get('label') or r.get('step')}: {why}" for r in rows for why in r.get("client_bound") or []]


def prefix_counters(result: LoadResult) -> dict[str, Any]:
    """The server's prefix-cache counters over one step's measured window, never invented.

    The engine reads /metrics right before and right after the measured window of each step; the
    hit rate is hits delta / queries delta (vLLM counts both in prompt tokens).
    """
    metrics = result.run.server_metrics
    if not metrics:
        return {"exposed": False, "text": "not exposed (/metrics was not readable)"}
    counters = metrics.get("counters") or {}
    if PREFIX_QUERIES not in counters or PREFIX_HITS not in counters:
        return {"exposed": False, "text": f"not exposed (/metrics has no {PREFIX_QUERIES} / {PREFIX_HITS})"}
    queries, hits = counters[PREFIX_QUERIES], counters[PREFIX_HITS]
    if queries is None or hits is None:
        return {"exposed": True, "queries": None, "hits": None, "hit_rate": None,
                "text": "the counters went backwards during the step (did the server restart?)"}
    rate = hits / queries if queries > 0 else None
    text = (f"hit rate {rate:.0%} ({hits:g} of {queries:g} prompt tokens)" if rate is not None
            else "no prefix-cache lookups counted during the step")
    return {"exposed": True, "queries": queries, "hits": hits, "hit_rate": rate, "text": text}


def _status_from(out: CapacityResult, rows: Sequence[dict[str, Any]]) -> None:
    """invalid when the client limited a step (strict client check)."""
    bound = _bound(rows)
    if bound:
        out.status = "invalid"
        out.reasons.append("the client was the bottleneck, so the step says nothing about the server: "
                           + "; ".join(bound))


# ---------------------------------------------------------------------------------------------
# Length effects


def bucket_range(name: str, direction: Direction, cap: int | None) -> tuple[int, int] | str:
    """The (lo, hi) tokens to draw for a bucket, capped at `cap`; or why it is not run."""
    lo, hi = (INPUT_LENGTHS if direction == "input" else OUTPUT_LENGTHS)[name]
    floor = BUCKET_BOUNDS[name][0]
    if cap is None:
        return (lo, hi)
    if cap < floor:
        return "beyond"
    hi = min(hi, cap)
    return (max(floor, min(lo, hi)), hi)


def _length_row(result: LoadResult, direction: Direction, name: str, span: tuple[int, int],
                peaks: dict[str, float]) -> dict[str, Any]:
    row = step_row((span[0] + span[1]) // 2, result, peaks)
    ok = _measured_ok(result)
    prompt = _pct([r.prompt_tokens for r in ok], 0.5)
    output = _pct([r.completion_tokens for r in ok], 0.5)
    counted = prompt if direction == "input" else output
    realised = bucket(round(counted)) if counted is not None else None
    row.update({
        "direction": direction, "bucket": name, "asked_tokens": list(span), "not_run": None,
        "prompt_tokens_p50": prompt, "output_tokens_p50": output,
        "realised_bucket": realised, "confirmed": None if realised is None else realised == name,
        "succeeded": len(ok),
    })
    return row


def _not_run_row(direction: Direction, name: str, why: str) -> dict[str, Any]:
    return {"direction": direction, "bucket": name, "level": BUCKET_BOUNDS[name][0], "label": None,
            "not_run": why, "measured": 0, "failed": 0, "succeeded": 0, "asked_tokens": None,
            "prompt_tokens_p50": None, "output_tokens_p50": None, "realised_bucket": None, "confirmed": None,
            "throughput_tokens_per_s": None, "request_rate_per_s": None, "error_rate": None,
            "client_bound": [], "client_warnings": [], **{
                f"{m}_{s}": None for m in ("ttft", "e2e", "itl") for s in ("p50", "p95", "p99")}}


def lengths(
    measure: Measure,
    sampler: Sampler,
    *,
    context_window: int | None,
    input_buckets: Sequence[str] = ("short", "medium", "long", "very_long"),
    output_buckets: Sequence[str] = ("short", "medium", "long"),
    requests: int = 16,
    concurrency: int = 2,
    duration: float,
    short_input: int = 64,
    short_output: int = 32,
    seed: int | None = None,
    label: str,
    say: Say = _quiet,
) -> CapacityResult:
    """Latency per input length bucket (answers of `short_output` tokens) and per output length
    bucket (prompts of `short_input` tokens): one bounded closed-loop step per bucket."""
    for name in (*input_buckets, *output_buckets):
        if name not in BUCKET_BOUNDS:
            raise ValueError(f"unknown length bucket {name!r}; use {', '.join(BUCKET_BOUNDS)}")
    base = fresh_seed(seed)
    rows: list[dict[str, Any]] = []
    plan: list[tuple[Direction, str, tuple[int, int] | str]] = []
    in_cap = usable_input(context_window, short_output)
    out_cap = usable_input(context_window, short_input)
    for name in input_buckets:
        span = bucket_range(name, "input", in_cap)
        if context_window is None and name == "very_long":
            span = "unknown"
        plan.append(("input", name, span))
    for name in output_buckets:
        span = bucket_range(name, "output", out_cap)
        if context_window is None and name == "very_long":
            span = "unknown"
        plan.append(("output", name, span))
    with sampler:
        for i, (direction, name, span) in enumerate(plan):
            if isinstance(span, str):
                why = (f"not run: beyond the context window ({context_window})" if span == "beyond"
                       else "not run: the context window is unknown (give --context-window)")
                rows.append(_not_run_row(direction, name, why))
                say(f"inferaccept: length {direction} {name}: {why}")
                continue
            n_in: Fixed | Uniform = Uniform(*span) if direction == "input" else Fixed(short_input)
            n_out: Fixed | Uniform = Uniform(*span) if direction == "output" else Fixed(short_output)
            t0 = sampler.now()
            result = measure(
                f"{direction} {name}",
                concurrency=concurrency,
                requests=max(requests, 2 * concurrency),
                duration=duration,
                warmup=concurrency,
                workload=SyntheticWorkload(input=n_in, output=n_out, seed=base + i),
            )
            row = _length_row(result, direction, name, span, sampler.peaks(t0, sampler.now()))
            rows.append(row)
            size = row["prompt_tokens_p50"] if direction == "input" else row["output_tokens_p50"]
            say(
                f"inferaccept: length {direction} {name} ({span[0]}-{span[1]} tokens asked, "
                f"{'n/a' if size is None else f'{size:.0f}'} counted): {row['succeeded']} answered, "
                f"{row['failed']} failed, TTFT p50 {_ms(row['ttft_p50'])}, e2e p95 {_ms(row['e2e_p95'])}"
            )
    out = CapacityResult(
        kind="length",
        label=label,
        status="pass",
        headline="",
        steps=rows,
        telemetry=sampler.to_json(),
        params={"context_window": context_window, "input_buckets": list(input_buckets),
                "output_buckets": list(output_buckets), "requests_per_bucket": requests,
                "concurrency": concurrency, "max_seconds_per_bucket": duration,
                "input_tokens_for_output_buckets": short_input,
                "output_tokens_for_input_buckets": short_output, "seed": base},
    )
    run = [r for r in rows if r["not_run"] is None]
    for r in run:
        if r["confirmed"] is False:
            counted = "prompt" if r["direction"] == "input" else "output"
            size = r["prompt_tokens_p50"] if r["direction"] == "input" else r["output_tokens_p50"]
            lo, hi = r["asked_tokens"]
            out.notes.append(
                f"{r['direction']} {r['bucket']}: {lo}-{hi} tokens asked, "
                f"the server counted {size:.0f} {counted} tokens (p50), in the {r['realised_bucket']} bucket"
                + (": it ended its answers before max_tokens" if r["direction"] == "output" else "")
            )
        elif r["confirmed"] is None and r["succeeded"]:
            out.notes.append(f"{r['direction']} {r['bucket']}: the server reported no usage; the bucket "
                             "is the one asked for, not confirmed")
    out.notes += [f"{r['direction']} {r['bucket']}: {r['not_run']}" for r in rows if r["not_run"]]
    out.notes += [f"not measured: {a}" for a in sampler.absent()]
    by_in = {r["bucket"]: r for r in run if r["direction"] == "input"}
    by_out = {r["bucket"]: r for r in run if r["direction"] == "output"}
    out.findings = {
        "ttft_p50_by_input": {k: r["ttft_p50"] for k, r in by_in.items()},
        "ttft_p95_by_input": {k: r["ttft_p95"] for k, r in by_in.items()},
        "e2e_p95_by_output": {k: r["e2e_p95"] for k, r in by_out.items()},
        "itl_p50_by_output": {k: r["itl_p50"] for k, r in by_out.items()},
        "not_run": {f"{r['direction']} {r['bucket']}": r["not_run"] for r in rows if r["not_run"]},
        "context_window": context_window,
    }
    failed = [r for r in run if not r["succeeded"]]
    _status_from(out, run)
    if out.status == "pass" and not run:
        out.status = "invalid"
        out.reasons.append("no length bucket could be run")
    elif out.status == "pass" and len(failed) == len(run):
        out.status = "fail"
        out.reasons.append("every length bucket failed: " + "; ".join(
            f"{r['direction']} {r['bucket']}: {r['failed']} failed" for r in failed))
    for r in run:
        if r["failed"]:
            out.notes.append(
                f"{r['direction']} {r['bucket']}: {r['failed']} of {r['measured']} failed{_statuses(r)}"
                + ("; the context window is unknown: give --context-window to keep the buckets inside it"
                   if context_window is None else ""))
    parts = []
    if by_in:
        parts.append("TTFT p50 by input length: " + ", ".join(
            _bucket_text(k, r, "ttft_p50") for k, r in by_in.items()))
    if by_out:
        parts.append("e2e p95 by output length: " + ", ".join(
            _bucket_text(k, r, "e2e_p95") for k, r in by_out.items()))
    parts += [f"{r['direction']} {r['bucket']} {r['not_run']}" for r in rows if r["not_run"]]
    out.headline = "; ".join(parts) or "no length bucket was run"
    return out


def _bucket_text(name: str, row: dict[str, Any], key: str) -> str:
    """'long 870 ms', 'long 870 ms (3 of 16 failed)' or 'long failed (HTTP 400 ×16)'."""
    if not row["succeeded"]:
        return f"{name} failed{_statuses(row)}"
    failed = f" ({row['failed']} of {row['measured']} failed)" if row["failed"] else ""
    return f"{name} {_ms(row[key])}{failed}"


# ---------------------------------------------------------------------------------------------
# Interference


def interference(
    measure: Measure,
    sampler: Sampler,
    *,
    concurrency: int = 4,
    requests: int = 32,
    duration: float,
    short_tokens: int = 64,
    long_tokens: int,
    long_share: float = 0.25,
    output_tokens: int = 32,
    threshold: float = 2.0,
    max_ratio: float | None = None,
    seed: int | None = None,
    label: str,
    say: Say = _quiet,
) -> CapacityResult:
    """Short prompts' TTFT on a closed loop alone, then with `long_share` of long prompts mixed in.

    The p95 ratio (mixed / alone) comes with an exact bootstrap interval (`stats.quantile_ratio`):
    with `max_ratio` the scenario fails only when the interval's low end is above it, passes when
    its high end is at or below it, and is INVALID ("not enough data") when it straddles it.
    """
    from pytest_inferaccept.stats.quantile_ratio import quantile_ratio

    base = fresh_seed(seed)
    long_wl = SyntheticWorkload(input=Fixed(long_tokens), output=Fixed(output_tokens), seed=base + 1)
    steps = [
        ("alone", 0.0, requests),
        ("mixed", long_share, math.ceil(requests / (1.0 - long_share))),
    ]
    rows: list[dict[str, Any]] = []
    short_ttfts: list[list[float]] = []
    with sampler:
        for i, (name, share, n) in enumerate(steps):
            # Each step its own prompts: the mixed step must not be served from the alone step's cache.
            short_wl = SyntheticWorkload(input=Fixed(short_tokens), output=Fixed(output_tokens),
                                         seed=base + 2 + i)
            t0 = sampler.now()
            result = measure(
                f"interference {name}",
                concurrency=concurrency,
                requests=max(n, 2 * concurrency),
                duration=duration,
                warmup=concurrency,
                workload=MixedWorkload(short=short_wl, long=long_wl, long_share=share),
            )
            row = step_row(concurrency, result, sampler.peaks(t0, sampler.now()))
            short = _measured_ok(result, "short")
            short_ttfts.append([r.ttft for r in short if r.ttft is not None])
            longs = [r for r in result.records if not r.warmup and "long" in r.tags]
            row.update({
                "step": name, "long_share": share, "short_answered": len(short),
                "short_ttft_p50": _ttft(short, 0.5), "short_ttft_p95": _ttft(short, 0.95),
                "long_sent": len(longs), "long_failed": sum(1 for r in longs if not r.ok),
                "long_ttft_p50": _ttft([r for r in longs if r.ok], 0.5),
                "long_prompt_tokens_p50": _pct([r.prompt_tokens for r in longs if r.ok], 0.5),
            })
            rows.append(row)
            say(
                f"inferaccept: interference {name} (c={concurrency}, {share:.0%} long): "
                f"short TTFT p50 {_ms(row['short_ttft_p50'])}, p95 {_ms(row['short_ttft_p95'])}"
                + (f"; long TTFT p50 {_ms(row['long_ttft_p50'])}" if longs else "")
            )
    alone, mixed = rows
    r50 = _ratio(mixed["short_ttft_p50"], alone["short_ttft_p50"])
    r95 = _ratio(mixed["short_ttft_p95"], alone["short_ttft_p95"])
    interval = quantile_ratio(short_ttfts[1], short_ttfts[0], p=0.95, confidence=0.95)
    lo, hi = interval.low, interval.high
    between = (f"95% interval ×{lo:.2f}–×{hi:.2f}" if lo is not None and hi is not None
               else f"95% interval from ×{lo:.2f}, no upper end" if lo is not None else "no interval")
    out = CapacityResult(
        kind="interference",
        label=label,
        status="pass",
        headline="",
        steps=rows,
        telemetry=sampler.to_json(),
        params={"concurrency": concurrency, "requests_alone": requests, "short_tokens": short_tokens,
                "long_tokens": long_tokens, "long_share": long_share, "output_tokens": output_tokens,
                "threshold": threshold, "max_ratio": max_ratio, "max_seconds_per_step": duration,
                "seed": base},
    )
    out.findings = {
        "short_ttft_p50_alone": alone["short_ttft_p50"], "short_ttft_p95_alone": alone["short_ttft_p95"],
        "short_ttft_p50_mixed": mixed["short_ttft_p50"], "short_ttft_p95_mixed": mixed["short_ttft_p95"],
        "ratio_p50": r50, "ratio_p95": r95, "ratio_p95_low": lo, "ratio_p95_high": hi,
        "ratio_p95_interval": interval.to_json(),
    }
    if mixed["long_failed"]:
        out.notes.append(
            f"{mixed['long_failed']} of {mixed['long_sent']} long prompts ({long_tokens} tokens) failed: the "
            "mix did not load the server as asked" + _statuses(mixed))
    out.notes += [f"not measured: {a}" for a in sampler.absent()]
    mix = f"{long_share:.0%} long prompts ({long_tokens} tokens)"
    if r95 is not None and r95 > threshold:
        text = f"long prompts delay short ones: TTFT p95 ×{r95:.1f}"
        out.explanations.append({"kind": "interference", "level": concurrency, "text": text,
                                 "evidence": {"ratio_p95": r95, "ratio_p50": r50, "threshold": threshold}})
    _status_from(out, rows)
    if out.status == "pass" and mixed["long_sent"] and mixed["long_failed"] == mixed["long_sent"]:
        out.status = "invalid"
        out.reasons.append(
            f"every long prompt ({long_tokens} tokens) failed{_statuses(mixed)}, so the mix never loaded the "
            "server: lower long_tokens or give --context-window")
    elif out.status == "pass" and (r95 is None or r50 is None):
        out.status = "fail"
        empty = [r["step"] for r in rows if not r["short_answered"]]
        out.reasons.append(f"no short request was answered in the {' and '.join(empty)} step"
                           + "".join(_statuses(r) for r in rows if not r["short_answered"]))
    elif out.status == "pass" and max_ratio is not None and r95 is not None:
        judged = interval.judge(max_ratio)
        measured = (f"({_ms(alone['short_ttft_p95'])} alone over {interval.n_denominator} short requests, "
                    f"{_ms(mixed['short_ttft_p95'])} with {mix} over {interval.n_numerator})")
        if judged == "fail":
            out.status = "fail"
            out.reasons.append(f"long prompts raise short prompts' TTFT p95 ×{r95:.1f} ({between}), all of "
                               f"it above the ×{max_ratio:g} allowed {measured}")
        elif judged == "not_enough_data":
            out.status = "invalid"
            out.reasons.append(f"not enough data: short prompts' TTFT p95 ratio ×{r95:.2f} ({between}) "
                               f"straddles the ×{max_ratio:g} allowed {measured}; more requests per step "
                               f"(now {requests}) narrow the interval")
    if r95 is None or r50 is None:
        out.headline = f"short prompts' TTFT could not be compared alone and with {mix} at c={concurrency}"
    else:
        verdict = (f"long prompts delay short ones: TTFT p95 ×{r95:.1f} ({between})" if r95 > threshold
                   else f"TTFT p95 ×{r95:.1f} ({between}): below the ×{threshold:g} that counts as "
                        "interference")
        out.headline = (
            f"short prompts' TTFT p95 {_ms(alone['short_ttft_p95'])} alone, {_ms(mixed['short_ttft_p95'])} "
            f"with {mix} at c={concurrency} (p50 {_ms(alone['short_ttft_p50'])} → "
            f"{_ms(mixed['short_ttft_p50'])}, ×{r50:.1f}); {verdict}"
        )
    if mixed["long_sent"] and mixed["long_failed"] == mixed["long_sent"]:
        out.headline += f"; but every long prompt failed{_statuses(mixed)}"
    return out


# ---------------------------------------------------------------------------------------------
# Prefix cache


def prefix_cache(
    measure: Measure,
    sampler: Sampler,
    *,
    concurrency: int = 2,
    requests: int = 24,
    duration: float,
    prefix_tokens: int,
    suffix_tokens: int = 64,
    output_tokens: int = 16,
    seed: int | None = None,
    label: str,
    say: Say = _quiet,
) -> CapacityResult:
    """The same number of requests with unique prompts, then with one shared `prefix_tokens` prefix.

    Both steps send prompts of the same length; in the shared one every prompt begins with the same
    text (then `Request <uid>:` and its own words), in the unique one the first words differ.
    """
    base = fresh_seed(seed)
    total = prefix_tokens + suffix_tokens
    steps = [("unique", 0), ("shared", prefix_tokens)]
    rows: list[dict[str, Any]] = []
    with sampler:
        for i, (name, shared) in enumerate(steps):
            t0 = sampler.now()
            result = measure(
                f"prefix {name}",
                concurrency=concurrency,
                requests=max(requests, 2 * concurrency),
                duration=duration,
                warmup=concurrency,
                workload=SyntheticWorkload(input=Fixed(total), output=Fixed(output_tokens), seed=base + i,
                                           shared_prefix=shared),
            )
            row = step_row(concurrency, result, sampler.peaks(t0, sampler.now()))
            cache = prefix_counters(result)
            row.update({"step": name, "shared_prefix_tokens": shared, "prompt_tokens": total,
                        "prompt_tokens_p50": _pct([r.prompt_tokens for r in _measured_ok(result)], 0.5),
                        "succeeded": len(_measured_ok(result)), "prefix_cache": cache})
            rows.append(row)
            say(f"inferaccept: prefix {name}: TTFT p50 {_ms(row['ttft_p50'])}, p95 {_ms(row['ttft_p95'])}; "
                f"prefix cache {cache['text']}")
    unique, shared_row = rows
    r50 = _ratio(shared_row["ttft_p50"], unique["ttft_p50"])
    r95 = _ratio(shared_row["ttft_p95"], unique["ttft_p95"])
    out = CapacityResult(
        kind="prefix",
        label=label,
        status="pass",
        headline="",
        steps=rows,
        telemetry=sampler.to_json(),
        params={"concurrency": concurrency, "requests_per_step": requests, "prefix_tokens": prefix_tokens,
                "suffix_tokens": suffix_tokens, "output_tokens": output_tokens,
                "max_seconds_per_step": duration, "seed": base},
    )
    exposed = unique["prefix_cache"]["exposed"] and shared_row["prefix_cache"]["exposed"]
    out.findings = {
        "ttft_p50_unique": unique["ttft_p50"], "ttft_p50_shared": shared_row["ttft_p50"],
        "ttft_p95_unique": unique["ttft_p95"], "ttft_p95_shared": shared_row["ttft_p95"],
        "ratio_p50": r50, "ratio_p95": r95,
        "hit_rate_unique": unique["prefix_cache"].get("hit_rate"),
        "hit_rate_shared": shared_row["prefix_cache"].get("hit_rate"),
        "counters": "exposed" if exposed else "not exposed",
    }
    out.notes.append("prefix-cache counters: read by the engine from /metrics right before and after each "
                     f"step's measured window ({PREFIX_QUERIES}, {PREFIX_HITS}); warm-up excluded")
    out.notes += [f"not measured: {a}" for a in sampler.absent()]
    if r50 is not None and r50 < 0.8:
        out.explanations.append({
            "kind": "prefix_cache", "level": concurrency,
            "text": f"a shared {prefix_tokens}-token prefix lowers TTFT p50 ×{r50:.2f}",
            "evidence": {"ratio_p50": r50, "ratio_p95": r95,
                         "hit_rate_shared": out.findings["hit_rate_shared"]}})
    _status_from(out, rows)
    empty = [r["step"] for r in rows if not r["succeeded"]]
    if out.status == "pass" and empty:
        out.status = "fail"
        out.reasons.append(f"no request was answered in the {' and '.join(empty)} step"
                           + "".join(_statuses(r) for r in rows if not r["succeeded"]))
    if r50 is None or r95 is None:
        out.headline = (f"TTFT with a shared {prefix_tokens}-token prefix could not be compared with "
                        "unique prompts")
    else:
        out.headline = (
            f"with a shared {prefix_tokens}-token prefix TTFT p50 is {_ms(shared_row['ttft_p50'])} vs "
            f"{_ms(unique['ttft_p50'])} for unique prompts of {total} tokens (×{r50:.2f}; p95 ×{r95:.2f})"
        )
    hit_shared, hit_unique = out.findings["hit_rate_shared"], out.findings["hit_rate_unique"]
    if exposed and hit_shared is not None and hit_unique is not None:
        out.headline += f"; prefix-cache hit rate {hit_shared:.0%} shared vs {hit_unique:.0%} unique"
    elif exposed:
        out.headline += (f"; prefix cache: {shared_row['prefix_cache']['text']} (shared), "
                         f"{unique['prefix_cache']['text']} (unique)")
    else:
        out.headline += "; prefix-cache counters not exposed"
    return out


# ---------------------------------------------------------------------------------------------
# Multi-turn conversations


def _slope_per_1k(rows: Sequence[dict[str, Any]]) -> float | None:
    """Least-squares seconds of TTFT p50 per 1000 prompt tokens over the turns (usage, else asked)."""
    points = [(float(r["prompt_tokens_asked"] if r["prompt_tokens_p50"] is None else r["prompt_tokens_p50"]),
               float(r["ttft_p50"])) for r in rows if r["ttft_p50"] is not None]
    if len(points) < 2 or len({x for x, _ in points}) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return 1000 * sum((x - mx) * (y - my) for x, y in points) / sxx


def multi_turn(
    measure: Measure,
    sampler: Sampler,
    *,
    conversations: int = 8,
    turns: int = 6,
    concurrency: int = 8,
    user_tokens: int = 96,
    answer_tokens: int = 64,
    context_window: int | None,
    duration: float,
    seed: int | None = None,
    label: str,
    say: Say = _quiet,
) -> CapacityResult:
    """`conversations` chats of `turns` turns at `concurrency`, each turn resending the history:
    TTFT per turn index, and whether it grows with the history."""
    base = fresh_seed(seed)
    notes: list[str] = []
    if concurrency > conversations:
        notes.append(f"concurrency {concurrency} lowered to {conversations}, the number of conversations "
                     "(a conversation's turns go out one after the other)")
        concurrency = conversations
    cap = usable_input(context_window, answer_tokens)
    asked_turns = turns
    while cap is not None and turns > 1 and (
            turns * user_tokens + (turns - 1) * answer_tokens + 8 * turns > cap):
        turns -= 1
    if turns < asked_turns:
        notes.append(f"turns capped at {turns} of {asked_turns}: the history must fit the context window "
                     f"({context_window})")
    workload = ConversationWorkload(conversations=conversations, turns=turns, user_tokens=user_tokens,
                                    answer_tokens=answer_tokens, max_tokens=answer_tokens, seed=base)
    with sampler:
        t0 = sampler.now()
        # No warm-up (it would send the first turns twice, and the second time from the cache); one
        # worker process, so the positions go out in one order.
        result = measure("multi-turn", concurrency=concurrency, requests=conversations * turns,
                         duration=duration, warmup=0, workers=1, workload=workload)
        peaks = sampler.peaks(t0, sampler.now())
    overall = step_row(concurrency, result, peaks)
    rows: list[dict[str, Any]] = []
    for t in range(turns):
        tag = f"turn={t + 1}"
        sent = [r for r in result.records if not r.warmup and tag in r.tags]
        ok = [r for r in sent if r.ok]
        rows.append({
            "level": t + 1, "turn": t + 1, "label": overall["label"], "sent": len(sent), "succeeded": len(ok),
            "failed": len(sent) - len(ok), "ttft_p50": _ttft(ok, 0.5), "ttft_p95": _ttft(ok, 0.95),
            "e2e_p50": _pct([r.e2e for r in ok], 0.5),
            "prompt_tokens_p50": _pct([r.prompt_tokens for r in ok], 0.5),
            "prompt_tokens_asked": workload.prompt_tokens(t),
            "client_bound": overall["client_bound"] if t == 0 else [],
        })
    cache = prefix_counters(result)
    measured = [r for r in rows if r["ttft_p50"] is not None]
    first, last = (measured[0], measured[-1]) if measured else (None, None)
    growth = _ratio(last["ttft_p50"], first["ttft_p50"]) if first and last and last is not first else None
    out = CapacityResult(
        kind="multi_turn",
        label=label,
        status="pass",
        headline="",
        steps=rows,
        telemetry=sampler.to_json(),
        params={"conversations": conversations, "turns": turns, "turns_asked": asked_turns,
                "concurrency": concurrency, "user_tokens": user_tokens, "answer_tokens": answer_tokens,
                "context_window": context_window, "max_seconds": duration, "seed": base},
    )
    out.findings = {"ttft_p50_by_turn": {r["turn"]: r["ttft_p50"] for r in rows}, "growth_p50": growth,
                    "ttft_s_per_1k_prompt_tokens": _slope_per_1k(measured), "prefix_cache": cache,
                    "overall": overall}
    out.notes = [
        *notes,
        f"each earlier answer is resent as a fixed stand-in of {answer_tokens} words, not the server's "
        "real answer: the engine builds every request before the previous turn's answer is known",
        "turn-major order: every conversation's turn t goes out before any conversation's turn t+1",
    ]
    unreached = [r["turn"] for r in rows if not r["sent"]]
    if unreached:
        out.notes.append(f"turns {unreached[0]}-{unreached[-1]} were not reached within {duration:g} s")
    out.notes += [f"not measured: {a}" for a in sampler.absent()]
    _status_from(out, [overall])
    if out.status == "pass" and not measured:
        out.status = "fail"
        out.reasons.append("no turn was answered" + _statuses(overall))
    if first is None or last is None:
        out.headline = "no turn was answered"
    elif growth is None:
        out.headline = f"only turn {first['turn']} was answered: TTFT p50 {_ms(first['ttft_p50'])}"
    else:
        size = "prompt_tokens_p50" if first["prompt_tokens_p50"] is not None else "prompt_tokens_asked"
        change = last["ttft_p50"] - first["ttft_p50"]
        how = ("grows with the history" if growth >= 1.5 and change > 0.01 else
               "falls as the history grows" if growth <= 1 / 1.5 and change < -0.01 else
               "stays about flat as the history grows")
        out.headline = (
            f"TTFT p50 {how}: {_ms(first['ttft_p50'])} at turn {first['turn']} ({first[size]:.0f} prompt "
            f"tokens) → {_ms(last['ttft_p50'])} at turn {last['turn']} ({last[size]:.0f}), ×{growth:.1f}; "
            f"{conversations} conversations at c={concurrency}; prefix cache {cache['text']}"
        )
    if unreached and first is not None:
        out.headline += f"; turns {unreached[0]}-{unreached[-1]} not reached within {duration:g} s"
    return out
