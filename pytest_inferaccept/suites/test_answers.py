"""Answer consistency: fixed prompts answered at temperature 0 and a fixed seed, recorded for a baseline.

These checks record; they judge nothing on their own. Given --inferaccept-baseline, the answers
(and embeddings) are compared with the baseline's, and --answer-drift decides what a change means.
"""

from __future__ import annotations

import httpx
import pytest

from pytest_inferaccept.answers import BUNDLED, SEED, AnswerPrompt, AnswersFileError, load_answers_file
from pytest_inferaccept.checks import require
from pytest_inferaccept.checks.embeddings import embedding_items, float_vector, post_embeddings
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.settings import Settings

DIGITS = 6
"""Embedding components are kept to 6 decimals: enough for a cosine to 1e-6, half the bytes."""


def _prompts(settings: Settings) -> list[AnswerPrompt]:
    path = settings.gate.answers_file
    if path is None:
        return list(BUNDLED)
    try:
        return [*BUNDLED, *load_answers_file(path)]
    except AnswersFileError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.mark.capability("chat")
def test_fixed_prompts_are_answered_and_recorded(http_client: httpx.Client, model: str,
                                                 inferaccept_settings: Settings,
                                                 inferaccept_evidence: Evidence) -> None:
    answers = []
    for prompt in _prompts(inferaccept_settings):
        resp = http_client.post("/v1/chat/completions", json={
            "model": model, "messages": list(prompt.messages), "temperature": 0, "seed": SEED,
            "max_tokens": prompt.max_tokens})
        require(resp.status_code == 200, f"prompt {prompt.id!r} answered {resp.status_code}, expected 200",
                excerpt(resp.text, 300))
        choice = resp.json()["choices"][0]
        answers.append({"id": prompt.id, "prompt": prompt.messages[-1]["content"],
                        "text": choice["message"].get("content") or "",
                        "finish_reason": choice.get("finish_reason")})
    inferaccept_evidence.record("answers", answers)


@pytest.mark.capability("embeddings")
def test_fixed_inputs_are_embedded_and_recorded(embedding_http_client: httpx.Client, embedding_model: str,
                                                inferaccept_settings: Settings,
                                                inferaccept_evidence: Evidence) -> None:
    prompts = [p for p in _prompts(inferaccept_settings) if p.embed is not None]
    inputs = [str(p.embed) for p in prompts]
    body = post_embeddings(embedding_http_client, {"model": embedding_model, "input": inputs,
                                                   "encoding_format": "float"})
    vectors = [float_vector(v, f"data[{i}].embedding")
               for i, v in enumerate(embedding_items(body, len(inputs)))]
    inferaccept_evidence.record("embeddings", [
        {"id": p.id, "vector": [round(x, DIGITS) for x in vector]}
        for p, vector in zip(prompts, vectors, strict=True)])
