"""A good server must not fail a check: the false alarms seen on a real llama-server, each reproduced on
the fake, and the faults those checks exist for still caught."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from pytest_inferaccept.checks import CheckFailed
from pytest_inferaccept.checks.messages import prompt_size
from pytest_inferaccept.checks.pace import CouldNotFinish, Pace, paced, read_paced
from tests.conftest import RunSuite

SYSTEM_CHECK = "test_system_prompt_reaches_the_model"
MESSAGES_ARGS = ["--capabilities", "chat,messages", "--request-timeout", "5"]
LEAK_STREAM = "test_no_reasoning_or_markers_leak_into_the_answer[stream]"
LEAK_ONLY_STREAM = "test_no_reasoning_or_markers_leak_into_the_answer and not non"
BASE = ["--request-timeout", "1", "--capabilities", "chat,stream", "-k", LEAK_ONLY_STREAM]
"""A base limit of 1 s (the paced read waits 4 s at most), which the fake's 32-token answer outlasts;
stream required, so that no capability probe of its own judges the slow stream first."""


# --- cached prompt tokens in Messages usage ---------------------------------------------------------


def test_prompt_size_adds_cache_reads_and_writes_to_input_tokens() -> None:
    assert prompt_size({"input_tokens": 1, "cache_read_input_tokens": 112, "output_tokens": 8}) == 113
    assert prompt_size({"input_tokens": 3, "cache_creation_input_tokens": 60,
                        "cache_read_input_tokens": 50}) == 113
    assert prompt_size({"input_tokens": 17}) == 17
    assert prompt_size({"input_tokens": 17, "cache_read_input_tokens": None}) == 17
    assert prompt_size({"input_tokens": True}) is None
    assert prompt_size({}) is None


def test_system_prompt_check_passes_on_a_server_that_reads_the_prompt_from_its_cache(
        run_suite: RunSuite) -> None:
    warm = run_suite("test_messages", faults=["messages_cache_accounting"], args=MESSAGES_ARGS)
    assert warm.outcome(SYSTEM_CHECK) == "passed", warm.failure(SYSTEM_CHECK)
    # The thinking checks skip on a fake that does not reason; every other check passes.
    judged = {v for k, v in warm.outcomes.items() if not k.startswith("test_thinking_")}
    assert judged == {"passed"}, warm.output[-3000:]


def test_system_prompt_check_still_fails_a_server_that_drops_system_under_cache_accounting(
        run_suite: RunSuite) -> None:
    dropped = run_suite("test_messages", faults=["messages_cache_accounting", "messages_system_ignored"],
                        select=SYSTEM_CHECK, args=MESSAGES_ARGS)
    assert dropped.outcome(SYSTEM_CHECK) == "failed", dropped.output[-3000:]
    said = dropped.failure(SYSTEM_CHECK)
    assert "added 0 input tokens, cached ones counted" in said, said
    assert "input_tokens 1 + cache_read_input_tokens" in said, said


# --- streams judged by their own pace ---------------------------------------------------------------


class _Clock:
    """A clock the fake stream below moves forward."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _event(text: str) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _stream(clock: _Clock, gaps: list[float], end: bool = True) -> Iterator[bytes]:
    """One event after each gap (seconds), then [DONE] when `end`."""
    for gap in gaps:
        clock.now += gap
        yield _event(" word")
    if end:
        yield b"data: [DONE]\n\n"


PACE = Pace(base_s=10.0, stall_s=10.0, ceiling_s=40.0)


def test_a_steady_stream_that_outlasts_the_base_limit_is_read_to_its_end() -> None:
    clock = _Clock()
    raw = read_paced(_stream(clock, [0.5] * 50), max_tokens=64, pace=PACE, clock=clock)
    assert clock.now == pytest.approx(25.0)
    assert raw.endswith(b"data: [DONE]\n\n")


def test_a_steady_stream_too_slow_for_the_ceiling_could_not_finish_and_says_its_pace() -> None:
    clock = _Clock()
    with pytest.raises(CouldNotFinish) as caught:
        read_paced(_stream(clock, [0.5] * 500, end=False), max_tokens=256, pace=PACE, clock=clock)
    said = str(caught.value)
    assert said.startswith("could not finish in time: ")
    assert "at 2.0 tok/s, still delivering" in said, said
    assert clock.now == pytest.approx(40.0, abs=0.6)


def test_a_stream_silent_past_the_stall_limit_is_a_finding() -> None:
    clock = _Clock()
    with pytest.raises(CheckFailed, match=r"the stream stalled: no event for 12\.0 s \(stall limit 10 s"):
        read_paced(_stream(clock, [0.5, 0.5, 12.0, 0.5]), max_tokens=64, pace=PACE, clock=clock)


def test_a_stream_far_past_max_tokens_is_endless_whatever_its_pace() -> None:
    clock = _Clock()
    with pytest.raises(CheckFailed, match=r"sent 145 events .* for max_tokens=64 and had not ended"):
        read_paced(_stream(clock, [0.01] * 400, end=False), max_tokens=64, pace=PACE, clock=clock)


def test_slow_but_steady_leak_stream_is_not_judged_instead_of_failed(run_suite: RunSuite) -> None:
    slow = run_suite("test_reasoning", args=BASE, itl=0.25)
    assert slow.outcome(LEAK_STREAM) == "skipped", slow.output[-3000:]
    assert "could not finish in time: " in slow.output
    assert "still delivering" in slow.output
    assert "VERDICT: INVALID" in slow.output, slow.output[-3000:]


def test_a_leak_stream_slower_than_the_base_limit_but_steady_is_judged(run_suite: RunSuite) -> None:
    steady = run_suite("test_reasoning", args=BASE, itl=0.07)
    assert steady.outcome(LEAK_STREAM) == "passed", steady.output[-3000:]


@pytest.mark.parametrize(("fault", "says"), [("stream_forever", "is an endless stream"),
                                             ("stream_drip", "the stream stalled: no event for"),
                                             ("stream_stall", "the stream stalled: no byte for")])
def test_a_stream_that_never_ends_or_stalls_still_fails_the_leak_check(run_suite: RunSuite, fault: str,
                                                                       says: str) -> None:
    bad = run_suite("test_reasoning", faults=[fault], args=BASE)
    assert bad.outcome(LEAK_STREAM) == "failed", bad.output[-3000:]
    assert says in bad.failure(LEAK_STREAM), bad.failure(LEAK_STREAM)


# --- every streamed check judged by its stream's pace, not by the client's whole-exchange limit ------

STREAMING = ["--request-timeout", "1", "--capabilities", "chat,stream,stream_usage,n",
             "-k", "not text and not concurrent"]
"""The streaming checks that read only streams (the others also send a plain request, which a slow server
answers in no less time than its stream and is bound by --request-timeout alone)."""
WELL_FORMED = "test_stream_is_well_formed_sse_ending_with_done"
REQUIRED_ENDS = "test_tool_choice_required_stream_ends_within_max_tokens"
TOOL_STREAMS = ["--request-timeout", "2", "--capabilities", "chat,stream,tools,tool_choice_required"]


def test_slow_but_steady_streams_pass_every_streaming_check(run_suite: RunSuite) -> None:
    # 12 tokens 0.15 s apart: about 1.8 s, past the 1 s request timeout, well within the paced 4 s.
    slow = run_suite("test_streaming", args=STREAMING, itl=0.15)
    assert len(slow.outcomes) == 5, slow.output[-3000:]
    assert set(slow.outcomes.values()) == {"passed"}, slow.output[-3000:]
    assert "no end in" not in slow.output


def test_a_slow_but_steady_forced_tool_call_stream_is_read_to_its_end(run_suite: RunSuite) -> None:
    # The call's events come 1.2 s and 1.9 s after the request: past the 0.8 x 2 s the read once allowed,
    # each within the 2 s stall limit.
    slow = run_suite("test_tools", args=[*TOOL_STREAMS, "-k", "ends_within"], ttft=1.2, itl=0.7)
    assert slow.outcome(REQUIRED_ENDS) == "passed", slow.output[-3000:]


def test_slow_but_steady_tool_and_structured_streams_are_judged(run_suite: RunSuite) -> None:
    agent = run_suite("test_tools", args=[*TOOL_STREAMS, "-k", "agent_loop and not non"], itl=0.06)
    assert agent.outcome("test_agent_loop_gets_an_answer_after_every_tool_result[stream]") == "passed", \
        agent.output[-3000:]
    structured = run_suite("test_structured_output", itl=0.35, args=[
        "--request-timeout", "1", "--capabilities", "chat,stream,json_object,json_schema",
        "-k", "stream and not non"])
    assert set(structured.outcomes.values()) == {"passed"}, structured.output[-3000:]
    assert len(structured.outcomes) == 2, structured.output[-3000:]


def test_an_sdk_stream_slower_than_the_request_timeout_is_read_to_its_end_at_its_pace() -> None:
    from pytest_inferaccept.fake import FakeServer
    from pytest_inferaccept.http import make_openai_client
    from pytest_inferaccept.settings import Settings
    from pytest_inferaccept.suites._pace import pace_of

    settings = Settings(request_timeout=1.0)
    pace = pace_of(settings)
    with FakeServer(itl=0.15) as server:
        client = make_openai_client(settings, f"{server.url}/v1", asynchronous=False)
        stream = client.chat.completions.create(
            model=server.config.model, max_tokens=12, temperature=0, stream=True,
            messages=[{"role": "user", "content": "Write one sentence about rivers."}],
            timeout=pace.byte_wait_s)
        chunks = list(paced(stream, max_tokens=12, pace=pace))
    assert chunks[-1].choices == [] or chunks[-1].choices[0].finish_reason is not None
    assert sum(bool(c.choices and c.choices[0].delta.content) for c in chunks) >= 10


def test_a_slow_servers_stream_probe_says_supported_not_broken(run_suite: RunSuite) -> None:
    # stream not required: the probe (8 tokens 0.25 s apart, 1.75 s against a 1 s request timeout) decides.
    slow = run_suite("test_streaming", args=["--request-timeout", "1", "--capabilities", "chat",
                                             "-k", "well_formed"], itl=0.25)
    assert slow.outcome(WELL_FORMED) == "passed", slow.output[-3000:]
    assert re.search(r"stream +supported +probed", slow.output), slow.output[-3000:]


@pytest.mark.parametrize(("fault", "says"), [("stream_forever", "is an endless stream"),
                                             ("stream_drip", "the stream stalled: no event for"),
                                             ("stream_stall", "the stream stalled: no byte for")])
def test_a_stream_that_never_ends_or_stalls_still_fails_the_streaming_checks(run_suite: RunSuite, fault: str,
                                                                             says: str) -> None:
    bad = run_suite("test_streaming", faults=[fault], select=WELL_FORMED,
                    args=["--request-timeout", "1", "--capabilities", "chat,stream"])
    assert bad.outcome(WELL_FORMED) == "failed", bad.output[-3000:]
    assert says in bad.failure(WELL_FORMED), bad.failure(WELL_FORMED)


@pytest.mark.parametrize(("fault", "says"), [("stream_forever", "is an endless stream"),
                                             ("stream_stall", "the stream stalled: no byte for")])
def test_a_forced_tool_call_stream_that_never_ends_or_stalls_still_fails(run_suite: RunSuite, fault: str,
                                                                         says: str) -> None:
    bad = run_suite("test_tools", faults=[fault], select=REQUIRED_ENDS, args=TOOL_STREAMS)
    assert bad.outcome(REQUIRED_ENDS) == "failed", bad.output[-3000:]
    assert "the stream did not end: " in bad.failure(REQUIRED_ENDS), bad.failure(REQUIRED_ENDS)
    assert says in bad.failure(REQUIRED_ENDS), bad.failure(REQUIRED_ENDS)


def test_an_endless_stream_still_makes_the_stream_probe_say_broken(run_suite: RunSuite) -> None:
    bad = run_suite("test_streaming", faults=["stream_forever"], select=WELL_FORMED,
                    args=["--request-timeout", "1", "--capabilities", "chat"])
    assert bad.outcome(WELL_FORMED) == "skipped", bad.output[-3000:]
    assert re.search(r"stream +broken +probed +stream failed: the stream sent \d+ events in [\d.]+ s for "
                     r"max_tokens=8 and had not ended", bad.output), bad.output[-3000:]


def test_a_silent_stream_is_a_stall_at_the_stall_limit_not_at_the_paced_ceiling(run_suite: RunSuite) -> None:
    # Each byte is waited for --stall-timeout (1 s here); only the whole exchange gets the paced 4 s + 1 s.
    bad = run_suite("test_streaming", faults=["stream_stall"], select=WELL_FORMED,
                    args=["--request-timeout", "1", "--capabilities", "chat,stream"])
    found = re.search(r"no byte for ([\d.]+) s", bad.failure(WELL_FORMED))
    assert found, bad.failure(WELL_FORMED)
    assert 0.9 <= float(found.group(1)) < 3.0, found.group(0)


def test_a_stream_probe_that_cannot_see_the_end_in_time_says_streaming_works_and_usage_undecided() -> None:
    from pytest_inferaccept.fake import FakeServer
    from pytest_inferaccept.http import make_client
    from pytest_inferaccept.probes import probe_stream, probe_stream_usage
    from pytest_inferaccept.server import ServerUnderTest

    # 8 tokens 1 s apart against a 1.5 s base: the paced limit (4 x 1.5 s) runs out before the end.
    with FakeServer(itl=1.0) as fake:
        server = ServerUnderTest(base_url=fake.url, model=fake.config.model, embedding_url=fake.url,
                                 embedding_model=None, served_models=(), required=("chat",))
        with make_client("", api_key=None, request_timeout=1.5, connect_timeout=5.0,
                         evidence=lambda: None) as client:
            streams = probe_stream(client, server)
            usage = probe_stream_usage(client, server)
    assert streams.status == "supported", streams.detail
    assert "could not finish in time: " in streams.detail, streams.detail
    assert usage.status == "unsupported", usage.detail
    assert usage.detail.startswith("undecided "), usage.detail
    assert "still delivering" in usage.detail, usage.detail


def test_sdk_chunks_are_judged_by_the_same_pace_rules_as_raw_events() -> None:
    clock = _Clock()

    def chunks(gaps: list[float]) -> Iterator[int]:
        for n, gap in enumerate(gaps):
            clock.now += gap
            yield n

    assert len(list(paced(chunks([0.5] * 50), max_tokens=64, pace=PACE, clock=clock))) == 50
    clock.now = 0.0
    with pytest.raises(CouldNotFinish, match=r"at 2\.0 tok/s, still delivering"):
        list(paced(chunks([0.5] * 500), max_tokens=256, pace=PACE, clock=clock))
    clock.now = 0.0
    with pytest.raises(CheckFailed, match=r"sent 145 events .* is an endless stream"):
        list(paced(chunks([0.01] * 400), max_tokens=64, pace=PACE, clock=clock))
    clock.now = 0.0
    with pytest.raises(CheckFailed, match=r"the stream stalled: no event for 12\.0 s"):
        list(paced(chunks([0.5, 12.0]), max_tokens=64, pace=PACE, clock=clock))
