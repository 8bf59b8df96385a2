"""Per-request consistency on load traffic: one finish_reason per answer, usage that agrees with the stream.

The pure check over built records (llama-server-like and vLLM-like streams pass; doubled finish
reasons and miscounted usage fail), the stream parser's counts, the verdicts it feeds, and the
bundled load test and a ladder against the fake with each fault switched on above a load.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_inferaccept.capacity.scenarios import conclude
from pytest_inferaccept.load.consistency import (
    OVER_FACTOR,
    OVER_SLACK,
    check_consistency,
    findings,
    load_words,
)
from pytest_inferaccept.load.engine import LoadRun
from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.load.sse import StreamParser
from pytest_inferaccept.loadgen import judge
from pytest_inferaccept.model import CapacityParams, CapacityStep
from pytest_inferaccept.run.load import LoadResult
from pytest_inferaccept.stats import summarize
from tests._processes import fake_process

PACE = 0.01
"""Seconds between one token and the next in the built answers."""


def _answer(i: int, *, events: int = 32, tokens: int | None = None, finishes: int = 1, warmup: bool = False,
            reasoning_events: int = 0, reasoning_tokens: int | None = None, error: str | None = None,
            gaps: list[float] | None = None) -> RequestRecord:
    """One streamed answer: `events` content events one PACE apart (or after `gaps`, the first being the
    wait from the headers), usage of `tokens` (default one per event)."""
    send = i * 0.01
    waits = gaps if gaps is not None else [PACE] * events
    times = [send + sum(waits[:k + 1]) for k in range(len(waits))]
    return RequestRecord(index=i, warmup=warmup, send=send, headers=send, end=times[-1] + 0.001,
                         content_events=len(times), content_times=times, reasoning_events=reasoning_events,
                         reasoning_tokens=reasoning_tokens,
                         completion_tokens=len(times) if tokens is None else tokens,
                         finish_reason="stop", finish_reasons=finishes, finished_choices=1 if finishes else 0,
                         done=True, first_content=times[0], first_token_any=times[0], error=error,  # type: ignore[arg-type]
                         max_tokens=64)


def _vllm_like(n: int, seed: int) -> list[RequestRecord]:
    """Answers whose tokens mostly come one per event at a pace that varies with the batch, and
    sometimes several: after a stall of the frontend, the tokens that piled up meanwhile come in one
    event (so a bunched event follows a long gap), and with speculative decoding a step may accept up
    to 3 tokens. Usage also counts the end-of-sequence token, never streamed."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        tokens = rng.randint(1, 64)
        pace = PACE * rng.uniform(0.6, 1.6)  # this answer's batch
        gaps, left = [], tokens
        wait = rng.uniform(2, 40) * pace  # prefill and queueing before the first event
        while left > 0:
            stalled = rng.random() < 0.05
            take = min(left, rng.randint(2, 20) if stalled else rng.choice((1,) * 8 + (2, 3)))
            gaps.append(wait + (take - 1) * pace * rng.uniform(0.5, 1.0) if stalled else wait)
            wait = pace * rng.uniform(0.7, 1.3)
            left -= take
        if rng.random() < 0.03:  # a whole answer that came in one event after a long frontend stall
            gaps = [sum(gaps)]
        out.append(_answer(i, tokens=tokens + 1, gaps=gaps))
    return out


# ------------------------------------------------------------------------ the pure check


def test_one_token_per_event_as_llama_server_streams_passes() -> None:
    records = [_answer(i, events=32, tokens=32 + (i % 2)) for i in range(200)]  # EOS counted or not
    c = check_consistency(records, load="c=4")
    assert (c.checked, c.usage_checked, c.violations, c.no_finish) == (200, 200, 0, 0)
    assert c.tokens_per_event is not None and 1.0 <= c.tokens_per_event <= 1.04
    assert findings(c) == []


def test_occasional_multi_token_events_as_vllm_streams_pass_in_every_seeded_run() -> None:
    for seed in range(200):
        c = check_consistency(_vllm_like(240, seed), load="c=16")
        assert c.violations == 0, (seed, c.examples)
        assert c.tokens_per_event is not None and c.tokens_per_event > 1.0


def test_an_answer_bunched_into_few_events_after_a_stall_passes_and_the_same_count_without_the_stall_fails(
        ) -> None:
    steady = [_answer(i) for i in range(50)]
    stalled = _answer(50, events=4, tokens=32, gaps=[PACE, PACE, 25 * PACE, 5 * PACE])
    at_pace = _answer(51, events=4, tokens=32)
    c = check_consistency([*steady, stalled, at_pace])
    assert (c.usage_over, [e.index for e in c.examples]) == (1, [51]), c.examples


def test_a_server_that_streams_every_eighth_token_passes_on_its_own_packing() -> None:
    records = [_answer(i, events=8, tokens=64 + (i % 3)) for i in range(100)]  # SGLang --stream-interval 8
    c = check_consistency(records)
    assert c.violations == 0 and c.tokens_per_event is not None and c.tokens_per_event >= 8


def test_two_finish_reasons_for_one_choice_are_counted_and_named_with_the_level() -> None:
    records = [_answer(i, finishes=2 if i in (17, 90, 200) else 1) for i in range(240)]
    c = check_consistency(records, load="c=8")
    assert (c.checked, c.double_finish) == (240, 3)
    assert [e.index for e in c.examples] == [17, 90, 200] and c.examples[0].problem == "double_finish"
    (line,) = findings(c)
    assert line.startswith("at c=8, 3 of 240 answers carried two or more finish_reason values for one choice "
                           "(request 17: 2 finish_reason values for 1 choice)"), line


def test_one_finish_reason_for_each_of_several_choices_is_sound() -> None:
    rec = _answer(0)
    rec.finish_reasons, rec.finished_choices = 2, 2  # n=2: one each
    assert check_consistency([rec]).double_finish == 0


def test_usage_below_the_events_streamed_is_a_miscount() -> None:
    records = [_answer(i, tokens=8 if i % 4 == 0 else 32) for i in range(40)]
    c = check_consistency(records, load="c=4")
    assert (c.usage_under, c.usage_over) == (10, 0)
    assert findings(c)[0].startswith("at c=4, 10 of 40 answers reported usage.completion_tokens below the "
                                     "events they streamed"), findings(c)


def test_usage_far_above_the_runs_packing_is_a_miscount_and_just_within_it_is_not() -> None:
    events = 32  # one PACE apart from the headers on: 32 usual intervals
    limit = int(OVER_FACTOR * events + OVER_SLACK)
    records = [_answer(i) for i in range(50)] + [_answer(50, tokens=limit), _answer(51, tokens=limit + 1)]
    c = check_consistency(records)
    assert (c.usage_over, c.usage_under) == (1, 0)
    assert c.examples[0].index == 51 and c.examples[0].completion_tokens == limit + 1


def test_a_miscount_by_the_same_factor_on_every_answer_looks_like_packing() -> None:
    # The documented blind spot: four tokens counted per event on every answer is what a server that
    # streams every fourth token reports.
    c = check_consistency([_answer(i, tokens=128) for i in range(50)])
    assert c.violations == 0 and c.tokens_per_event == 4.0


def test_reasoning_streamed_or_hidden_is_counted_with_the_content() -> None:
    # 100 reasoning and 32 content events, one of them shared: 131 tokens
    streamed = _answer(0, events=32, tokens=131, reasoning_events=100, reasoning_tokens=100)
    hidden = _answer(1, events=32, tokens=132, reasoning_tokens=100)  # reasoning counted, never streamed
    c = check_consistency([streamed, hidden])
    assert (c.usage_checked, c.violations) == (2, 0), c.examples


def test_warm_up_client_faults_and_failed_requests_are_not_checked() -> None:
    records = [_answer(0, finishes=2, warmup=True), _answer(1, finishes=2, error="client_error"),
               _answer(2, finishes=2, error="http_5xx"), _answer(3)]
    incomplete = _answer(4, finishes=0)
    incomplete.finish_reason, incomplete.error = None, "incomplete"
    c = check_consistency([*records, incomplete])
    assert (c.checked, c.double_finish, c.no_finish, c.usage_checked) == (2, 0, 1, 1)


def test_the_load_is_named_by_concurrency_rate_or_replay() -> None:
    assert load_words({"concurrency": 8}) == "c=8"
    assert load_words({"rate": 2.5}) == "2.5 req/s"
    assert load_words({"mode": "replay"}) == "trace replay"


# ------------------------------------------------------------------------ the parser's counts


def test_the_parser_counts_every_finish_reason_by_choice() -> None:
    def event(choices: list[dict[str, Any]]) -> bytes:
        return f"data: {json.dumps({'id': 'x', 'choices': choices})}\n\n".encode()

    rec = RequestRecord(index=0)
    parser = StreamParser(rec)
    text = [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]
    stop = [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    parser.feed(event(text) + event(stop) + event(stop) + b"data: [DONE]\n\n", 0.1)
    assert (rec.finish_reasons, rec.finished_choices, rec.content_events) == (2, 1, 1)
    two = RequestRecord(index=1)
    parser = StreamParser(two)
    parser.feed(event([{"index": 0, "delta": {}, "finish_reason": "stop"},
                       {"index": 1, "delta": {}, "finish_reason": "length"}]), 0.1)
    assert (two.finish_reasons, two.finished_choices) == (2, 2)


# ------------------------------------------------------------------------ the verdicts it feeds


def _result(records: list[RequestRecord], concurrency: int = 8) -> LoadResult:
    window = (0.0, max(r.end for r in records))
    run = LoadRun(spec={"concurrency": concurrency}, records=records, window=window,
                  selfcheck={"mode": "closed", "total": {"asked_concurrency": concurrency,
                                                         "achieved_concurrency": concurrency}},
                  server_metrics={}, stopped_by="requests")
    return LoadResult(label="t", run=run, summary=summarize(records, window), slo=None, evaluation=None)


def test_a_load_test_without_an_slo_fails_on_a_double_finish_and_names_the_level() -> None:
    verdict = judge([_result([_answer(i, finishes=2 if i < 3 else 1) for i in range(240)])], None,
                    from_marker=False)
    assert verdict.status == "fail"
    assert verdict.title == "the server's answers contradicted themselves under load"
    assert verdict.lines[0].startswith("at c=8, 3 of 240 answers carried two or more finish_reason values")
    clean = judge([_result([_answer(i) for i in range(240)])], None, from_marker=False)
    assert clean.status == "unjudged"


def test_a_scenario_with_an_inconsistent_step_fails_naming_that_step() -> None:
    steps = [CapacityStep(level=c, consistency=check_consistency(
        [_answer(i, tokens=8 if c == 16 and i < 5 else 32) for i in range(60)], load=f"c={c}"))
        for c in (1, 4, 16)]
    found = conclude(kind="ladder", label="t", steps=steps, params=CapacityParams(), headline="knee at c=4",
                     slo=None, bound="the client was the bottleneck at c=16")
    assert found.status == "fail"
    assert found.reasons[0].startswith("at c=16, 5 of 60 answers reported usage.completion_tokens below")
    assert found.headline.startswith("at c=16, 5 of 60") and found.headline.endswith("; knee at c=4")
    clean = conclude(kind="ladder", label="t", steps=steps[:2], params=CapacityParams(), headline="h",
                     slo=None)
    assert clean.status == "pass"


# ------------------------------------------------------------------------ against the fake


@pytest.fixture(scope="module")
def clean_fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A correct fake whose answers take ~70 ms, so a closed loop keeps its requests in the server."""
    yield from fake_process(tmp_path_factory.mktemp("clean"), "--itl", "0.002")


@pytest.fixture(scope="module")
def double_fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Streams send their finish twice while more than 2 chat requests are in the server."""
    yield from fake_process(tmp_path_factory.mktemp("double"), "--itl", "0.002",
                            "--double-finish-under-load", "2")


@pytest.fixture(scope="module")
def miscount_fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Streamed usage counts a quarter of the tokens while more than 2 chat requests are in the server."""
    yield from fake_process(tmp_path_factory.mktemp("miscount"), "--itl", "0.002",
                            "--usage-miscount-under-load", "2")


def _load_test(pytester: pytest.Pytester, url: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest_inprocess(
        "--pyargs", "pytest_inferaccept.suites.test_load", "--server-url", url, "--load-concurrency", "4",
        "--load-requests", "40", "--client-check", "warn", "--inferaccept-json", "r.json")
    return result, json.loads((pytester.path / "r.json").read_text())


def test_the_load_test_on_the_correct_fake_passes_with_its_counts_in_the_results(
        pytester: pytest.Pytester, clean_fake: str) -> None:
    result, doc = _load_test(pytester, clean_fake)
    assert result.ret == 0, result.stdout.str()
    (test,) = doc["tests"]
    c = test["load"][0]["summary"]["consistency"]
    assert c["load"] == "c=4" and c["checked"] == c["usage_checked"] == 40, c
    assert (c["double_finish"], c["usage_under"], c["usage_over"], c["tokens_per_event"]) == (0, 0, 0, 1.0), c


@pytest.mark.parametrize(("fake", "words"), [
    ("double_fake", "answers carried two or more finish_reason values for one choice"),
    ("miscount_fake", "answers reported usage.completion_tokens below the events they streamed"),
])
def test_the_load_test_is_a_no_go_when_answers_contradict_themselves_under_load(
        pytester: pytest.Pytester, request: pytest.FixtureRequest, fake: str, words: str) -> None:
    result, doc = _load_test(pytester, request.getfixturevalue(fake))
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "VERDICT: NO-GO" in out
    assert "the server's answers contradicted themselves under load" in out
    reason = next(r for r in doc["verdict"]["reasons"] if words in r)
    assert " at c=4, " in reason, doc["verdict"]["reasons"]


def test_a_ladder_fails_at_the_level_where_finish_reasons_double_and_not_below(
        pytester: pytest.Pytester, double_fake: str) -> None:
    pytester.makepyfile("""
        def test_ladder(loadgen):
            loadgen.ladder([1, 4], requests=24, settle=1)
    """)
    result = pytester.runpytest_inprocess("--server-url", double_fake, "--inferaccept-json", "r.json",
                                          "--client-check", "warn")
    assert result.ret == 1, result.stdout.str()
    doc = json.loads((pytester.path / "r.json").read_text())
    (ladder,) = [c for t in doc["tests"] for c in t.get("capacity", [])]
    assert ladder["status"] == "fail"
    by_level = {s["level"]: s["consistency"] for s in ladder["steps"]}
    assert by_level[1]["double_finish"] == 0 and by_level[1]["checked"] == 24, by_level[1]
    assert by_level[4]["double_finish"] > 0, by_level[4]
    assert any(r.startswith("at c=4, ") and "two or more finish_reason values" in r
               for r in ladder["reasons"]), ladder["reasons"]
