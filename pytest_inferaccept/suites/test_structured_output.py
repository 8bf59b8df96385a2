"""Structured output: response_format json_object and json_schema, streamed and not.

The schema asks for keys, an enum and an integer range that no prompt alone would produce, so an
answer that validates shows the server constrained the output (llama.cpp #11988 and ollama
#10001 ignored the schema).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks.generation import ChatResult, chat
from pytest_inferaccept.checks.pace import Pace
from pytest_inferaccept.checks.structured import check_json_object, check_schema_instance
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.suites._pace import pace_of, unfinished_is_invalid

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "zq_level": {"type": "integer", "minimum": 7, "maximum": 9},
        "xv_tint": {"type": "string", "enum": ["mauve", "teal"]},
        "kb_open": {"type": "boolean"},
    },
    "required": ["zq_level", "xv_tint", "kb_open"],
    "additionalProperties": False,
}
"""No free-text field: a constrained answer is short, so no model runs out of tokens inside it."""
MAX_TOKENS = 160
MODES = [
    pytest.param(False, id="non-stream"),
    pytest.param(True, id="stream", marks=pytest.mark.capability("stream")),
]


@pytest.fixture
def pace(inferaccept_settings: Settings) -> Pace:
    """The limits a streamed answer is read under, sized from its own pace (checks/pace.py)."""
    return pace_of(inferaccept_settings)


def _body(model: str, prompt: str, response_format: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "temperature": 0, "max_tokens": MAX_TOKENS,
            "messages": [{"role": "user", "content": prompt}], "response_format": response_format}


def _skip_if_cut_inside_json(result: ChatResult) -> None:
    """A JSON answer cut by the token limit cannot be judged; plain text can (it is not JSON)."""
    if result.finish_reason == "length" and result.text.lstrip().startswith(("{", "[")):
        pytest.skip(f"the model used all {MAX_TOKENS} tokens inside its JSON answer, so it cannot be "
                    f"judged: {excerpt(result.text, 200)!r}")


@pytest.mark.capability("json_object")
@pytest.mark.parametrize("stream", MODES)
def test_json_object_mode_answers_a_json_object(http_client: httpx.Client, model: str, stream: bool,
                                                inferaccept_evidence: Evidence, pace: Pace) -> None:
    # OpenAI requires the word JSON in the messages for json_object mode.
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, _body(model, "Describe a cat as a JSON object.",
                                         {"type": "json_object"}), stream, pace)
    inferaccept_evidence.record("text", result.text)
    _skip_if_cut_inside_json(result)
    check_json_object(result.text, f"{'streamed ' if stream else ''}json_object output", result.finish_reason)


@pytest.mark.capability("json_schema")
@pytest.mark.parametrize("stream", MODES)
def test_json_schema_output_validates_against_the_schema(http_client: httpx.Client, model: str,
                                                         stream: bool, inferaccept_evidence: Evidence,
                                                         pace: Pace) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "panel", "strict": True, "schema": SCHEMA}}
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, _body(model, "Describe the weather today. Answer in JSON.", fmt), stream,
                      pace)
    inferaccept_evidence.record("text", result.text)
    _skip_if_cut_inside_json(result)
    check_schema_instance(result.text, SCHEMA, f"{'streamed ' if stream else ''}json_schema output",
                          result.finish_reason)
