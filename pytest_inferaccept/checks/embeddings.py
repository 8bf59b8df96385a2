"""Checks of POST /v1/embeddings: response shape, encodings, dimensions, finiteness and usage."""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.evidence import excerpt

if TYPE_CHECKING:
    import httpx

EMBEDDINGS_PATH = "/v1/embeddings"
Vector = list[float]


def post_embeddings(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """POST an embeddings request; fail unless it answers 200 with a JSON object."""
    resp = client.post(EMBEDDINGS_PATH, json=body)
    require(resp.status_code == 200, f"/v1/embeddings answered HTTP {resp.status_code}, expected 200",
            f"request: {excerpt(json.dumps(body), 300)}\nbody: {excerpt(resp.text, 500)}")
    try:
        data = resp.json()
    except ValueError:
        fail("/v1/embeddings answered 200 with a body that is not JSON", excerpt(resp.text, 500))
    if not isinstance(data, dict):
        fail("/v1/embeddings answered 200 with JSON that is not an object", excerpt(resp.text, 500))
    return data


def embedding_items(body: dict[str, Any], count: int) -> list[Any]:
    """Check {object: list, data: [{object: embedding, index, embedding}]}; return embeddings by index.

    `data` must hold one entry per input with the indices 0..count-1 (in any order).
    """
    shown = excerpt(json.dumps(body)[:2000], 500)
    require(body.get("object") == "list", f"response object is {body.get('object')!r}, expected 'list'",
            shown)
    data = body.get("data")
    if not isinstance(data, list):
        fail("response has no data array", shown)
    require(len(data) == count, f"data holds {len(data)} embeddings for {count} input(s)", shown)
    by_index: dict[int, Any] = {}
    for pos, item in enumerate(data):
        if not isinstance(item, dict):
            fail(f"data[{pos}] is not an object", shown)
        require(item.get("object") == "embedding",
                f"data[{pos}].object is {item.get('object')!r}, expected 'embedding'", shown)
        index = item.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            fail(f"data[{pos}].index is {index!r}, expected an integer", shown)
        require(index not in by_index, f"data[{pos}].index {index} appears twice",
                f"indices: {[d.get('index') for d in data if isinstance(d, dict)]}")
        by_index[index] = item.get("embedding")
    require(sorted(by_index) == list(range(count)),
            f"data indices are {sorted(by_index)}, expected 0..{count - 1}", shown)
    return [by_index[i] for i in range(count)]


def float_vector(value: Any, where: str) -> Vector:
    """An embedding sent as a JSON array of numbers."""
    if not isinstance(value, list) or not value:
        fail(f"{where} is not a non-empty array of numbers", excerpt(str(value), 200))
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            fail(f"{where} holds {x!r}, not a number", excerpt(str(value), 200))
    return [float(x) for x in value]


def base64_vector(value: Any, where: str) -> Vector:
    """An embedding sent as base64 of little-endian float32 values (the OpenAI encoding)."""
    if not isinstance(value, str):
        fail(f"{where} is {type(value).__name__}, expected a base64 string (encoding_format=base64)",
             excerpt(str(value), 200))
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        fail(f"{where} is not valid base64: {exc}", excerpt(value, 200))
    require(len(raw) % 4 == 0, f"{where} decodes to {len(raw)} bytes, not a whole number of float32",
            excerpt(value, 200))
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def check_close(got: Sequence[float], expected: Sequence[float], what: str, tolerance: float = 1e-6) -> None:
    """Two vectors must have the same length and agree element-wise within `tolerance`."""
    require(len(got) == len(expected),
            f"{what}: vector of {len(got)} values, the float answer has {len(expected)}",
            f"got[:4]={list(got[:4])}, float[:4]={list(expected[:4])}")
    worst = max(range(len(got)), key=lambda i: _gap(got[i], expected[i]), default=0)
    gap = _gap(got[worst], expected[worst]) if got else 0.0
    require(gap <= tolerance,
            f"{what}: element {worst} is {got[worst]!r}, the float answer has {expected[worst]!r} "
            f"(difference {gap:.3g} > {tolerance:g})",
            f"got[:4]={list(got[:4])}, float[:4]={list(expected[:4])}")


def _gap(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.inf
    return abs(a - b)


def check_finite(vectors: Sequence[Sequence[float]]) -> None:
    """No NaN or infinity in any vector, and no all-zero vector."""
    for i, vec in enumerate(vectors):
        bad = [j for j, x in enumerate(vec) if not math.isfinite(x)]
        require(not bad, f"embedding {i} holds {len(bad)} non-finite value(s), first at element {bad[:1]}",
                f"values: {[vec[j] for j in bad[:4]]}")
        require(any(x != 0 for x in vec), f"embedding {i} is all zeros", f"length {len(vec)}")


def check_same_dimension(vectors: Sequence[Sequence[float]], inputs: Sequence[str]) -> int:
    """Every vector has the same length; return it."""
    lengths = [len(v) for v in vectors]
    require(len(set(lengths)) == 1, f"embedding lengths differ between inputs: {lengths}",
            f"inputs: {[excerpt(t, 40) for t in inputs]}")
    return lengths[0]


def check_usage(body: dict[str, Any]) -> dict[str, int]:
    """usage.prompt_tokens and usage.total_tokens are present and positive integers."""
    usage = body.get("usage")
    if not isinstance(usage, dict):
        fail(f"embedding response has no usage object (usage={usage!r})",
             f"keys: {sorted(body)}")
    out: dict[str, int] = {}
    for key in ("prompt_tokens", "total_tokens"):
        value = usage.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            fail(f"usage.{key} is {value!r}, expected a positive integer", f"usage: {usage}")
        out[key] = value
    return out


def check_dimensions_answer(status: int, body: Any, asked: int, full: int) -> str:
    """`dimensions` is honoured (vectors of that length) or refused with a 4xx error envelope.

    Returns "honoured" or "rejected"; a 200 with other-length vectors (silently ignored) fails.
    """
    shown = excerpt(json.dumps(body)[:2000] if not isinstance(body, str) else body, 400)
    if 400 <= status < 500:
        error = body.get("error") if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        require(isinstance(message, str) and message,
                f"dimensions={asked} was refused with {status} but without an "
                "{error: {message, ...}} body", shown)
        return "rejected"
    require(status == 200, f"dimensions={asked} answered HTTP {status}, expected 200 or a 4xx refusal",
            shown)
    if not isinstance(body, dict):
        fail("dimensions request answered 200 without a JSON object", shown)
    vec = float_vector(embedding_items(body, 1)[0], "data[0].embedding")
    if len(vec) == full and asked != full:
        fail(f"dimensions={asked} was silently ignored: 200 with the full {full}-value vector",
             "a server that cannot shorten vectors must refuse the parameter with a 4xx error")
    require(len(vec) == asked, f"dimensions={asked} gave a vector of {len(vec)} values", shown)
    return "honoured"
