"""What the fake model answers to one request: text, tool calls, logprobs and token counts."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_inferaccept.fake import textgen


@dataclass
class Choice:
    """One generated choice, with the token pieces that make up its content."""

    index: int
    pieces: list[str] = field(default_factory=list)
    finish_reason: str = "stop"
    completion_tokens: int = 0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The content as one string."""
        return "".join(self.pieces)


def _limit(body: Mapping[str, Any]) -> int | None:
    value = body.get("max_completion_tokens")
    if value is None:
        value = body.get("max_tokens")
    return int(value) if value is not None else None


def _stops(body: Mapping[str, Any]) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def generate_text(prompt: str, body: Mapping[str, Any], index: int, max_natural: int,
                  json_schema: Mapping[str, Any] | None = None, json_mode: bool = False) -> Choice:
    """Generate one choice's content, honouring max_tokens and stop sequences exactly."""
    temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
    seed = body.get("seed")
    rng = textgen.make_rng(prompt, temperature=temperature, seed=seed, choice=index)
    limit = _limit(body)
    stops = _stops(body)
    choice = Choice(index=index)
    if json_mode or json_schema is not None:
        text = textgen.json_text(json_schema, rng)
        pieces = [text[i:i + 6] for i in range(0, len(text), 6)]
        if limit is not None and limit < len(pieces):
            choice.pieces, choice.finish_reason = pieces[:limit], "length"
        else:
            choice.pieces = pieces
        choice.completion_tokens = len(choice.pieces)
        return choice
    produced = ""
    for token in textgen.tokens(rng, max_natural):
        if limit is not None and choice.completion_tokens >= limit:
            choice.finish_reason = "length"
            return choice
        choice.completion_tokens += 1
        produced += token
        choice.pieces.append(token)
        hits = [produced.find(s) for s in stops if s in produced]
        if hits:
            choice.pieces = _truncate(choice.pieces, min(hits))
            choice.finish_reason = "stop"
            return choice
    choice.finish_reason = "stop"
    return choice


def _truncate(pieces: list[str], cut: int) -> list[str]:
    """Keep the pieces up to character `cut` (a stop sequence may span several tokens)."""
    out: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) >= cut:
            if cut > used:
                out.append(piece[: cut - used])
            break
        out.append(piece)
        used += len(piece)
    return out


def tool_calls_for(body: Mapping[str, Any], prompt_last_user: str, rng_prompt: str) -> list[dict[str, Any]]:
    """Decide which tools the fake model calls, and with which arguments."""
    tools: Sequence[Mapping[str, Any]] = body.get("tools") or []
    choice = body.get("tool_choice", "auto")
    if not tools or choice == "none":
        return []
    functions = {t["function"]["name"]: t["function"] for t in tools}
    if isinstance(choice, Mapping):
        chosen = [choice["function"]["name"]]
    else:
        lowered = prompt_last_user.lower()
        chosen = [name for name in functions if name.lower() in lowered]
        if choice == "required" and not chosen:
            chosen = [next(iter(functions))]
        if body.get("parallel_tool_calls") is False:
            chosen = chosen[:1]
    rng = textgen.make_rng(rng_prompt, temperature=0, seed=None)
    calls = []
    for name in chosen:
        params = functions[name].get("parameters") or {"type": "object", "properties": {}}
        calls.append({
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(textgen.instance_for(params, rng))},
        })
    return calls


def logprobs_for(choice: Choice, top: int) -> dict[str, Any]:
    """Logprobs whose tokens concatenate to the choice's content."""
    content = []
    for i, piece in enumerate(choice.pieces):
        lp = -0.05 * (i % 7 + 1)
        alts = [{"token": piece, "logprob": lp, "bytes": list(piece.encode())}]
        alts += [{"token": f" alt{k}", "logprob": lp - k, "bytes": list(f" alt{k}".encode())}
                 for k in range(1, top)]
        content.append({"token": piece, "logprob": lp, "bytes": list(piece.encode()),
                        "top_logprobs": alts[:top]})
    return {"content": content, "refusal": None}
