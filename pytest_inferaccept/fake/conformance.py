"""Protocol-conformance faults of the fake server: rewrites of correct answers into wrong ones.

The handlers build a correct answer; with a fault switched on, the functions here bend it the way
a real server once got it wrong. Without faults every function returns its input unchanged.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from pytest_inferaccept.fake.config import FakeConfig
from pytest_inferaccept.fake.metrics import vllm_names

Payload = dict[str, Any] | str


def models_payload(data: list[dict[str, Any]], faults: frozenset[str]) -> dict[str, Any]:
    """The /v1/models answer."""
    if "models_shape_bad" in faults:
        data = [{**m, "object": "engine", "created": "2024-01-01T00:00:00Z"} for m in data]
    return {"object": "list", "data": data}


# Old (pre-rename) vLLM names for ITL and KV cache; names no profile knows for the others.
_RENAMES: tuple[tuple[str, str], ...] = (
    ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    ("vllm:time_to_first_token_seconds", "vllm:first_token_latency_seconds"),
    ("vllm:e2e_request_latency_seconds", "vllm:request_latency_seconds"),
    ("vllm:num_requests_waiting", "vllm:queue_length"),
)


def metrics_text(text: str, faults: frozenset[str], names: str = "new") -> str:
    """The /metrics exposition text, with vLLM's renamed metrics under the `names` asked for."""
    if "metrics_renamed" in faults:
        for new, old in _RENAMES:
            text = text.replace(new, old)
        text += ("# HELP vllm:time_per_output_token_seconds Histogram.\n"
                 "# TYPE vllm:time_per_output_token_seconds histogram\n"
                 'vllm:time_per_output_token_seconds_bucket{le="+Inf"} 0\n'
                 "vllm:time_per_output_token_seconds_count 0\n"
                 "vllm:time_per_output_token_seconds_sum 0.0\n")
    if "metrics_old_names_frozen" in faults:
        return vllm_names(text, "both", frozen_old=True)
    return vllm_names(text, names)


def chat_response(payload: dict[str, Any], faults: frozenset[str]) -> dict[str, Any]:
    """A non-streamed chat.completion."""
    if not faults:
        return payload
    for choice in payload["choices"]:
        if "finish_reason_invalid" in faults and choice["finish_reason"] in ("stop", "length"):
            choice["finish_reason"] = "eos_token"
        if "n_wrong_indices" in faults:
            choice["index"] = 0
        msg = choice.get("message") or {}
        if "answer_in_reasoning" in faults and isinstance(msg.get("content"), str):
            msg["reasoning_content"], msg["content"] = msg["content"], None
        lp = choice.get("logprobs")
        if "logprobs_mismatch" in faults and lp and lp.get("content"):
            first = lp["content"][0]
            first["token"] = "X" + first["token"]
            first["bytes"] = list(first["token"].encode())
    if "usage_total_wrong" in faults:
        payload["usage"]["total_tokens"] += 1
    return payload


def completion_response(payload: dict[str, Any], faults: frozenset[str]) -> dict[str, Any]:
    """A non-streamed legacy text_completion."""
    if "completions_shape_bad" in faults:
        payload["object"] = "completion"
        for choice in payload["choices"]:
            del choice["index"]
    return payload


def stream_content_type(faults: frozenset[str]) -> str:
    """The content-type of a streamed answer."""
    return "application/json" if "stream_content_type_wrong" in faults else "text/event-stream"


def load_stream_faults(config: FakeConfig, in_flight: int) -> tuple[frozenset[str], bool]:
    """The faults a streamed chat answer is shaped with while `in_flight` chat requests are in the server
    (itself counted), and whether its usage is miscounted (the consistency knobs of FakeConfig)."""
    faults = config.faults
    double = config.double_finish_under_load
    if double is not None and in_flight > double:
        faults = faults | {"stream_double_finish"}
    miscount = config.usage_miscount_under_load
    return faults, miscount is not None and in_flight > miscount


def miscounted(usage: dict[str, Any]) -> dict[str, Any]:
    """usage_miscount_under_load: a quarter of the completion tokens (at least one), the totals to match."""
    out = dict(usage)
    out["completion_tokens"] = max(1, usage["completion_tokens"] // 4)
    out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]
    return out


class StreamShaper:
    """Rewrites each event of one stream; `usage` is what a spurious usage chunk reports."""

    def __init__(self, faults: frozenset[str], usage: Mapping[str, int], number: int = 0) -> None:
        self.faults = faults
        self.usage = dict(usage)
        # stream_cut_most cuts three chat requests in five, by the request's number (from 1; 0: unnumbered)
        self.cut = "stream_error_chunk" in faults or (
            "stream_cut_most" in faults and number > 0 and number % 5 in (0, 1, 3))
        self.sent = 0
        self.content_chunks = 0
        self.dropped_text = False
        self.broken = False
        self.tool_names: dict[int, str] = {}
        """The function name of each streamed tool call, by its index (for stream_tool_name_repeated)."""

    def __call__(self, payload: Payload) -> list[Payload]:
        """The events to send instead of `payload` (none, one or several)."""
        faults = self.faults
        if self.broken:
            return []
        if isinstance(payload, str):
            out: list[Payload] = []
            if "usage_without_asking" in faults:
                out.append({"id": self._id(), "object": "chat.completion.chunk", "created": 0,
                            "model": "", "choices": [], "usage": self.usage})
            if "stream_no_done" not in faults:
                out.append(payload)
            return out
        chunk = copy.deepcopy(payload)
        choices = chunk.get("choices") or []
        has_text = any((c.get("delta") or {}).get("content") or c.get("text") for c in choices)
        if has_text:
            self.content_chunks += 1
            if "stream_text_differs" in faults and not self.dropped_text:
                self.dropped_text = True
                return []
            if self.cut and self.content_chunks == 3:
                self.broken = True
                return [{"error": {"message": "the engine failed while generating", "type": "server_error",
                                   "param": None, "code": None}}, "[DONE]"]
        if "stream_inconsistent_id" in faults:
            chunk["id"] = self._id()
        for choice in choices:
            delta = choice.get("delta") or {}
            if "stream_no_role" in faults:
                delta.pop("role", None)
            if "n_wrong_indices" in faults:
                choice["index"] = 0
            if "finish_reason_invalid" in faults and choice.get("finish_reason") in ("stop", "length"):
                choice["finish_reason"] = "eos_token"
            for frag in delta.get("tool_calls") or []:
                self._tool_fragment(frag)
        if chunk.get("usage") is not None and "usage_chunk_with_choices" in faults:
            chunk["choices"] = [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]
        if "usage" in chunk and chunk["usage"] is None and "usage_every_chunk" in faults:
            chunk["usage"] = self.usage
        repeat = 2 if ("stream_double_finish" in faults
                       and any(c.get("finish_reason") for c in choices)) else 1
        return [chunk] * repeat

    def _tool_fragment(self, frag: dict[str, Any]) -> None:
        """Bend one streamed tool-call fragment: its name repeated, its type dropped, its index 0."""
        faults = self.faults
        fn = frag.get("function")
        index = frag.get("index")
        if isinstance(fn, dict) and isinstance(index, int):
            if fn.get("name"):
                self.tool_names[index] = fn["name"]
            elif "stream_tool_name_repeated" in faults and index in self.tool_names:
                fn["name"] = self.tool_names[index]
        if "stream_tool_type_missing" in faults:
            frag.pop("type", None)
        if "stream_tool_index_zero" in faults:
            frag["index"] = 0

    def _id(self) -> str:
        self.sent += 1
        return f"chatcmpl-shaped-{self.sent}"


RUNAWAY_CALLS = 100_000
"""How many extra tool calls tool_required_runaway streams at most (a client gives up long before)."""


async def run_away(resp: web.StreamResponse, chunk: Callable[[list[dict[str, Any]]], dict[str, Any]],
                   calls: list[dict[str, Any]], delay: Callable[[], float]) -> None:
    """tool_required_runaway: after the answer's own tool calls, stream copies of them, one call a
    token step, with no finish_reason, RUNAWAY_CALLS times (SGLang #13514: a required choice streams
    past max_tokens; a client stops reading long before the end)."""
    if not calls:
        return
    for k in range(len(calls), len(calls) + RUNAWAY_CALLS):
        call = calls[k % len(calls)]
        frag = {"index": k, "id": f"call_runaway_{k}", "type": "function",
                "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}}
        await resp.write(encode(chunk([{"index": 0, "delta": {"tool_calls": [frag]}, "logprobs": None,
                                        "finish_reason": None}])))
        await asyncio.sleep(delay())


def shape(resp: web.StreamResponse, payload: Payload) -> list[Payload]:
    """The events to send for `payload` on a response that may carry a StreamShaper."""
    shaper = resp.get("inferaccept_shaper")
    return shaper(payload) if isinstance(shaper, StreamShaper) else [payload]


def encode(payload: Payload) -> bytes:
    """One SSE event."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n".encode()
