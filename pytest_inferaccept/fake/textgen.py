"""Deterministic text for the fake server: the same prompt and seed give the same tokens."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

WORDS: tuple[str, ...] = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "the",
    "of", "and", "to", "in", "is", ",", ".", "é", "日本",
)


def make_rng(prompt: str, *, temperature: float, seed: int | None, choice: int = 0) -> random.Random:
    """A generator seeded by the prompt (and seed) when sampling is reproducible, else random."""
    if temperature == 0 or seed is not None:
        key = f"{prompt}\x00{seed}\x00{choice}\x00{temperature if seed is not None else 0}"
        # surrogatepass: a prompt may hold a lone surrogate (the robustness catalogue sends one)
        return random.Random(int.from_bytes(hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:8],
                                            "big"))
    return random.Random()


def tokens(rng: random.Random, max_natural: int) -> Iterator[str]:
    """Yield token strings; the stream ends by itself after a prompt-dependent length."""
    length = rng.randint(max(4, max_natural // 2), max_natural)
    for i in range(length):
        word = rng.choice(WORDS)
        yield word if i == 0 else (word if word in ",." else " " + word)


def count_tokens(text: str) -> int:
    """The fake tokenizer: one token per whitespace-separated piece (at least one)."""
    return max(1, len(text.split()))


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Flatten chat messages into one prompt string."""
    parts = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        parts.append(f"{msg.get('role')}: {content or ''}")
    return "\n".join(parts)


def instance_for(schema: Mapping[str, Any], rng: random.Random, depth: int = 0) -> Any:
    """Build a value that validates against a (simple) JSON schema."""
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props: Mapping[str, Any] = schema.get("properties", {})
        return {k: instance_for(v, rng, depth + 1) for k, v in props.items()} if depth < 6 else {}
    if kind == "array":
        item = schema.get("items", {"type": "string"})
        count = max(int(schema.get("minItems", 1)), 1)
        return [instance_for(item, rng, depth + 1) for _ in range(count)]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.5))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    word = rng.choice(WORDS[:26])
    min_len = int(schema.get("minLength", 0))
    return (word * (min_len // len(word) + 1)) if min_len > len(word) else word


def json_text(schema: Mapping[str, Any] | None, rng: random.Random) -> str:
    """JSON text for response_format: an instance of the schema, or a small object."""
    value = instance_for(schema, rng) if schema else {"answer": rng.choice(WORDS[:26])}
    return json.dumps(value)
