"""The Responses API (POST /v1/responses): the response resource, typed input items, instructions,
flattened function tools and their outputs, text.format, max_output_tokens, server-side state with
previous_response_id, error envelopes, streams read from the raw bytes, and the official SDK.

Nothing here assumes a model that follows instructions: whether instructions or an earlier turn
reached the model is measured by usage.input_tokens against the same request without them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from pytest_inferaccept.checks import fail, require
from pytest_inferaccept.checks.responses import (
    RESPONSES_PATH,
    check_cut_by_limit,
    check_error_envelope,
    check_event_order,
    check_function_calls,
    check_response,
    check_stream_assembly,
    check_stream_framing,
    input_tokens,
    items_of,
    output_text,
    output_tokens,
    post_response,
    read_stream,
    stream_response,
)
from pytest_inferaccept.checks.structured import check_schema_instance
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.server import ServerUnderTest

if TYPE_CHECKING:
    import openai

pytestmark = pytest.mark.capability("responses")

PROMPT = "Write one sentence about rivers."
MAX_TOKENS = 64
WEATHER: dict[str, Any] = {
    "type": "function", "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "the city name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False},
    "strict": True}
"""A function tool in the Responses shape: flat, not nested under `function` as in Chat."""
ASK_WEATHER = "What is the weather in Paris, in celsius? Use get_weather."
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"zq_level": {"type": "integer", "minimum": 7, "maximum": 9},
                   "xv_tint": {"type": "string", "enum": ["mauve", "teal"]},
                   "kb_open": {"type": "boolean"}},
    "required": ["zq_level", "xv_tint", "kb_open"],
    "additionalProperties": False,
}
"""Keys, an enum and a range no prompt alone produces: an answer that validates was constrained."""
INSTRUCTIONS = ("You are the night clerk of a small harbour office. Answer every visitor in one calm "
                "sentence, never use lists or headings, never mention these rules, and when a visitor asks "
                "about ships, tides or weather, say that the morning clerk keeps the logbook and will know "
                "more.")
EARLIER = ("Remember this list for later, I will ask about it: amber, basalt, cedar, dune, ember, fjord, "
           "granite, heron, iris, juniper, kelp, lagoon, marble, nectar, orchid, pebble, quartz, reed.")
FOLLOW_UP = "Which word of the list came third?"
LIMIT = 16
ROOM = 256
"""max_output_tokens of the reference request: room for the natural answer (and a model's thinking)."""
"""max_output_tokens below any natural answer to LONG_PROMPT (OpenAI's own minimum is 16)."""
LONG_PROMPT = "Tell a long story about a lighthouse keeper and a storm, in at least ten sentences."
MODES = [pytest.param(False, id="non-stream"), pytest.param(True, id="stream")]
SDK_TOKENS = 256
"""Room for a reasoning model's thinking, so that the SDK's stream usually ends response.completed."""


def _body(model: str, prompt: Any = PROMPT, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "input": prompt, "temperature": 0,
                            "max_output_tokens": MAX_TOKENS}
    body.update(extra)
    return body


def _answer(client: httpx.Client, body: dict[str, Any], stream: bool,
            evidence: Evidence) -> dict[str, Any]:
    """The final response, from the JSON body or from a stream checked on the way."""
    if not stream:
        return post_response(client, body)
    final, warnings = read_stream(stream_response(client, body))
    for warning in warnings:
        evidence.warn(warning)
    return final


def _warn_all(evidence: Evidence, warnings: list[str]) -> None:
    for warning in dict.fromkeys(warnings):
        evidence.warn(warning)


INPUT_FORMS = {
    "string": PROMPT,
    "messages": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": PROMPT}],
    "typed-parts": [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "Answer briefly."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Name a river."}]},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "The Danube.", "annotations": []}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": PROMPT}]},
    ],
}


@pytest.mark.parametrize("form", list(INPUT_FORMS))
def test_a_response_has_the_documented_shape(http_client: httpx.Client, model: str, form: str,
                                              inferaccept_evidence: Evidence) -> None:
    resp = post_response(http_client, _body(model, INPUT_FORMS[form]))
    inferaccept_evidence.record("response", {k: resp.get(k) for k in ("id", "status", "usage")})
    _warn_all(inferaccept_evidence, check_response(resp))
    if resp["status"] == "completed":
        require(items_of(resp, "message"), "a completed response to a plain question has no message item",
                excerpt(json.dumps(resp.get("output")), 400))
    check_cut_by_limit(resp, MAX_TOKENS, "a plain response")


def test_instructions_reach_the_model(http_client: httpx.Client, model: str,
                                      inferaccept_evidence: Evidence) -> None:
    plain = post_response(http_client, _body(model, "Say hello.", max_output_tokens=LIMIT))
    told = post_response(http_client, _body(model, "Say hello.", max_output_tokens=LIMIT,
                                            instructions=INSTRUCTIONS))
    without, with_them = input_tokens(plain, "the response without instructions"), \
        input_tokens(told, "the response with instructions")
    words = len(INSTRUCTIONS.split())
    inferaccept_evidence.record("input_tokens", {"without": without, "with_instructions": with_them,
                                                 "instruction_words": words})
    require(with_them - without >= words // 2,
            f"instructions of {words} words add {with_them - without} input tokens ({without} without them, "
            f"{with_them} with them), at least {words // 2} expected: the instructions never reach the model",
            f"instructions: {INSTRUCTIONS!r}")


def test_a_response_stream_is_well_formed_sse(http_client: httpx.Client, model: str,
                                              inferaccept_evidence: Evidence) -> None:
    stream = stream_response(http_client, _body(model))
    inferaccept_evidence.record("events", len(stream.events))
    _warn_all(inferaccept_evidence, check_stream_framing(stream))


def test_stream_events_come_in_the_documented_order(http_client: httpx.Client, model: str,
                                                    inferaccept_evidence: Evidence) -> None:
    stream = stream_response(http_client, _body(model))
    inferaccept_evidence.record("event_types", list(dict.fromkeys(stream.types)))
    final = check_event_order(stream)
    _warn_all(inferaccept_evidence, check_response(final, "the terminal event's response"))


def test_stream_deltas_add_up_to_the_final_response(http_client: httpx.Client, model: str,
                                                    inferaccept_evidence: Evidence) -> None:
    stream = stream_response(http_client, _body(model))
    final = check_event_order(stream)
    inferaccept_evidence.record("text", output_text(final))
    check_stream_assembly(stream, final)


@pytest.mark.parametrize("stream", MODES)
def test_a_forced_function_call_has_a_call_id_and_json_arguments(http_client: httpx.Client, model: str,
                                                                 stream: bool,
                                                                 inferaccept_evidence: Evidence) -> None:
    body = _body(model, ASK_WEATHER, max_output_tokens=128, tools=[WEATHER], tool_choice="required")
    resp = _answer(http_client, body, stream, inferaccept_evidence)
    _warn_all(inferaccept_evidence, check_response(resp))
    calls = check_function_calls(resp, [WEATHER])
    inferaccept_evidence.record("calls", [[n, a] for n, a in calls])
    if not calls and resp.get("status") == "incomplete":
        pytest.skip("the model used all 128 tokens before it called the function, so the call cannot be "
                    f"judged: {excerpt(json.dumps(resp.get('output')), 200)}")
    require(calls, "no function_call item although tool_choice is 'required'",
            excerpt(json.dumps(resp.get("output")), 400))


def test_a_function_call_output_gets_an_answer(http_client: httpx.Client, model: str,
                                               inferaccept_evidence: Evidence) -> None:
    args = json.dumps({"city": "Paris", "unit": "celsius"})
    turn = [{"role": "user", "content": ASK_WEATHER},
            {"type": "function_call", "call_id": "call_weather_1", "name": "get_weather", "arguments": args},
            {"type": "function_call_output", "call_id": "call_weather_1",
             "output": json.dumps({"temperature": 21, "unit": "celsius", "sky": "clear"})}]
    resp = post_response(http_client, _body(model, turn, tools=[WEATHER]))
    _warn_all(inferaccept_evidence, check_response(resp))
    inferaccept_evidence.record("text", output_text(resp))
    require(items_of(resp, "message") or items_of(resp, "function_call") or resp["status"] == "incomplete",
            "the answer to a function_call_output holds neither a message nor a function call",
            excerpt(json.dumps(resp.get("output")), 400))


@pytest.mark.parametrize("stream", MODES)
def test_text_format_json_schema_is_enforced(http_client: httpx.Client, model: str, stream: bool,
                                             inferaccept_evidence: Evidence) -> None:
    fmt = {"type": "json_schema", "name": "panel", "strict": True, "schema": SCHEMA}
    body = _body(model, "Describe the weather today. Answer in JSON.", max_output_tokens=160,
                 text={"format": fmt})
    resp = _answer(http_client, body, stream, inferaccept_evidence)
    text = output_text(resp)
    inferaccept_evidence.record("text", text)
    if resp.get("status") == "incomplete" and (not text.strip() or text.lstrip().startswith(("{", "["))):
        pytest.skip(f"the model used all 160 tokens before or inside its JSON answer, so it cannot be "
                    f"judged: {excerpt(text, 200)!r}")
    check_schema_instance(text, SCHEMA, f"{'streamed ' if stream else ''}text.format json_schema output",
                          "length" if resp.get("status") == "incomplete" else "stop")


@pytest.mark.parametrize("stream", MODES)
def test_max_output_tokens_ends_the_response_incomplete(http_client: httpx.Client, model: str,
                                                        stream: bool, inferaccept_evidence: Evidence) -> None:
    # The same request with room to spare says whether LIMIT must cut it (temperature 0).
    natural = output_tokens(post_response(http_client, _body(model, LONG_PROMPT, max_output_tokens=ROOM)))
    resp = _answer(http_client, _body(model, LONG_PROMPT, max_output_tokens=LIMIT), stream,
                   inferaccept_evidence)
    inferaccept_evidence.record("response", {"natural_output_tokens": natural,
                                             **{k: resp.get(k) for k in ("status", "incomplete_details",
                                                                         "usage")}})
    if not check_cut_by_limit(resp, LIMIT, f"{'streamed ' if stream else ''}response", natural):
        pytest.skip(f"the model finished within max_output_tokens={LIMIT} by itself ({natural} output tokens "
                    "with room to spare), so the limit cannot be judged: "
                    f"{excerpt(output_text(resp), 200)!r}")


def _stateless(server: ServerUnderTest, reason: str) -> None:
    """The server keeps no responses: a skip, or a failure when the team requires responses_state."""
    if "responses_state" in server.required:
        fail(f"responses_state is required, but {reason}")
    pytest.skip(f"unsupported: responses state ({reason})")


@pytest.mark.capability("responses_state")
def test_previous_response_id_carries_the_earlier_turn(http_client: httpx.Client, model: str,
                                                       inferaccept_server: ServerUnderTest,
                                                       inferaccept_evidence: Evidence) -> None:
    first = post_response(http_client, _body(model, EARLIER, max_output_tokens=LIMIT, store=True))
    if first.get("store") is False:
        _stateless(inferaccept_server, "a response asked with store: true came back with store: false")
    alone = post_response(http_client, _body(model, FOLLOW_UP, max_output_tokens=LIMIT))
    follow = http_client.post(RESPONSES_PATH, json=_body(model, FOLLOW_UP, max_output_tokens=LIMIT,
                                                         previous_response_id=first["id"]))
    if follow.status_code in (400, 404, 422):
        _stateless(inferaccept_server, f"previous_response_id naming a stored response answered "
                   f"{follow.status_code}: {excerpt(follow.text, 200)}")
    require(follow.status_code == 200, f"a follow-up with previous_response_id answered "
            f"{follow.status_code}, expected 200", excerpt(follow.text, 400))
    then = follow.json()
    before, after = input_tokens(alone, "the follow-up alone"), input_tokens(then, "the follow-up")
    words = len(EARLIER.split())
    inferaccept_evidence.record("input_tokens", {"follow_up_alone": before, "with_previous": after,
                                                 "earlier_turn_words": words})
    require(after - before >= words // 2,
            f"previous_response_id adds {after - before} input tokens to the follow-up ({before} alone, "
            f"{after} after a {words}-word turn), at least {words // 2} expected: the earlier turn never "
            "reaches the model (previous_response_id ignored)", f"first response: {first['id']}")
    if then.get("previous_response_id") != first["id"]:
        inferaccept_evidence.warn(f"the follow-up response shows previous_response_id "
                                  f"{then.get('previous_response_id')!r}, not {first['id']!r}")


@pytest.mark.capability("responses_state")
def test_an_unknown_previous_response_id_is_refused(http_client: httpx.Client, model: str,
                                                    inferaccept_evidence: Evidence) -> None:
    unknown = "resp_" + "0" * 32
    resp = http_client.post(RESPONSES_PATH, json=_body(model, FOLLOW_UP, max_output_tokens=LIMIT,
                                                       previous_response_id=unknown))
    require(resp.status_code != 200, f"previous_response_id {unknown!r}, which names no response, was "
            "answered 200: the server ignores previous_response_id (OpenAI answers 404)",
            excerpt(resp.text, 300))
    _warn_all(inferaccept_evidence, check_error_envelope(resp, "an unknown previous_response_id"))


def test_bad_requests_get_an_error_envelope(http_client: httpx.Client, model: str,
                                            inferaccept_evidence: Evidence) -> None:
    no_input = http_client.post(RESPONSES_PATH, json={"model": model})
    warnings = check_error_envelope(no_input, "a request without input")
    nested = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    chat_tool = http_client.post(RESPONSES_PATH, json=_body(model, tools=[nested]))
    warnings += check_error_envelope(chat_tool, "a function tool in the Chat shape (nested under 'function', "
                                     "no name)")
    _warn_all(inferaccept_evidence, warnings)


def test_openai_sdk_reads_responses(openai_client: openai.OpenAI, model: str,
                                    inferaccept_evidence: Evidence) -> None:
    import openai

    try:
        plain = openai_client.responses.create(model=model, input=PROMPT, temperature=0,
                                               max_output_tokens=MAX_TOKENS)
    except Exception as exc:  # whatever the SDK raises is what a user of it meets
        fail(f"openai-python {openai.__version__} raised on responses.create: {type(exc).__name__}: {exc}")
    deltas: list[str] = []
    terminal: list[str] = []
    last: Any = None
    try:
        with openai_client.responses.stream(model=model, input=PROMPT, temperature=0,
                                            max_output_tokens=SDK_TOKENS) as stream:
            for event in stream:
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
                elif event.type in ("response.completed", "response.incomplete", "response.failed"):
                    terminal.append(event.type)
                    last = event.response
            # get_final_response() knows response.completed only: a response cut by the token limit
            # is read from its response.incomplete event.
            completed = stream.get_final_response() if terminal == ["response.completed"] else None
    except Exception as exc:  # a TypeError deep in the SDK is as fatal to its user as an APIError
        fail(f"openai-python {openai.__version__} raised while reading responses.stream(): "
             f"{type(exc).__name__}: {exc}: a client using the official SDK cannot read this stream",
             f"text so far: {''.join(deltas)!r}")
    require(terminal, f"openai-python {openai.__version__} read the whole stream without a terminal event: "
            "its get_final_response() raises", f"text: {''.join(deltas)!r}")
    final: Any = completed or last
    inferaccept_evidence.record("sdk", {"status": plain.status, "stream_status": final.status,
                                        "text": final.output_text})
    require(final.output_text == "".join(deltas),
            "the SDK's final response text differs from the text deltas it delivered",
            f"deltas: {excerpt(''.join(deltas), 300)!r}\nfinal: {excerpt(final.output_text, 300)!r}")
