"""Named faults the fake server can inject: one switch per defect a bundled check exists to catch.

This table is the documentation of what the suites catch: every fault is listed with the
misbehaviour it reproduces, and the project's tests prove a check fails when it is switched on.
"""

from __future__ import annotations

FAULTS: dict[str, str] = {
    # service readiness
    "health_lies": "/health answers 200 while every completion hangs",
    "health_down": "/health answers 503 although completions work",
    "models_missing_served": "/v1/models does not list the served model",
    "wrong_model_field": "responses name model 'gpt-3.5-turbo' instead of the served id",
    "metrics_missing": "/metrics answers 404",
    "metrics_invalid": "/metrics is not valid Prometheus text",
    "metrics_counter_reset": "counters go down between scrapes",
    # process-level
    "hang_completions": "chat and completions requests never answer (no headers)",
    "stream_stall": "streams send headers and the role chunk, then nothing",
    "chat_500": "every chat completion answers 500",
    # capabilities
    "no_tools": "requests with tools are rejected with 400 (tools unsupported)",
    "tools_500": "requests with tools answer 500 (tools broken)",
    "no_embeddings": "/v1/embeddings answers 404",
    "no_completions": "/v1/completions answers 404",
    "ignore_n": "n > 1 returns a single choice",
    "no_logprobs": "logprobs requests return logprobs: null",
}


def validate_faults(names: object) -> frozenset[str]:
    """Return the fault names as a frozenset; raise ValueError naming the known faults."""
    if isinstance(names, str):
        names = [n for n in names.replace(",", " ").split() if n]
    if not isinstance(names, (list, tuple, set, frozenset)):
        raise ValueError(f"faults must be a list of names, got {names!r}")
    unknown = sorted(str(n) for n in names if n not in FAULTS)
    if unknown:
        raise ValueError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    return frozenset(str(n) for n in names)
