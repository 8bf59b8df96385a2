"""A burst of concurrent streamed chat requests: each answer as valid and as complete as a lone one.

Some servers answer one user correctly and break when two arrive at once: HTTP 200, the role
chunk, `data: [DONE]`, and nothing generated. A load run would see it as errors, but a
conformance run without a load SLO never sends two requests together; this check does.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.checks._base import CheckFailed
from pytest_inferaccept.checks.sse import SseStream
from pytest_inferaccept.checks.stream import check_chat_chunks, check_framing, open_stream, stream_seconds
from pytest_inferaccept.evidence import excerpt

if TYPE_CHECKING:
    import httpx

START_TOGETHER_S = 10.0
"""Longest wait for every thread of a burst to be ready before the requests go out together."""
EMPTY = "empty"


@dataclass(frozen=True)
class BurstAnswer:
    """What one request of a burst got: its problem (None: a valid answer with output)."""

    problem: str | None = None
    kind: str = ""
    """"empty" (nothing generated, no finish_reason), "incomplete", "invalid" or "failed"."""
    raw: str = ""
    """An excerpt of what the server sent."""
    warnings: tuple[str, ...] = ()
    error: BaseException | None = None
    """The transport error of a request that got no answer."""


def _has_output(delta: Mapping[str, Any]) -> bool:
    calls = delta.get("tool_calls")
    return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
                or (isinstance(calls, list) and calls))


def _what_came(chunks: list[dict[str, Any]], done: bool) -> str:
    """The shape of an answer with nothing in it: 'role chunk and [DONE]', '3 chunks, no [DONE]'."""
    roles = [c for c in chunks
             if any((ch.get("delta") or {}).get("role") for ch in c.get("choices") or [])]
    if len(chunks) == 1 and roles:
        came = "role chunk"
    elif not chunks:
        came = "no chunks"
    else:
        came = f"{len(chunks)} chunks"
    return f"{came} and [DONE]" if done else f"{came}, no [DONE]"


def judge_stream(content_type: str, stream: SseStream) -> BurstAnswer:
    """Judge one answer of a burst with the validators a lone streamed answer gets, and require
    generated output (content, reasoning or a tool call) and a finish_reason."""
    raw = excerpt(stream.raw.decode("utf-8", "replace").strip(), 400)
    try:
        chunks = stream.chunks()
    except CheckFailed as exc:
        return BurstAnswer(problem=exc.title, kind="invalid", raw=raw)
    choices = [ch for c in chunks for ch in c.get("choices") or [] if isinstance(ch, dict)]
    output = any(_has_output(ch.get("delta") or {}) for ch in choices)
    finish = [ch["finish_reason"] for ch in choices if ch.get("finish_reason") is not None]
    if not output and not finish and not any("error" in c for c in chunks):
        return BurstAnswer(problem=f"{_what_came(chunks, stream.done)}; no content, no finish_reason",
                           kind=EMPTY, raw=raw)
    try:
        check_framing(content_type, stream)
        warnings = check_chat_chunks(chunks, seconds=stream_seconds(stream))
    except CheckFailed as exc:
        return BurstAnswer(problem=exc.title, kind="invalid", raw=raw)
    if not output:
        return BurstAnswer(problem=f"finish_reason {finish[0]!r} without any generated output "
                           "(no content, reasoning or tool call)", kind="incomplete", raw=raw)
    return BurstAnswer(raw=raw, warnings=tuple(warnings))


def stream_burst(client: httpx.Client, path: str, bodies: Sequence[Mapping[str, Any]]) -> list[BurstAnswer]:
    """Send every body at once, each from its own thread on the shared client, and judge each answer.

    Every request is bounded by the client's own timeouts (the plugin's clients bound the whole
    exchange), so the burst ends when its slowest request does.
    """
    import httpx

    ready = threading.Barrier(len(bodies))

    def one(body: Mapping[str, Any]) -> BurstAnswer:
        # A thread slow to start breaks the barrier: send anyway, the burst is only less tight.
        with contextlib.suppress(threading.BrokenBarrierError):
            ready.wait(START_TOGETHER_S)
        try:
            content_type, stream = open_stream(client, path, body)
        except CheckFailed as exc:
            return BurstAnswer(problem=exc.title, kind="invalid", raw=exc.detail)
        except httpx.HTTPError as exc:
            return BurstAnswer(problem=f"no answer: {type(exc).__name__}: {exc}", kind="failed", error=exc)
        return judge_stream(content_type, stream)

    with ThreadPoolExecutor(max_workers=len(bodies), thread_name_prefix="inferaccept-burst") as pool:
        return list(pool.map(one, bodies))


_KIND_WORDS = {EMPTY: "empty", "incomplete": "incomplete", "invalid": "invalid", "failed": "unanswered"}


def check_burst(answers: Sequence[BurstAnswer]) -> None:
    """Every answer of the burst valid and complete; else one failure that counts the bad ones.

    The title reads like "under 6 concurrent streams, 5 of 6 answers were empty (role chunk and
    [DONE]; no content, no finish_reason)"; the detail lists each bad answer and one excerpt.
    """
    n = len(answers)
    bad = [(i, a) for i, a in enumerate(answers) if a.problem is not None]
    if not bad:
        return
    kinds = sorted({a.kind for _, a in bad})
    problems = {a.problem for _, a in bad}
    if len(kinds) == 1:
        what = _KIND_WORDS.get(kinds[0], kinds[0])
        if len(problems) == 1 and kinds[0] in (EMPTY, "incomplete"):
            what += f" ({bad[0][1].problem})"
    else:
        what = " or ".join(_KIND_WORDS.get(k, k) for k in kinds)
    title = f"under {n} concurrent streams, {len(bad)} of {n} answers were {what}"
    lines = [f"answer {i + 1}: {a.problem}" for i, a in bad]
    first = bad[0]
    lines.append(f"answer {first[0] + 1} as sent: {first[1].raw or '(nothing)'}")
    error = next((a.error for _, a in bad if a.error is not None), None)
    # Chained to a transport error, so the plugin can tell a server that stopped answering.
    raise CheckFailed(title, "\n".join(lines)) from error
