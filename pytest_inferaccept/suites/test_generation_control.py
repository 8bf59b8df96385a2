"""Generation control: stop sequences, token limits and determinism, for any model.

Each check first asks the model for its own deterministic (temperature 0) answer, then derives
what a correct server must return with the parameter under test from that answer: a stop string
is a word the model itself wrote, a token limit is below the length it reached by itself.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks.generation import (
    NEVER_STOP,
    ChatResult,
    chat,
    check_length_result,
    check_same_text,
    check_stop_result,
    completion_tokens,
    post_chat,
    stop_candidates,
)
from pytest_inferaccept.evidence import Evidence

# An open-ended request: even a model that follows no instruction continues it with some text.
PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle. Once upon a time"
REFERENCE_TOKENS = 24
MODES = [
    pytest.param(False, id="non-stream"),
    pytest.param(True, id="stream", marks=pytest.mark.capability("stream")),
]


def _body(model: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "temperature": 0, "max_tokens": REFERENCE_TOKENS,
                            "messages": [{"role": "user", "content": PROMPT}]}
    body.update(extra)
    return body


def _reference(client: httpx.Client, model: str, evidence: Evidence) -> ChatResult:
    """The model's own temperature-0 answer, which the other requests are judged against."""
    ref = post_chat(client, _body(model))
    evidence.record("reference_text", ref.text)
    evidence.record("reference_finish_reason", ref.finish_reason)
    return ref


def _no_material(what: str, ref: ChatResult) -> None:
    pytest.skip(f"the model's own temperature-0 output gives {what}: {ref.text!r} "
                f"(finish_reason {ref.finish_reason!r})")


@pytest.mark.capability("chat")
@pytest.mark.parametrize("stream", MODES)
def test_stop_string_cuts_the_output_right_before_it(http_client: httpx.Client, model: str, stream: bool,
                                                     inferaccept_evidence: Evidence) -> None:
    ref = _reference(http_client, model, inferaccept_evidence)
    words = stop_candidates(ref.text)
    if not words:
        _no_material("no word after the first to use as a stop string", ref)
    stop = words[len(words) // 2]
    inferaccept_evidence.record("stop", stop)
    result = chat(http_client, _body(model, stop=stop), stream)
    check_stop_result(result, ref.text, [stop])


@pytest.mark.capability("chat")
@pytest.mark.parametrize("stream", MODES)
def test_stop_list_cuts_at_the_earliest_of_its_strings(http_client: httpx.Client, model: str, stream: bool,
                                                       inferaccept_evidence: Evidence) -> None:
    ref = _reference(http_client, model, inferaccept_evidence)
    by_position = sorted({ref.text.find(w): w for w in stop_candidates(ref.text)}.items())
    if len(by_position) < 2:
        _no_material("fewer than two distinct words to use as stop strings", ref)
    early = by_position[len(by_position) // 3][1]
    late = by_position[-1][1]
    # The earliest match is deliberately not the list's first entry: every entry must count.
    stops = [late, NEVER_STOP, early]
    inferaccept_evidence.record("stop", stops)
    result = chat(http_client, _body(model, stop=stops), stream)
    check_stop_result(result, ref.text, stops)


@pytest.mark.capability("chat")
@pytest.mark.parametrize("stream", MODES)
def test_multi_token_stop_cuts_the_output_right_before_it(http_client: httpx.Client, model: str,
                                                          stream: bool,
                                                          inferaccept_evidence: Evidence) -> None:
    ref = _reference(http_client, model, inferaccept_evidence)
    spans = [m for m in re.finditer(r" [^\s]+", ref.text) if m.start() > 0]
    if len(spans) < 2:
        _no_material("fewer than two words after the first to build a multi-token stop", ref)
    i = (len(spans) - 1) // 2
    stop = ref.text[spans[i].start():spans[i + 1].end()]
    inferaccept_evidence.record("stop", stop)
    result = chat(http_client, _body(model, stop=stop), stream)
    check_stop_result(result, ref.text, [stop])


def _natural_length(ref: ChatResult) -> int:
    natural = completion_tokens(ref)
    if natural is None:
        pytest.skip("the reference answer has no usage.completion_tokens to pick a limit below it")
    if natural < 2:
        _no_material(f"only {natural} token(s), too few to cut with a smaller limit", ref)
    return natural


def _check_limit(client: httpx.Client, model: str, field_name: str, stream: bool,
                 evidence: Evidence) -> None:
    ref = _reference(client, model, evidence)
    natural = _natural_length(ref)
    limit = min(6, natural - 1)
    extra: dict[str, Any] = {"max_tokens": None, field_name: limit}
    if stream:
        extra["stream_options"] = {"include_usage": True}
    body = {k: v for k, v in _body(model, **extra).items() if v is not None}
    result = chat(client, body, stream)
    evidence.record("limit", limit)
    evidence.record("text", result.text)
    check_length_result(result, limit, field_name, natural)
    if completion_tokens(result) is None:
        evidence.note("the answer carried no usage, so only finish_reason was checked")
    if not ref.text.startswith(result.text):
        evidence.warn(f"text cut by {field_name}={limit} is not a prefix of the uncut temperature-0 "
                      f"text: {result.text!r} vs {ref.text!r}")


@pytest.mark.capability("chat")
@pytest.mark.parametrize("stream", MODES)
def test_max_tokens_cuts_the_output_with_finish_reason_length(http_client: httpx.Client, model: str,
                                                              stream: bool,
                                                              inferaccept_evidence: Evidence) -> None:
    _check_limit(http_client, model, "max_tokens", stream, inferaccept_evidence)


@pytest.mark.capability("chat")
def test_max_completion_tokens_cuts_the_output_with_finish_reason_length(
        http_client: httpx.Client, model: str, inferaccept_evidence: Evidence) -> None:
    _check_limit(http_client, model, "max_completion_tokens", False, inferaccept_evidence)


@pytest.mark.capability("chat")
def test_temperature_zero_gives_the_same_text_twice(http_client: httpx.Client, model: str,
                                                    inferaccept_evidence: Evidence) -> None:
    first = post_chat(http_client, _body(model))
    second = post_chat(http_client, _body(model))
    if not first.text and not second.text:
        _no_material("no text twice, nothing to compare", first)
    check_same_text(first, second, "temperature 0")


@pytest.mark.capability("seed")
def test_fixed_seed_reproduces_sampled_text(http_client: httpx.Client, model: str,
                                            inferaccept_evidence: Evidence) -> None:
    body = _body(model, temperature=1.0, seed=1234)
    first = post_chat(http_client, body)
    second = post_chat(http_client, body)
    if not first.text and not second.text:
        _no_material("no text twice at temperature 1, nothing to compare", first)
    check_same_text(first, second, "seed 1234 at temperature 1")
