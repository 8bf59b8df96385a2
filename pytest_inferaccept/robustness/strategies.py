"""Hypothesis strategies for chat requests around the contract: valid ones and near misses.

Every generated body keeps max_tokens small (or breaks it), so a valid request stays cheap; the
valid choice comes first in every one_of, so shrinking moves a counterexample toward a valid
request and leaves only what breaks the server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from pytest_inferaccept.robustness.cases import Case

FUZZ_CASE = Case(id="fuzz", description="a generated request", expect="either",
                 statuses=tuple(range(400, 500)))
"""How a generated request is judged: any 2xx or 4xx may be right; never a 5xx, a hang or an
error body outside the envelope."""


@dataclass(frozen=True)
class FuzzRequest:
    """One generated request: the exact body bytes, and whether it asks for a stream."""

    body: bytes
    stream: bool = False


_short_text = st.text(max_size=12)
_weird = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), _short_text,
                   st.floats(allow_nan=True, allow_infinity=True), st.lists(st.integers(), max_size=2),
                   st.dictionaries(_short_text, st.integers(), max_size=2))


def _weighted(valid: st.SearchStrategy[Any], *others: st.SearchStrategy[Any],
              valid_share: int = 2) -> st.SearchStrategy[Any]:
    """Draw `valid` valid_share times in valid_share + 2, else one of the others; an explicit
    weight, since one_of flattens nested one_ofs and would let the many weird branches dominate."""
    rest = st.one_of(*others)
    return st.integers(0, valid_share + 1).flatmap(lambda k: valid if k < valid_share else rest)


def _near(valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return _weighted(valid, invalid, _weird)


_ROLES = ("user", "system", "assistant", "developer")
_valid_message = st.fixed_dictionaries({"role": st.sampled_from(_ROLES), "content": st.text(min_size=1,
                                                                                            max_size=40)})
_near_message = st.fixed_dictionaries(
    {"role": _near(st.sampled_from(_ROLES), st.sampled_from(["tool", "wizard", "", "USER"])),
     "content": _near(st.text(max_size=40),
                      st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "x"]),
                                                      "text": _short_text}), max_size=2))},
    optional={"tool_call_id": _near(st.text(min_size=1, max_size=8), st.just("")),
              "name": _short_text})
_valid_messages = st.lists(_valid_message, min_size=1, max_size=3).map(
    lambda m: [*m[:-1], {**m[-1], "role": "user"}])
# mostly valid, so that most bodies get past message validation and exercise the other fields
_messages = _weighted(_valid_messages, st.lists(_near_message, min_size=0, max_size=3), _weird,
                      valid_share=6)

_TOOL = {"type": "function", "function": {"name": "get_weather",
                                          "parameters": {"type": "object",
                                                         "properties": {"city": {"type": "string"}}}}}
_near_tool = st.fixed_dictionaries({
    "type": _near(st.just("function"), st.just("retrieval")),
    "function": _near(st.fixed_dictionaries({"name": _near(st.just("f"), st.just(""))},
                                            optional={"parameters": _near(st.just({"type": "object"}),
                                                                          st.just({"type": "string"}))}),
                      st.just({}))})

_OPTIONAL: dict[str, st.SearchStrategy[Any]] = {
    "temperature": _near(st.floats(0, 2), st.floats(-5, -0.001) | st.floats(2.001, 50)),
    "top_p": _near(st.floats(0, 1), st.floats(-1, -0.001) | st.floats(1.001, 5)),
    "n": _near(st.integers(1, 2), st.integers(-2, 0) | st.integers(129, 10**9)),
    "seed": _near(st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**66)),
    "stop": _near(st.text(min_size=1, max_size=4) | st.lists(st.text(min_size=1, max_size=4), min_size=1,
                                                             max_size=4),
                  st.lists(_short_text, min_size=5, max_size=6) | st.lists(st.integers(), max_size=2)),
    "logprobs": _near(st.booleans(), st.just("yes")),
    "top_logprobs": _near(st.integers(0, 20), st.integers(21, 10**6) | st.integers(-5, -1)),
    "presence_penalty": _near(st.floats(-2, 2), st.floats(2.001, 100)),
    "frequency_penalty": _near(st.floats(-2, 2), st.floats(-100, -2.001)),
    "response_format": _near(st.sampled_from([{"type": "text"}, {"type": "json_object"}]),
                             st.sampled_from([{"type": "xml"}, {"type": "json_schema"},
                                              {"type": "json_schema", "json_schema": {"schema": 3}}])),
    "tools": _near(st.just([_TOOL]), st.lists(_near_tool, max_size=2)),
    "tool_choice": _near(st.sampled_from(["auto", "none"]),
                         st.sampled_from(["required", "always",
                                          {"type": "function", "function": {"name": "absent"}}])),
    "stream": _near(st.booleans(), st.just("true")),
    "stream_options": _near(st.just({"include_usage": True}), st.just({"include_usage": "x"})),
    "logit_bias": _near(st.just({"1": 1}), st.dictionaries(_short_text, st.floats(-1000, 1000), max_size=2)),
}


def chat_bodies(model: str) -> st.SearchStrategy[dict[str, Any]]:
    """JSON chat bodies: mostly the contract, with near-miss values in any field."""
    return st.fixed_dictionaries(
        {"model": _weighted(st.just(model), st.sampled_from(["", "no-such-model", model.upper() + "x"]),
                            _weird, valid_share=6),
         "messages": _messages,
         # never null or absent: a valid request must stay cheap on a real server
         "max_tokens": _weighted(st.integers(1, 4), st.integers(-3, 0) | st.integers(10**9, 2**64),
                                 _weird.filter(lambda v: v is not None))},
        optional=_OPTIONAL)


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def fuzz_requests(model: str) -> st.SearchStrategy[FuzzRequest]:
    """Generated requests: whole JSON bodies, and now and then a body cut short."""
    bodies = chat_bodies(model)
    whole = bodies.map(lambda b: FuzzRequest(_encode(b), stream=b.get("stream") is True))
    cut = bodies.map(_encode).flatmap(
        lambda raw: st.integers(0, max(len(raw) - 1, 0)).map(lambda i: FuzzRequest(raw[:i])))
    return _weighted(whole, cut, valid_share=6)
