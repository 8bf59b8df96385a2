"""Configuration of the fake server: timing, limits, model names and injected faults."""

from __future__ import annotations

from dataclasses import dataclass, field

OVERLOAD_STATUSES: tuple[int, ...] = (429, 503, 500)
"""The statuses an overloaded fake may answer with (`FakeConfig.overload_status`)."""
REASONING_FIELDS: tuple[str, ...] = ("reasoning_content", "reasoning", "both")
"""Where the fake puts its reasoning text (`FakeConfig.reasoning_field`)."""
METRICS_NAMES: tuple[str, ...] = ("new", "old", "both")
"""Which of vLLM's renamed metric names /metrics serves (`FakeConfig.metrics_names`)."""
SLOW_RECOVERY_FACTOR = 4.0
"""How much slower the fake is while it recovers from a spike (`FakeConfig.slow_recovery`)."""
RECOVERY_QUIET_S = 0.5
"""The spike is over once no request has waited for a slot for this long (`FakeConfig.slow_recovery`)."""


@dataclass(frozen=True, kw_only=True)
class FakeConfig:
    """How the fake server behaves; every field has a correct, fast default."""

    model: str = "fake-chat"
    served_models: tuple[str, ...] = ()
    """More chat models /v1/models lists and the fake answers, beside `model` (a gateway's list)."""
    unservable_model: str | None = None
    """A listed chat model whose requests are answered 404 model_not_found (a gateway whose backend
    for it is missing); None: every listed model is served."""
    embedding_model: str = "fake-embed"
    embedding_dim: int = 16
    ttft: float = 0.0
    """Seconds from request to the first content token."""
    itl: float = 0.0
    """Seconds between content tokens."""
    slots: int | None = None
    """How many requests generate at once; the rest queue (None: unlimited)."""
    context_window: int = 2048
    max_natural_tokens: int = 48
    """A generation ends by itself (finish_reason stop) after at most this many tokens."""
    api_key: str | None = field(default=None, repr=False)
    faults: frozenset[str] = frozenset()
    exit_after: int | None = None
    """Exit the process after this many completion requests (subprocess mode only)."""
    version: str = "fake 0.1.0"
    gzip_streams: bool = False
    """Send streamed chat answers with Content-Encoding: gzip (a gateway's habit; not a fault)."""
    timing_log: str | None = None
    """Append the server's own timestamps of each streamed chat answer to this JSONL file (off: None)."""
    # Capacity knobs: a server whose behaviour under load is known, for testing capacity scenarios.
    # Every default leaves the fake as fast and as flat as it is without them.
    batch_slowdown: float = 0.0
    """Each token's delay (and `ttft`) is multiplied by 1 + batch_slowdown * (running - 1), where
    running is how many generations are in progress at that moment (a batch that slows as it grows)."""
    latency_creep: float = 0.0
    """Seconds of extra TTFT per minute of server uptime (a server that gets slower as it runs)."""
    memory_growth: int = 0
    """Bytes `process_resident_memory_bytes` grows by per finished completion request, for ever (0: flat):
    a leak of a set size per request."""
    cache_fill: int = 0
    """Bytes a bounded cache adds to `process_resident_memory_bytes` once full (0: no cache); it fills
    in equal steps over the first `cache_fill_requests` finished requests, then stays (a prompt cache
    filling to its size: growth that levels off, not a leak)."""
    cache_fill_requests: int = 0
    """How many finished completion requests fill the `cache_fill` cache."""
    max_queue: int | None = None
    """With `slots`: a request arriving while running + waiting >= slots + max_queue is overloaded
    (answered at once with `overload_status`, or left hanging with `overload_hang`; None: no limit)."""
    overload_status: int = 503
    """The answer to an overloaded request: 429 or 503 (with Retry-After: graceful shedding) or 500."""
    overload_hang: bool = False
    """An overloaded request is never answered (a server that falls over without shedding)."""
    spike_unbounded_queue: bool = False
    """With `slots`: no request is ever refused for load, whatever `max_queue` says; a spike's extra
    requests all wait for a slot, so the queue and its waiting time grow with the spike."""
    slow_recovery: float = 0.0
    """With `slots`: for this many seconds once no request has waited for a slot for RECOVERY_QUIET_S (the
    spike is over), TTFT and token delays are SLOW_RECOVERY_FACTOR times longer (a server slow to recover
    from a spike; 0: off)."""
    cancel_keeps_generating: bool = False
    """A fault: a request whose client disconnected goes on generating unseen, a token at a time up to its
    max_tokens, holding its slot: running stays up, vllm:generation_tokens_total keeps rising (vllm#54947)."""
    cancel_leaks_slot: bool = False
    """A fault: a request whose client disconnected never gives its slot back: running stays one higher
    for ever and, with `slots`, one request fewer can run at once."""
    cancel_deadlock: bool = False
    """A fault: after the first client disconnect mid-stream, every later chat and completions request
    hangs (no headers) while /health and /v1/models still answer 200 (tabbyAPI#428)."""
    kv_cache_tokens: int = 0
    """KV-cache size in tokens: vllm:kv_cache_usage_perc is the prompt + generated tokens of the
    generating requests over this, capped at 1.0 (0: off, the gauge stays 0.0)."""
    prefill_per_token: float = 0.0
    """Seconds of extra TTFT per prompt token (long prompts are slow to start)."""
    prefix_cache: bool = False
    """Remember the first 200 characters of each chat prompt; a repeat skips 80 % of its prefill
    (`prefill_per_token`) time, and the prefix-cache counters are exposed."""
    metrics_names: str = "new"
    """The names /metrics gives the metrics vLLM renamed (KV-cache usage, prefix-cache counters, ITL):
    "new" (vLLM 0.12 and later: vllm:kv_cache_usage_perc, vllm:prefix_cache_queries_total, ...),
    "old" (before 0.10: vllm:gpu_cache_usage_perc, vllm:gpu_prefix_cache_queries_total,
    vllm:time_per_output_token_seconds) or "both" (the deprecation window: each under both names)."""
    # Verdict knobs: a known share of requests slow, failed, or thinking first. Each share is spread
    # evenly by a counter of chat and legacy completions requests (see fake/traffic.py), so 100
    # requests with a fraction of 0.3 hold exactly 30 of them.
    slow_fraction: float = 0.0
    """The share of chat/completions requests that wait `slow_ttft` more before their first token."""
    slow_ttft: float = 0.0
    """Seconds a slow request (`slow_fraction`) adds to its first-token delay (a slow tail)."""
    error_fraction: float = 0.0
    """The share of chat/completions requests answered at once with `error_status`."""
    error_status: int = 500
    """The status of a failed request (`error_fraction`), with an OpenAI error envelope."""
    reasoning_tokens: int = 0
    """Chat text answers first produce this many reasoning tokens (streamed as
    delta.reasoning_content, one per chunk, paced like content; counted in usage.completion_tokens
    and usage.completion_tokens_details.reasoning_tokens, and within max_tokens)."""
    reasoning_field: str = "reasoning_content"
    """The field the reasoning text travels in, in messages and stream deltas: reasoning_content (the
    older name: DeepSeek, llama.cpp, SGLang, vLLM before late 2025), reasoning (vLLM's newer name) or
    both (vLLM while renaming). A server setting, not a fault: which one a client misses depends on
    the name the client reads."""
    # Consistency knobs: answers that contradict themselves with the load (off: None).
    double_finish_under_load: int | None = None
    """While more than this many chat requests are in the server (the request itself counted), a
    streamed answer sends its finish_reason chunk twice."""
    usage_miscount_under_load: int | None = None
    """While more than this many chat requests are in the server, a streamed answer's usage reports a
    quarter of the completion tokens it streamed (fewer tokens than content events)."""

    # Correctness-under-load knobs: known answers (`fake.knowns`) that go wrong with the load (off: None).
    wrong_above_inflight: int | None = None
    """Known answers are wrong while more than this many chat requests are in the server, the request
    itself counted (a server that answers wrongly only when busy)."""
    stays_wrong_after_overload: int | None = None
    """Once more than this many chat requests were in the server at once, every later known answer is
    wrong, alone too (a server an overload left broken)."""

    def __post_init__(self) -> None:
        if self.overload_status not in OVERLOAD_STATUSES:
            raise ValueError(f"overload_status must be one of {', '.join(map(str, OVERLOAD_STATUSES))}, "
                             f"not {self.overload_status}")
        if self.max_queue is not None and not self.slots:
            raise ValueError("max_queue needs slots (a queue only exists when generations are limited)")
        if self.max_queue is not None and self.max_queue < 0:
            raise ValueError(f"max_queue must be >= 0, not {self.max_queue}")
        if (self.spike_unbounded_queue or self.slow_recovery) and not self.slots:
            raise ValueError("spike_unbounded_queue and slow_recovery need slots (a spike only queues when "
                             "generations are limited)")
        if self.overload_hang and self.max_queue is None:
            raise ValueError("overload_hang needs max_queue (and slots): it says what overloaded means")
        if self.cancel_keeps_generating and self.cancel_leaks_slot:
            raise ValueError("cancel_keeps_generating and cancel_leaks_slot exclude each other (a slot is "
                             "either freed late or never)")
        if self.cache_fill and self.cache_fill_requests <= 0:
            raise ValueError("cache_fill needs cache_fill_requests > 0 (how many requests fill the cache)")
        for name in ("batch_slowdown", "latency_creep", "memory_growth", "cache_fill", "cache_fill_requests",
                     "slow_recovery", "kv_cache_tokens", "prefill_per_token", "slow_ttft",
                     "reasoning_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)}")
        for name in ("wrong_above_inflight", "stays_wrong_after_overload"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)}")
        for name in ("double_finish_under_load", "usage_miscount_under_load"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)}")
        for name in ("slow_fraction", "error_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, not {getattr(self, name)}")
        if self.slow_fraction and not self.slow_ttft:
            raise ValueError("slow_fraction needs slow_ttft > 0 (it says how slow a slow request is)")
        if self.metrics_names not in METRICS_NAMES:
            raise ValueError(f"metrics_names must be one of {', '.join(METRICS_NAMES)}, "
                             f"not {self.metrics_names!r}")
        if self.reasoning_field not in REASONING_FIELDS:
            raise ValueError(f"reasoning_field must be one of {', '.join(REASONING_FIELDS)}, "
                             f"not {self.reasoning_field!r}")
        if self.unservable_model is not None and self.unservable_model not in self.chat_models:
            raise ValueError(f"unservable_model {self.unservable_model!r} is not a listed chat model "
                             f"({', '.join(self.chat_models)})")
        if not 400 <= self.error_status <= 599:
            raise ValueError(f"error_status must be an HTTP error status (400-599), not {self.error_status}")

    @property
    def chat_models(self) -> tuple[str, ...]:
        """The chat models /v1/models lists: `model` first, then `served_models`."""
        return tuple(dict.fromkeys((self.model, *self.served_models)))

    @property
    def answered_models(self) -> tuple[str, ...]:
        """The chat models requests may name: the listed ones, less `unservable_model`."""
        return tuple(m for m in self.chat_models if m != self.unservable_model)
