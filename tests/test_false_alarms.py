"""A good server must not fail a check: the false alarms seen on a real llama-server, each reproduced on
the fake, and the faults those checks exist for still caught."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from pytest_inferaccept.checks import CheckFailed
from pytest_inferaccept.checks.messages import prompt_size
from pytest_inferaccept.checks.pace import CouldNotFinish, Pace, read_paced
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
