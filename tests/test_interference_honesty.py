"""The interference scenario never reads better because the server failed more: a short request
that times out counts as slower than any limit, as in every latency figure, and a step whose
requests mostly failed fails the scenario whatever the ratio says."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.model import InterferenceStep
from tests._processes import fake_process
from tests._stubs import NullSampler

TIMEOUT = 2.0
"""The request timeout of the simulated client: a delayed short request that times out ends here."""

RANK = {"fail": 0, "invalid": 1, "pass": 2}
"""Verdicts from worst to best, for "never better than"."""


def _record(index: int, tag: str, ttft: float | None, *, error: str | None = None) -> RequestRecord:
    """A measured request sent at `index` seconds: answered `ttft` after it was sent, or failed."""
    send = float(index)
    if error is not None:
        return RequestRecord(index=index, tags=(tag,), send=send, end=send + TIMEOUT, error=error,
                             error_detail=f"no answer within the total deadline of {TIMEOUT:g} s")
    assert ttft is not None
    return RequestRecord(index=index, tags=(tag,), send=send, first_content=send + ttft,
                         first_token_any=send + ttft, end=send + ttft + 0.05, content_times=[send + ttft],
                         content_events=1, status=200, finish_reason="stop", done=True, completion_tokens=4)


def _result(tag: str, records: list[RequestRecord], concurrency: int) -> Any:
    """A LoadResult over made-up records, as the scenario's `measure` returns it."""
    from pytest_inferaccept.load import LoadRun
    from pytest_inferaccept.loadgen import LoadResult
    from pytest_inferaccept.stats import summarize

    run = LoadRun(spec={"concurrency": concurrency}, records=records, window=(0.0, 1000.0),
                  server_metrics={}, stopped_by="requests", selfcheck={"total": {}})
    return LoadResult(label=tag, run=run, summary=summarize(records, run.window), slo=None, evaluation=None,
                      client_check="warn")


def _scenario(rng: random.Random, *, delayed: float, times_out: bool, max_ratio: float = 1.5,
              requests: int = 32) -> Any:
    """interference() over made-up steps: short TTFT lognormal around 100 ms (spread 0.25) alone;
    with the long prompts mixed in, a `delayed` share of the short requests waits four times
    longer, or times out instead (`times_out`). Every long prompt is answered in 1 s."""
    from pytest_inferaccept.capacity.interference import interference

    def measure(tag: str, **kw: Any) -> Any:
        mix = kw["workload"]
        records = []
        for i in range(kw["requests"]):
            tag_i = mix.item(i, i).tags[0]
            base = 0.1 * rng.lognormvariate(0.0, 0.25)
            if tag_i == "long":
                records.append(_record(i, "long", 1.0))
            elif "mixed" in tag and rng.random() < delayed:
                records.append(_record(i, "short", None, error="timeout") if times_out
                               else _record(i, "short", 4 * base))
            else:
                records.append(_record(i, "short", base))
        return _result(tag, records, kw["concurrency"])

    return interference(measure, NullSampler(), concurrency=4, requests=requests,  # type: ignore[arg-type]
                        duration=60.0, long_tokens=1000, max_ratio=max_ratio, seed=rng.randrange(1, 2**31),
                        label="sim")


def test_short_requests_that_time_out_never_read_better_than_answered_late() -> None:
    # 20% of the short requests wait four times longer with the long prompts mixed in: the p95
    # ratio is about ×4 against a ×1.5 limit. Dropping the timed-out ones instead passed 87.5% of
    # these runs (the answered ones look like the alone step); counted as slower than any limit,
    # the timed-out ones read at least as badly as the late answers, run by run.
    runs = 200
    late, timed_out = [], []
    for seed in range(runs):
        late.append(_scenario(random.Random(seed), delayed=0.2, times_out=False).status)
        timed_out.append(_scenario(random.Random(seed), delayed=0.2, times_out=True).status)
    counts = {s: (late.count(s), timed_out.count(s)) for s in RANK}
    assert counts["pass"] == (0, 0), counts
    assert all(RANK[t] <= RANK[s] for s, t in zip(late, timed_out, strict=True))
    assert counts["fail"][1] >= counts["fail"][0] >= runs // 3, counts


def test_a_mixed_step_whose_short_requests_time_out_fails_and_says_why() -> None:
    found = _scenario(random.Random(0), delayed=0.25, times_out=True)
    assert found.status == "fail"
    mixed = found.steps[1]
    assert isinstance(mixed, InterferenceStep)
    assert mixed.short_failed == 8 and mixed.short_failure_kinds == {"timeout": 8}
    assert mixed.short_ttft_p95 is None and mixed.short_ttft_p95_censored is True
    assert (mixed.short_ttft_p95_answered or 1.0) < 0.2  # the answered ones alone look unaffected
    assert found.findings.ratio_p95 is None and found.findings.ratio_p95_above_any_limit is True
    (reason,) = found.reasons
    assert reason.startswith("long prompts raise short prompts' TTFT p95 ×∞ (95% interval wholly ×∞), "
                             "above the ×1.5 allowed: with 25% long prompts (1000 tokens) it falls on failed "
                             "requests (8 of 33 short requests never got their first token (timeout ×8), "
                             "each counted as slower than any limit), against "), reason
    assert "slower than any limit with 25% long prompts" in found.headline
    assert found.notes[0] == ("mixed step: 8 of 33 short requests never got their first token (timeout ×8), "
                              "each counted as slower than any limit")
    # no infinity reaches the results document
    json.dumps(found.model_dump(exclude_unset=True), allow_nan=False)


def test_short_requests_failing_alone_leave_the_ratio_undecided_never_passed() -> None:
    # Every fifth short request fails in both steps: the alone p95 is on failed requests, so the
    # ratio is unknown; dropping them read ×1.0 and passed the ×1.5 limit.
    def measure(tag: str, **kw: Any) -> Any:
        mix = kw["workload"]
        records = [_record(i, mix.item(i, i).tags[0], 0.1 + 0.001 * (i % 7),
                           error="http_5xx" if i % 5 == 0 else None) for i in range(kw["requests"])]
        return _result(tag, records, kw["concurrency"])

    from pytest_inferaccept.capacity.interference import interference

    found = interference(measure, NullSampler(), requests=32, duration=60.0, long_tokens=1000,  # type: ignore[arg-type]
                         max_ratio=1.5, seed=1, label="sim")
    assert found.status == "invalid", found.reasons
    assert found.reasons[0].startswith("not enough data: short prompts' TTFT p95 alone is not known well "
                                       "enough to compare against the ×1.5 allowed"), found.reasons
    alone = found.steps[0]
    assert isinstance(alone, InterferenceStep)
    assert alone.short_ttft_p95_censored and found.findings.ratio_p95 is None
    json.dumps(found.model_dump(exclude_unset=True), allow_nan=False)


# -- against the fake server --------------------------------------------------------------------


@pytest.fixture(scope="module")
def mostly_500(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fake server answering 500 at once to 80% of requests, the rest in about 20 ms."""
    yield from fake_process(tmp_path_factory.mktemp("500"), "--ttft", "0.02", "--itl", "0.001",
                            "--error-fraction", "0.8")


@pytest.fixture(scope="module")
def some_500(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fake server answering 500 at once to every fifth request, the rest in about 20 ms."""
    yield from fake_process(tmp_path_factory.mktemp("some500"), "--ttft", "0.02", "--itl", "0.001",
                            "--error-fraction", "0.2")


def _run(pytester: pytest.Pytester, url: str, body: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    """Run `loadgen.<body>` in a pytester test; the outcome and the capacity scenario it recorded."""
    pytester.makepyfile(f"def test_it(loadgen):\n    {body}\n")
    result = pytester.runpytest_inprocess("--server-url", url, "--inferaccept-json", "r.json",
                                          "--client-check", "warn", "--context-window", "2048")
    doc = json.loads((pytester.path / "r.json").read_text())
    (scenario,) = [c for t in doc["tests"] for c in t.get("capacity", [])]
    return result, scenario


def test_a_step_whose_requests_mostly_failed_fails_the_interference(
        pytester: pytest.Pytester, mostly_500: str) -> None:
    # Without a limit the scenario only informs, but 80% failures is a broken server, not a ratio.
    result, found = _run(pytester, mostly_500, "loadgen.interference(requests=32, long_tokens=200)")
    assert found["status"] == "fail" and result.ret == 1, found
    alone = found["steps"][0]
    assert alone["failing"] and alone["short_failure_kinds"] == {"HTTP 500": alone["short_failed"]}
    assert found["reasons"][0].startswith("the alone step failed: under concurrency 4, "), found["reasons"]
    assert "requests failed (HTTP 500)" in found["reasons"][0]
    assert found["headline"].startswith(found["reasons"][0])


def test_live_short_requests_failing_alone_are_counted_not_dropped(
        pytester: pytest.Pytester, some_500: str) -> None:
    result, found = _run(pytester, some_500,
                         "loadgen.interference(requests=32, long_tokens=200, max_ratio=1.5)")
    assert found["status"] == "invalid" and result.ret == 6, found  # 6: the run is INVALID
    alone, mixed = found["steps"]
    assert alone["short_failed"] >= 6 and alone["short_ttft_p95_censored"], alone
    assert not alone["failing"] and not mixed["failing"]
    assert found["reasons"][0].startswith("not enough data: short prompts' TTFT p95 alone is not "), found
    assert found["findings"]["ratio_p95_interval"]["censored_denominator"] == alone["short_failed"]
