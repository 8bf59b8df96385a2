"""Embeddings: shape, encodings (float, base64, the SDK's default), dimensions, finiteness, usage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from pytest_inferaccept.checks import fail, require
from pytest_inferaccept.checks.embeddings import (
    EMBEDDINGS_PATH,
    base64_vector,
    check_close,
    check_dimensions_answer,
    check_finite,
    check_same_dimension,
    check_usage,
    embedding_items,
    float_vector,
    post_embeddings,
)
from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.server import ServerUnderTest

if TYPE_CHECKING:
    import openai

# Different lengths and characters, so that a length-dependent defect shows.
INPUTS = ["The quick brown fox jumps over the lazy dog.", "Hello", "Embeddings are lists of numbers.",
          "abc"]

pytestmark = pytest.mark.capability("embeddings")


def _floats(client: httpx.Client, model: str, inputs: str | list[str]) -> list[list[float]]:
    body = post_embeddings(client, {"model": model, "input": inputs, "encoding_format": "float"})
    count = 1 if isinstance(inputs, str) else len(inputs)
    return [float_vector(v, f"data[{i}].embedding") for i, v in enumerate(embedding_items(body, count))]


def test_a_string_input_gets_one_embedding(embedding_http_client: httpx.Client, embedding_model: str,
                                           inferaccept_evidence: Evidence) -> None:
    vectors = _floats(embedding_http_client, embedding_model, INPUTS[0])
    inferaccept_evidence.record("dimension", len(vectors[0]))


def test_a_list_input_gets_one_embedding_per_item_indexed_in_order(embedding_http_client: httpx.Client,
                                                                   embedding_model: str) -> None:
    vectors = _floats(embedding_http_client, embedding_model, INPUTS[:3])
    require(vectors[0] != vectors[1], "two different inputs got the same embedding",
            f"first values: {vectors[0][:4]}")


def test_embedding_vectors_are_finite(embedding_http_client: httpx.Client, embedding_model: str) -> None:
    check_finite(_floats(embedding_http_client, embedding_model, INPUTS))


def test_embedding_dimension_is_the_same_for_every_input_and_call(embedding_http_client: httpx.Client,
                                                                  embedding_model: str,
                                                                  inferaccept_evidence: Evidence) -> None:
    batch = check_same_dimension(_floats(embedding_http_client, embedding_model, INPUTS), INPUTS)
    single = len(_floats(embedding_http_client, embedding_model, INPUTS[-1])[0])
    inferaccept_evidence.record("dimension", batch)
    require(single == batch, f"a single-input call gave {single} values, the batch call {batch}",
            f"input: {INPUTS[-1]!r}")


def test_base64_embeddings_decode_to_the_float_vectors(embedding_http_client: httpx.Client,
                                                       embedding_model: str) -> None:
    floats = _floats(embedding_http_client, embedding_model, INPUTS[:2])
    body = post_embeddings(embedding_http_client, {"model": embedding_model, "input": INPUTS[:2],
                                                   "encoding_format": "base64"})
    for i, value in enumerate(embedding_items(body, 2)):
        where = f"data[{i}].embedding"
        check_close(base64_vector(value, where), floats[i], f"base64 {where} (little-endian float32)")


@pytest.fixture
def embedding_sdk(openai_client: openai.OpenAI, inferaccept_server: ServerUnderTest) -> openai.OpenAI:
    """The official SDK pointed at the embedding endpoint (it may be another server)."""
    if inferaccept_server.embedding_url == inferaccept_server.base_url:
        return openai_client
    return openai_client.with_options(base_url=f"{inferaccept_server.embedding_url}/v1")


def test_sdk_default_embeddings_equal_the_float_vectors(embedding_http_client: httpx.Client,
                                                        embedding_sdk: openai.OpenAI,
                                                        embedding_model: str) -> None:
    # openai-python asks for base64 when the caller names no encoding_format, and decodes it itself.
    import openai

    floats = _floats(embedding_http_client, embedding_model, INPUTS[:2])
    try:
        answer = embedding_sdk.embeddings.create(model=embedding_model, input=INPUTS[:2])
    except openai.APIError as exc:
        fail(f"the OpenAI SDK's default embeddings call (encoding_format=base64) failed: "
             f"{type(exc).__name__}", str(exc)[:500])
    require(len(answer.data) == 2, f"the SDK got {len(answer.data)} embeddings for 2 inputs")
    for item in answer.data:
        require(isinstance(item.embedding, list), "the SDK did not get a vector",
                f"data[{item.index}].embedding is {type(item.embedding).__name__}")
        check_close(item.embedding, floats[item.index], f"SDK default data[{item.index}].embedding")


def test_dimensions_is_honoured_or_refused(embedding_http_client: httpx.Client, embedding_model: str,
                                           inferaccept_evidence: Evidence) -> None:
    full = len(_floats(embedding_http_client, embedding_model, INPUTS[0])[0])
    if full < 2:
        pytest.skip(f"the model's vectors have {full} value(s), nothing shorter to ask for")
    asked = full // 2
    resp = embedding_http_client.post(EMBEDDINGS_PATH, json={
        "model": embedding_model, "input": INPUTS[0], "encoding_format": "float", "dimensions": asked})
    body: Any
    try:
        body = resp.json()
    except ValueError:
        body = resp.text
    how = check_dimensions_answer(resp.status_code, body, asked, full)
    inferaccept_evidence.record("dimensions", {"full": full, "asked": asked, "answer": how})
    if how == "rejected":
        inferaccept_evidence.note(f"the server refuses dimensions={asked} with {resp.status_code} "
                                  "(allowed: it cannot shorten vectors)")


def test_embedding_usage_counts_the_input_tokens(embedding_http_client: httpx.Client,
                                                 embedding_model: str,
                                                 inferaccept_evidence: Evidence) -> None:
    body = post_embeddings(embedding_http_client, {"model": embedding_model, "input": INPUTS[:2],
                                                   "encoding_format": "float"})
    inferaccept_evidence.record("usage", check_usage(body))
