"""Checks of reasoning models: which field the reasoning travels in, that it stays out of the answer,
and that `stop` and `max_tokens` treat it the way clients rely on.

Reasoning text is a vendor extension beside `content`: `reasoning_content` (DeepSeek, llama.cpp,
SGLang, vLLM until late 2025) or `reasoning` (vLLM since, which stopped sending the old name in
early 2026). A client reading the other name silently gets nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.checks.generation import ChatResult, stop_candidates
from pytest_inferaccept.evidence import excerpt

REASONING_FIELDS: tuple[str, ...] = ("reasoning", "reasoning_content")
"""The names servers send reasoning text under, newest first."""
MARKERS: tuple[str, ...] = ("<think>", "</think>", "<|channel|>", "<|message|>", "<|start|>", "<|end|>")
"""Think tags and gpt-oss Harmony markers: model syntax that a reasoning parser must strip."""
REPEAT_PROBE = 40
"""How many leading characters of the reasoning, found again in the content, count as the
reasoning repeated there (shorter reasoning is not compared: a short phrase may recur honestly)."""

_RENAME = ("vLLM renamed reasoning_content to reasoning in late 2025 and stopped sending the old name "
           "in early 2026; DeepSeek, llama.cpp and SGLang send reasoning_content")


def _mode(result: ChatResult) -> str:
    return "streamed" if result.streamed else "non-stream"


def reasoning_of(result: ChatResult) -> dict[str, str]:
    """The first choice's reasoning text under each field name that carried some: the message's
    fields, or for a stream the concatenated deltas of choice 0."""
    found: dict[str, str] = {}
    if not result.streamed:
        for name in REASONING_FIELDS:
            value = result.message.get(name)
            if isinstance(value, str) and value:
                found[name] = value
        return found
    for chunk in result.chunks:
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            for name in REASONING_FIELDS:
                piece = delta.get(name) if isinstance(delta, dict) else None
                if isinstance(piece, str) and piece:
                    found[name] = found.get(name, "") + piece
    return found


def reasoning_text(result: ChatResult) -> str:
    """The reasoning text of the first choice, whichever field carried it ("" when none did)."""
    found = reasoning_of(result)
    return max(found.values(), key=len) if found else ""


def check_reasoning_field(result: ChatResult, client_reads: str) -> list[str]:
    """The answer carries reasoning text under a name the team's client reads (`client_reads`:
    reasoning, reasoning_content or any). Returns the names it was found under."""
    found = reasoning_of(result)
    mode = _mode(result)
    keys = sorted(result.message) if not result.streamed else sorted(
        {k for c in result.chunks for ch in c.get("choices") or [] if isinstance(ch, dict)
         for k in (ch.get("delta") or {})})
    require(found, f"the {mode} answer carries no reasoning text under {' or '.join(REASONING_FIELDS)}",
            f"{'delta' if result.streamed else 'message'} keys seen: {keys}\n{result.describe()}")
    names = sorted(found)
    if client_reads != "any" and client_reads not in found:
        fail(f"the {mode} answer sends its reasoning only as {' and '.join(names)}; the client reads "
             f"{client_reads!r} (--reasoning-field) and gets no reasoning at all",
             f"{_RENAME}\nreasoning ({len(found[names[0]])} chars): {excerpt(found[names[0]], 200)!r}")
    return names


def markers_in(text: str) -> list[str]:
    """The think tags and Harmony markers a text holds, in the order of MARKERS."""
    return [m for m in MARKERS if m in text]


def marker_problems(result: ChatResult) -> list[str]:
    """What of the answer holds model syntax: content, tool names, tool arguments."""
    problems = []
    found = markers_in(result.text)
    if found:
        problems.append(f"content holds {', '.join(found)}")
    for i, call in enumerate(result.tool_calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        for part in ("name", "arguments"):
            value = fn.get(part)
            found = markers_in(value if isinstance(value, str) else json.dumps(value))
            if found:
                problems.append(f"tool_calls[{i}].function.{part} {excerpt(str(value), 80)!r} holds "
                                f"{', '.join(found)}")
    return problems


def check_no_leak(result: ChatResult, situation: str) -> None:
    """Neither the reasoning text nor think tags or Harmony markers appear in the answer (content,
    tool names, tool arguments), which was asked for none of them."""
    problems = []
    thought = reasoning_text(result).strip()
    if len(thought) >= REPEAT_PROBE and thought[:REPEAT_PROBE] in result.text:
        problems.append(f"content repeats the reasoning text (its first {REPEAT_PROBE} of {len(thought)} "
                        "chars appear again in the content)")
    problems += marker_problems(result)
    require(not problems, f"the {_mode(result)} answer {situation} leaks model syntax or reasoning: "
            + "; ".join(problems),
            "a reasoning parser must move the reasoning out of content and strip its markers (think "
            "tags; gpt-oss Harmony <|channel|>, <|message|>, <|start|>, <|end|>)\n"
            f"content: {excerpt(result.text, 400)!r}\nreasoning: {excerpt(thought, 200)!r}\n"
            f"tool_calls: {excerpt(json.dumps(result.tool_calls), 300)}")


def reasoning_stop_candidates(reasoning: str, content: str) -> list[str]:
    """Words of the reasoning (with their leading space) that the answer does not contain: stop
    strings that may only ever match inside the reasoning."""
    return [w for w in dict.fromkeys(stop_candidates(reasoning)) if w not in content]


def content_stop_candidates(content: str, reasoning: str) -> list[str]:
    """Words of the answer (with their leading space) that the reasoning does not contain."""
    return [w for w in dict.fromkeys(stop_candidates(content)) if w not in reasoning]


def check_stop_spares_reasoning(result: ChatResult, reference: ChatResult, in_reasoning: str,
                                in_content: str | None) -> None:
    """With `stop` = [in_reasoning, in_content?]: the reasoning runs on past `in_reasoning` (a stop
    applies to the answer), and the answer is cut at `in_content` when given, else finishes as the
    reference (same request without stop) did."""
    stops = [s for s in (in_reasoning, in_content) if s]
    ref_thought = reasoning_text(reference)
    thought = reasoning_text(result)
    context = (f"stop={stops!r}\n"
               f"reference reasoning ({len(ref_thought)} chars): {excerpt(ref_thought, 300)!r}\n"
               f"reasoning with stop ({len(thought)} chars): {excerpt(thought, 300)!r}\n"
               f"reference answer: {excerpt(reference.text, 200)!r}\n{result.describe()}")
    if in_reasoning not in thought:
        answer = "an empty answer" if not result.text.strip() else f"an answer of {len(result.text)} chars"
        fail(f"the stop string {in_reasoning!r}, found only in the reasoning, cut the {_mode(result)} "
             f"reasoning short: {len(thought)} chars instead of {len(ref_thought)}, then {answer}, "
             f"finish_reason {result.finish_reason!r} (vLLM #14170)", context)
    check_no_leak(result, "to a request with a stop string found in the reasoning")
    for stop in stops:
        require(stop not in result.text, f"the {_mode(result)} answer contains the stop text {stop!r}",
                context)
    if in_content:
        require(result.text.strip(), f"the {_mode(result)} answer is empty although the reference answer "
                f"has text before the stop string {in_content!r}", context)
        require(result.finish_reason == "stop", f"finish_reason is {result.finish_reason!r} after the stop "
                f"string {in_content!r} matched in the answer, expected 'stop'", context)
    else:
        require(result.finish_reason == reference.finish_reason,
                f"finish_reason is {result.finish_reason!r} with a stop string that occurs only in the "
                f"reasoning; the same request without stop finished {reference.finish_reason!r}", context)


def check_length_for_spent_budget(result: ChatResult, limit: int, field_name: str = "max_tokens") -> None:
    """An answer left empty because the reasoning used up the token limit reports `length`."""
    require(result.finish_reason == "length",
            f"finish_reason is {result.finish_reason!r} for a {_mode(result)} answer whose reasoning used "
            f"up {field_name}={limit} (content empty), expected 'length'",
            "a client reads 'stop' as a finished answer that is empty; 'length' tells it to raise the "
            f"limit (LiteLLM #21041)\nreasoning: {excerpt(reasoning_text(result), 200)!r}\n"
            f"{result.describe()}")


def reasoning_tokens(usage: Mapping[str, Any] | None) -> int | None:
    """usage.completion_tokens_details.reasoning_tokens, when the server reports it."""
    details = (usage or {}).get("completion_tokens_details")
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
