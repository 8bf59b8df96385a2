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


@dataclass
class MetricsState:
    """Counters, gauges and histograms of one fake server."""

    running: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0
    scrapes: int = 0
    ttft: _Histogram = field(default_factory=_Histogram)
    e2e: _Histogram = field(default_factory=_Histogram)
    itl: _Histogram = field(default_factory=_Histogram)

    def request_started(self) -> None:
        """A request began generating."""
        self.running += 1

    def request_finished(self, prompt: int, generated: int, *, ttft: float, e2e: float) -> None:
        """A request finished."""
        self.running = max(self.running - 1, 0)
        self.prompt_tokens += prompt
        self.generation_tokens += generated
        self.requests += 1
        self.ttft.observe(ttft)
        self.e2e.observe(e2e)
        if generated > 1:
            self.itl.observe(max(e2e - ttft, 0.0) / (generated - 1))

    def render(self, model: str, *, reset: bool = False) -> str:
        """Exposition text; with `reset`, counters go down on every scrape (a fault)."""
        self.scrapes += 1
        shift = 1000 - 10 * self.scrapes if reset else 0
        label = f'model_name="{model}"'
        lines = [
            "# HELP vllm:num_requests_running Requests being generated.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {self.running}",
            "# HELP vllm:num_requests_waiting Requests waiting for a slot.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{label}}} 0",
            "# HELP vllm:kv_cache_usage_perc KV cache usage (fake: always 0).",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{label}}} 0.0",
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
                           ("vllm:inter_token_latency_seconds", self.itl)):
            lines.append(f"# HELP {name} Histogram.")
            lines.append(f"# TYPE {name} histogram")
            for bound, count in zip(BUCKETS, hist.counts, strict=True):
                lines.append(f'{name}_bucket{{{label},le="{bound}"}} {count}')
            lines.append(f'{name}_bucket{{{label},le="+Inf"}} {hist.n}')
            lines.append(f"{name}_count{{{label}}} {hist.n}")
            lines.append(f"{name}_sum{{{label}}} {hist.total}")
        return "\n".join(lines) + "\n"
