"""The Responses API (POST /v1/responses): the response resource, typed input items, instructions,
flattened function tools and their outputs, text.format, max_output_tokens, server-side state with
previous_response_id, error envelopes, streams read from the raw bytes, and the official SDK.

Nothing here assumes a model that follows instructions: whether instructions or an earlier turn
reached the model is measured by usage.input_tokens against the same request without them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from pytest_inferaccept.checks import fail, require
from pytest_inferaccept.checks.responses import (
    RESPONSES_PATH,
    ResponseStream,
    check_call_argument_events,
    check_cut_by_limit,
    check_error_envelope,
    check_error_events,
    check_event_indices,
    check_event_order,
    check_forced_call,
    check_function_calls,
    check_input_tokens_count,
    check_response,
    check_sequence_numbers,
    check_stream_assembly,
    check_stream_framing,
    input_tokens,
    items_of,
    output_text,
    output_tokens,
    post_response,
    read_stream,
    stream_or_refusal,
    stream_response,
    terminal_response,
)
from pytest_inferaccept.checks.structured import check_json_object, check_schema_instance
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
FORCED_TOKENS = 128
"""max_output_tokens of the forced function call: room for a call with two arguments."""
CALL_STARTED = [{"type": "message", "role": "user", "content": ASK_WEATHER},
                {"type": "message", "role": "assistant",
                 "content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "'}]
"""A user turn, then an assistant turn that opens a get_weather call in the Hermes/ChatML tool form: a
server that continues a trailing assistant message (llama-server) streams the call from there, whatever
its model would choose; one that does not answers the forced choice as usual."""
BROKEN_CALL = [{"type": "message", "role": "user", "content": ASK_WEATHER},
               {"type": "message", "role": "assistant",
                "content": '<tool_call>\n{"name": "launch_rocket", "arguments": {'}]
"""An assistant turn that opens a call of a tool that was not declared: a server that continues it cannot
parse the call, and fails after its stream began (llama-server b11434: HTTP 200, response.created,
response.in_progress, then the error)."""


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


def test_stream_events_are_numbered_in_sequence(http_client: httpx.Client, model: str,
                                               inferaccept_evidence: Evidence) -> None:
    stream = stream_response(http_client, _body(model))
    inferaccept_evidence.record("sequence_numbers", [e.get("sequence_number") for e in stream.events][:40])
    check_sequence_numbers(stream)


def test_stream_events_carry_their_output_and_content_index(http_client: httpx.Client, model: str,
                                                            inferaccept_evidence: Evidence) -> None:
    stream = stream_response(http_client, _body(model))
    inferaccept_evidence.record("indices", [[e.get("type"), e.get("output_index"), e.get("content_index")]
                                            for e in stream.events][:12])
    check_event_indices(stream)


def _note_placement(evidence: Evidence, stream: ResponseStream) -> None:
    """Say when events were matched to their items by item id, for want of output_index."""
    unplaced = sum(1 for e in stream.events if ("item_id" in e or "item" in e) and "output_index" not in e)
    if unplaced:
        evidence.note(f"{unplaced} of {len(stream.events)} events carry no output_index: they were matched "
                      "to their output items by item id (the missing index is "
                      "test_stream_events_carry_their_output_and_content_index's finding)")


def test_stream_events_come_in_the_documented_order(http_client: httpx.Client, model: str,
                                                    inferaccept_evidence: Evidence) -> None:
    stream = stream_response(http_client, _body(model))
    inferaccept_evidence.record("event_types", list(dict.fromkeys(stream.types)))
    _note_placement(inferaccept_evidence, stream)
    final = check_event_order(stream)
    _warn_all(inferaccept_evidence, check_response(final, "the terminal event's response"))


def test_stream_deltas_add_up_to_the_final_response(http_client: httpx.Client, model: str,
                                                    inferaccept_evidence: Evidence) -> None:
    stream = stream_response(http_client, _body(model))
    # The deltas are judged against the terminal response whatever the order check finds.
    final = terminal_response(stream)
    inferaccept_evidence.record("text", output_text(final))
    _note_placement(inferaccept_evidence, stream)
    check_stream_assembly(stream, final)


@pytest.mark.parametrize("stream", MODES)
def test_a_forced_function_call_has_a_call_id_and_json_arguments(http_client: httpx.Client, model: str,
                                                                 stream: bool,
                                                                 inferaccept_evidence: Evidence) -> None:
    body = _body(model, ASK_WEATHER, max_output_tokens=FORCED_TOKENS, tools=[WEATHER], tool_choice="required")
    resp = _answer(http_client, body, stream, inferaccept_evidence)
    _warn_all(inferaccept_evidence, check_response(resp))
    calls = check_function_calls(resp, [WEATHER])
    inferaccept_evidence.record("calls", [[n, a] for n, a in calls])
    if not calls and resp.get("status") == "incomplete":
        pytest.skip(f"the model used all {FORCED_TOKENS} tokens before it called the function, so the call "
                    f"cannot be judged: {excerpt(json.dumps(resp.get('output')), 200)}")
    check_forced_call(resp, calls, FORCED_TOKENS)


def test_a_streamed_function_call_ends_with_its_arguments_done(http_client: httpx.Client, model: str,
                                                               inferaccept_evidence: Evidence) -> None:
    body = _body(model, CALL_STARTED, max_output_tokens=FORCED_TOKENS, tools=[WEATHER],
                 tool_choice="required")
    stream = stream_response(http_client, body)
    # Read apart from the order check, so that a call without its .done event is this check's finding.
    final = terminal_response(stream)
    inferaccept_evidence.record("call_events", [t for t in stream.types if "function_call" in t
                                                or t.startswith("response.output_item")][:20])
    if not check_call_argument_events(stream, final):
        pytest.skip(f"the model streamed no function call (status {final.get('status')!r}, "
                    f"{output_tokens(final)} output tokens of {FORCED_TOKENS}), so its argument events "
                    f"cannot be judged: {excerpt(output_text(final), 200)!r}")


def test_a_mid_stream_error_comes_as_an_error_event(http_client: httpx.Client, model: str,
                                                    inferaccept_evidence: Evidence) -> None:
    got = stream_or_refusal(http_client, _body(model, BROKEN_CALL, tools=[WEATHER]))
    if isinstance(got, tuple):
        pytest.skip(f"the server refused the request before streaming (HTTP {got[0]}: "
                    f"{excerpt(got[1], 200)}), so there is no mid-stream error to judge")
    inferaccept_evidence.record("events", [[e.fields.get("event"), excerpt(e.data, 160)]
                                           for e in got.sse.events][-4:])
    if not check_error_events(got):
        pytest.skip(f"the stream carried no error ({len(got.events)} events, last {got.types[-1:]}): the "
                    "server did not fail on the malformed call it was given, so there is no mid-stream error "
                    "to judge")


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


JSON_PROMPT = "Write one sentence about rivers, as JSON."
"""Answered in plain prose by SmolLM2-135M when nothing constrains it: a JSON object answer was made so."""
JSON_TOKENS = 160


@pytest.mark.parametrize("stream", MODES)
def test_text_format_json_object_answers_a_json_object(http_client: httpx.Client, model: str, stream: bool,
                                                       inferaccept_evidence: Evidence) -> None:
    body = _body(model, JSON_PROMPT, max_output_tokens=JSON_TOKENS, text={"format": {"type": "json_object"}})
    resp = _answer(http_client, body, stream, inferaccept_evidence)
    text = output_text(resp)
    used = output_tokens(resp)
    inferaccept_evidence.record("answer", {"status": resp.get("status"), "output_tokens": used, "text": text})
    # A cut answer is judged by its token count too: a server may call a cut response completed, which is
    # test_max_output_tokens_ends_the_response_incomplete's finding, not this one's.
    cut = resp.get("status") == "incomplete" or (used is not None and used >= JSON_TOKENS)
    if cut and (not text.strip() or text.lstrip().startswith("{")):
        pytest.skip(f"the model used all {JSON_TOKENS} tokens before or inside its JSON object, so it cannot "
                    f"be judged: {excerpt(text, 200)!r}")
    check_json_object(text, f"{'streamed ' if stream else ''}text.format json_object output",
                      "length" if cut else "stop")


def test_input_tokens_endpoint_counts_what_the_response_bills(http_client: httpx.Client, model: str,
                                                              inferaccept_evidence: Evidence) -> None:
    body = _body(model, INPUT_FORMS["typed-parts"], max_output_tokens=LIMIT, instructions=INSTRUCTIONS,
                 tools=[WEATHER])
    counted = http_client.post(f"{RESPONSES_PATH}/input_tokens", json=body)
    if counted.status_code in (404, 405, 501):
        pytest.skip(f"unsupported: {RESPONSES_PATH}/input_tokens answered {counted.status_code} (not served)")
    require(counted.status_code == 200, f"{RESPONSES_PATH}/input_tokens answered {counted.status_code}, "
            "expected 200", excerpt(counted.text, 400))
    try:
        answer: object = counted.json()
    except ValueError:
        fail(f"{RESPONSES_PATH}/input_tokens answered 200 with a body that is not JSON",
             excerpt(counted.text, 400))
    resp = post_response(http_client, body)
    count = check_input_tokens_count(answer, resp)
    inferaccept_evidence.record("input_tokens", {"counted": count, "billed": input_tokens(resp, "response")})


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


@dataclass
class _SdkRead:
    """What one of the SDK's two ways of streaming a response read."""

    path: str
    deltas: list[str] = field(default_factory=list)
    terminal: list[str] = field(default_factory=list)
    final: Any = None
    events: list[Any] = field(default_factory=list)
    error: str | None = None

    def summary(self) -> dict[str, Any]:
        """What the evidence keeps of it."""
        return {"events": len(self.events), "terminal": self.terminal, "error": self.error,
                "text": "".join(self.deltas)[:200]}


def _sdk_create_stream(client: openai.OpenAI, model: str) -> _SdkRead:
    """responses.create(stream=True): the SDK's plain event iterator, which keeps no snapshot."""
    read = _SdkRead("responses.create(stream=True)")
    try:
        for event in client.responses.create(model=model, input=PROMPT, temperature=0,
                                             max_output_tokens=SDK_TOKENS, stream=True):
            _take(read, event)
    except Exception as exc:  # whatever the SDK raises is what a user of it meets
        read.error = f"{type(exc).__name__}: {exc}"
    return read


def _take(read: _SdkRead, event: Any) -> None:
    """Keep one SDK event: every event, the text deltas, and the terminal event with its response."""
    read.events.append(event)
    if event.type == "response.output_text.delta":
        read.deltas.append(event.delta)
    elif event.type in ("response.completed", "response.incomplete", "response.failed"):
        read.terminal.append(event.type)
        read.final = event.response


def _sdk_stream_helper(client: openai.OpenAI, model: str) -> _SdkRead:
    """responses.stream(): the SDK's helper, which assembles a snapshot of the response as events come."""
    read = _SdkRead("responses.stream()")
    try:
        with client.responses.stream(model=model, input=PROMPT, temperature=0,
                                     max_output_tokens=SDK_TOKENS) as stream:
            for event in stream:
                _take(read, event)
            # get_final_response() knows response.completed only: a response cut by the token limit
            # is read from its response.incomplete event.
            if read.terminal == ["response.completed"]:
                read.final = stream.get_final_response()
    except Exception as exc:  # a TypeError deep in the SDK is as fatal to its user as an APIError
        read.error = f"{type(exc).__name__}: {exc}"
    return read


def _sdk_fields_missing(events: list[Any]) -> str:
    """Which of the fields the SDK's helper places events by the events lack, in words ('' for none)."""
    about = [e for e in events
             if getattr(e, "item_id", None) is not None or getattr(e, "item", None) is not None]
    parts = [e for e in events if str(getattr(e, "type", "")).startswith(
        ("response.content_part.", "response.output_text.", "response.refusal."))]
    counts = [(name, sum(1 for e in group if getattr(e, name, None) is None), len(group))
              for name, group in (("sequence_number", events), ("output_index", about),
                                  ("content_index", parts))]
    return ", ".join(f"{gone} of {total} without {name}" for name, gone, total in counts if gone)


def test_openai_sdk_reads_responses(openai_client: openai.OpenAI, model: str,
                                    inferaccept_evidence: Evidence) -> None:
    import openai

    version = f"openai-python {openai.__version__}"
    try:
        plain = openai_client.responses.create(model=model, input=PROMPT, temperature=0,
                                               max_output_tokens=MAX_TOKENS)
    except Exception as exc:  # whatever the SDK raises is what a user of it meets
        fail(f"{version} raised on responses.create: {type(exc).__name__}: {exc}")
    # Both client paths are read: llama.cpp's own tests stream with create(stream=True), the Agents SDK
    # and most apps with the stream() helper, and a server can break one and not the other.
    reads = [_sdk_create_stream(openai_client, model), _sdk_stream_helper(openai_client, model)]
    inferaccept_evidence.record("sdk", {"status": plain.status, **{r.path: r.summary() for r in reads}})
    broken = [r for r in reads if r.error]
    if broken:
        said = "; ".join(f"{r.path} raised {r.error}" for r in broken)
        fine = [r for r in reads if not r.error]
        if fine:
            missing = _sdk_fields_missing(fine[0].events)
            said += (f", while {fine[0].path} read the whole stream ({len(fine[0].events)} events, "
                     f"terminal {fine[0].terminal})" + (f"; of those events {missing}" if missing else ""))
        fail(f"{version}: {said}: a client using {' or '.join(r.path for r in broken)} cannot read this "
             "stream", "\n".join(f"{r.path}: text so far {excerpt(''.join(r.deltas), 200)!r}"
                                  for r in broken))
    for read in reads:
        require(read.terminal, f"{version} read the whole stream with {read.path} without a terminal event: "
                "its final response never comes", f"text: {''.join(read.deltas)!r}")
        text = getattr(read.final, "output_text", None)
        require(text == "".join(read.deltas),
                f"with {read.path} the final response text differs from the text deltas the SDK delivered",
                f"deltas: {excerpt(''.join(read.deltas), 300)!r}\nfinal: {excerpt(str(text), 300)!r}")
