"""Per-request consistency of a load run's answers: the checks MLPerf's TEST06 makes, on the traffic itself.

Every measured streamed answer is held to what a sound server sends whatever its load, with no
extra request: exactly one finish_reason per choice, and a usage.completion_tokens that agrees with
what was streamed. A server may pack several tokens into one content event: vLLM coalesces the
tokens that piled up while its frontend was busy, speculative decoding accepts several a step, and
SGLang and vLLM can be set to stream every n tokens. So the usage rule is two-sided:

- each streamed event carries at least one token: fewer completion tokens than events is wrong;
- tokens pile up only with time: an answer may carry the run's usual tokens per event interval
  (the median over answers) for every usual interval its stream took, its wait for the first event
  included, `OVER_FACTOR` times over, plus `OVER_SLACK` tokens (an end-of-sequence token counted but
  never streamed, a held-back stop string, a character split over byte tokens). More is more than
  any packing explains.

A server that inflates every answer of a run by the same factor looks like one that packs that many
tokens per event, and is not caught; an undercount always is. Pure: records in, counts out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import pairwise
from statistics import median
from typing import Any, Literal

from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.model import ConsistencyExample, LoadConsistency

OVER_FACTOR = 3.0
"""How many times the run's usual tokens per event interval one answer may carry before its usage is too
high (the pace of one answer's batch varies around the run's)."""
OVER_SLACK = 4
"""Tokens an answer may count beyond that whatever the packing (end-of-sequence token, a stop string
held back and dropped, bytes of one character split over tokens)."""
EXAMPLES = 5
"""Violating answers kept as examples."""
Problem = Literal["double_finish", "usage_under", "usage_over"]


def check_consistency(records: Iterable[RequestRecord], *, load: str = "") -> LoadConsistency:
    """Count the measured answers that broke a per-request rule; `load` names the level (c=8)."""
    checked = [r for r in records if not r.warmup and not r.harness_error and r.kind != "embeddings"
               and r.error in (None, "incomplete")]
    double = [r for r in checked if r.finish_reasons > r.finished_choices]
    usage = [r for r in checked if r.ok and r.completion_tokens is not None
             and r.content_events + r.reasoning_events]
    interval = _usual_interval(usage)
    spans = [(r, _streamed_tokens(r), _intervals(r, interval)) for r in usage]
    per_event = median(_streamed_tokens(r) / (r.content_events + r.reasoning_events) for r in usage) \
        if usage else None
    packing = max(1.0, median(tokens / n for _, tokens, n in spans)) if spans else 1.0
    under = [r for r in usage if _least_tokens(r) > _streamed_tokens(r)]
    over = [r for r, tokens, n in spans if tokens > OVER_FACTOR * packing * n + OVER_SLACK]
    found: list[tuple[int, Problem, RequestRecord]] = [
        *((r.index, "double_finish", r) for r in double), *((r.index, "usage_under", r) for r in under),
        *((r.index, "usage_over", r) for r in over)]
    found.sort(key=lambda x: x[0])
    examples = [ConsistencyExample(index=r.index, problem=problem, finish_reasons=r.finish_reasons,
                                   finished_choices=r.finished_choices, content_events=r.content_events,
                                   reasoning_events=r.reasoning_events, completion_tokens=r.completion_tokens)
                for _, problem, r in found[:EXAMPLES]]
    return LoadConsistency(
        load=load, checked=len(checked), double_finish=len(double),
        no_finish=sum(1 for r in checked if r.finish_reason is None), usage_checked=len(usage),
        usage_under=len(under), usage_over=len(over),
        tokens_per_event=None if per_event is None else round(per_event, 3),
        event_interval_s=None if interval is None else round(interval, 6),
        tokens_per_interval=round(packing, 3) if spans else None,
        over_factor=OVER_FACTOR, over_slack=OVER_SLACK, examples=examples)


def _streamed_tokens(r: RequestRecord) -> int:
    """The completion tokens the stream should have carried: usage less reasoning it kept hidden."""
    assert r.completion_tokens is not None
    return r.completion_tokens - r.hidden_reasoning_tokens


def _least_tokens(r: RequestRecord) -> int:
    """The fewest tokens the streamed events can hold: one each, less one where an event may have
    carried both the end of the reasoning and the start of the content."""
    events = r.content_events + r.reasoning_events
    return events - 1 if r.content_events and r.reasoning_events else events


def _usual_interval(records: list[RequestRecord]) -> float | None:
    """The run's usual gap between content events, in seconds: the median of every gap longer than
    zero (events read together share a timestamp); None without any."""
    gaps = [b - a for r in records for a, b in pairwise(r.content_times) if b > a]
    return median(gaps) if gaps else None


def _intervals(r: RequestRecord, interval: float | None) -> float:
    """How many usual intervals an answer's stream took, at least one per event: the wait from its
    headers (else its send) to the first content event, each gap after it, and one per reasoning event.
    Without timing, its events."""
    times = r.content_times
    if interval is None or not times:
        return float(r.content_events + r.reasoning_events)
    start = r.headers if r.headers is not None else r.send
    n = max(1.0, (times[0] - start) / interval)
    n += sum(max(1.0, (b - a) / interval) for a, b in pairwise(times))
    return n + r.reasoning_events


def load_words(spec: Mapping[str, Any]) -> str:
    """The load a run was under, as a finding names it: 'c=8', '2.5 req/s' or 'trace replay'."""
    concurrency, rate = spec.get("concurrency"), spec.get("rate")
    if isinstance(concurrency, int) and concurrency > 0:
        return f"c={concurrency}"
    if isinstance(rate, (int, float)) and rate > 0:
        return f"{rate:g} req/s"
    return "trace replay" if spec.get("mode") == "replay" or spec.get("replay") else ""


def findings(c: LoadConsistency) -> list[str]:
    """Each broken rule in one sentence naming the level and the count ([] when none was broken)."""
    at = f"at {c.load}, " if c.load else ""
    out = []
    if c.double_finish:
        out.append(f"{at}{c.double_finish} of {c.checked} answers carried two or more finish_reason values "
                   f"for one choice{_first(c, 'double_finish')}")
    if c.usage_under:
        out.append(f"{at}{c.usage_under} of {c.usage_checked} answers reported usage.completion_tokens below "
                   f"the events they streamed (each event carries at least one token)"
                   f"{_first(c, 'usage_under')}")
    if c.usage_over:
        packing = c.tokens_per_interval if c.tokens_per_interval is not None else 1
        out.append(f"{at}{c.usage_over} of {c.usage_checked} answers reported usage.completion_tokens beyond "
                   f"what their stream's length explains ({c.over_factor:g} × the run's {packing:g} "
                   f"tokens per usual event interval, + {c.over_slack}){_first(c, 'usage_over')}")
    return out


def _first(c: LoadConsistency, problem: str) -> str:
    """The first example of a problem, in words: ' (request 17: 2 finish_reason values, ...)'."""
    ex = next((e for e in c.examples if e.problem == problem), None)
    if ex is None:
        return ""
    if problem == "double_finish":
        choices = f"{ex.finished_choices} choice{'' if ex.finished_choices == 1 else 's'}"
        return f" (request {ex.index}: {ex.finish_reasons} finish_reason values for {choices})"
    events = ex.content_events + ex.reasoning_events
    return f" (request {ex.index}: completion_tokens {ex.completion_tokens}, {events} events streamed)"
