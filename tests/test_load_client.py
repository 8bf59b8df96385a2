"""The load client: one request -> one record, timestamps right, every failure classified."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aiohttp import web

from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.load.client import (
    ClientLimits,
    StreamClient,
    api_root,
    build_body,
    make_session,
)
from pytest_inferaccept.load.records import RequestKind, RequestRecord
from pytest_inferaccept.load.sse import StreamParser

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextmanager
def serve(handler: Handler) -> Iterator[str]:
    """A one-route aiohttp server (any path, any method) in a background thread; yields its URL."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        box["loop"] = asyncio.get_running_loop()
        box["stop"] = asyncio.Event()
        ready.set()
        await box["stop"].wait()
        await runner.cleanup()

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{box['port']}"
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(5)


def sse(obj: Any) -> bytes:
    """One SSE event."""
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """A chat.completion.chunk."""
    return {"id": "chatcmpl-x", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def stream_start(request: web.Request) -> web.StreamResponse:
    """Headers of an SSE answer, sent."""
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    return resp


def send_one(url: str, *, kind: RequestKind = "chat", api_key: str | None = None,
             max_tokens: int = 8, **limits: Any) -> RequestRecord:
    """Send one request with the load client and return its record."""

    async def go() -> RequestRecord:
        t0 = time.perf_counter()
        session = make_session(limit=1, connect_timeout=limits.get("connect_timeout", 2.0), api_key=api_key)
        client = StreamClient(session, url, kind, limits=ClientLimits(**limits), t0=t0)
        rec = RequestRecord(index=0, kind=kind)
        model = "fake-embed" if kind == "embeddings" else "fake-chat"
        body = build_body(kind, model, prompt="say something", messages=None, max_tokens=max_tokens)
        try:
            await client.send(rec, body)
        finally:
            await session.close()
        return rec

    return asyncio.run(go())


# -- timing against the fake server -------------------------------------------------------------


def test_ttft_is_taken_at_the_first_content_token_not_at_the_role_chunk() -> None:
    with FakeServer(ttft=0.05, itl=0.01) as server:
        rec = send_one(server.url)
    assert rec.ok, rec.error_detail
    assert rec.ttft is not None
    assert 0.05 <= rec.ttft <= 0.09
    assert rec.first_event is not None and rec.headers is not None
    assert rec.first_event - rec.send < 0.03  # the role chunk came at once, and was not a token
    assert rec.first_content == rec.first_token_any == rec.content_times[0]


def test_inter_token_gaps_follow_the_servers_pacing() -> None:
    with FakeServer(ttft=0.02, itl=0.01) as server:
        rec = send_one(server.url, max_tokens=16)
    gaps = rec.itls()
    assert len(gaps) == 15
    assert 0.009 <= statistics.median(gaps) <= 0.02


def test_usage_from_the_final_chunk_is_read_with_the_finish_and_done() -> None:
    with FakeServer() as server:
        rec = send_one(server.url, max_tokens=5)
    assert rec.ok
    assert rec.completion_tokens == 5 == rec.content_events == rec.output_tokens
    assert rec.prompt_tokens is not None and rec.prompt_tokens > 0
    assert rec.finish_reason == "length"
    assert rec.done
    assert rec.response_id is not None and rec.response_id.startswith("chatcmpl-")
    assert rec.status == 200
    assert rec.output_chars > 0


def test_without_usage_output_tokens_are_the_counted_content_events() -> None:
    with FakeServer() as server:
        rec = send_one(server.url, kind="completions", max_tokens=6)
    assert rec.ok, rec.error_detail
    assert rec.completion_tokens is None and not rec.usage_reported
    assert rec.output_tokens == rec.content_events == 6


def test_embeddings_are_one_answer_whose_ttft_is_the_whole_request() -> None:
    with FakeServer() as server:
        rec = send_one(server.url, kind="embeddings")
    assert rec.ok, rec.error_detail
    assert rec.ttft == pytest.approx(rec.e2e)
    assert rec.prompt_tokens is not None and rec.prompt_tokens > 0
    assert rec.max_tokens is None or rec.content_events == 0


def test_the_api_key_is_sent_as_a_bearer_token() -> None:
    with FakeServer(api_key="sekrit") as server:
        good = send_one(server.url, api_key="sekrit")
        bad = send_one(server.url)
    assert good.ok
    assert bad.error == "http_4xx" and bad.status == 401
    assert "API key" in bad.error_detail


# -- failures -----------------------------------------------------------------------------------


def test_a_500_is_recorded_as_http_5xx_with_the_body_excerpt() -> None:
    with FakeServer(faults=["chat_500"]) as server:
        rec = send_one(server.url)
    assert rec.error == "http_5xx" and rec.status == 500
    assert "internal server error" in rec.error_detail
    assert rec.end >= rec.send


def test_a_stalled_stream_is_recorded_as_a_stall() -> None:
    with FakeServer(faults=["stream_stall"]) as server:
        rec = send_one(server.url, stall_timeout=0.3, request_timeout=5.0)
    assert rec.error == "stall"
    assert rec.first_event is not None  # the role chunk came, then nothing
    assert 0.3 <= rec.e2e < 1.5


def test_a_server_that_never_answers_hits_the_total_deadline() -> None:
    with FakeServer(faults=["hang_completions"]) as server:
        rec = send_one(server.url, request_timeout=0.5, stall_timeout=0.2)
    assert rec.error == "timeout"  # no headers: the stall limit does not apply before them
    assert rec.headers is None
    assert 0.5 <= rec.e2e < 1.5


def test_an_error_event_in_the_stream_is_a_stream_error() -> None:
    with FakeServer(faults=["stream_error_chunk"]) as server:
        rec = send_one(server.url, max_tokens=10)
    assert rec.error == "stream_error"
    assert "engine failed" in rec.error_detail
    assert rec.content_events == 2


def test_a_connection_refused_is_a_connect_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    rec = send_one(f"http://127.0.0.1:{port}")
    assert rec.error == "connect"
    assert rec.headers is None and rec.status is None


def test_a_stream_that_ends_without_finish_or_done_is_a_stream_error() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await stream_start(request)
        await resp.write(sse(chunk({"role": "assistant", "content": ""})))
        await resp.write(sse(chunk({"content": "hi"})))
        await resp.write_eof()
        return resp

    with serve(handler) as url:
        rec = send_one(url)
    assert rec.error == "stream_error"
    assert "before a finish_reason" in rec.error_detail
    assert rec.content_events == 1


def test_a_connection_dropped_mid_stream_is_a_stream_error() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await stream_start(request)
        await resp.write(sse(chunk({"content": "hi"})))
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.abort()
        return resp

    with serve(handler) as url:
        rec = send_one(url)
    assert rec.error == "stream_error"
    assert rec.content_events == 1


def test_malformed_json_in_an_event_is_a_stream_error() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await stream_start(request)
        await resp.write(sse(chunk({"content": "hi"})))
        await resp.write(b'data: {"choices": [\n\n')
        await resp.write(sse("[DONE]"))
        return resp

    with serve(handler) as url:
        rec = send_one(url)
    assert rec.error == "stream_error"
    assert "malformed JSON" in rec.error_detail


def test_a_server_dripping_bytes_cannot_outlive_the_total_deadline() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await stream_start(request)
        for _ in range(100):
            await resp.write(b":")  # a byte at a time: never a stall, never an event
            await asyncio.sleep(0.1)
        return resp

    with serve(handler) as url:
        t = time.monotonic()
        rec = send_one(url, request_timeout=0.6, stall_timeout=0.3)
        took = time.monotonic() - t
    assert rec.error == "timeout"
    assert 0.6 <= rec.e2e < 1.5 and took < 3


def test_an_endless_stream_is_cut_by_the_size_cap() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await stream_start(request)
        event = sse(chunk({"content": "x" * 200}))
        for _ in range(100_000):
            await resp.write(event * 10)
        return resp

    with serve(handler) as url:
        rec = send_one(url, max_response_bytes=50_000, request_timeout=5.0)
    assert rec.error == "too_large"
    assert rec.content_events < 50_000 // 200  # nothing past the cap was read


def test_reasoning_text_is_a_token_of_any_kind_but_not_content() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await stream_start(request)
        await resp.write(sse(chunk({"role": "assistant", "content": ""})))
        await asyncio.sleep(0.03)
        await resp.write(sse(chunk({"reasoning_content": "thinking"})))
        await asyncio.sleep(0.03)
        await resp.write(sse(chunk({"reasoning": "more"})))
        await asyncio.sleep(0.03)
        await resp.write(sse(chunk({"content": "answer"})))
        await resp.write(sse(chunk({}, finish="stop")))
        await resp.write(sse("[DONE]"))
        return resp

    with serve(handler) as url:
        rec = send_one(url)
    assert rec.ok, rec.error_detail
    assert rec.first_event is not None and rec.first_token_any is not None and rec.first_content is not None
    assert rec.first_event < rec.first_token_any < rec.first_content
    assert rec.first_content - rec.first_token_any >= 0.05
    assert rec.content_events == 1 and rec.chunks == 5
    assert rec.completion_tokens is None and rec.output_tokens == 1


def test_events_in_one_write_are_all_parsed_and_counted_as_coalesced() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await stream_start(request)
        events = b"".join(sse(chunk({"content": f"w{i}"})) for i in range(5)).replace(b"\n", b"\r\n")
        await resp.write(events[:37])  # an event split across writes, CRLF split too
        await asyncio.sleep(0.05)
        await resp.write(events[37:])
        await asyncio.sleep(0.05)
        await resp.write(sse(chunk({}, finish="stop")) + b": keep-alive comment\n\n" + sse("[DONE]"))
        return resp

    with serve(handler) as url:
        rec = send_one(url)
    assert rec.ok, rec.error_detail
    assert rec.content_events == 5
    assert rec.coalesced == 4  # the first event of the read is not coalesced, the next four are
    assert rec.finish_reason == "stop" and rec.done


# -- the parser on its own ----------------------------------------------------------------------


def _parse(pieces: list[bytes]) -> RequestRecord:
    rec = RequestRecord(index=0)
    stream = StreamParser(rec)
    for i, piece in enumerate(pieces):
        stream.feed(piece, float(i))
    stream.finish_input(float(len(pieces)))
    assert stream.problem is None
    rec.done, rec.finish_reason = stream.done, stream.finish
    return rec


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_the_parser_gives_the_same_events_however_the_bytes_are_split(newline: bytes) -> None:
    body = (sse(chunk({"role": "assistant", "content": ""})) + sse(chunk({"content": "a"}))
            + b"data: " + json.dumps(chunk({"content": "b"})).encode() + b"\n\n"
            + sse(chunk({}, finish="stop"))
            + sse({"id": "x", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
            + sse("[DONE]")).replace(b"\n", newline)
    whole = _parse([body])
    for cut in range(1, len(body)):
        split = _parse([body[:cut], body[cut:]])
        seen = (split.content_events, split.chunks, split.completion_tokens, split.done)
        assert seen == (2, 5, 2, True), cut
    assert whole.content_events == 2 and whole.coalesced == 1 and whole.finish_reason == "stop"


def test_the_parser_joins_multi_line_data_and_ignores_other_fields() -> None:
    body = b'id: 1\nevent: message\ndata: {"choices": [{"delta":\ndata: {"content": "x"}}]}\n\ndata: [DONE]'
    rec = _parse([body])
    assert rec.content_events == 1 and rec.done  # the last event has no blank line: still read


def test_a_request_body_asks_for_a_stream_with_usage() -> None:
    body = json.loads(build_body("chat", "m", prompt="hi", messages=None, max_tokens=7,
                                 extra={"ignore_eos": True}))
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 7,
                    "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    emb = json.loads(build_body("embeddings", "e", prompt=None, messages=[{"role": "user", "content": "x"}],
                                max_tokens=7))
    assert emb == {"model": "e", "input": "user: x"}


def test_the_server_root_is_found_with_or_without_v1() -> None:
    assert api_root("http://h:8000/v1/") == api_root("http://h:8000/") == "http://h:8000"


@contextmanager
def closes_after_each_answer() -> Iterator[str]:
    """A raw HTTP server that answers one streamed chat request per connection and closes it
    without saying so (no Connection: close), as llama.cpp's server does after a stream. It
    closes when the next request arrives on it, so a reused connection always loses the race."""
    answer = b"".join([sse(chunk({"role": "assistant", "content": ""})), sse(chunk({"content": "hi"})),
                       sse(chunk({}, "stop")), b"data: [DONE]\n\n"])
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Content-Length: " + str(len(answer)).encode() + b"\r\n\r\n")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(2)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            headers, _, rest = data.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in headers.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            while len(rest) < length:
                rest += conn.recv(65536)
            conn.sendall(head + answer)
            with contextlib.suppress(OSError):
                conn.recv(1)  # the next request on this connection (or 2 s): then it is closed

    def serve_forever() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_a_keep_alive_connection_the_server_closed_is_resent_once_not_counted_as_an_error() -> None:
    async def go(url: str) -> list[RequestRecord]:
        t0 = time.perf_counter()
        session = make_session(limit=1, connect_timeout=2.0, api_key=None)
        client = StreamClient(session, url, "chat", limits=ClientLimits(request_timeout=5.0), t0=t0)
        records = []
        try:
            for i in range(6):
                rec = RequestRecord(index=i)
                await client.send(rec, build_body("chat", "m", prompt="x", messages=None, max_tokens=4))
                records.append(rec)  # the next request goes out at once, on the pooled connection
        finally:
            await session.close()
        return records

    with closes_after_each_answer() as url:
        records = asyncio.run(go(url))
    assert [r.error for r in records] == [None] * 6, [r.error_detail for r in records]
    assert sum(r.retries for r in records) >= 1
    assert all(r.content_events == 1 for r in records)


def test_a_resend_after_a_closed_connection_takes_a_new_one_not_another_pooled_one() -> None:
    async def go(url: str) -> RequestRecord:
        t0 = time.perf_counter()
        session = make_session(limit=2, connect_timeout=2.0, api_key=None)
        client = StreamClient(session, url, "chat", limits=ClientLimits(request_timeout=5.0), t0=t0)
        body = build_body("chat", "m", prompt="x", messages=None, max_tokens=4)
        try:
            # Two answers leave two pooled connections, both of which the server closes on reuse.
            await asyncio.gather(*(client.send(RequestRecord(index=i), body) for i in range(2)))
            rec = RequestRecord(index=2)
            await client.send(rec, body)
        finally:
            await client.close()
            await session.close()
        return rec

    with closes_after_each_answer() as url:
        rec = asyncio.run(go(url))
    assert rec.error is None, rec.error_detail
    assert rec.retries == 1 and rec.content_events == 1
