"""The load client records what the server streamed, not what it claimed: TPOT over the streamed
tokens, the first token of any kind at the first visible character, usage without text as an empty
answer, a server's bad data as its protocol error, vLLM's goodput limits, and a stall limit the
options reach."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aiohttp import web

from pytest_inferaccept.load.client import ClientLimits
from pytest_inferaccept.load.records import RequestRecord
from pytest_inferaccept.markers import MarkerError, allowed_slo_keys, parse_slo
from pytest_inferaccept.settings import SettingsError, resolve
from pytest_inferaccept.slo_profile import resolve as resolve_slo
from pytest_inferaccept.stats import summarize
from pytest_inferaccept.stats.slo import evaluate
from tests.test_load_client import chunk, send_one, serve, sse, stream_start

Script = Callable[[web.StreamResponse], Awaitable[None]]


def usage(completion: int, reasoning: int | None = None) -> dict[str, Any]:
    """The include_usage chunk: no choices, the server's token counts."""
    out: dict[str, Any] = {"prompt_tokens": 9, "completion_tokens": completion,
                           "total_tokens": 9 + completion}
    if reasoning is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return {"id": "chatcmpl-x", "object": "chat.completion.chunk", "choices": [], "usage": out}


def streaming(script: Script) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A handler that opens an SSE answer, runs the script on it and ends the body."""

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await stream_start(request)
        await script(resp)
        await resp.write_eof()
        return resp

    return handler


@contextmanager
def scripted_server(script: Script) -> Iterator[str]:
    """An OpenAI-shaped server: /v1/models lists one model, every chat request streams `script`;
    the rest is 404 (a bundled load run needs nothing else)."""
    stream = streaming(script)

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/v1/models":
            return web.json_response({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        if request.method == "POST" and request.path == "/v1/chat/completions":
            return await stream(request)
        return web.Response(status=404)

    with serve(handler) as url:
        yield url


async def _role(resp: web.StreamResponse) -> None:
    await resp.write(sse(chunk({"role": "assistant", "content": ""})))


async def _finish(resp: web.StreamResponse, finish: str, counted: dict[str, Any] | None) -> None:
    await resp.write(sse(chunk({}, finish=finish)))
    if counted is not None:
        await resp.write(sse(counted))
    await resp.write(sse("[DONE]"))


def _bundled(pytester: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    # --client-check warn: the scripted server shares this process, so the self-check may find the
    # client busy; what is judged here is the server's answers, not the client's pace.
    return pytester.runpytest_inprocess("--pyargs", "pytest_inferaccept.suites.test_load", "--server-url",
                                        url, "--inferaccept-json", "r.json", "--client-check", "warn", *args)


def _load(pytester: pytest.Pytester) -> dict[str, Any]:
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    (load,) = test["load"]
    return load  # type: ignore[no-any-return]


# -- item 4: TPOT over the tokens the server streamed -------------------------------------------


async def _hidden_reasoning(resp: web.StreamResponse) -> None:
    """100 reasoning tokens counted in usage, never streamed; 20 content tokens 20 ms apart."""
    await _role(resp)
    await asyncio.sleep(0.05)
    for i in range(20):
        if i:
            await asyncio.sleep(0.02)
        await resp.write(sse(chunk({"content": f" w{i}"})))
    await _finish(resp, "stop", usage(120, reasoning=100))


def test_tpot_leaves_out_the_reasoning_tokens_the_server_never_streamed() -> None:
    with serve(streaming(_hidden_reasoning)) as url:
        rec = send_one(url, max_tokens=200)
    assert rec.ok, rec.error_detail
    assert (rec.completion_tokens, rec.reasoning_tokens, rec.reasoning_events) == (120, 100, 0)
    assert rec.hidden_reasoning_tokens == 100
    tpot = rec.tpot()
    # 20 streamed tokens 20 ms apart: 19 gaps over the streamed span, never 119 (about 3 ms);
    # a loaded machine only makes the gaps longer
    assert tpot is not None and 0.018 <= tpot <= 0.1, tpot
    assert rec.tpot_basis() == "usage_streamed"


def test_streamed_reasoning_stays_in_the_tpot_count() -> None:
    async def script(resp: web.StreamResponse) -> None:
        await _role(resp)
        for i in range(10):
            await asyncio.sleep(0.01)
            await resp.write(sse(chunk({"reasoning_content": f" r{i}"})))
        for i in range(10):
            await asyncio.sleep(0.01)
            await resp.write(sse(chunk({"content": f" w{i}"})))
        await _finish(resp, "stop", usage(20, reasoning=10))

    with serve(streaming(script)) as url:
        rec = send_one(url, max_tokens=100)
    assert rec.ok, rec.error_detail
    assert rec.reasoning_events == 10 and rec.hidden_reasoning_tokens == 0
    assert rec.tpot_basis() == "usage"
    assert rec.first_token_any is not None and rec.first_content is not None
    tpot = rec.tpot()
    assert tpot == pytest.approx((rec.end - rec.first_token_any) / 19)


def _hidden_reasoning_record(i: int, rng: random.Random) -> RequestRecord:
    """A successful answer: 2 s of hidden reasoning, then 20 content tokens about 20 ms apart."""
    send = i * 0.1
    first = send + 2.0 + rng.uniform(0.0, 0.2)
    times = [first]
    for _ in range(19):
        times.append(times[-1] + rng.uniform(0.018, 0.022))
    return RequestRecord(index=i, send=send, first_event=send + 0.01, first_token_any=first,
                         first_content=first, content_times=times, content_events=20, chunks=23,
                         end=times[-1], completion_tokens=120, reasoning_tokens=100, finish_reason="stop",
                         done=True)


def test_a_hidden_reasoning_server_fails_a_tpot_limit_its_streamed_pace_misses_and_says_so() -> None:
    rng = random.Random(24)
    records = [_hidden_reasoning_record(i, rng) for i in range(100)]
    slo = parse_slo((), {"tpot_p95": 0.010})
    summary = summarize(records, (0.0, 15.0), slo=slo)
    p95 = summary.metrics["tpot"].percentiles["p95"]
    assert 0.019 <= p95.value <= 0.022  # the streamed pace, not (span / 119) ≈ 3.3 ms
    assert evaluate(summary, slo).status == "fail"
    assert summary.usage.tpot_basis == {"usage_streamed": 100}
    assert summary.usage.hidden_reasoning == 100
    assert "100 of 100 successful requests reported 10000 reasoning tokens" in summary.usage.note
    assert summary.output_tokens == 12000  # throughput still counts what the server generated


# -- item 5: the first token of any kind carries a visible character ----------------------------


async def _blank_reasoning_then_wait(resp: web.StreamResponse) -> None:
    """A " " reasoning delta at once, then 0.4 s of nothing, then reasoning and content."""
    await _role(resp)
    await resp.write(sse(chunk({"reasoning_content": " "})))
    await asyncio.sleep(0.4)
    await resp.write(sse(chunk({"reasoning_content": "thinking"})))
    for i in range(4):
        await asyncio.sleep(0.005)
        await resp.write(sse(chunk({"content": f" w{i}"})))
    await _finish(resp, "stop", usage(5))


def test_a_blank_reasoning_delta_sent_at_once_is_not_the_first_token() -> None:
    with serve(streaming(_blank_reasoning_then_wait)) as url:
        rec = send_one(url)
    assert rec.ok, rec.error_detail
    assert rec.first_token_any is not None and rec.first_event is not None
    assert rec.first_token_any - rec.send >= 0.38  # at "thinking", not at the blank delta
    assert rec.reasoning_events == 1


def test_an_answer_that_is_whitespace_throughout_takes_its_first_generated_event() -> None:
    async def script(resp: web.StreamResponse) -> None:
        await _role(resp)
        await asyncio.sleep(0.05)
        await resp.write(sse(chunk({"content": "\n"})))
        await _finish(resp, "stop", usage(1))

    with serve(streaming(script)) as url:
        rec = send_one(url)
    assert rec.ok, rec.error_detail  # it generated a token; a blank one is still an answer
    assert rec.first_token_any is not None and rec.first_token_any == rec.first_content


def test_a_blank_reasoning_delta_buys_no_fast_ttft_any_in_a_live_run(pytester: pytest.Pytester) -> None:
    with scripted_server(_blank_reasoning_then_wait) as url:
        # a median limit: a plan sized for it stays small, and the miss is conclusive at any size
        result = _bundled(pytester, url, "--slo", "ttft_any_p50=0.2", "--load-concurrency", "8")
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "VERDICT: NO-GO" in out
    load = _load(pytester)
    ttft_any = load["summary"]["metrics"]["ttft_any_token"]["p50"]["value"]
    assert ttft_any >= 0.38, ttft_any
    assert load["summary"]["counts"]["failed"] == 0


# -- item 8: no text is no answer, whatever usage claims ----------------------------------------


async def _usage_without_text(resp: web.StreamResponse) -> None:
    await _role(resp)
    await asyncio.sleep(0.01)
    await _finish(resp, "stop", usage(20))


def test_an_answer_with_no_text_but_claimed_usage_is_incomplete() -> None:
    with serve(streaming(_usage_without_text)) as url:
        rec = send_one(url)
    assert rec.error == "incomplete"
    assert rec.error_detail.startswith("finish_reason 'stop' and usage claiming 20 completion tokens, but "
                                       "nothing generated (no content, reasoning or tool call)")


def test_hidden_reasoning_that_took_the_whole_budget_is_an_answer_without_content() -> None:
    async def script(resp: web.StreamResponse) -> None:
        await _role(resp)
        await asyncio.sleep(0.01)
        await _finish(resp, "length", usage(8, reasoning=8))

    with serve(streaming(script)) as url:
        rec = send_one(url, max_tokens=8)
    assert rec.ok, rec.error_detail  # the workload left no room for content: not a server failure
    assert rec.first_content is None and rec.hidden_reasoning_tokens == 8


def test_usage_without_text_fails_an_e2e_slo_in_a_load_only_run(pytester: pytest.Pytester) -> None:
    with scripted_server(_usage_without_text) as url:
        result = _bundled(pytester, url, "--slo", "e2e_p50=1.0", "--load-concurrency", "8")
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "VERDICT: NO-GO" in out
    counts = _load(pytester)["summary"]["counts"]
    assert counts["measured"] >= 20
    assert counts["errors"]["incomplete"] == counts["measured"]


# -- item 8c: vLLM's goodput limits, under its names and in its unit ----------------------------


def test_vllm_goodput_limits_are_slo_keys_in_milliseconds_that_need_goodput_min() -> None:
    slo = parse_slo((), {"goodput_ttft_ms": 500, "goodput_tpot_ms": 50, "goodput_e2el_ms": 2000,
                         "goodput_min": 0.9})
    assert slo.goodput_limits() == {"ttft": 0.5, "tpot": 0.05, "e2e": 2.0}
    assert slo.to_json() == {"goodput_min": 0.9, "goodput_ttft_ms": 500.0, "goodput_tpot_ms": 50.0,
                             "goodput_e2el_ms": 2000.0}
    assert {"goodput_ttft_ms", "goodput_tpot_ms", "goodput_e2el_ms"} <= set(allowed_slo_keys())
    with pytest.raises(MarkerError, match=r"goodput_ttft_ms say\(s\) which requests count as good.*"
                                          r"add goodput_min"):
        parse_slo((), {"goodput_ttft_ms": 500})
    with pytest.raises(MarkerError, match="must be > 0"):
        parse_slo((), {"goodput_tpot_ms": 0, "goodput_min": 0.9})


def test_vllm_goodput_limits_come_through_the_slo_option() -> None:
    slo, source = resolve_slo("goodput_ttft_ms=500,goodput_tpot_ms=50,goodput_min=0.9", None)
    assert slo is not None and slo.goodput_limits() == {"ttft": 0.5, "tpot": 0.05}
    assert source == "--slo goodput_ttft_ms=500.0,goodput_tpot_ms=50.0,goodput_min=0.9"


def _answer(i: int, ttft: float, gap: float) -> RequestRecord:
    """A successful answer of 11 content tokens `gap` apart, its first `ttft` after send."""
    times = [ttft + k * gap for k in range(11)]
    return RequestRecord(index=i, first_event=0.01, first_token_any=ttft, first_content=ttft,
                         content_times=times, content_events=11, completion_tokens=11, end=times[-1],
                         finish_reason="stop", done=True)


def test_goodput_keys_replace_the_latency_limits_and_judge_each_request_as_vllm_does() -> None:
    # ttft 0.5 s exactly is good under vLLM's ttft:500 (at or under the limit); 0.6 s is not
    records = [_answer(i, 0.5, 0.01) for i in range(90)] + [_answer(90 + i, 0.6, 0.01) for i in range(10)]
    slo = parse_slo((), {"ttft_p99": 0.2, "goodput_ttft_ms": 500, "goodput_min": 0.8})
    summary = summarize(records, (0.0, 1.0), slo=slo)
    good = summary.goodput
    assert good is not None
    assert (good.good, good.measured, good.source) == (90, 100, "goodput_keys")
    assert good.limits == {"ttft": 0.5}  # the ttft_p99 limit of 0.2 s is not a goodput limit here
    row = next(r for r in evaluate(summary, slo).rows if r.key == "goodput_min")
    assert row.measured == pytest.approx(0.9)
    # without goodput keys the latency limits define goodput, as before
    plain = summarize(records, (0.0, 1.0), slo=parse_slo((), {"ttft_p99": 0.55, "goodput_min": 0.8}))
    assert plain.goodput is not None and plain.goodput.source == "latency_limits"
    assert plain.goodput.limits == {"ttft": 0.55}


# -- item 12: the server's bad data is the server's protocol error ------------------------------


@pytest.mark.parametrize(("event", "named"), [
    (chunk({"content": 7}), "choices[0].delta.content is 7 (int), not a string"),
    (chunk({"reasoning_content": ["x"]}), "choices[0].delta.reasoning_content is [\"x\"] (list)"),
    (chunk({"tool_calls": {"id": "c"}}), "choices[0].delta.tool_calls is {\"id\": \"c\"} (dict), not a list"),
    (chunk([]), "choices[0].delta is [] (list), not an object"),  # type: ignore[arg-type]
    ({"id": "x", "choices": "none"}, "choices is \"none\" (str), not a list"),
    ({"id": "x", "choices": [3]}, "choices[0] is 3 (int), not an object"),
    ({"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": 1}]},
     "choices[0].finish_reason is 1 (int), not a string"),
])
def test_an_event_that_breaks_the_chunk_schema_is_the_servers_stream_error(event: dict[str, Any],
                                                                           named: str) -> None:
    async def script(resp: web.StreamResponse) -> None:
        await _role(resp)
        await resp.write(sse(event))
        await _finish(resp, "stop", usage(1))

    with serve(streaming(script)) as url:
        rec = send_one(url)
    assert rec.error == "stream_error", rec.error_detail  # never client_error ("a fault in the plugin")
    assert rec.error_detail.startswith("the stream broke the chunk schema: ")
    assert named in rec.error_detail


async def _content_not_a_string(resp: web.StreamResponse) -> None:
    await _role(resp)
    await asyncio.sleep(0.005)
    await resp.write(sse(chunk({"content": 7})))
    await _finish(resp, "stop", usage(1))


def test_a_number_for_content_is_a_no_go_on_the_server_in_a_live_run(pytester: pytest.Pytester) -> None:
    with scripted_server(_content_not_a_string) as url:
        result = _bundled(pytester, url, "--load-concurrency", "4", "--load-requests", "20")
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "VERDICT: NO-GO" in out
    assert "fault in the plugin" not in out and "TypeError" not in out
    counts = _load(pytester)["summary"]["counts"]
    assert counts["client_errors"] == 0
    assert counts["errors"]["stream_error"] == counts["measured"] == 20


# -- item 15: the stall limit is an option, by default the request timeout ----------------------


def test_the_stall_limit_defaults_to_the_request_timeout_and_never_exceeds_it() -> None:
    assert ClientLimits(request_timeout=300.0).stall_seconds == 300.0
    assert ClientLimits(request_timeout=300.0, stall_timeout=20.0).stall_seconds == 20.0
    assert ClientLimits(request_timeout=5.0, stall_timeout=20.0).stall_seconds == 5.0


def test_stall_timeout_is_an_option_with_the_request_timeout_as_its_default() -> None:
    plain = resolve(lambda key: {"request_timeout": "300"}.get(key), environ={})
    assert plain.stall_timeout is None and plain.load_stall_timeout == 300.0
    assert plain.describe()["stall_timeout"] == 300.0
    given = resolve(lambda key: {"request_timeout": "300", "stall_timeout": "45"}.get(key), environ={})
    assert given.load_stall_timeout == 45.0
    with pytest.raises(SettingsError, match=r"--stall-timeout 400 is longer than --request-timeout 300"):
        resolve(lambda key: {"request_timeout": "300", "stall_timeout": "400"}.get(key), environ={})
    with pytest.raises(SettingsError, match="--stall-timeout must be a number of seconds > 0"):
        resolve(lambda key: {"stall_timeout": "0"}.get(key), environ={})


async def _quick(resp: web.StreamResponse) -> None:
    await _role(resp)
    for i in range(4):
        await asyncio.sleep(0.002)
        await resp.write(sse(chunk({"content": f" w{i}"})))
    await _finish(resp, "stop", usage(4))


def test_a_long_request_timeout_reaches_the_load_clients_stall_limit(pytester: pytest.Pytester) -> None:
    with scripted_server(_quick) as url:
        result = _bundled(pytester, url, "--request-timeout", "300", "--load-requests", "8")
    assert result.ret == 0, result.stdout.str()
    assert _load(pytester)["spec"]["stall_timeout"] == 300  # no hidden 30 s limit under it


async def _pause_after_the_role_chunk(resp: web.StreamResponse) -> None:
    await _role(resp)
    await asyncio.sleep(1.0)
    await resp.write(sse(chunk({"content": "late"})))
    await _finish(resp, "stop", usage(1))


def test_the_stall_timeout_option_fails_a_stream_quiet_for_longer(pytester: pytest.Pytester) -> None:
    with scripted_server(_pause_after_the_role_chunk) as url:
        result = _bundled(pytester, url, "--stall-timeout", "0.3", "--request-timeout", "5",
                          "--load-concurrency", "4", "--load-requests", "8")
    out = result.stdout.str()
    assert result.ret == 1, out
    load = _load(pytester)
    assert load["spec"]["stall_timeout"] == 0.3
    assert load["summary"]["counts"]["errors"]["stall"] == 8
    assert "no bytes for 0.3 s in the middle of the answer (--stall-timeout)" in out
