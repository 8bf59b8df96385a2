"""The capability vocabulary: what a team can require of a server, and what a probe saw."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pytest_inferaccept.model import Probe as ProbeResult

__all__ = ["CAPABILITIES", "DEFAULT_REQUIRED", "ProbeResult", "ProbeStatus", "exercised_by_load",
           "parse_capability_list"]


def __getattr__(name: str) -> Any:
    """`ProbeResult` is the run model's `Probe`, imported when first asked for (pydantic is not loaded
    before)."""
    if name == "ProbeResult":
        from pytest_inferaccept.model import Probe

        return Probe
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

CAPABILITIES: dict[str, str] = {
    "chat": "POST /v1/chat/completions answers a plain chat request",
    "stream": "chat completions stream as server-sent events (stream=true)",
    "stream_usage": "stream_options.include_usage yields a final usage chunk",
    "completions": "legacy POST /v1/completions",
    "embeddings": "POST /v1/embeddings (on --embedding-url when given)",
    "tools": "tool calling with tool_choice auto",
    "tool_choice_required": "tool_choice='required' forces a tool call",
    "tool_choice_named": "tool_choice naming one function forces that call",
    "parallel_tool_calls": "several tool calls in one assistant turn",
    "reasoning": "reasoning text beside the answer (message.reasoning or reasoning_content)",
    "json_object": "response_format {type: json_object}",
    "json_schema": "response_format {type: json_schema} with a schema",
    "responses": "POST /v1/responses (the Responses API) answers a response resource",
    "responses_state": "the Responses API stores responses: previous_response_id continues one",
    "messages": "POST /v1/messages (the Anthropic Messages API coding agents use) answers a message",
    "logprobs": "logprobs / top_logprobs on chat completions",
    "echo_logprobs": "legacy completions with echo and logprobs return the prompt's tokens and their "
                     "logprobs (what evaluation harnesses score loglikelihood tasks with)",
    "tokenize": "POST /tokenize (llama.cpp or vLLM shape) tokenizes text and chat prompts",
    "n": "n > 1 choices in one request",
    "seed": "a fixed seed gives reproducible sampling",
    "batch_invariant": "the server runs in a batch-invariant (deterministic) mode: a request's answer "
                       "does not depend on the requests batched beside it or on its prefix cache",
    "metrics": "GET /metrics in Prometheus text format",
    "auth": "an API key is enforced (needs --api-key)",
}
"""Every capability name the plugin knows, with what it means."""

DEFAULT_REQUIRED: tuple[str, ...] = ("chat",)
"""Capabilities required when --capabilities is not given."""

ProbeStatus = Literal["supported", "unsupported", "broken"]


def exercised_by_load(kind: str | None, *, answered: int, with_usage: int = 0) -> tuple[str, ...]:
    """The capabilities a load run's successful answers exercised, in CAPABILITIES order.

    The load client streams chat and completions with stream_options.include_usage, so chat
    answers exercise chat and stream, and stream_usage where every one of them carried usage.
    A run with no successful answer exercised nothing.
    """
    if answered <= 0:
        return ()
    if kind == "chat":
        return ("chat", "stream", "stream_usage") if with_usage >= answered else ("chat", "stream")
    if kind in ("completions", "embeddings"):
        return (kind,)
    return ()


def parse_capability_list(text: str) -> tuple[str, ...]:
    """Parse a comma/space separated capability list; raise ValueError naming allowed values."""
    names = [part.strip() for part in text.replace(",", " ").split() if part.strip()]
    unknown = [name for name in names if name not in CAPABILITIES]
    if unknown:
        raise ValueError(
            f"unknown capabilit{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
            f"allowed: {', '.join(CAPABILITIES)}"
        )
    return tuple(dict.fromkeys(names))
