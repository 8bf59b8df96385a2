"""Checks of GET /metrics: valid Prometheus text, monotonic counters, the metrics operators need.

The exposition text is parsed with prometheus_client's own parser. Which metrics an operator needs
depends on the server, and servers rename metrics between versions; PROFILES holds, per server,
the names each concern has had (current name first, older names after).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.evidence import excerpt

SampleKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class OperatorMetric:
    """One concern an operator watches, and the names a server has exposed it under."""

    concern: str
    names: tuple[str, ...]
    """Current name first; the others are names used by older (or newer) versions."""
    essential: bool = False
    """Missing under every name fails the check; otherwise a warning."""
    note: str = ""


# Essential concerns are the ones SLO dashboards and autoscalers read: latency the user feels
# (TTFT, end-to-end), queue depth and running requests (what autoscalers such as KEDA scale on),
# and generated tokens (throughput). ITL and KV-cache usage are tuning aids: their absence warns.
PROFILES: dict[str, tuple[OperatorMetric, ...]] = {
    "vllm": (
        OperatorMetric("ttft", ("vllm:time_to_first_token_seconds",), essential=True),
        OperatorMetric("itl", ("vllm:inter_token_latency_seconds",
                               "vllm:time_per_output_token_seconds"),
                       note="time_per_output_token_seconds deprecated for inter_token_latency_seconds"),
        OperatorMetric("e2e", ("vllm:e2e_request_latency_seconds",), essential=True),
        OperatorMetric("waiting", ("vllm:num_requests_waiting",), essential=True),
        OperatorMetric("running", ("vllm:num_requests_running",), essential=True),
        OperatorMetric("kv_cache", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
                       note="gpu_cache_usage_perc deprecated for kv_cache_usage_perc"),
        OperatorMetric("prompt_tokens", ("vllm:prompt_tokens_total",)),
        OperatorMetric("generation_tokens", ("vllm:generation_tokens_total",), essential=True),
    ),
    "sglang": (
        OperatorMetric("ttft", ("sglang:time_to_first_token_seconds",), essential=True),
        OperatorMetric("itl", ("sglang:inter_token_latency_seconds",
                               "sglang:time_per_output_token_seconds")),
        OperatorMetric("e2e", ("sglang:e2e_request_latency_seconds",), essential=True),
        OperatorMetric("waiting", ("sglang:num_queue_reqs",), essential=True),
        OperatorMetric("running", ("sglang:num_running_reqs",), essential=True),
        OperatorMetric("kv_cache", ("sglang:token_usage",)),
        OperatorMetric("prompt_tokens", ("sglang:prompt_tokens_total",)),
        OperatorMetric("generation_tokens", ("sglang:generation_tokens_total",), essential=True),
    ),
    # llama.cpp has no TTFT or end-to-end histogram; its KV-cache gauges were removed (PR#13660).
    "llama.cpp": (
        OperatorMetric("itl", ("llamacpp:predicted_tokens_seconds",),
                       note="average generation throughput (tokens/s), not a histogram"),
        OperatorMetric("waiting", ("llamacpp:requests_deferred",), essential=True),
        OperatorMetric("running", ("llamacpp:requests_processing",), essential=True),
        OperatorMetric("kv_cache", ("llamacpp:kv_cache_usage_ratio",),
                       note="removed in llama.cpp PR#13660"),
        OperatorMetric("prompt_tokens", ("llamacpp:prompt_tokens_total",)),
        OperatorMetric("generation_tokens", ("llamacpp:tokens_predicted_total",), essential=True),
    ),
    "tgi": (
        OperatorMetric("itl", ("tgi_request_mean_time_per_token_duration",)),
        OperatorMetric("e2e", ("tgi_request_duration",), essential=True),
        OperatorMetric("waiting", ("tgi_queue_size",), essential=True),
        OperatorMetric("running", ("tgi_batch_current_size",), essential=True),
        OperatorMetric("prompt_tokens", ("tgi_request_input_length",)),
        OperatorMetric("generation_tokens", ("tgi_request_generated_tokens",), essential=True),
    ),
    # A proxy: no queue or KV cache of its own; latency and token counters are what it offers.
    "litellm": (
        OperatorMetric("ttft", ("litellm_llm_api_time_to_first_token_metric",),
                       note="only observed for streamed requests"),
        OperatorMetric("e2e", ("litellm_request_total_latency_metric",), essential=True),
        OperatorMetric("running", ("litellm_in_flight_requests",)),
        OperatorMetric("prompt_tokens", ("litellm_input_tokens_metric", "litellm_input_tokens")),
        OperatorMetric("generation_tokens", ("litellm_output_tokens_metric", "litellm_output_tokens"),
                       essential=True),
        OperatorMetric("total_tokens", ("litellm_total_tokens_metric", "litellm_total_tokens")),
    ),
}
"""Per server: the metrics operators rely on, with the names each has had across versions."""

PREFIXES: dict[str, str] = {"vllm": "vllm:", "sglang": "sglang:", "llama.cpp": "llamacpp:",
                            "tgi": "tgi_", "litellm": "litellm_"}
"""The name prefix each server puts on its own metrics."""

# Hints in what the server says about itself (the keys of ServerUnderTest.version_info).
_VERSION_HINTS: tuple[tuple[str, str], ...] = (("/props", "llama.cpp"), ("/get_server_info", "sglang"),
                                               ("/info", "tgi"), ("/version", "vllm"))


@dataclass(frozen=True)
class Scrape:
    """One parsed /metrics answer: every sample value and the type of every family."""

    samples: dict[SampleKey, float]
    types: dict[str, str]
    """Sample name (as exposed) -> the type of its family."""

    @property
    def names(self) -> set[str]:
        """Every name visible in the text: sample names and family names."""
        return set(self.types) | {name for name, _ in self.samples}


def parse_metrics(text: str) -> Scrape:
    """Parse Prometheus exposition text with prometheus_client; CheckFailed when it is not valid."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[SampleKey, float] = {}
    types: dict[str, str] = {}
    try:
        for family in text_string_to_metric_families(text):
            types[family.name] = family.type
            for sample in family.samples:
                types.setdefault(sample.name, family.type)
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        fail("/metrics is not valid Prometheus exposition text",
             f"parser: {exc}\ntext: {excerpt(text, 600)}")
    require(samples, "/metrics holds no samples at all", f"text: {excerpt(text, 600)}")
    return Scrape(samples=samples, types=types)


def monotonic_keys(scrape: Scrape) -> list[SampleKey]:
    """Samples that may never go down: counters, and histogram/summary counts, sums and buckets."""
    out: list[SampleKey] = []
    for key in scrape.samples:
        name = key[0]
        kind = scrape.types.get(name, "unknown")
        if kind == "counter" or (kind in ("histogram", "summary")
                                 and name.endswith(("_count", "_sum", "_bucket"))):
            out.append(key)
    return out


def check_counters_monotonic(before: Scrape, after: Scrape) -> list[str]:
    """Counters must not decrease between two scrapes; return the counters that grew."""
    went_down = []
    grew = []
    for key in monotonic_keys(before):
        if key not in after.samples:
            continue  # a series may vanish (a label set expiring); only a decrease is wrong
        old, new = before.samples[key], after.samples[key]
        if new < old:
            went_down.append(f"{_show(key)}: {old:g} -> {new:g}")
        elif new > old:
            grew.append(_show(key))
    require(not went_down, f"{len(went_down)} counter(s) decreased between two scrapes "
            "(a counter may only grow, except when the process restarts)",
            "\n".join(went_down[:15]))
    return grew


def _show(key: SampleKey) -> str:
    name, labels = key
    if not labels:
        return name
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


def detect_profile(names: Iterable[str], version_info: Mapping[str, Any]) -> str | None:
    """Which server's profile applies: the prefix most names carry, else the version endpoints."""
    counts = {server: 0 for server in PREFIXES}
    for name in names:
        for server, prefix in PREFIXES.items():
            if name.startswith(prefix):
                counts[server] += 1
    best = max(counts, key=lambda s: counts[s])
    if counts[best]:
        return best
    for path, server in _VERSION_HINTS:
        if path in version_info:
            return server
    return None


def _present(name: str, names: set[str]) -> bool:
    # Counters may be exposed as `x_total` or as the family `x`; histograms as `x_bucket` etc.
    base = name.removesuffix("_total")
    return bool({name, base, f"{base}_total", f"{name}_count", f"{name}_bucket"} & names)


def operator_metrics_table(profile: str, names: set[str]) -> list[dict[str, Any]]:
    """One row per operator metric of the profile: concern, status present/renamed/missing, names."""
    rows = []
    for metric in PROFILES[profile]:
        found = [n for n in metric.names if _present(n, names)]
        if metric.names[0] in found:
            status, served = "present", metric.names[0]
        elif found:
            status, served = "renamed", found[0]
        else:
            status, served = "missing", None
        rows.append({"concern": metric.concern, "status": status, "expected": metric.names[0],
                     "served": served, "essential": metric.essential, "note": metric.note})
    return rows


def check_operator_metrics(table: list[dict[str, Any]], profile: str) -> list[str]:
    """Fail when an essential metric is missing; return warnings for the other deviations."""
    missing = [r for r in table if r["status"] == "missing" and r["essential"]]
    warnings = []
    for row in table:
        if row["status"] == "renamed":
            warnings.append(f"{profile}: {row['concern']} is served as {row['served']}, not under "
                            f"the current name {row['expected']} (dashboards using one name break "
                            f"with the other){': ' + row['note'] if row['note'] else ''}")
        elif row["status"] == "missing" and not row["essential"]:
            warnings.append(f"{profile}: no {row['concern']} metric ({row['expected']})")
    require(not missing,
            f"{profile}: {len(missing)} essential operator metric(s) missing: "
            + ", ".join(f"{r['concern']} ({r['expected']})" for r in missing),
            "table: " + "; ".join(f"{r['concern']}={r['status']}" for r in table))
    return warnings
