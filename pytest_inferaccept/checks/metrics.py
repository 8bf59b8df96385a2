"""Checks of GET /metrics: valid Prometheus text, monotonic counters, the metrics operators need.

The exposition text is parsed with prometheus_client's own parser. Which metrics an operator needs
depends on the server, and servers rename metrics between versions; PROFILES holds, per server,
the names each concern has had (current name first, older names after), and RENAMED_METRICS the
renames themselves, with the releases that deprecated, hid and removed each old name.
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


@dataclass(frozen=True)
class MetricRename:
    """A metric a server renamed, and the releases of its deprecate → hide → remove schedule."""

    server: str
    """The profile it belongs to (a key of PROFILES)."""
    old: str
    new: str
    deprecated_in: str
    """The release from which the old name is deprecated (the new name is served beside it)."""
    hidden_in: str
    """From this release the old name is served only when the server is started with `show_hidden`."""
    removed_in: str
    show_hidden: str
    """The server option that brings a hidden old name back."""
    source: str


# vLLM's policy: a metric deprecated in X.Y is hidden in X.Y+1 (shown again with
# --show-hidden-metrics-for-version=X.Y) and removed in X.Y+2. The gpu_ names were renamed in
# PR#18354 (the new names first shipped in 0.9.2; vLLM counts the deprecation from 0.10) and removed
# in PR#29330; TPOT was renamed ITL, as what it measured is the gap between iterations, in PR#24110.
_GPU_PREFIX = {"deprecated_in": "0.10", "hidden_in": "0.11", "removed_in": "0.12",
               "show_hidden": "--show-hidden-metrics-for-version=0.10", "source": "vLLM PR#18354"}
RENAMED_METRICS: tuple[MetricRename, ...] = (
    MetricRename("vllm", "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc", **_GPU_PREFIX),
    MetricRename("vllm", "vllm:gpu_prefix_cache_queries", "vllm:prefix_cache_queries", **_GPU_PREFIX),
    MetricRename("vllm", "vllm:gpu_prefix_cache_hits", "vllm:prefix_cache_hits", **_GPU_PREFIX),
    MetricRename("vllm", "vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds",
                 deprecated_in="0.11", hidden_in="0.12", removed_in="0.13",
                 show_hidden="--show-hidden-metrics-for-version=0.11", source="vLLM PR#24110"),
)
"""Every metric rename the checks and the upgrade gate recognise: old name → new name, per release."""

SERVER_TITLES: dict[str, str] = {"vllm": "vLLM", "sglang": "SGLang", "llama.cpp": "llama.cpp",
                                 "tgi": "TGI", "litellm": "LiteLLM"}


def known_rename(first: str, second: str) -> MetricRename | None:
    """The rename between two metric names, in either direction (a `_total` suffix is ignored)."""
    pair = {first.removesuffix("_total"), second.removesuffix("_total")}
    return next((r for r in RENAMED_METRICS if {r.old, r.new} == pair), None)


def _older_names(current: str) -> tuple[str, ...]:
    """A concern's names: its current one, then those RENAMED_METRICS says it had before."""
    return (current, *(r.old for r in RENAMED_METRICS if r.new == current))


# Essential concerns are the ones SLO dashboards and autoscalers read: latency the user feels
# (TTFT, end-to-end), queue depth and running requests (what autoscalers such as KEDA scale on),
# and generated tokens (throughput). ITL and KV-cache usage are tuning aids: their absence warns.
PROFILES: dict[str, tuple[OperatorMetric, ...]] = {
    "vllm": (
        OperatorMetric("ttft", ("vllm:time_to_first_token_seconds",), essential=True),
        OperatorMetric("itl", _older_names("vllm:inter_token_latency_seconds"),
                       note="time_per_output_token_seconds deprecated for inter_token_latency_seconds"),
        OperatorMetric("e2e", ("vllm:e2e_request_latency_seconds",), essential=True),
        OperatorMetric("waiting", ("vllm:num_requests_waiting",), essential=True),
        OperatorMetric("running", ("vllm:num_requests_running",), essential=True),
        OperatorMetric("kv_cache", _older_names("vllm:kv_cache_usage_perc"),
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


def _wanted(row: dict[str, Any]) -> str:
    """The names a missing concern was looked for under: the current one, and its old names."""
    expected = str(row["expected"])
    older = [r.old for r in RENAMED_METRICS if r.new == expected]
    return expected + (f", nor its old name {', '.join(older)}" if older else "")


def check_operator_metrics(table: list[dict[str, Any]], profile: str) -> list[str]:
    """Fail when an essential metric is missing; return warnings for the other deviations.

    A concern served under a name RENAMED_METRICS knows is left to `rename_findings`, which says
    which release renamed it.
    """
    missing = [r for r in table if r["status"] == "missing" and r["essential"]]
    warnings = []
    for row in table:
        if row["status"] == "renamed" and known_rename(row["served"], row["expected"]) is None:
            warnings.append(f"{profile}: {row['concern']} is served as {row['served']}, not under "
                            f"the current name {row['expected']} (dashboards using one name break "
                            f"with the other){': ' + row['note'] if row['note'] else ''}")
        elif row["status"] == "missing" and not row["essential"]:
            warnings.append(f"{profile}: no {row['concern']} metric ({_wanted(row)})")
    require(not missing,
            f"{profile}: {len(missing)} essential operator metric(s) missing: "
            + ", ".join(f"{r['concern']} ({_wanted(r)})" for r in missing),
            "table: " + "; ".join(f"{r['concern']}={r['status']}" for r in table))
    return warnings


def renamed_metrics(profile: str, names: set[str]) -> list[dict[str, Any]]:
    """One row per rename of the profile's server seen under either name: which name(s) it is served under.

    `served` is "new" (the old name is hidden or removed), "old" (a server from before the rename)
    or "both" (the deprecation window, or a hidden name shown again).
    """
    rows = []
    for rename in RENAMED_METRICS:
        if rename.server != profile:
            continue
        old, new = _present(rename.old, names), _present(rename.new, names)
        if not (old or new):
            continue  # absent under both names: a profile concern reports it missing
        rows.append({"old": rename.old, "new": rename.new,
                     "served": "both" if old and new else "old" if old else "new",
                     "deprecated_in": rename.deprecated_in, "hidden_in": rename.hidden_in,
                     "removed_in": rename.removed_in, "source": rename.source})
    return rows


def rename_words(rename: MetricRename, served: str) -> str:
    """What a rename means for a dashboard, when the server serves the new, the old or both names."""
    title = f"{SERVER_TITLES.get(rename.server, rename.server)} {rename.deprecated_in}"
    schedule = (f"deprecated in {title}, hidden from {rename.hidden_in} unless the server is started "
                f"with {rename.show_hidden}, removed in {rename.removed_in}")
    if served == "new":
        return (f"renamed in {title}: {rename.old} is now {rename.new} "
                "(a dashboard reading the old name shows nothing)")
    if served == "old":
        return (f"{rename.old} is the old name of {rename.new} ({schedule}): a dashboard reading "
                f"{rename.new} shows nothing here, and one reading {rename.old} goes blank on upgrade")
    return (f"{rename.old} is still served beside its new name {rename.new} ({schedule}): "
            f"move dashboards to {rename.new} before upgrading")


def rename_findings(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(notes, warnings) for the rows of `renamed_metrics`: only an old name alone is a warning."""
    notes: list[str] = []
    warnings: list[str] = []
    for row in rows:
        rename = known_rename(row["old"], row["new"])
        if rename is None:
            continue
        (warnings if row["served"] == "old" else notes).append(rename_words(rename, row["served"]))
    return notes, warnings


def stale_old_names(before: Scrape, after: Scrape, rows: list[dict[str, Any]]) -> list[str]:
    """Counters of an old name served beside its new one that stood still while the new one grew.

    In the deprecation window both names count the same events; an old name that no longer
    counts keeps a dashboard on it alive but flat, which is worse than blank. Only counters and
    histogram counts and sums are judged (a gauge may differ between the two reads of one scrape;
    a histogram's buckets move with its count), and only a series of the new name that grew:
    traffic of others can only make the old one grow too.
    """
    out = []
    for row in rows:
        if row["served"] != "both":
            continue
        old, new = row["old"], row["new"]
        for key in monotonic_keys(after):
            name, labels = key
            if not name.startswith(new) or name.endswith(("_created", "_bucket")):
                continue
            twin = (old + name[len(new):], labels)
            if key not in before.samples or twin not in before.samples or twin not in after.samples:
                continue
            grew = after.samples[key] - before.samples[key]
            if grew > 0 and after.samples[twin] == before.samples[twin]:
                out.append(f"{_show(twin)} stayed at {after.samples[twin]:g} while {_show(key)} grew "
                           f"{before.samples[key]:g} -> {after.samples[key]:g}")
    return out


def check_old_names_count_along(stale: list[str]) -> None:
    """Fail when a deprecated name served beside its new one stopped counting (`stale_old_names`)."""
    require(not stale, f"{len(stale)} series of deprecated metric names stood still across a completion "
            "while their new names counted it: a dashboard still reading the old names shows a flat "
            "line, not a blank one", "\n".join(stale[:15]))
