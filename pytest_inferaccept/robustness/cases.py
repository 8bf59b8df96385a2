"""The catalogue of malformed, hostile and expensive-but-valid requests, as data.

Each case says how to build its request and which class of answer the contract asks for:
`reject` (a 4xx), `accept` (a 2xx, e.g. values at their inclusive bounds) or `either` (the
contract leaves it open; only a 5xx, a hang or a dead server is wrong). JSON bodies and raw bodies
may hold placeholders, expanded by `build()` for the server under test:

- ``{model}`` / ``{embedding_model}``: the served model names;
- ``{long_prompt}``: a prompt of `long_prompt_words` words, beyond any usual context window;
- ``{medium_prompt}``: a 500-word prompt that fits every context window the suites target;
- ``{padding}``: 8 MiB of filler text (a very large body);
- ``{deep}`` (raw bodies only): 10,000 nested JSON arrays.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

Expect = Literal["reject", "accept", "either"]
Endpoint = Literal["chat", "embeddings"]

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
JSON_TYPE = "application/json"
DEEP_NESTING = 10_000
PADDING_BYTES = 8 * 1024 * 1024
MEDIUM_PROMPT_WORDS = 500
WORD = "hello "


@dataclass(frozen=True, kw_only=True)
class Case:
    """One catalogue entry: the request to send and the class of answer it deserves."""

    id: str
    description: str
    expect: Expect
    json: Any = None
    """The JSON body (with placeholders); ignored when `raw` is given."""
    raw: bytes | None = None
    """A raw body (with placeholders), for what JSON cannot express."""
    content_type: str | None = JSON_TYPE
    endpoint: Endpoint = "chat"
    method: str = "POST"
    statuses: tuple[int, ...] = (400,)
    """For reject cases: the statuses that pass outright; another 4xx is judged by the policy."""
    stream: bool = False
    long_prompt: bool = False
    """The body holds {long_prompt}: a 2xx answer is checked for silent truncation."""
    reference: str = ""
    """The real regression this case reproduces, if any."""

    @property
    def path(self) -> str:
        """The request path on the server root."""
        return EMBEDDINGS_PATH if self.endpoint == "embeddings" else CHAT_PATH


@dataclass(frozen=True, kw_only=True)
class Params:
    """What the placeholders expand to for one server."""

    model: str
    embedding_model: str = ""
    long_prompt_words: int = 200_000


@dataclass(frozen=True, kw_only=True)
class RequestSpec:
    """A fully built request: what goes on the wire."""

    case_id: str
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    stream: bool = False
    prompt_words: int | None = None
    """Words in the prompt when the prompt is over-long (for the truncation check)."""


def _expand_text(text: str, params: Params) -> str:
    table = {
        "{model}": params.model,
        "{embedding_model}": params.embedding_model,
        "{long_prompt}": WORD * params.long_prompt_words,
        "{medium_prompt}": WORD * MEDIUM_PROMPT_WORDS,
        "{padding}": "x" * PADDING_BYTES,
    }
    return table.get(text, text)


def _expand(value: Any, params: Params) -> Any:
    if isinstance(value, str):
        return _expand_text(value, params)
    if isinstance(value, list):
        return [_expand(v, params) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, params) for k, v in value.items()}
    return value


def build(case: Case, params: Params) -> RequestSpec:
    """Build the wire request of a case for the given server parameters."""
    if case.raw is not None:
        body = case.raw
        for key in ("model", "embedding_model"):
            literal = json.dumps(getattr(params, key))[1:-1].encode()
            body = body.replace(b"{" + key.encode() + b"}", literal)
        body = body.replace(b"{deep}", b"[" * DEEP_NESTING + b"]" * DEEP_NESTING)
    else:
        body = json.dumps(_expand(case.json, params)).encode()
    headers = {"Content-Type": case.content_type} if case.content_type else {}
    return RequestSpec(case_id=case.id, method=case.method, path=case.path, headers=headers,
                       body=body, stream=case.stream,
                       prompt_words=params.long_prompt_words if case.long_prompt else None)


def _user(content: Any = "Hi") -> list[dict[str, Any]]:
    return [{"role": "user", "content": content}]


def _chat(**fields: Any) -> dict[str, Any]:
    """A valid, cheap chat body with `fields` changed (a value of ... removes the field)."""
    body: dict[str, Any] = {"model": "{model}", "messages": _user(), "max_tokens": 2, "temperature": 0}
    for key, value in fields.items():
        if value is ...:
            body.pop(key, None)
        else:
            body[key] = value
    return body


_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                          "parameters": {"type": "object",
                                                         "properties": {"city": {"type": "string"}}}}}


def _raw_chat(content: bytes) -> bytes:
    """A raw chat body whose user content is the given JSON-string or JSON-value bytes."""
    return (b'{"model": "{model}", "max_tokens": 2, "messages": [{"role": "user", "content": '
            + content + b"}]}")


def _case(id: str, description: str, expect: Expect = "reject", **kw: Any) -> Case:
    return Case(id=id, description=description, expect=expect, **kw)


CATALOGUE: tuple[Case, ...] = (
    # --- the body is not a request at all
    _case("body_not_json", "the body is not JSON", raw=b"this is not json",
          reference="SGLang #3805: malformed JSON answered 500 in plain text"),
    _case("body_truncated_json", "the JSON body is cut short", raw=b'{"model": "{model}", "messages": [{"ro'),
    _case("body_empty", "an empty body with a JSON Content-Type", raw=b""),
    _case("body_json_array", "the JSON body is an array, not an object", json=[_chat()]),
    _case("body_json_string", "the JSON body is a string", json="hello"),
    _case("body_json_null", "the JSON body is null", json=None, raw=b"null"),
    _case("content_type_text_plain", "a valid JSON body sent as text/plain", "either",
          json=_chat(), content_type="text/plain", statuses=(400, 415)),
    # --- required fields
    _case("model_missing", "no model field", json=_chat(model=...)),
    _case("model_not_string", "model is a number", json=_chat(model=42)),
    _case("model_unknown", "a model the server does not serve", json=_chat(model="no-such-model-xyz"),
          statuses=(404, 400)),
    _case("messages_missing", "no messages field", json=_chat(messages=...)),
    _case("messages_empty", "messages is an empty array", json=_chat(messages=[])),
    _case("messages_not_array", "messages is a string", json=_chat(messages="Hi")),
    _case("message_not_object", "a message is a bare string", json=_chat(messages=["Hi"])),
    _case("role_unknown", "a message with role 'wizard'",
          json=_chat(messages=[{"role": "wizard", "content": "Hi"}])),
    _case("role_missing", "a message without a role", json=_chat(messages=[{"content": "Hi"}])),
    _case("content_number", "message content is a number", json=_chat(messages=_user(42))),
    _case("content_object", "message content is an object", json=_chat(messages=_user({"text": "Hi"}))),
    _case("content_part_unknown_type", "a content part of an unknown type",
          json=_chat(messages=_user([{"type": "hologram", "hologram": "Hi"}]))),
    _case("tool_message_without_tool_call_id", "a tool message without tool_call_id",
          json=_chat(messages=[{"role": "user", "content": "Weather?"},
                               {"role": "tool", "content": "sunny"}])),
    # --- sampling parameters out of range, and at their inclusive bounds
    _case("max_tokens_zero", "max_tokens is 0", json=_chat(max_tokens=0)),
    _case("max_tokens_negative", "max_tokens is -5", json=_chat(max_tokens=-5)),
    _case("max_tokens_string", "max_tokens is the string 'ten'", json=_chat(max_tokens="ten")),
    _case("max_tokens_huge", "max_tokens far beyond any context window", json=_chat(max_tokens=10**9)),
    _case("temperature_below_range", "temperature -0.5", json=_chat(temperature=-0.5)),
    _case("temperature_above_range", "temperature 2.5", json=_chat(temperature=2.5)),
    _case("temperature_string", "temperature is the string 'hot'", json=_chat(temperature="hot")),
    _case("temperature_lower_bound", "temperature 0 (inclusive bound)", "accept", json=_chat(temperature=0)),
    _case("temperature_upper_bound", "temperature 2 (inclusive bound)", "accept", json=_chat(temperature=2)),
    _case("top_p_below_range", "top_p -0.1", json=_chat(top_p=-0.1)),
    _case("top_p_above_range", "top_p 1.5", json=_chat(top_p=1.5)),
    _case("top_p_lower_bound", "top_p 0 (inclusive bound)", "accept", json=_chat(top_p=0)),
    _case("top_p_upper_bound", "top_p 1.0 (inclusive bound)", "accept", json=_chat(top_p=1.0),
          reference="TGI #2222: top_p=1.0 rejected with 422"),
    _case("n_zero", "n is 0", json=_chat(n=0)),
    _case("n_huge", "n is one million", json=_chat(n=1_000_000)),
    _case("stop_five_entries", "stop with 5 entries (at most 4 allowed)",
          json=_chat(stop=["a", "b", "c", "d", "e"])),
    _case("stop_non_strings", "stop entries are numbers", json=_chat(stop=[1, 2])),
    _case("top_logprobs_above_range", "top_logprobs 21 (at most 20)",
          json=_chat(logprobs=True, top_logprobs=21)),
    _case("top_logprobs_negative", "top_logprobs -1", json=_chat(logprobs=True, top_logprobs=-1)),
    _case("top_logprobs_without_logprobs", "top_logprobs given while logprobs is false",
          json=_chat(logprobs=False, top_logprobs=2)),
    _case("seed_int64_overflow", "seed 2**64 does not fit in int64", json=_chat(seed=2**64)),
    _case("logit_bias_bad_key", "a logit_bias key that is not a token id", "either",
          json=_chat(logit_bias={"not-a-token": 5}),
          reference="vLLM PR#16529: a bad logit_bias key killed the engine"),
    _case("logit_bias_out_of_vocab", "a logit_bias token id far outside any vocabulary", "either",
          json=_chat(logit_bias={"987654321": 100})),
    _case("stream_not_boolean", "stream is the string 'yes'", json=_chat(stream="yes")),
    # --- structured output and tools
    _case("response_format_unknown_type", "response_format type 'xml'",
          json=_chat(response_format={"type": "xml"})),
    _case("response_format_json_schema_missing", "response_format json_schema without json_schema",
          json=_chat(response_format={"type": "json_schema"})),
    _case("response_format_schema_not_object", "json_schema.schema is a string",
          json=_chat(response_format={"type": "json_schema",
                                      "json_schema": {"name": "x", "schema": "not a schema"}})),
    _case("tool_missing_name", "a tool function without a name",
          json=_chat(tools=[{"type": "function", "function": {"description": "nameless",
                                                              "parameters": {"type": "object"}}}])),
    _case("tool_parameters_not_schema", "a tool whose parameters is a string",
          json=_chat(tools=[{"type": "function",
                             "function": {"name": "f", "parameters": "not a schema"}}])),
    _case("tool_choice_absent_tool", "tool_choice names a function not in tools",
          json=_chat(tools=[_TOOL], tool_choice={"type": "function", "function": {"name": "launch"}})),
    # --- context window
    _case("prompt_over_context", "a prompt far longer than the context window", long_prompt=True,
          json=_chat(messages=_user("{long_prompt}"), max_tokens=1),
          reference="Ollama #4967: silently truncated with 200; llama.cpp #19774: 500 or 400"),
    _case("prompt_over_context_stream", "the same over-long prompt, streamed", long_prompt=True,
          stream=True, json=_chat(messages=_user("{long_prompt}"), max_tokens=1, stream=True),
          reference="SGLang #19996: 200 with the error inside the stream"),
    # --- encoding and size
    _case("invalid_utf8", "the body holds bytes that are not UTF-8",
          raw=_raw_chat(b'"a\xff\xfeb\xc3"')),
    _case("raw_control_character", "an unescaped control character inside a JSON string",
          raw=_raw_chat(b'"a\x01\x1bb"')),
    _case("escaped_control_characters", "escaped NUL, BEL and ESC characters in the content", "either",
          json=_chat(messages=_user("a\u0000b\u0007c\u001bd"))),
    _case("lone_surrogate", "a lone UTF-16 surrogate escape in the content", "either",
          raw=_raw_chat(b'"a\\ud800b"')),
    _case("deep_nesting", "message content nested 10,000 arrays deep",
          raw=_raw_chat(b"{deep}"),
          statuses=(400, 413)),
    _case("large_body", "an 8 MiB body (a huge unknown field)", "either",
          json=_chat(metadata_padding="{padding}"), statuses=(400, 413)),
    # --- embeddings
    _case("embeddings_empty_string", "embeddings input is an empty string", endpoint="embeddings",
          json={"model": "{embedding_model}", "input": ""}),
    _case("embeddings_empty_list", "embeddings input is an empty list", endpoint="embeddings",
          json={"model": "{embedding_model}", "input": []}),
    # --- expensive but valid
    _case("medium_prompt", "a 500-word prompt with max_tokens 1", "accept",
          json=_chat(messages=_user("{medium_prompt}"), max_tokens=1)),
    _case("many_messages", "200 alternating short messages", "accept",
          json=_chat(messages=[{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
                               for i in range(199)], max_tokens=1)),
    _case("stop_four_entries", "stop with 4 entries (the maximum)", "accept",
          json=_chat(stop=["zq1", "zq2", "zq3", "zq4"])),
    _case("unicode_prompt", "emoji, CJK, right-to-left and combining characters", "accept",
          json=_chat(messages=_user("héllo 👋🏽 世界 مرحبا e\u0301 \U0001f9d1\u200d\U0001f680"),
                     max_tokens=8),
          reference="llama.cpp #9195: process died on invalid UTF-8 in its output"),
    _case("stream_with_usage", "a streamed answer with include_usage", "accept",
          json=_chat(stream=True, stream_options={"include_usage": True}, max_tokens=4), stream=True),
    _case("n_four", "n = 4 choices of 2 tokens", "either", json=_chat(n=4)),
    _case("top_logprobs_max", "top_logprobs 20 (the maximum) with logprobs", "either",
          json=_chat(logprobs=True, top_logprobs=20)),
)
"""Every catalogue case, in the order the suite sends them."""

CASES_BY_ID: dict[str, Case] = {c.id: c for c in CATALOGUE}
