"""What the workload-effect scenarios share: seeds, room in the context window, figures over answers.

The scenarios (`lengths`, `interference`, `prefix_cache`, `multi_turn`) each show how the
workload itself moves latency; they are informational, and the client's limits make any of them
say nothing about the server (`client_limited`). Nothing here imports pytest.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_inferaccept.model import CapacityStep, InterferenceStep, PrefixCounters, PrefixStep
from pytest_inferaccept.stats.percentiles import quantile

if TYPE_CHECKING:
    from pytest_inferaccept.load.records import RequestRecord
    from pytest_inferaccept.run.load import LoadResult

PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"


def fresh_seed(seed: int | None) -> int:
    """`seed`, else a new one: prompts from an earlier run must not be cache hits in this one."""
    return seed if seed is not None else random.SystemRandom().randrange(1, 2**31)


def usable_input(window: int | None, output: int) -> int | None:
    """Prompt tokens that fit beside `output` answer tokens, leaving room for the chat template."""
    if window is None:
        return None
    return window - output - max(64, window // 32)


def measured_ok(result: LoadResult, tag: str | None = None) -> list[RequestRecord]:
    """The step's measured requests that succeeded (those tagged `tag` when given)."""
    return [r for r in result.records if not r.warmup and r.ok and (tag is None or tag in r.tags)]


def pct(values: Sequence[float | int | None], p: float) -> float | None:
    """The `p` quantile of the values given (None without any)."""
    data = sorted(float(v) for v in values if v is not None)
    return quantile(data, p) if data else None


def ttft(records: Sequence[RequestRecord], p: float) -> float | None:
    """The `p` quantile of the records' TTFT."""
    return pct([r.ttft for r in records], p)


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing (or b is zero)."""
    return a / b if a is not None and b else None


def client_limited(rows: Sequence[CapacityStep]) -> str:
    """Why the client limited the steps (as --client-check strict counts it), or ''."""
    bound = [f"{r.label or (r.step if isinstance(r, (InterferenceStep, PrefixStep)) else None)}: {why}"
             for r in rows for why in r.client_bound]
    if not bound:
        return ""
    return "the client was the bottleneck, so the step says nothing about the server: " + "; ".join(bound)


def prefix_counters(result: LoadResult) -> PrefixCounters:
    """The server's prefix-cache counters over one step's measured window, never invented.

    The engine reads /metrics right before and right after the measured window of each step; the
    hit rate is hits delta / queries delta (vLLM counts both in prompt tokens).
    """
    metrics = result.run.server_metrics
    if not metrics:
        return PrefixCounters(exposed=False, text="not exposed (/metrics was not readable)")
    counters = metrics.get("counters") or {}
    if PREFIX_QUERIES not in counters or PREFIX_HITS not in counters:
        return PrefixCounters(exposed=False,
                              text=f"not exposed (/metrics has no {PREFIX_QUERIES} / {PREFIX_HITS})")
    queries, hits = counters[PREFIX_QUERIES], counters[PREFIX_HITS]
    if queries is None or hits is None:
        return PrefixCounters(exposed=True, queries=None, hits=None, hit_rate=None,
                              text="the counters went backwards during the step (did the server restart?)")
    rate = hits / queries if queries > 0 else None
    text = (f"hit rate {rate:.0%} ({hits:g} of {queries:g} prompt tokens)" if rate is not None
            else "no prefix-cache lookups counted during the step")
    return PrefixCounters(exposed=True, queries=queries, hits=hits, hit_rate=rate, text=text)
