"""One minimal request per capability, classifying the server as supported/unsupported/broken."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capabilities import ProbeResult, ProbeStatus
from pytest_inferaccept.evidence import excerpt
from pytest_inferaccept.server import ServerUnderTest

if TYPE_CHECKING:
    import httpx

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}
TIME_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the current local time for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}
Probe = Callable[["httpx.Client", ServerUnderTest], ProbeResult]


def _chat(server: ServerUnderTest, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": server.model, "max_tokens": 8, "temperature": 0,
                            "messages": [{"role": "user", "content": "Say hello."}]}
    body.update(extra)
    return body


def _result(cap: str, status: ProbeStatus, detail: str) -> ProbeResult:
    return ProbeResult(capability=cap, status=status, detail=detail)


def _failed(cap: str, what: str, exc: Exception) -> ProbeResult:
    """A probe whose request failed in transport: broken, and not cached when it may be a blip."""
    import httpx

    from pytest_inferaccept.http import bound_finding

    # A refused or reset connection may pass; a timeout or a bound crossed would repeat.
    blip = isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException) \
        and bound_finding(exc) is None
    return ProbeResult(capability=cap, status="broken", detail=f"{what}: {type(exc).__name__}: {exc}",
                       transient=blip)


def _classify(cap: str, resp: httpx.Response) -> ProbeResult | None:
    """Turn a non-2xx answer into unsupported (4xx) or broken (5xx); None for 2xx."""
    if 200 <= resp.status_code < 300:
        return None
    what = f"HTTP {resp.status_code}: {excerpt(resp.text, 200)}"
    return _result(cap, "broken" if resp.status_code >= 500 else "unsupported", what)


def _post(client: httpx.Client, cap: str, url: str, body: dict[str, Any]) -> ProbeResult | httpx.Response:
    import httpx

    try:
        resp = client.post(url, json=body)
    except httpx.HTTPError as exc:
        return _failed(cap, "request failed", exc)
    return _classify(cap, resp) or resp


def _json(resp: httpx.Response) -> dict[str, Any] | None:
    try:
        data = resp.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _first_message(data: dict[str, Any] | None) -> dict[str, Any] | None:
    try:
        msg = data["choices"][0]["message"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return None
    return msg if isinstance(msg, dict) else None


def probe_chat(client: httpx.Client, server: ServerUnderTest, cap: str = "chat",
               **extra: Any) -> ProbeResult:
    """A plain chat request (plus `extra` fields) must answer a chat.completion."""
    got = _post(client, cap, f"{server.api_base}/chat/completions", _chat(server, **extra))
    if isinstance(got, ProbeResult):
        return got
    msg = _first_message(_json(got))
    if msg is None:
        return _result(cap, "broken", f"200 without choices[0].message: {excerpt(got.text, 200)}")
    return _result(cap, "supported", f"HTTP {got.status_code}, message with keys {sorted(msg)}")


def probe_stream(client: httpx.Client, server: ServerUnderTest, cap: str = "stream",
                 **extra: Any) -> ProbeResult:
    """A streamed chat request must answer text/event-stream with data: events.

    The stream is read under limits sized from its own pace (checks/pace.py), with the probe client's
    timeout as the base: a slow server's stream is not broken because a fixed limit ran out. One that
    stalls, or runs far past max_tokens, is broken; one still delivering events when even its paced limit
    runs out streams (`stream` is supported), while whether it ends with a usage chunk stays undecided."""
    import time

    import httpx

    from pytest_inferaccept.checks import CheckFailed
    from pytest_inferaccept.checks.pace import CEILING_FACTOR, CouldNotFinish, Pace, read_paced

    body = _chat(server, stream=True, **extra)
    base = client.timeout.read or 60.0
    # The probe's client carries no stall limit of its own: a stream silent for the whole base stalled.
    pace = Pace(base_s=base, stall_s=base, ceiling_s=CEILING_FACTOR * base)
    got = bytearray()
    unfinished: str | None = None

    def kept(chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            got.extend(chunk)
            yield chunk

    try:
        sent = time.monotonic()
        with client.stream("POST", f"{server.api_base}/chat/completions", json=body,
                           **pace.request_options(client.timeout.connect or 5.0)) as resp:
            if resp.status_code >= 300:
                resp.read()
                bad = _classify(cap, resp)
                assert bad is not None
                return bad
            ctype = resp.headers.get("content-type", "")
            try:
                read_paced(kept(resp.iter_bytes()), max_tokens=int(body["max_tokens"]), pace=pace,
                           started=sent)
            except CouldNotFinish as exc:
                unfinished = str(exc)
    except httpx.HTTPError as exc:
        return _failed(cap, "stream failed", exc)
    except CheckFailed as exc:
        return _result(cap, "broken", f"stream failed: {exc.title}")
    from pytest_inferaccept.checks.sse import data_texts

    text = got.decode("utf-8", "replace")
    events = [data.strip() for data in data_texts(text)]
    if "text/event-stream" not in ctype or not events:
        return _result(cap, "unsupported",
                       f"content-type {ctype!r}, {len(events)} data events: {excerpt(text, 200)}"
                       + (f" ({unfinished})" if unfinished else ""))
    if unfinished is not None:
        if cap == "stream":
            return _result(cap, "supported", f"{len(events)} data events, content-type {ctype}; its end not "
                           f"seen within the probe's paced limit, {unfinished}")
        return _result(cap, "unsupported", "undecided (the usage chunk comes last, and the stream's end was "
                       f"not seen within the probe's paced limit): {unfinished}")
    if cap == "stream_usage":
        chunks = [json.loads(e) for e in events if e != "[DONE]" and e.startswith("{")]
        if not any(isinstance(c.get("usage"), dict) for c in chunks):
            return _result(cap, "unsupported", "include_usage asked, no chunk carried usage")
    return _result(cap, "supported", f"{len(events)} data events, content-type {ctype}")


def probe_stream_usage(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """include_usage must add a usage chunk."""
    return probe_stream(client, server, "stream_usage",
                        stream_options={"include_usage": True})


def probe_completions(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """Legacy completions must answer choices[].text."""
    body = {"model": server.model, "prompt": "Hello", "max_tokens": 4, "temperature": 0}
    got = _post(client, "completions", f"{server.api_base}/completions", body)
    if isinstance(got, ProbeResult):
        return got
    data = _json(got)
    try:
        text = data["choices"][0]["text"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return _result("completions", "broken", f"200 without choices[0].text: {excerpt(got.text, 200)}")
    return _result("completions", "supported", f"HTTP 200, text of {len(str(text))} chars")


def probe_embeddings(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """An embeddings request must answer a vector."""
    if not server.embedding_model:
        return _result("embeddings", "unsupported",
                       "no embedding model known (give --embedding-model / --embedding-url)")
    body = {"model": server.embedding_model, "input": "hello", "encoding_format": "float"}
    got = _post(client, "embeddings", f"{server.embedding_url}/v1/embeddings", body)
    if isinstance(got, ProbeResult):
        return got
    data = _json(got)
    try:
        vec = data["data"][0]["embedding"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return _result("embeddings", "broken", f"200 without data[0].embedding: {excerpt(got.text, 200)}")
    return _result("embeddings", "supported", f"HTTP 200, vector of {len(vec)} dims")


def probe_tools(client: httpx.Client, server: ServerUnderTest, cap: str = "tools",
                choice: Any = "auto", tools: list[dict[str, Any]] | None = None,
                need_calls: int = 0,
                prompt: str = "What is the weather in Paris? Use get_weather.") -> ProbeResult:
    """A request with tools must be accepted; forced choices must produce calls."""
    body = _chat(server, tools=tools or [WEATHER_TOOL], tool_choice=choice, max_tokens=96,
                 messages=[{"role": "user", "content": prompt}])
    got = _post(client, cap, f"{server.api_base}/chat/completions", body)
    if isinstance(got, ProbeResult):
        return got
    msg = _first_message(_json(got))
    if msg is None:
        return _result(cap, "broken", f"200 without choices[0].message: {excerpt(got.text, 200)}")
    calls = msg.get("tool_calls") or []
    if len(calls) < need_calls:
        seen = _answer_words(got, msg)
        if choice != "auto":
            # A dropped forced choice answers as tool_choice auto does: a server fault, not the model.
            again = _post(client, cap, f"{server.api_base}/chat/completions", {**body, "tool_choice": "auto"})
            other = None if isinstance(again, ProbeResult) else _first_message(_json(again))
            if other is not None and not isinstance(again, ProbeResult) and _same_message(msg, other):
                return _result(cap, "broken",
                               f"the forced tool_choice {excerpt(str(choice), 80)} was not honoured: the "
                               f"answer is the same as with tool_choice 'auto' ({seen})")
        return _result(cap, "unsupported",
                       f"accepted but returned {len(calls)} tool call(s), {need_calls} needed ({seen}; "
                       f"content: {excerpt(str(msg.get('content')), 120)})")
    return _result(cap, "supported", f"HTTP 200, {len(calls)} tool call(s)")


def _answer_words(resp: httpx.Response, msg: dict[str, Any]) -> str:
    """What a chat answer was: its calls, finish_reason, completion tokens and length of text."""
    data = _json(resp)
    choices = data.get("choices") if isinstance(data, dict) else None
    finish = choices[0].get("finish_reason") if isinstance(choices, list) and choices and \
        isinstance(choices[0], dict) else None
    usage = data.get("usage") if isinstance(data, dict) else None
    used = usage.get("completion_tokens") if isinstance(usage, dict) else None
    content = msg.get("content")
    text = content if isinstance(content, str) else ""
    spent = f" after {used} completion tokens" if isinstance(used, int) else ""
    return (f"{len(msg.get('tool_calls') or [])} tool call(s), finish_reason {finish!r}{spent}, "
            f"{len(text)} characters of text")


def _same_message(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same text and the same calls (names and arguments; ids differ between answers)."""
    def calls(m: dict[str, Any]) -> list[tuple[object, object]]:
        return [((c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
                for c in m.get("tool_calls") or [] if isinstance(c, dict)]
    return a.get("content") == b.get("content") and calls(a) == calls(b)


def probe_tool_choice_required(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """tool_choice=required must yield a call."""
    return probe_tools(client, server, "tool_choice_required", "required", need_calls=1)


def probe_tool_choice_named(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """A named tool_choice must yield that call."""
    named = {"type": "function", "function": {"name": "get_weather"}}
    return probe_tools(client, server, "tool_choice_named", named, need_calls=1)


def probe_parallel_tool_calls(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """parallel_tool_calls must be accepted (the test checks whether several calls come)."""
    return probe_tools(client, server, "parallel_tool_calls", "auto",
                       tools=[WEATHER_TOOL, TIME_TOOL],
                       prompt="Use get_weather and get_time for Paris.")


def probe_response_format(client: httpx.Client, server: ServerUnderTest, cap: str) -> ProbeResult:
    """response_format must be accepted."""
    fmt: dict[str, Any] = {"type": "json_object"}
    if cap == "json_schema":
        fmt = {"type": "json_schema", "json_schema": {
            "name": "greeting", "strict": True,
            "schema": {"type": "object", "properties": {"greeting": {"type": "string"}},
                       "required": ["greeting"], "additionalProperties": False}}}
    return probe_chat(client, server, cap, response_format=fmt, max_tokens=32,
                      messages=[{"role": "user", "content": "Answer in JSON."}])


def probe_logprobs(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """logprobs=true must return choices[0].logprobs."""
    got = _post(client, "logprobs", f"{server.api_base}/chat/completions",
                _chat(server, logprobs=True, top_logprobs=2))
    if isinstance(got, ProbeResult):
        return got
    data = _json(got)
    try:
        lp = data["choices"][0]["logprobs"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        lp = None
    if not lp:
        return _result("logprobs", "unsupported", "accepted but choices[0].logprobs is null")
    return _result("logprobs", "supported", "HTTP 200 with logprobs")


def probe_n(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """n=2 must return two choices."""
    got = _post(client, "n", f"{server.api_base}/chat/completions", _chat(server, n=2, temperature=1))
    if isinstance(got, ProbeResult):
        return got
    data = _json(got) or {}
    count = len(data.get("choices") or [])
    if count != 2:
        return _result("n", "broken", f"asked n=2, got {count} choice(s)")
    return _result("n", "supported", "n=2 gave 2 choices")


def probe_reasoning(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """A plain chat answer must carry reasoning text under `reasoning` or `reasoning_content`."""
    got = _post(client, "reasoning", f"{server.api_base}/chat/completions", _chat(server, max_tokens=32))
    if isinstance(got, ProbeResult):
        return got
    msg = _first_message(_json(got))
    if msg is None:
        return _result("reasoning", "broken", f"200 without choices[0].message: {excerpt(got.text, 200)}")
    found = [k for k in ("reasoning", "reasoning_content") if isinstance(msg.get(k), str) and msg[k]]
    if not found:
        return _result("reasoning", "unsupported",
                       f"a plain answer carries no reasoning text (message keys {sorted(msg)})")
    return _result("reasoning", "supported",
                   f"reasoning text under {' and '.join(found)} ({len(msg[found[0]])} chars)")


def probe_seed(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """A seed must be accepted."""
    return probe_chat(client, server, "seed", seed=1234, temperature=1.0)


def probe_metrics(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """GET /metrics must answer text."""
    import httpx

    try:
        # Followed as a Prometheus scraper follows it (a LiteLLM gateway answers 307 to /metrics/).
        resp = client.get(f"{server.base_url}/metrics", follow_redirects=True)
    except httpx.HTTPError as exc:
        return _failed("metrics", "request failed", exc)
    bad = _classify("metrics", resp)
    if bad:
        return bad
    hops = "".join(f"{r.status_code} to {r.headers.get('location', '?')}, " for r in resp.history)
    moved = f"after a redirect ({hops.rstrip(', ')}) " if hops else ""
    return _result("metrics", "supported", f"{moved}HTTP 200, {len(resp.text)} chars")


def probe_auth(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """Without a key, the server must refuse."""
    import httpx

    request = client.build_request("POST", f"{server.api_base}/chat/completions", json=_chat(server))
    request.headers.pop("Authorization", None)
    try:
        resp = client.send(request)
    except httpx.HTTPError as exc:
        return _failed("auth", "request failed", exc)
    if resp.status_code in (401, 403):
        return _result("auth", "supported", f"no key → {resp.status_code}")
    return _result("auth", "unsupported", f"no key → {resp.status_code} (key not enforced)")


def _responses(server: ServerUnderTest, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": server.model, "input": "Say hello.", "max_output_tokens": 16,
                            "temperature": 0}
    body.update(extra)
    return body


def probe_responses(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """POST /v1/responses must answer a response resource with an output list."""
    got = _post(client, "responses", f"{server.api_base}/responses", _responses(server))
    if isinstance(got, ProbeResult):
        return got
    data = _json(got)
    if data is None or not isinstance(data.get("output"), list):
        return _result("responses", "broken", f"200 without an output list: {excerpt(got.text, 200)}")
    return _result("responses", "supported",
                   f"HTTP 200, status {data.get('status')!r}, {len(data['output'])} output item(s)")


def probe_responses_state(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """A stored response must be continued by previous_response_id."""
    cap = "responses_state"
    got = _post(client, cap, f"{server.api_base}/responses", _responses(server, store=True))
    if isinstance(got, ProbeResult):
        return got
    first = _json(got) or {}
    if first.get("store") is False:
        return _result(cap, "unsupported", "the server keeps no responses: store: true came back as false")
    if not isinstance(first.get("id"), str):
        return _result(cap, "broken", f"200 without a response id: {excerpt(got.text, 200)}")
    again = _post(client, cap, f"{server.api_base}/responses",
                  _responses(server, input="And again.", previous_response_id=first["id"]))
    if isinstance(again, ProbeResult):
        return ProbeResult(capability=cap, status=again.status, transient=again.transient,
                           detail=f"previous_response_id naming a stored response: {again.detail}")
    return _result(cap, "supported", f"previous_response_id {first['id']} continued with HTTP 200")



def probe_messages(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """POST /v1/messages, as an Anthropic client sends it, must answer a message."""
    import httpx

    sent = {"anthropic-version": "2023-06-01"}
    bearer = client.headers.get("Authorization", "")
    if bearer.startswith("Bearer "):
        sent["x-api-key"] = bearer.removeprefix("Bearer ")
    body = {"model": server.model, "max_tokens": 8, "temperature": 0,
            "messages": [{"role": "user", "content": "Say hello."}]}
    try:
        resp = client.post(f"{server.api_base}/messages", json=body, headers=sent)
    except httpx.HTTPError as exc:
        return _failed("messages", "request failed", exc)
    bad = _classify("messages", resp)
    if bad:
        return bad
    data = _json(resp)
    if data is None or data.get("type") != "message":
        return _result("messages", "broken", f"200 without type 'message': {excerpt(resp.text, 200)}")
    return _result("messages", "supported", f"HTTP 200, stop_reason {data.get('stop_reason')!r}")


ECHO_PROMPT = "The capital of France is"
"""The probe's prompt for echo_logprobs."""


def probe_echo_logprobs(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """A completion with echo and logprobs must echo the prompt and return logprobs."""
    cap = "echo_logprobs"
    body = {"model": server.model, "prompt": ECHO_PROMPT, "echo": True, "logprobs": 1, "max_tokens": 1,
            "temperature": 0}
    got = _post(client, cap, f"{server.api_base}/completions", body)
    if isinstance(got, ProbeResult):
        return got
    try:
        choice = _json(got)["choices"][0]  # type: ignore[index]
        text, logprobs = choice["text"], choice.get("logprobs")
    except (KeyError, IndexError, TypeError):
        return _result(cap, "broken", f"200 without choices[0].text: {excerpt(got.text, 200)}")
    if not isinstance(text, str) or not text.startswith(ECHO_PROMPT):
        # echo silently ignored: the parameter is not offered (a team that requires it gets the check)
        return _result(cap, "unsupported", f"echo: true accepted (200) but not honoured: the text "
                       f"{excerpt(str(text), 80)!r} does not start with the prompt {ECHO_PROMPT!r}")
    if not logprobs:
        return _result(cap, "unsupported", "echo honoured but choices[0].logprobs is null")
    return _result(cap, "supported", f"HTTP 200, the prompt echoed, logprobs with keys {sorted(logprobs)}")


def probe_tokenize(client: httpx.Client, server: ServerUnderTest) -> ProbeResult:
    """POST /tokenize must tokenize a text, in llama.cpp's shape (content) or vLLM's (prompt)."""
    import httpx

    seen, codes = [], []
    for shape, body in (("llama.cpp", {"content": "Hello world"}),
                        ("vLLM", {"model": server.model, "prompt": "Hello world"})):
        try:
            resp = client.post(f"{server.base_url}/tokenize", json=body)
        except httpx.HTTPError as exc:
            return _failed("tokenize", "request failed", exc)
        data = _json(resp) if resp.status_code == 200 else None
        tokens = data.get("tokens") if data else None
        # llama.cpp answers a vLLM-shaped body 200 with no tokens: only a non-empty list counts.
        if isinstance(tokens, list) and tokens:
            return _result("tokenize", "supported", f"{shape} shape: HTTP 200, {len(tokens)} tokens")
        seen.append(f"{shape} shape: HTTP {resp.status_code} {excerpt(resp.text, 80)}")
        codes.append(resp.status_code)
    status: ProbeStatus = "broken" if any(code >= 500 for code in codes) else "unsupported"
    return _result("tokenize", status, "POST /tokenize gave no tokens: " + "; ".join(seen))

PROBES: dict[str, Probe] = {
    "chat": probe_chat,
    "stream": probe_stream,
    "stream_usage": probe_stream_usage,
    "completions": probe_completions,
    "embeddings": probe_embeddings,
    "tools": probe_tools,
    "tool_choice_required": probe_tool_choice_required,
    "tool_choice_named": probe_tool_choice_named,
    "parallel_tool_calls": probe_parallel_tool_calls,
    "reasoning": probe_reasoning,
    "json_object": lambda c, s: probe_response_format(c, s, "json_object"),
    "json_schema": lambda c, s: probe_response_format(c, s, "json_schema"),
    "responses": probe_responses,
    "responses_state": probe_responses_state,
    "messages": probe_messages,
    "logprobs": probe_logprobs,
    "echo_logprobs": probe_echo_logprobs,
    "tokenize": probe_tokenize,
    "n": probe_n,
    "seed": probe_seed,
    "metrics": probe_metrics,
    "auth": probe_auth,
    # A mode of the server, not a feature an answer shows: only the team can say it is on.
    "batch_invariant": lambda c, s: _result(
        "batch_invariant", "unsupported", "not declared: a batch-invariant mode cannot be seen from outside; "
        "declare it with --capabilities batch_invariant"),
}
"""The probe for every capability in the vocabulary."""
