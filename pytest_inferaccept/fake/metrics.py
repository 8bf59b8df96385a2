"""Prometheus text the fake server exposes, named as vLLM names its metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

BUCKETS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                              0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                self.counts[i] += 1
        self.total += value
        self.n += 1


BASE_RESIDENT_BYTES = 200 * 1024 * 1024
"""What `process_resident_memory_bytes` reads before any request (a flat, stable server)."""


@dataclass
class MetricsState:
    """Counters, gauges and histograms of one fake server."""

    running: int = 0
    """Requests generating now (holding a slot)."""
    waiting: int = 0
    """Requests waiting for a slot."""
    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0
    scrapes: int = 0
    prefix_queries: int = 0
    """Prompt tokens looked up in the prefix cache."""
    prefix_hits: int = 0
    """Prompt tokens of the lookups that hit."""
    ttft: _Histogram = field(default_factory=_Histogram)
    e2e: _Histogram = field(default_factory=_Histogram)
    itl: _Histogram = field(default_factory=_Histogram)
    queue: _Histogram = field(default_factory=_Histogram)

    def request_queued(self) -> None:
        """A request began waiting for a slot."""
        self.waiting += 1

    def request_dequeued(self) -> None:
        """A request stopped waiting (it got its slot, or gave up)."""
        self.waiting = max(self.waiting - 1, 0)

    def request_started(self, queue_time: float = 0.0) -> None:
        """A request began generating after `queue_time` seconds waiting for its slot."""
        self.running += 1
        self.queue.observe(queue_time)

    def request_ended(self) -> None:
        """A request stopped generating (finished or abandoned) and gave its slot back."""
        self.running = max(self.running - 1, 0)

    def request_finished(self, prompt: int, generated: int, *, ttft: float, e2e: float) -> None:
        """A request finished: count its tokens and observe its latencies."""
        self.prompt_tokens += prompt
        self.generation_tokens += generated
        self.requests += 1
        self.ttft.observe(ttft)
        self.e2e.observe(e2e)
        if generated > 1:
            self.itl.observe(max(e2e - ttft, 0.0) / (generated - 1))

    def count_generated(self, tokens: int) -> None:
        """Count tokens generated for a request that did not finish (its client left), as an engine that
        counts every decoding step does; a finished request's tokens count in `request_finished`."""
        self.generation_tokens += tokens

    def prefix_lookup(self, prompt: int, hit: bool) -> None:
        """A prompt of `prompt` tokens was looked up in the prefix cache."""
        self.prefix_queries += prompt
        if hit:
            self.prefix_hits += prompt

    def resident_bytes(self, *, memory_growth: int = 0, cache_fill: int = 0,
                       cache_fill_requests: int = 0) -> float:
        """`process_resident_memory_bytes`: the base, a leak of `memory_growth` per finished request,
        and a cache of `cache_fill` bytes that fills over the first `cache_fill_requests` of them."""
        cache = cache_fill * min(1.0, self.requests / cache_fill_requests) if cache_fill_requests else 0.0
        return float(BASE_RESIDENT_BYTES + memory_growth * self.requests + cache)

    def render(self, model: str, *, reset: bool = False, kv_usage: float = 0.0, memory_growth: int = 0,
               prefix_cache: bool = False, cache_fill: int = 0, cache_fill_requests: int = 0) -> str:
        """Exposition text; with `reset`, counters go down on every scrape (a fault).

        `kv_usage` is the KV-cache gauge's value, `memory_growth` the resident-memory bytes each
        finished request adds (a leak), `cache_fill` and `cache_fill_requests` a bounded cache
        that fills then levels off, and `prefix_cache` exposes the prefix-cache counters.
        """
        self.scrapes += 1
        shift = 1000 - 10 * self.scrapes if reset else 0
        label = f'model_name="{model}"'
        lines = [
            "# HELP vllm:num_requests_running Requests being generated.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {self.running}",
            "# HELP vllm:num_requests_waiting Requests waiting for a slot.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{label}}} {self.waiting}",
            "# HELP vllm:kv_cache_usage_perc KV-cache usage, 1.0 = full (fake: 0 unless kv_cache_tokens).",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{label}}} {float(kv_usage)}",
            "# HELP vllm:prompt_tokens_total Prompt tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{label}}} {self.prompt_tokens + shift}",
            "# HELP vllm:generation_tokens_total Tokens generated.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{label}}} {self.generation_tokens + shift}",
            "# HELP vllm:request_success_total Requests finished.",
            "# TYPE vllm:request_success_total counter",
            f"vllm:request_success_total{{{label}}} {self.requests + shift}",
        ]
        for name, hist in (("vllm:time_to_first_token_seconds", self.ttft),
                           ("vllm:e2e_request_latency_seconds", self.e2e),
                           ("vllm:inter_token_latency_seconds", self.itl),
                           ("vllm:request_queue_time_seconds", self.queue)):
            lines.append(f"# HELP {name} Histogram.")
            lines.append(f"# TYPE {name} histogram")
            for bound, count in zip(BUCKETS, hist.counts, strict=True):
                lines.append(f'{name}_bucket{{{label},le="{bound}"}} {count}')
            lines.append(f'{name}_bucket{{{label},le="+Inf"}} {hist.n}')
            lines.append(f"{name}_count{{{label}}} {hist.n}")
            lines.append(f"{name}_sum{{{label}}} {hist.total}")
        if prefix_cache:
            lines += [
                "# HELP vllm:prefix_cache_queries_total Prompt tokens looked up in the prefix cache.",
                "# TYPE vllm:prefix_cache_queries_total counter",
                f"vllm:prefix_cache_queries_total{{{label}}} {self.prefix_queries + shift}",
                "# HELP vllm:prefix_cache_hits_total Prompt tokens found in the prefix cache.",
                "# TYPE vllm:prefix_cache_hits_total counter",
                f"vllm:prefix_cache_hits_total{{{label}}} {self.prefix_hits + shift}",
            ]
        resident = self.resident_bytes(memory_growth=memory_growth, cache_fill=cache_fill,
                                       cache_fill_requests=cache_fill_requests)
        lines += [
            "# HELP process_resident_memory_bytes Resident memory size in bytes.",
            "# TYPE process_resident_memory_bytes gauge",
            f"process_resident_memory_bytes {resident}",
        ]
        return "\n".join(lines) + "\n"


VLLM_OLD_NAMES: dict[str, str] = {
    "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
    "vllm:prefix_cache_queries": "vllm:gpu_prefix_cache_queries",
    "vllm:prefix_cache_hits": "vllm:gpu_prefix_cache_hits",
    "vllm:inter_token_latency_seconds": "vllm:time_per_output_token_seconds",
}
"""The metrics vLLM renamed: new name → the name it had before (vLLM PR#18354, PR#24110)."""


def _line_name(line: str) -> str:
    """The metric name a line of exposition text is about ('' for other comments)."""
    if line.startswith("# "):
        parts = line.split(" ", 3)
        return parts[2] if len(parts) > 2 and parts[1] in ("HELP", "TYPE") else ""
    return line.split("{", 1)[0].split(" ", 1)[0]


def vllm_names(text: str, names: str, *, frozen_old: bool = False) -> str:
    """The text with vLLM's renamed metrics under their "new" names (unchanged), their "old" names,
    or "both": each renamed family again, under its old name, after the rest of the text.

    With `frozen_old` the old names' samples all read 0 (an old name that no longer counts). A
    family whose old name the text already has is left as it is.
    """
    if names == "new":
        return text
    lines = text.splitlines()
    typed = {line.split(" ")[2].removesuffix("_total") for line in lines if line.startswith("# TYPE ")}
    renames = {new: old for new, old in VLLM_OLD_NAMES.items() if new in typed and old not in typed}
    out: list[str] = []
    copies: list[str] = []
    for line in lines:
        name = _line_name(line)
        new = next((n for n in renames if name == n or name.startswith(n + "_")), None)
        if new is None:
            out.append(line)
            continue
        renamed = line.replace(new, renames[new], 1)
        if names == "old":
            out.append(renamed)
            continue
        out.append(line)
        if line.startswith("# HELP "):
            renamed += f" Deprecated: use {new}."
        elif not line.startswith("#") and frozen_old:
            renamed = renamed.rsplit(" ", 1)[0] + " 0"
        copies.append(renamed)
    return "\n".join(out + copies) + "\n"
