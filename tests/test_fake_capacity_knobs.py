"""The fake server's capacity knobs: each one shows its effect, and with none of them on nothing happens.

Timings are compared as lower bounds (a sleep never ends early) or as ratios between runs on the
same machine, and the server's own histograms are read where its arithmetic is exact, so the
tests hold on a loaded machine.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_inferaccept.fake import FakeConfig, FakeServer
from pytest_inferaccept.fake.__main__ import main as fake_main
from pytest_inferaccept.fake.generation import PrefixCache
from pytest_inferaccept.fake.traffic import in_share

MIB = 1024 * 1024
BASE_MEMORY = 200 * MIB
LONG_PROMPT = " ".join(f"word{i}" for i in range(500))

Metrics = dict[str, float]


def _body(content: str = "tell me a story", max_tokens: int = 1, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "fake-chat", "temperature": 0, "max_tokens": max_tokens,
                            "messages": [{"role": "user", "content": content}]}
    body.update(extra)
    return body


def _parse(text: str) -> Metrics:
    """Every sample without an `le` label, by sample name (one label set per name on the fake)."""
    return {s.name: float(s.value) for family in text_string_to_metric_families(text)
            for s in family.samples if "le" not in s.labels}


async def _scrape(client: httpx.AsyncClient) -> Metrics:
    return _parse((await client.get("/metrics")).text)


async def _timed(client: httpx.AsyncClient, body: dict[str, Any],
                 path: str = "/v1/chat/completions") -> tuple[httpx.Response, float]:
    start = time.perf_counter()
    resp = await client.post(path, json=body)
    return resp, time.perf_counter() - start


async def _until(client: httpx.AsyncClient, pred: Callable[[Metrics], bool], timeout: float = 5.0) -> Metrics:
    """Scrape until `pred` holds (fails after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = await _scrape(client)
        if pred(seen):
            return seen
        assert time.monotonic() < deadline, f"never reached: {seen}"
        await asyncio.sleep(0.02)


def _run(server: FakeServer, scenario: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        async with httpx.AsyncClient(base_url=server.url, timeout=15) as client:
            return await scenario(client)
    return asyncio.run(go())


async def _scrape_while(client: httpx.AsyncClient, tasks: list[asyncio.Task[Any]]) -> list[Metrics]:
    """Scrape /metrics every 20 ms until every task is done."""
    seen = []
    while not all(t.done() for t in tasks):
        seen.append(await _scrape(client))
        await asyncio.sleep(0.02)
    return seen


def test_without_knobs_nothing_queues_slows_sheds_or_grows() -> None:
    with FakeServer(ttft=0.2) as server:
        async def scenario(client: httpx.AsyncClient) -> tuple[list[Any], list[Metrics], Metrics, Metrics]:
            before = await _scrape(client)
            tasks = [asyncio.create_task(_timed(client, _body(f"prompt {i % 2}"))) for i in range(8)]
            tasks.append(asyncio.create_task(_timed(client, {"model": "fake-chat", "prompt": "hi",
                                                             "max_tokens": 2}, "/v1/completions")))
            seen = await _scrape_while(client, tasks)
            return [await t for t in tasks], seen, before, await _scrape(client)

        answers, seen, before, after = _run(server, scenario)
    assert [resp.status_code for resp, _ in answers] == [200] * 9
    assert max(elapsed for _, elapsed in answers) < 1.5  # 9 at once, 0.2 s each: nobody waited for anybody
    assert all(m["vllm:num_requests_waiting"] == 0 for m in seen)
    assert max(m["vllm:num_requests_running"] for m in seen) >= 2
    assert all(m["vllm:kv_cache_usage_perc"] == 0.0 for m in seen)
    assert before["process_resident_memory_bytes"] == after["process_resident_memory_bytes"] == BASE_MEMORY
    assert after["vllm:request_queue_time_seconds_count"] == 9
    assert after["vllm:request_queue_time_seconds_sum"] == 0.0
    assert after["vllm:time_to_first_token_seconds_sum"] == pytest.approx(9 * 0.2)
    assert after["vllm:request_success_total"] == 9
    assert after["vllm:num_requests_running"] == 0
    assert not any(name.startswith("vllm:prefix_cache") for name in after)


def test_slots_queue_shows_as_waiting_running_and_queue_time() -> None:
    with FakeServer(slots=2, ttft=0.2) as server:
        async def scenario(client: httpx.AsyncClient) -> tuple[list[Any], list[Metrics], Metrics]:
            tasks = [asyncio.create_task(_timed(client, _body())) for _ in range(8)]
            seen = await _scrape_while(client, tasks)
            return [await t for t in tasks], seen, await _scrape(client)

        answers, seen, after = _run(server, scenario)
    assert [resp.status_code for resp, _ in answers] == [200] * 8
    assert max(m["vllm:num_requests_waiting"] for m in seen) >= 4
    assert max(m["vllm:num_requests_running"] for m in seen) == 2
    assert after["vllm:num_requests_waiting"] == after["vllm:num_requests_running"] == 0
    assert after["vllm:request_queue_time_seconds_count"] == 8
    # 8 requests of 0.2 s through 2 slots wait 2 x (0.2 + 0.4 + 0.6) = 2.4 s in all
    assert after["vllm:request_queue_time_seconds_sum"] >= 1.8


def test_batch_slowdown_slows_tokens_and_ttft_as_the_batch_grows() -> None:
    with FakeServer(ttft=0.1, itl=0.03, batch_slowdown=1.0) as server:
        body = _body(max_tokens=9, stream=True)

        async def batch(client: httpx.AsyncClient) -> tuple[float, float]:
            before = await _scrape(client)
            answers = await asyncio.gather(*(_timed(client, body) for _ in range(4)))
            assert all(resp.status_code == 200 and "[DONE]" in resp.text for resp, _ in answers)
            after = await _scrape(client)
            name = "vllm:time_to_first_token_seconds_sum"
            ttft = after[name] - before[name]
            return sum(elapsed for _, elapsed in answers) / 4, ttft

        async def scenario(client: httpx.AsyncClient) -> tuple[float, float, float, float, float]:
            alone = (await _timed(client, body))[1]
            slow, slow_ttft = await batch(client)
            server.reconfigure(batch_slowdown=0.0)
            fast, fast_ttft = await batch(client)
            return alone, slow, slow_ttft, fast, fast_ttft

        alone, slow, slow_ttft, fast, fast_ttft = _run(server, scenario)
    # Four at once: 8 gaps of 0.03 s x 4 = 0.96 s; alone, or without the knob, 0.1 + 0.24 s.
    assert slow >= 0.6
    assert slow >= 2 * alone
    assert slow >= 2 * fast
    # TTFT of the 4 arrivals: 0.1 x (1 + 2 + 3 + 4) = 1.0 s in all, against 4 x 0.1 without the knob.
    assert slow_ttft >= 0.7
    assert fast_ttft == pytest.approx(0.4)


def test_latency_creep_grows_ttft_with_uptime() -> None:
    with FakeServer(latency_creep=12.0) as server:  # 0.2 s of TTFT per second of uptime
        async def scenario(client: httpx.AsyncClient) -> tuple[float, float, Metrics]:
            await client.get("/health")
            early = (await _timed(client, _body()))[1]
            await asyncio.sleep(1.5)
            late = (await _timed(client, _body()))[1]
            return early, late, await _scrape(client)

        early, late, after = _run(server, scenario)
    assert late >= 0.3
    assert late >= early + 0.2
    assert after["vllm:time_to_first_token_seconds_sum"] >= 0.3


def test_memory_growth_raises_resident_memory_per_finished_request() -> None:
    with FakeServer(memory_growth=MIB) as server:
        async def scenario(client: httpx.AsyncClient) -> tuple[Metrics, Metrics]:
            before = await _scrape(client)
            for i in range(10):
                resp = await client.post("/v1/chat/completions", json=_body(stream=i % 2 == 0))
                assert resp.status_code == 200
            return before, await _scrape(client)

        before, after = _run(server, scenario)
    assert before["process_resident_memory_bytes"] == BASE_MEMORY
    assert after["process_resident_memory_bytes"] == BASE_MEMORY + 10 * MIB


@pytest.fixture(scope="module")
def overload_server() -> Iterator[FakeServer]:
    """One slot, no queue: a second request at once is overloaded (tests reconfigure the rest)."""
    with FakeServer(slots=1, max_queue=0, ttft=0.6) as server:
        yield server


@pytest.mark.parametrize("status", [503, 429, 500])
def test_overload_sheds_at_once_with_the_configured_status(overload_server: FakeServer, status: int) -> None:
    overload_server.reconfigure(max_queue=0, overload_status=status, overload_hang=False)

    async def scenario(client: httpx.AsyncClient) -> tuple[httpx.Response, float, httpx.Response,
                                                          httpx.Response]:
        first = asyncio.create_task(client.post("/v1/chat/completions", json=_body()))
        await _until(client, lambda m: m["vllm:num_requests_running"] == 1)
        shed, elapsed = await _timed(client, _body())
        legacy = await client.post("/v1/completions", json={"model": "fake-chat", "prompt": "hi"})
        return shed, elapsed, legacy, await first

    shed, elapsed, legacy, first = _run(overload_server, scenario)
    assert first.status_code == 200
    assert shed.status_code == legacy.status_code == status
    assert elapsed < 0.5
    error = shed.json()["error"]
    assert {"message", "type", "code"} <= set(error) and error["message"]
    if status == 500:
        assert "Retry-After" not in shed.headers
    else:
        assert shed.headers["Retry-After"] == "1"


def test_max_queue_admits_slots_plus_queue_then_sheds_until_there_is_room(
        overload_server: FakeServer) -> None:
    overload_server.reconfigure(max_queue=1, overload_status=503, overload_hang=False)

    async def scenario(client: httpx.AsyncClient) -> tuple[list[int], int, int]:
        admitted = [asyncio.create_task(client.post("/v1/chat/completions", json=_body())) for _ in range(2)]
        await _until(client, lambda m: m["vllm:num_requests_running"] + m["vllm:num_requests_waiting"] == 2)
        shed = await client.post("/v1/chat/completions", json=_body())
        done = [(await t).status_code for t in admitted]
        later = await client.post("/v1/chat/completions", json=_body())
        return done, shed.status_code, later.status_code

    assert _run(overload_server, scenario) == ([200, 200], 503, 200)


def test_overload_hang_never_answers_the_overloaded_request(overload_server: FakeServer) -> None:
    overload_server.reconfigure(max_queue=0, overload_hang=True)

    async def scenario(client: httpx.AsyncClient) -> tuple[int, float]:
        first = asyncio.create_task(client.post("/v1/chat/completions", json=_body()))
        await _until(client, lambda m: m["vllm:num_requests_running"] == 1)
        start = time.perf_counter()
        with pytest.raises(httpx.ReadTimeout):
            await client.post("/v1/chat/completions", json=_body(), timeout=1.2)
        return (await first).status_code, time.perf_counter() - start

    status, waited = _run(overload_server, scenario)
    assert status == 200
    assert waited >= 1.2  # still unanswered after the admitted request finished (0.6 s)


def test_overload_knobs_are_checked_at_startup(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="needs slots"):
        FakeConfig(max_queue=0)
    with pytest.raises(ValueError, match="needs slots"):
        FakeServer(max_queue=2)
    with pytest.raises(ValueError, match="overload_status"):
        FakeConfig(slots=1, max_queue=0, overload_status=404)
    with pytest.raises(ValueError, match="needs max_queue"):
        FakeConfig(slots=1, overload_hang=True)
    for argv in (["--max-queue", "0"], ["--slots", "1", "--max-queue", "0", "--overload-status", "404"]):
        with pytest.raises(SystemExit) as exit_info:
            fake_main(argv)
        assert exit_info.value.code == 2
    assert "max_queue needs slots" in capsys.readouterr().err


def test_kv_cache_gauge_follows_tokens_in_flight_and_caps_at_one() -> None:
    with FakeServer(kv_cache_tokens=1000, itl=0.05) as server:
        async def gauge_during(client: httpx.AsyncClient, body: dict[str, Any]) -> list[float]:
            task = asyncio.create_task(client.post("/v1/chat/completions", json=body))
            seen = await _scrape_while(client, [task])
            assert (await task).status_code == 200
            return [m["vllm:kv_cache_usage_perc"] for m in seen]

        async def scenario(client: httpx.AsyncClient) -> tuple[int, list[float], list[float], list[float],
                                                              float]:
            answer = await client.post("/v1/chat/completions", json=_body())
            prompt = answer.json()["usage"]["prompt_tokens"]
            streamed = await gauge_during(client, _body(max_tokens=20, stream=True))
            server.reconfigure(kv_cache_tokens=10)
            full = await gauge_during(client, _body(max_tokens=6))
            server.reconfigure(kv_cache_tokens=0)
            off = await gauge_during(client, _body(max_tokens=6))
            return prompt, streamed, full, off, (await _scrape(client))["vllm:kv_cache_usage_perc"]

        prompt, streamed, full, off, idle = _run(server, scenario)
    busy = [v for v in streamed if v > 0]
    assert busy and all(prompt / 1000 <= v <= (prompt + 20) / 1000 for v in busy)
    assert busy == sorted(busy)  # one request: its generated tokens only add up
    assert max(busy) >= (prompt + 10) / 1000
    assert max(full) == 1.0
    assert off and all(v == 0.0 for v in off)
    assert idle == 0.0


def test_prefill_per_token_makes_long_prompts_slow_and_delays_short_ones_queued_behind() -> None:
    with FakeServer(prefill_per_token=0.002, slots=1) as server:
        async def scenario(client: httpx.AsyncClient) -> tuple[float, httpx.Response, float, float]:
            alone = (await _timed(client, _body("hi")))[1]
            long_task = asyncio.create_task(_timed(client, _body(LONG_PROMPT)))
            await _until(client, lambda m: m["vllm:num_requests_running"] == 1)
            behind = (await _timed(client, _body("hi")))[1]
            long_resp, long_elapsed = await long_task
            return alone, long_resp, long_elapsed, behind

        alone, long_resp, long_elapsed, behind = _run(server, scenario)
    prompt = long_resp.json()["usage"]["prompt_tokens"]
    assert prompt > 500
    assert long_elapsed >= 0.002 * prompt
    assert behind >= 0.4  # waited for most of the long prompt's 1 s prefill
    assert behind >= 3 * alone


def test_prefix_cache_skips_most_of_the_prefill_of_a_seen_prefix() -> None:
    with FakeServer(prefix_cache=True, prefill_per_token=0.001) as server:
        async def scenario(client: httpx.AsyncClient) -> list[tuple[int, float, Metrics]]:
            out = []
            for content in (LONG_PROMPT, LONG_PROMPT + " and a different ending", "a different start"):
                resp, elapsed = await _timed(client, _body(content))
                out.append((resp.json()["usage"]["prompt_tokens"], elapsed, await _scrape(client)))
            return out

        (p1, e1, m1), (p2, e2, m2), (p3, _, m3) = _run(server, scenario)
    ttft = "vllm:time_to_first_token_seconds_sum"
    assert m1[ttft] == pytest.approx(0.001 * p1)
    assert m2[ttft] - m1[ttft] == pytest.approx(0.2 * 0.001 * p2)  # a hit: 80 % of the prefill skipped
    assert m3[ttft] - m2[ttft] == pytest.approx(0.001 * p3)  # another prefix: a miss
    assert e1 >= 0.001 * p1
    assert e2 < e1
    assert m3["vllm:prefix_cache_queries_total"] == p1 + p2 + p3
    assert m3["vllm:prefix_cache_hits_total"] == p2


def test_prefix_cache_is_bounded_and_forgets_the_least_recently_used() -> None:
    cache = PrefixCache(size=3)
    assert [cache.lookup(p) for p in ("a", "b", "c", "a", "d")] == [False, False, False, True, False]
    assert len(cache) == 3
    assert cache.lookup("a")  # used lately: kept
    assert not cache.lookup("b")  # the least recently used: forgotten when "d" came


# --- verdict knobs: a known share of requests slow, failed, or thinking first -------------------


def _chat_or_legacy(i: int) -> tuple[str, dict[str, Any]]:
    """Request i of a mixed sequence: every third one legacy completions, the rest chat."""
    if i % 3 == 2:
        return "/v1/completions", {"model": "fake-chat", "prompt": "hi", "max_tokens": 2}
    return "/v1/chat/completions", _body(stream=i % 2 == 0)


def test_error_fraction_fails_exactly_its_share_evenly_and_at_once() -> None:
    with FakeServer(error_fraction=0.3, error_status=503, ttft=0.05) as server:
        async def scenario(client: httpx.AsyncClient) -> tuple[list[tuple[str, httpx.Response, float]],
                                                              Metrics]:
            out = []
            for i in range(100):
                path, body = _chat_or_legacy(i)
                resp, elapsed = await _timed(client, body, path)
                out.append((path, resp, elapsed))
            return out, await _scrape(client)

        answers, after = _run(server, scenario)
    failed = [i for i, (_, resp, _) in enumerate(answers) if resp.status_code != 200]
    assert len(failed) == 30
    assert all(answers[i][1].status_code == 503 for i in failed)
    assert {answers[i][0] for i in failed} == {"/v1/chat/completions", "/v1/completions"}
    assert max(b - a for a, b in itertools.pairwise(failed)) <= 4  # spread evenly: every 3rd or 4th
    error = answers[failed[0]][1].json()["error"]
    assert error["message"] and error["type"] == "server_error" and error["code"]
    # At once: a failed request never generates (the server's own counts), and is faster than TTFT.
    assert after["vllm:time_to_first_token_seconds_count"] == after["vllm:request_success_total"] == 70
    assert sorted(answers[i][2] for i in failed)[15] < 0.05
    assert all(elapsed >= 0.05 for _, resp, elapsed in answers if resp.status_code == 200)


def test_slow_fraction_delays_the_first_token_of_exactly_its_share() -> None:
    with FakeServer(slow_fraction=0.25, slow_ttft=0.3) as server:
        async def scenario(client: httpx.AsyncClient) -> tuple[list[tuple[httpx.Response, float]], Metrics]:
            legacy = {"model": "fake-chat", "prompt": "hi", "max_tokens": 2}
            chat, legacy_path = "/v1/chat/completions", "/v1/completions"
            sequence = [(chat, _body()), (legacy_path, legacy), (chat, _body()), (chat, _body(stream=True)),
                        (chat, _body()), (legacy_path, legacy), (chat, _body()),
                        (legacy_path, {**legacy, "stream": True})]
            out = [await _timed(client, body, path) for path, body in sequence]
            return out, await _scrape(client)

        answers, after = _run(server, scenario)
    assert [resp.status_code for resp, _ in answers] == [200] * 8
    # Requests 4 and 8 make a quarter (a streamed chat, a streamed legacy completion): both slow...
    assert answers[3][1] >= 0.3 and answers[7][1] >= 0.3
    # ...and only they, by the server's own exact TTFT: two waits of 0.3 s, six of none.
    assert after["vllm:time_to_first_token_seconds_sum"] == pytest.approx(2 * 0.3)
    assert after["vllm:time_to_first_token_seconds_count"] == 8


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.1, 0.25, 0.29, 0.3, 1 / 3, 0.5, 0.77, 1.0])
def test_a_share_holds_exactly_its_fraction_of_any_first_n_requests_evenly_spaced(fraction: float) -> None:
    chosen = [k for k in range(1, 1001) if in_share(k, fraction)]
    for n in (10, 100, 1000):
        assert sum(k <= n for k in chosen) == int(round(n * fraction, 9))
    if fraction:
        gaps = {b - a for a, b in itertools.pairwise([0, *chosen])}
        assert max(gaps) - min(gaps) <= 1  # every gap floor(1/f) or ceil(1/f): no bursts


def _stream_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def test_reasoning_tokens_come_first_one_per_chunk_paced_and_counted_in_usage() -> None:
    with FakeServer(reasoning_tokens=5, itl=0.02) as server:
        async def scenario(client: httpx.AsyncClient) -> tuple[httpx.Response, float, httpx.Response,
                                                              httpx.Response]:
            streamed, elapsed = await _timed(client, _body(max_tokens=12, stream=True,
                                                           stream_options={"include_usage": True}))
            plain = await client.post("/v1/chat/completions", json=_body(max_tokens=12))
            starved = await client.post("/v1/chat/completions", json=_body(max_tokens=3))
            return streamed, elapsed, plain, starved

        streamed, elapsed, plain, starved = _run(server, scenario)
    chunks = _stream_events(streamed.text)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    kinds = ["reasoning" if "reasoning_content" in d else "content" if d.get("content") else "other"
             for d in deltas]
    assert kinds[1:6] == ["reasoning"] * 5  # after the role chunk, before any content
    assert "reasoning" not in kinds[6:] and "content" in kinds[6:]
    content = "".join(d.get("content") or "" for d in deltas)
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == 5 + kinds.count("content") <= 12
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 5}
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert elapsed >= 0.02 * (usage["completion_tokens"] - 1)  # reasoning is paced like content
    message = plain.json()["choices"][0]["message"]
    assert (message["content"], message["reasoning_content"]) == (content, reasoning)
    assert plain.json()["usage"] == usage
    # Reasoning uses up max_tokens first: with 3 there is no room left for content.
    cut = starved.json()
    assert cut["choices"][0]["message"]["content"] == ""
    assert cut["choices"][0]["finish_reason"] == "length"
    assert cut["usage"]["completion_tokens"] == 3
    assert cut["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}


def test_a_prompt_beyond_the_context_window_is_refused_at_once_even_when_the_server_is_slow() -> None:
    with FakeServer(context_window=64, slots=1, ttft=1.0, slow_fraction=1.0, slow_ttft=1.0) as server:
        resp, elapsed = _run(server, lambda client: _timed(client, _body(LONG_PROMPT)))
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "context_length_exceeded"
    assert elapsed < 0.5


def test_verdict_knobs_are_checked_at_startup(capsys: pytest.CaptureFixture[str]) -> None:
    for bad, match in (({"slow_fraction": 1.5, "slow_ttft": 1.0}, "between 0 and 1"),
                       ({"error_fraction": -0.1}, "between 0 and 1"),
                       ({"slow_fraction": 0.1}, "needs slow_ttft"),
                       ({"slow_ttft": -1.0}, "slow_ttft must be >= 0"),
                       ({"error_status": 200}, "error_status"),
                       ({"reasoning_tokens": -1}, "reasoning_tokens must be >= 0")):
        with pytest.raises(ValueError, match=match):
            FakeConfig(**bad)  # type: ignore[arg-type]
    for argv in (["--error-status", "200"], ["--slow-fraction", "0.2"], ["--reasoning-tokens", "-3"]):
        with pytest.raises(SystemExit) as exit_info:
            fake_main(argv)
        assert exit_info.value.code == 2
    assert "reasoning_tokens must be >= 0" in capsys.readouterr().err
