"""Legacy completions (POST /v1/completions): the response shape, streamed and not."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks.chat import check_text_completion, ok_json
from pytest_inferaccept.checks.pace import Pace
from pytest_inferaccept.checks.stream import (
    assemble_text,
    check_completion_chunks,
    check_framing,
    check_same_text,
    open_stream,
)
from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.suites._pace import pace_of, unfinished_is_invalid

pytestmark = pytest.mark.capability("completions")

COMPLETIONS = "/v1/completions"


@pytest.fixture
def pace(inferaccept_settings: Settings) -> Pace:
    """The limits a stream is read under, sized from its own pace (checks/pace.py)."""
    return pace_of(inferaccept_settings)


def _body(model: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "prompt": "The weather today is", "max_tokens": 10,
                            "temperature": 0}
    body.update(extra)
    return body


def test_completion_has_the_openai_shape(http_client: httpx.Client, model: str) -> None:
    check_text_completion(ok_json(http_client.post(COMPLETIONS, json=_body(model)), "completion"))


def test_streamed_completion_equals_the_non_streamed_one(http_client: httpx.Client, model: str,
                                                         inferaccept_evidence: Evidence, pace: Pace) -> None:
    plain = ok_json(http_client.post(COMPLETIONS, json=_body(model)), "completion")
    check_text_completion(plain)
    with unfinished_is_invalid(inferaccept_evidence):
        ctype, stream = open_stream(http_client, COMPLETIONS, _body(model, stream=True), pace)
    check_framing(ctype, stream)
    chunks = stream.chunks()
    check_completion_chunks(chunks)
    check_same_text(assemble_text(chunks).get(0, ""), plain["choices"][0]["text"], "completions")
