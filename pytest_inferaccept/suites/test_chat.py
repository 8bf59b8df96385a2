"""Chat completions, not streamed: the response shape, usage, n choices, logprobs, unknown models."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks import require
from pytest_inferaccept.checks.chat import (
    check_chat_completion,
    check_choice_indices,
    check_logprobs,
    check_usage_arithmetic,
    error_envelope,
    ok_json,
)
from pytest_inferaccept.evidence import Evidence, excerpt

CHAT = "/v1/chat/completions"
UNKNOWN_MODEL = "inferaccept-no-such-model"


def _body(model: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": 12, "temperature": 0,
                            "messages": [{"role": "user", "content": "Name three colours."}]}
    body.update(extra)
    return body


@pytest.mark.inferaccept_core
def test_chat_completion_has_the_openai_shape(http_client: httpx.Client, model: str,
                                              inferaccept_evidence: Evidence) -> None:
    data = ok_json(http_client.post(CHAT, json=_body(model)), "chat completion")
    for warning in check_chat_completion(data):
        inferaccept_evidence.warn(warning)


def test_usage_adds_up_and_respects_max_tokens(http_client: httpx.Client, model: str,
                                               inferaccept_evidence: Evidence) -> None:
    data = ok_json(http_client.post(CHAT, json=_body(model, max_tokens=6)), "chat completion")
    inferaccept_evidence.record("usage", data.get("usage"))
    check_usage_arithmetic(data.get("usage"), max_tokens=6)


@pytest.mark.capability("n")
def test_n_returns_n_choices_indexed_from_zero(http_client: httpx.Client, model: str) -> None:
    # temperature > 0: some servers refuse n > 1 with greedy sampling.
    data = ok_json(http_client.post(CHAT, json=_body(model, n=3, temperature=0.8, max_tokens=6)),
                   "chat completion with n=3")
    check_choice_indices(data.get("choices"), 3)
    check_usage_arithmetic(data.get("usage"), max_tokens=6, n=3)


@pytest.mark.capability("logprobs")
def test_logprobs_spell_the_content(http_client: httpx.Client, model: str,
                                    inferaccept_evidence: Evidence) -> None:
    data = ok_json(http_client.post(CHAT, json=_body(model, logprobs=True, top_logprobs=2)),
                   "chat completion with logprobs")
    check_chat_completion(data)
    for choice in data["choices"]:
        for warning in check_logprobs(choice, top_logprobs=2):
            inferaccept_evidence.warn(warning)


def test_unknown_model_is_refused_with_404(http_client: httpx.Client, model: str,
                                           inferaccept_evidence: Evidence) -> None:
    # 404 model_not_found is the contract. 400/422 still refuses the request (a warning); a 2xx
    # means the server silently answered with another model than the one asked for.
    resp = http_client.post(CHAT, json=_body(UNKNOWN_MODEL, max_tokens=2))
    inferaccept_evidence.record("unknown_model_status", resp.status_code)
    require(resp.status_code in (400, 404, 422),
            f"a request for model {UNKNOWN_MODEL!r} answered {resp.status_code}, expected 404 "
            f"(the server serves {model!r})", excerpt(resp.text, 300))
    try:
        body = resp.json()
    except ValueError:
        body = None
    ok, why = error_envelope(body)
    require(ok, f"the {resp.status_code} for an unknown model is not the OpenAI error envelope: {why}",
            excerpt(resp.text, 300))
    if resp.status_code != 404:
        inferaccept_evidence.warn(f"unknown model refused with {resp.status_code}, the contract says 404")
