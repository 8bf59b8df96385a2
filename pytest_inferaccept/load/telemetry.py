"""The server's own view of the window: /metrics scraped before and after, histograms as deltas.

A snapshot keeps, per metric name summed over its label sets, the histograms (count, sum,
cumulative buckets), the counters and the gauges that matter for a load run. Names from vLLM
(current and older), SGLang and TGI are known; a missing /metrics is normal and gives {}.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

HISTOGRAMS: dict[str, str] = {
    "vllm:time_to_first_token_seconds": "ttft",
    "vllm:e2e_request_latency_seconds": "e2e",
    "vllm:inter_token_latency_seconds": "itl",
    "vllm:time_per_output_token_seconds": "tpot",
    "vllm:request_queue_time_seconds": "queue",
    "sglang:time_to_first_token_seconds": "ttft",
    "sglang:e2e_request_latency_seconds": "e2e",
    "sglang:inter_token_latency_seconds": "itl",
    "sglang:time_per_output_token_seconds": "tpot",
    "tgi_request_duration": "e2e",
    "tgi_request_queue_duration": "queue",
    "tgi_batch_forward_duration": "forward",
}
"""Latency histograms and what each measures."""

COUNTERS: tuple[str, ...] = (
    "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
    "sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_requests_total",
    "tgi_request_success", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
)
GAUGES: tuple[str, ...] = (
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc", "sglang:num_running_reqs", "sglang:num_queue_reqs",
    "sglang:token_usage", "tgi_queue_size", "tgi_batch_current_size",
    "process_resident_memory_bytes", "llamacpp:requests_processing", "llamacpp:requests_deferred",
    "llamacpp:kv_cache_usage_ratio",
)

Snapshot = dict[str, Any]


def parse(text: str) -> Snapshot:
    """A snapshot of the metrics that matter; ValueError when the text is not Prometheus text."""
    from prometheus_client.parser import text_string_to_metric_families

    hist: dict[str, dict[str, Any]] = {}
    counters: dict[str, float] = {}
    gauges: dict[str, list[float]] = {}
    # Samples are matched by name, not by family type, so a missing `# TYPE` line does not matter.
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, value = sample.name, float(sample.value)
            if name in COUNTERS or (name + "_total") in COUNTERS:
                key = name if name in COUNTERS else name + "_total"
                counters[key] = counters.get(key, 0.0) + value
                continue
            if name in GAUGES:
                gauges.setdefault(name, []).append(value)
                continue
            for suffix in ("_bucket", "_count", "_sum"):
                if name.endswith(suffix) and name[: -len(suffix)] in HISTOGRAMS:
                    h = hist.setdefault(name[: -len(suffix)], {"count": 0.0, "sum": 0.0, "buckets": {}})
                    if suffix == "_bucket":
                        le = float(sample.labels.get("le", "inf"))
                        h["buckets"][le] = h["buckets"].get(le, 0.0) + value
                    else:
                        h[suffix[1:]] += value
                    break
    # A usage ratio does not add up over label sets (several engines): keep the largest.
    gauge_values = {k: (max(v) if ("perc" in k or "usage" in k) else sum(v)) for k, v in gauges.items()}
    return {"histograms": hist, "counters": counters, "gauges": gauge_values}


async def scrape(base_url: str, *, timeout: float = 3.0, api_key: str | None = None) -> Snapshot | None:
    """GET /metrics and parse it; None when it is absent, slow, or not Prometheus text."""
    import aiohttp

    from pytest_inferaccept.load.client import api_root

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session, \
                session.get(api_root(base_url) + "/metrics", headers=headers) as resp:
            if resp.status != 200:
                return None
            raw = await resp.content.read(32 * 2**20)
        return parse(raw.decode("utf-8", "replace"))
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError, ValueError):
        return None


def scrape_blocking(base_url: str, *, timeout: float = 3.0, api_key: str | None = None) -> Snapshot | None:
    """`scrape` from blocking code (the parent of worker processes), in or out of an event loop."""
    from pytest_inferaccept.load.blocking import run_blocking

    return run_blocking(scrape(base_url, timeout=timeout, api_key=api_key))


def deltas(before: Snapshot | None, after: Snapshot | None) -> dict[str, Any]:
    """What changed over the window: histogram deltas (count, sum, mean, buckets), counters, gauges."""
    if before is None or after is None:
        return {}
    out: dict[str, Any] = {"histograms": {}, "counters": {}, "gauges": {}}
    for name, h1 in after["histograms"].items():
        h0 = before["histograms"].get(name, {"count": 0.0, "sum": 0.0, "buckets": {}})
        count = h1["count"] - h0["count"]
        total = h1["sum"] - h0["sum"]
        entry: dict[str, Any] = {"role": HISTOGRAMS[name], "count": count, "sum": total,
                                 "mean": total / count if count > 0 else None}
        if count < 0:
            entry.update(count=None, sum=None, mean=None, reset=True)  # the server restarted
        else:
            entry["buckets"] = [[_le(le), v - h0["buckets"].get(le, 0.0)]
                                for le, v in sorted(h1["buckets"].items())]
        out["histograms"][name] = entry
    for name, v1 in after["counters"].items():
        v0 = before["counters"].get(name)
        out["counters"][name] = None if v0 is None or v1 < v0 else v1 - v0
    for name in sorted(set(before["gauges"]) | set(after["gauges"])):
        out["gauges"][name] = {"before": before["gauges"].get(name), "after": after["gauges"].get(name)}
    return out


def _le(value: float) -> float | str:
    """A bucket bound as JSON allows it (+Inf as the string "+Inf")."""
    return "+Inf" if math.isinf(value) else value

