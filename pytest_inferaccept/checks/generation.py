"""Generation control: stop sequences, token limits and determinism, judged against the model itself.

Nothing here assumes a model that follows instructions: the expected output of a request is
derived from the server's own deterministic (temperature 0) answer to the same request without
the parameter under test.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.checks.pace import Pace, read_paced
from pytest_inferaccept.checks.sse import assemble_content, assemble_tool_calls, read_sse
from pytest_inferaccept.evidence import excerpt

if TYPE_CHECKING:
    import httpx

CHAT_PATH = "/v1/chat/completions"
NEVER_STOP = "\u00a7\u00a7no-such-text\u00a7\u00a7"
"""A stop string no model produces, to fill a stop list."""


@dataclass
class ChatResult:
    """The first choice of a chat completion, streamed or not, reduced to what checks compare."""

    text: str
    finish_reason: str | None
    usage: dict[str, Any] | None
    message: dict[str, Any]
    """The non-stream message, or for a stream the reassembled {content, tool_calls}."""
    streamed: bool
    raw: str = ""
    chunks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls of the first choice (empty when none)."""
        calls = self.message.get("tool_calls")
        return calls if isinstance(calls, list) else []

    def describe(self) -> str:
        """A one-line account for failure messages."""
        mode = "stream" if self.streamed else "non-stream"
        return (f"{mode}: finish_reason={self.finish_reason!r}, text={excerpt(self.text, 300)!r}, "
                f"usage={self.usage}")


def post_chat(client: httpx.Client, body: dict[str, Any]) -> ChatResult:
    """POST a non-stream chat completion; fail unless it answers 200 with choices[0].message."""
    resp = client.post(CHAT_PATH, json={**body, "stream": False})
    require(resp.status_code == 200, f"chat completion answered HTTP {resp.status_code}, expected 200",
            f"request: {excerpt(json.dumps(body), 400)}\nbody: {excerpt(resp.text, 600)}")
    try:
        data = resp.json()
        choice = data["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        fail("chat completion has no choices[0].message", excerpt(resp.text, 600))
    if not isinstance(message, dict):
        fail("choices[0].message is not an object", excerpt(resp.text, 600))
    content = message.get("content")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
    return ChatResult(text=content if isinstance(content, str) else "",
                      finish_reason=choice.get("finish_reason"), usage=usage, message=message,
                      streamed=False, raw=resp.text)


def stream_chat(client: httpx.Client, body: dict[str, Any], pace: Pace | None = None) -> ChatResult:
    """Stream a chat completion; fail unless it answers 200 and a finish_reason arrives. With `pace`
    (and a token limit in the body) the stream is read under limits sized from its own pace
    (checks/pace.py: CouldNotFinish when it is slow, not endless)."""
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if not isinstance(limit, int):
        pace = None  # without a token limit there is no whole answer to size the wait by
    extra: dict[str, Any] = {} if pace is None else pace.request_options(client.timeout.connect or 5.0)
    sent = time.monotonic()
    with client.stream("POST", CHAT_PATH, json={**body, "stream": True}, **extra) as resp:
        if resp.status_code != 200:
            resp.read()
            fail(f"streamed chat completion answered HTTP {resp.status_code}, expected 200",
                 f"request: {excerpt(json.dumps(body), 400)}\nbody: {excerpt(resp.text, 600)}")
        if pace is not None:
            assert isinstance(limit, int)
            stream = read_sse([read_paced(resp.iter_bytes(), max_tokens=limit, pace=pace, started=sent)])
        else:
            stream = read_sse(resp.iter_bytes())
    raw = stream.raw.decode("utf-8", "replace")
    chunks = stream.chunks()
    errors = [c["error"] for c in chunks if "error" in c]
    require(not errors, "the stream carried an error chunk after HTTP 200", excerpt(str(errors[:1]), 600))
    finish = None
    usage = None
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            if int(choice.get("index", 0)) == 0 and choice.get("finish_reason") is not None:
                finish = choice["finish_reason"]
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
    require(finish is not None, "no stream chunk carried a finish_reason for choice 0", excerpt(raw, 800))
    text = assemble_content(chunks).get(0, "")
    message: dict[str, Any] = {"role": "assistant", "content": text,
                               "tool_calls": assemble_tool_calls(chunks)}
    return ChatResult(text=text, finish_reason=finish, usage=usage, message=message, streamed=True,
                      raw=raw, chunks=chunks)


def chat(client: httpx.Client, body: dict[str, Any], stream: bool, pace: Pace | None = None) -> ChatResult:
    """Run one chat completion in the given mode (a stream read under `pace` when given)."""
    return stream_chat(client, body, pace) if stream else post_chat(client, body)


# --- stop sequences -------------------------------------------------------------------------------


def stop_candidates(text: str) -> list[str]:
    """Words of the text with their leading space, in order, that could serve as stop strings.

    A leading space makes the cut point unambiguous (servers differ on trailing whitespace);
    words at the very start are left out so that the cut output is not empty.
    """
    found = [m.group(0) for m in re.finditer(r" [^\s]+", text) if text.find(m.group(0)) > 0]
    # Prefer words with letters or digits: punctuation-only stops are easily merged into tokens.
    wordy = [w for w in found if re.search(r"\w", w)]
    return wordy or found


def cut_at_stops(text: str, stops: list[str]) -> str | None:
    """The text cut before the earliest occurrence of any stop; None when no stop occurs."""
    hits = [text.find(s) for s in stops if s in text]
    return text[: min(hits)] if hits else None


def check_stop_result(result: ChatResult, reference: str, stops: list[str]) -> None:
    """The output equals the reference text cut before the earliest stop, with finish_reason stop."""
    expected = cut_at_stops(reference, stops)
    assert expected is not None, "the stops must come from the reference text"
    got = result.text
    mode = "streamed text" if result.streamed else "output"
    context = (f"stop={stops!r}\nreference (same request without stop): {excerpt(reference, 400)!r}\n"
               f"expected: {excerpt(expected, 400)!r}\ngot: {excerpt(got, 400)!r}")
    for stop in stops:
        require(stop not in got, f"{mode} contains the stop text {stop!r}", context)
    if got != expected and got.startswith(expected):
        leak = got[len(expected):]
        if any(s.startswith(leak) for s in stops):
            fail(f"{mode} leaks {leak!r}, a partial prefix of the stop text", context)
        fail(f"{mode} runs on past the stop: {excerpt(leak, 120)!r} after the cut point", context)
    if got != expected and expected.startswith(got):
        fail(f"{mode} ends {len(expected) - len(got)} characters before the stop", context)
    require(got == expected, f"{mode} differs from the reference text cut before the stop", context)
    require(result.finish_reason == "stop",
            f"finish_reason is {result.finish_reason!r} after a stop sequence matched, expected 'stop'",
            context)


# --- token limits -----------------------------------------------------------------------------------


def completion_tokens(result: ChatResult) -> int | None:
    """usage.completion_tokens when the server reported it."""
    value = (result.usage or {}).get("completion_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_length_result(result: ChatResult, limit: int, field_name: str, natural: int) -> None:
    """A limit below the natural length ends with finish_reason length and exactly `limit` tokens."""
    context = f"{field_name}={limit}, the same request without a tight limit made {natural} tokens\n" \
              f"{result.describe()}"
    used = completion_tokens(result)
    if used is not None and used > limit and result.finish_reason != "length":
        fail(f"{field_name}={limit} was ignored: {used} completion tokens, "
             f"finish_reason {result.finish_reason!r}", context)
    require(result.finish_reason == "length",
            f"finish_reason is {result.finish_reason!r} for output cut by {field_name}={limit}, "
            "expected 'length'", context)
    if used is not None:
        require(used == limit, f"usage.completion_tokens is {used}, expected {field_name}={limit}",
                context)


def check_same_text(first: ChatResult, second: ChatResult, what: str) -> None:
    """Two answers to the same deterministic request must be identical."""
    if first.text == second.text:
        return
    at = next((i for i, (a, b) in enumerate(zip(first.text, second.text, strict=False)) if a != b),
              min(len(first.text), len(second.text)))
    fail(f"{what}: two identical requests gave different text (first difference at character {at})",
         f"first:  {excerpt(first.text, 500)!r}\nsecond: {excerpt(second.text, 500)!r}")
