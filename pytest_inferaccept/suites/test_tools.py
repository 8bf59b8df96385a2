"""Tool calling: tool_choice auto / required / named / none, streamed deltas, parallel calls,
the agent loop of tool results and answers, and finish_reason, each call checked against the
function's parameter schema and every answer for leaked model syntax (think tags, Harmony markers)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks import CheckFailed, fail, require
from pytest_inferaccept.checks.generation import CHAT_PATH, chat, post_chat, stream_chat
from pytest_inferaccept.checks.pace import Pace, read_paced
from pytest_inferaccept.checks.reasoning import check_no_leak
from pytest_inferaccept.checks.tools import (
    BoundedRead,
    check_finish_reason,
    check_follow_up,
    check_forced_choice,
    check_stream_ends_within,
    check_tool_calls,
    require_calls,
)
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.server import ServerUnderTest
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.suites._pace import pace_of, unfinished_is_invalid

WEATHER: dict[str, Any] = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "the city name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME: dict[str, Any] = {"type": "function", "function": {
    "name": "get_time",
    "description": "Get the current local time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": False}}}
TOOLS = [WEATHER, TIME]
ASK_WEATHER = "What is the weather in Paris, in celsius?"
# Naming the tool invites even a weak model (and the fake's auto mode) to call it.
ASK_WEATHER_BY_NAME = "What is the weather in Paris, in celsius? Use get_weather."
PARALLEL_PROMPT = "Use get_weather and get_time for Paris: I need the weather in celsius and the local time."
MAX_TOKENS = 128
MODES = [
    pytest.param(False, id="non-stream"),
    pytest.param(True, id="stream", marks=pytest.mark.capability("stream")),
]


@pytest.fixture
def pace(inferaccept_settings: Settings) -> Pace:
    """The limits a streamed answer is read under, sized from its own pace (checks/pace.py)."""
    return pace_of(inferaccept_settings)


def _body(model: str, prompt: str, tool_choice: Any, tools: list[dict[str, Any]] | None = None,
          **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "temperature": 0, "max_tokens": MAX_TOKENS,
                            "messages": [{"role": "user", "content": prompt}],
                            "tools": tools or [WEATHER], "tool_choice": tool_choice}
    body.update(extra)
    return body


@pytest.mark.capability("tools")
@pytest.mark.parametrize("stream", MODES)
def test_tool_choice_auto_gives_valid_calls_or_a_plain_answer(http_client: httpx.Client, model: str,
                                                              stream: bool, inferaccept_evidence: Evidence,
                                                              pace: Pace) -> None:
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, _body(model, ASK_WEATHER_BY_NAME, "auto"), stream, pace)
    calls = check_tool_calls(result, [WEATHER])
    inferaccept_evidence.record("calls", [[n, a] for n, a in calls])
    check_no_leak(result, "to a tool_choice auto request")
    if calls:
        check_finish_reason(result, ["tool_calls"], "after the model called a tool (tool_choice auto)")
    else:
        # auto lets the model answer in text; a model that does so has not broken the contract.
        inferaccept_evidence.note(f"with tool_choice auto the model answered without a tool call: "
                                  f"{excerpt(result.text, 200)!r}")
        check_finish_reason(result, ["stop", "length"], "for a text answer without tool calls")


@pytest.mark.capability("tool_choice_required")
@pytest.mark.parametrize("stream", MODES)
def test_tool_choice_required_forces_a_valid_call(http_client: httpx.Client, model: str, stream: bool,
                                                  inferaccept_evidence: Evidence, pace: Pace) -> None:
    body = _body(model, ASK_WEATHER, "required")
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, body, stream, pace)
        # Without a call, the same request with auto shows what the forced choice changed (nothing, when
        # the server's constraint lets text run until max_tokens before any call).
        check_forced_choice(result, None,
                            lambda: chat(http_client, {**body, "tool_choice": "auto"}, stream, pace))
    inferaccept_evidence.record("calls", [[n, a] for n, a in check_tool_calls(result, [WEATHER])])
    check_finish_reason(result, ["tool_calls"], "for a call forced by tool_choice 'required'")


@pytest.mark.capability("tool_choice_named")
@pytest.mark.parametrize("stream", MODES)
def test_tool_choice_named_calls_that_function(http_client: httpx.Client, model: str, stream: bool,
                                               inferaccept_evidence: Evidence, pace: Pace) -> None:
    # The prompt is about the weather while the named tool is get_time: the name must win.
    # A model left to itself does not call get_time for this prompt, so an answer the same as auto's
    # shows a named choice the server ignored (llama-server b11434 logs "Wrong type supplied for
    # parameter 'tool_choice', using default value" and answers as with auto).
    named = {"type": "function", "function": {"name": "get_time"}}
    body = _body(model, ASK_WEATHER, named, tools=TOOLS)
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, body, stream, pace)
        check_forced_choice(result, "get_time",
                            lambda: chat(http_client, {**body, "tool_choice": "auto"}, stream, pace))
    calls = check_tool_calls(result, TOOLS)
    inferaccept_evidence.record("calls", [[n, a] for n, a in calls])
    names = [n for n, _ in calls]
    require(set(names) == {"get_time"}, f"tool_choice named get_time but the calls are {names}",
            excerpt(json.dumps(result.tool_calls), 400))
    # OpenAI itself answers 'stop' for a named choice (vLLM copies it): both are allowed here.
    check_finish_reason(result, ["tool_calls", "stop"], "for a call forced by a named tool_choice")


@pytest.mark.capability("tools")
@pytest.mark.parametrize("stream", MODES)
def test_tool_choice_none_gives_no_tool_calls(http_client: httpx.Client, model: str, stream: bool,
                                              inferaccept_evidence: Evidence, pace: Pace) -> None:
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, _body(model, ASK_WEATHER_BY_NAME, "none"), stream, pace)
    check_no_leak(result, "to a tool_choice none request")
    require(not result.tool_calls, f"tool_choice is 'none' but the answer holds {len(result.tool_calls)} "
            "tool call(s)", excerpt(json.dumps(result.tool_calls), 400))
    check_finish_reason(result, ["stop", "length"], "with tool_choice 'none'")


@pytest.mark.capability("tool_choice_required", "stream")
def test_streamed_tool_call_equals_the_non_streamed_call(http_client: httpx.Client, model: str,
                                                         inferaccept_evidence: Evidence, pace: Pace) -> None:
    body = _body(model, ASK_WEATHER, "required")
    plain = post_chat(http_client, body)
    with unfinished_is_invalid(inferaccept_evidence):
        streamed = chat(http_client, body, True, pace)
    require_calls(plain, "in the non-stream answer although tool_choice is 'required'")
    require_calls(streamed, "in the reassembled stream although tool_choice is 'required'")
    want = check_tool_calls(plain, [WEATHER])
    got = check_tool_calls(streamed, [WEATHER])
    inferaccept_evidence.record("calls", {"non-stream": [[n, a] for n, a in want],
                                          "stream": [[n, a] for n, a in got]})
    require(got == want, "the tool calls rebuilt from stream deltas differ from the non-stream calls "
            "(vLLM #10395)", f"non-stream: {want}\nstream: {got}")
    check_finish_reason(streamed, ["tool_calls"], "at the end of a stream of forced tool calls")


@pytest.mark.capability("parallel_tool_calls")
def test_parallel_tool_calls_come_as_separate_calls(http_client: httpx.Client, model: str,
                                                    inferaccept_server: ServerUnderTest,
                                                    inferaccept_evidence: Evidence) -> None:
    result = post_chat(http_client, _body(model, PARALLEL_PROMPT, "auto", tools=TOOLS,
                                          parallel_tool_calls=True))
    calls = check_tool_calls(result, TOOLS)
    inferaccept_evidence.record("calls", [[n, a] for n, a in calls])
    if len(calls) < 2:
        seen = f"asked for get_weather and get_time, got {len(calls)} call(s): {[n for n, _ in calls]}"
        if "parallel_tool_calls" not in inferaccept_server.required:
            pytest.skip(f"unsupported: parallel_tool_calls: {seen}")
        fail(f"no parallel tool calls: {seen}", result.describe())
    ids = [c["id"] for c in result.tool_calls]
    require(len(set(ids)) == len(ids), f"parallel tool calls share ids: {ids}")
    names = sorted({n for n, _ in calls})
    require(names == ["get_time", "get_weather"], f"parallel calls name {names}, expected both tools")
    check_finish_reason(result, ["tool_calls"], "after parallel tool calls")


AGENT_ROUNDS = (("Paris", ASK_WEATHER), ("Berlin", "And in Berlin?"), ("Rome", "And what about Rome?"))
"""The user's questions of the agent loop, each answered by a get_weather call and its result."""
AGENT_MAX_TOKENS = 128


def _tool_turn(call_id: str, name: str, args: dict[str, Any], output: dict[str, Any]) -> list[dict[str, Any]]:
    """An assistant turn calling one tool (content null) and the tool message answering it."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": json.dumps(output)}]


@pytest.mark.capability("tools")
@pytest.mark.parametrize("stream", MODES)
def test_agent_loop_gets_an_answer_after_every_tool_result(http_client: httpx.Client, model: str,
                                                           stream: bool, inferaccept_evidence: Evidence,
                                                           pace: Pace) -> None:
    # The loop an agent client runs: question, tool call, tool result sent back, answer; three rounds
    # in one conversation. The calls are written here, so no model needs to choose them.
    messages: list[dict[str, Any]] = []
    seen: list[str] = []
    for n, (city, question) in enumerate(AGENT_ROUNDS, 1):
        messages.append({"role": "user", "content": question})
        messages += _tool_turn(f"call_weather_{n}", "get_weather", {"city": city, "unit": "celsius"},
                               {"city": city, "temperature": 18 + n, "unit": "celsius", "sky": "clear"})
        body = {"model": model, "temperature": 0, "max_tokens": AGENT_MAX_TOKENS, "messages": list(messages),
                "tools": [WEATHER], "tool_choice": "auto"}
        with unfinished_is_invalid(inferaccept_evidence):
            result = chat(http_client, body, stream, pace)
        require(result.message.get("role") == "assistant",
                f"the answer's role is {result.message.get('role')!r}, expected 'assistant'",
                result.describe())
        kind = check_follow_up(result, n, len(AGENT_ROUNDS))
        seen.append(kind)
        if kind == "tool calls":
            # Another call is a step of the loop too: the client answers it before the next question.
            check_tool_calls(result, [WEATHER])
            messages.append({"role": "assistant", "content": None, "tool_calls": result.tool_calls})
            messages += [{"role": "tool", "tool_call_id": str(call.get("id")),
                          "content": json.dumps({"city": city, "temperature": 18 + n, "unit": "celsius"})}
                         for call in result.tool_calls]
        else:
            messages.append({"role": "assistant", "content": result.text})
        if kind == "cut":
            inferaccept_evidence.note(f"round {n}: the answer was cut by max_tokens={AGENT_MAX_TOKENS} "
                                      "before any content (finish_reason length)")
    inferaccept_evidence.record("agent_rounds", seen)


@pytest.mark.capability("parallel_tool_calls", "stream")
def test_streamed_parallel_tool_calls_keep_one_index_per_call(http_client: httpx.Client, model: str,
                                                              inferaccept_server: ServerUnderTest,
                                                              inferaccept_evidence: Evidence,
                                                              pace: Pace) -> None:
    with unfinished_is_invalid(inferaccept_evidence):
        result = stream_chat(http_client, _body(model, PARALLEL_PROMPT, "auto", tools=TOOLS,
                                                parallel_tool_calls=True), pace)
    # check_tool_calls reads the fragments first: distinct indices, the name and type once per call.
    calls = check_tool_calls(result, TOOLS)
    inferaccept_evidence.record("calls", [[n, a] for n, a in calls])
    if len(calls) < 2:
        seen = (f"asked for get_weather and get_time, the stream rebuilt {len(calls)} call(s): "
                f"{[n for n, _ in calls]}")
        if "parallel_tool_calls" not in inferaccept_server.required:
            pytest.skip(f"unsupported: parallel_tool_calls: {seen}")
        fail(f"no parallel tool calls in the stream: {seen}", result.describe())
    names = sorted({n for n, _ in calls})
    require(names == ["get_time", "get_weather"],
            f"streamed parallel calls name {names}, expected both tools")
    check_finish_reason(result, ["tool_calls"], "at the end of a stream of parallel tool calls")


REQUIRED_MAX_TOKENS = 64


def _capped(byte_chunks: Iterable[bytes], max_bytes: int, sent: float) -> Iterator[bytes]:
    """The stream's bytes; a finding once more than `max_bytes` came (far more than its tokens need)."""
    size = 0
    for piece in byte_chunks:
        size += len(piece)
        if size > max_bytes:
            fail(f"{size} bytes in {time.monotonic() - sent:.1f} s and still streaming "
                 f"(read capped at {max_bytes} bytes)")
        yield piece


@pytest.mark.capability("tool_choice_required", "stream")
def test_tool_choice_required_stream_ends_within_max_tokens(http_client: httpx.Client, model: str,
                                                            inferaccept_evidence: Evidence,
                                                            pace: Pace) -> None:
    # The read is capped well below the plugin's own bounds: 64 tokens of tool call never need 144 KB
    # of stream, and a runaway is reported as this finding rather than as a timeout. Its time is sized
    # from the stream's own pace: a slow but steady stream is not judged, never called endless.
    body = _body(model, ASK_WEATHER, "required", max_tokens=REQUIRED_MAX_TOKENS, stream=True)
    max_bytes = 2048 * REQUIRED_MAX_TOKENS + 16384
    situation = "for a call forced by tool_choice 'required'"
    sent = time.monotonic()
    with http_client.stream("POST", CHAT_PATH, json=body,
                            **pace.request_options(http_client.timeout.connect or 5.0)) as resp:
        if resp.status_code != 200:
            resp.read()
            fail(f"streamed chat completion answered HTTP {resp.status_code}, expected 200",
                 excerpt(resp.text, 600))
        with unfinished_is_invalid(inferaccept_evidence):
            try:
                raw = read_paced(_capped(resp.iter_bytes(), max_bytes, sent), max_tokens=REQUIRED_MAX_TOKENS,
                                 pace=pace, started=sent)
            except CheckFailed as exc:
                fail(f"{situation} with max_tokens={REQUIRED_MAX_TOKENS}, the stream did not end: "
                     f"{exc.title} (SGLang #13514)", exc.detail)
    read = BoundedRead(raw, time.monotonic() - sent, None)
    inferaccept_evidence.record("stream", {"bytes": len(read.raw), "seconds": round(read.seconds, 3)})
    result = check_stream_ends_within(read, REQUIRED_MAX_TOKENS, situation)
    inferaccept_evidence.record("finish_reason", result.finish_reason)


@pytest.mark.capability("tool_choice_required")
@pytest.mark.parametrize("stream", MODES)
def test_tool_call_cut_by_max_tokens_reports_length(http_client: httpx.Client, model: str, stream: bool,
                                                    inferaccept_evidence: Evidence, pace: Pace) -> None:
    # Three tokens cannot hold a call with two required arguments in any tokenizer, so the forced
    # call is always cut: finish_reason must say so (vLLM #58228 reported tool_calls).
    with unfinished_is_invalid(inferaccept_evidence):
        result = chat(http_client, _body(model, ASK_WEATHER, "required", max_tokens=3), stream, pace)
    inferaccept_evidence.record("cut_answer", result.message)
    check_finish_reason(result, ["length"], "for a forced tool call cut by max_tokens=3")
