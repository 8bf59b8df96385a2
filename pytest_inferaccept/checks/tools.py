"""Checks of tool calling: call shape, arguments as a JSON string that fits the schema, finish_reason,
streamed call fragments, and the answers of an agent loop."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.checks.generation import ChatResult
from pytest_inferaccept.checks.reasoning import check_no_leak, markers_in
from pytest_inferaccept.checks.sse import assemble_content, assemble_tool_calls, read_sse
from pytest_inferaccept.checks.structured import schema_errors
from pytest_inferaccept.evidence import excerpt


def functions_of(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The parameter schema of every tool, by function name."""
    return {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}


def check_tool_calls(result: ChatResult, tools: Sequence[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    """Every call is {id, type: function, function: {name, arguments}} naming a declared tool, with
    `arguments` a string of JSON that validates against that tool's parameter schema.

    Returns (name, parsed arguments) per call.
    """
    schemas = functions_of(tools)
    mode = "streamed" if result.streamed else "non-stream"
    if result.streamed:
        check_tool_call_deltas(result.chunks)
    out = []
    for i, call in enumerate(result.tool_calls):
        where = f"{mode} tool_calls[{i}]"
        shown = excerpt(json.dumps(call), 500)
        if not isinstance(call, dict):
            fail(f"{where} is not an object", shown)
        fn_seen = call.get("function")
        for part in ("name", "arguments"):
            value = fn_seen.get(part) if isinstance(fn_seen, dict) else None
            found = markers_in(value if isinstance(value, str) else json.dumps(value))
            require(not found, f"{where}.function.{part} {excerpt(str(value), 80)!r} holds the model syntax "
                    f"{', '.join(found)}, which the server's parser should have stripped (vLLM #32587)",
                    shown)
        require(isinstance(call.get("id"), str) and call["id"], f"{where} has no id", shown)
        require(call.get("type") == "function", f"{where}.type is {call.get('type')!r}, expected 'function'",
                shown)
        fn = call.get("function")
        if not isinstance(fn, dict):
            fail(f"{where} has no function object", shown)
        name = fn.get("name")
        require(name in schemas, f"{where} calls {name!r}, which is not among the tools {sorted(schemas)}",
                shown)
        args = fn.get("arguments")
        if not isinstance(args, str):
            fail(f"{where}.function.arguments is a JSON {type(args).__name__}, expected a string holding "
                 "JSON (TGI #2461)", shown)
        try:
            parsed = json.loads(args)
        except ValueError as exc:
            fail(f"{where}.function.arguments is not valid JSON: {exc}", f"arguments: {args[:400]!r}")
        errors = schema_errors(parsed, schemas[str(name)])
        require(not errors, f"{where} arguments do not match {name}'s parameter schema: {errors[:1]}",
                f"arguments: {args[:400]!r}\nschema: {excerpt(json.dumps(schemas[str(name)]), 400)}")
        out.append((str(name), parsed))
    return out


def check_finish_reason(result: ChatResult, allowed: Collection[str], situation: str) -> None:
    """finish_reason must be one of `allowed` in this situation."""
    require(result.finish_reason in allowed,
            f"finish_reason is {result.finish_reason!r} {situation}, expected "
            f"{' or '.join(repr(a) for a in allowed)}",
            f"{result.describe()}\ntool_calls: {excerpt(json.dumps(result.tool_calls), 300)}")


def require_calls(result: ChatResult, situation: str) -> None:
    """At least one tool call must be present."""
    require(result.tool_calls, f"no tool call {situation}",
            f"{result.describe()}\nmessage: {excerpt(json.dumps(result.message), 400)}")


def check_tool_call_deltas(chunks: Sequence[Mapping[str, Any]], choice_index: int = 0) -> None:
    """Streamed tool-call fragments: one `index` per call (a second id under an index is a second
    call sharing it), `id`, `type: function` and the function name once per call, in its first
    fragment; later fragments only add arguments."""
    starts: dict[int, list[Mapping[str, Any]]] = {}
    names: dict[int, list[str]] = {}
    typed: set[int] = set()
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != choice_index:
                continue
            for frag in (choice.get("delta") or {}).get("tool_calls") or []:
                idx = frag.get("index") if isinstance(frag, dict) else None
                if not isinstance(idx, int):
                    fail("a streamed tool-call fragment has no integer index", excerpt(json.dumps(frag), 300))
                if frag.get("id"):
                    starts.setdefault(idx, []).append(frag)
                fn = frag.get("function") if isinstance(frag.get("function"), dict) else {}
                if fn.get("name"):
                    names.setdefault(idx, []).append(str(fn["name"]))
                if frag.get("type") == "function":
                    typed.add(idx)
    for idx, firsts in sorted(starts.items()):
        ids = list(dict.fromkeys(str(f["id"]) for f in firsts))
        if len(ids) > 1:
            fail(f"{len(ids)} streamed tool calls share index {idx} (ids {', '.join(ids)}): a client "
                 "merges them into one call with a concatenated name and arguments (Ollama #15457, SGLang "
                 "#6310)", excerpt("\n".join(json.dumps(f) for f in firsts), 600))
    for idx, seen in sorted(names.items()):
        if len(seen) > 1:
            fail(f"the function name of streamed tool call {idx} arrives in {len(seen)} fragments "
                 f"({', '.join(repr(n) for n in seen)}): a client that appends fragments calls "
                 f"{''.join(seen)!r} (vLLM #14951)", "the name belongs in the call's first fragment only")
    for idx in sorted(set(starts) | set(names)):
        require(idx in typed, f"streamed tool call {idx} never says type: 'function' (its first fragment "
                "carries no type)", excerpt("\n".join(json.dumps(f) for f in starts.get(idx, [])), 400))


def check_follow_up(result: ChatResult, round_no: int, rounds: int) -> str:
    """The answer to a tool result is not empty: text, or another tool call (the agent loop goes on).
    An empty answer cut by the token limit (`length`) is not judged empty: it was cut, and says so.

    Returns what the answer was: "text", "tool calls" or "cut".
    """
    mode = "streamed" if result.streamed else "non-stream"
    check_no_leak(result, f"to tool result {round_no} of {rounds}")
    check_finish_reason(result, ["stop", "length", "tool_calls"], f"after tool result {round_no} of {rounds}")
    if result.tool_calls:
        return "tool calls"
    if result.text.strip():
        return "text"
    content = result.message.get("content")
    if result.finish_reason == "length":
        return "cut"
    fail(f"round {round_no} of {rounds}: the {mode} answer to the tool result is empty (content {content!r}, "
         f"no tool calls, finish_reason {result.finish_reason!r}): the agent shows its user nothing",
         "empty follow-ups after tool results were reported on vLLM and SGLang (about 87% of later rounds "
         f"in one report)\n{result.describe()}")


@dataclass(frozen=True)
class BoundedRead:
    """What a read capped in bytes and time got from one stream."""

    raw: bytes
    seconds: float
    cut: str | None
    """Why the read stopped before the stream ended (None when the server ended it)."""


def read_bounded(byte_chunks: Iterable[bytes], *, max_bytes: int, seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> BoundedRead:
    """Read a stream until it ends, `max_bytes` have come, or `seconds` have passed."""
    start = clock()
    raw = bytearray()
    for piece in byte_chunks:
        raw.extend(piece)
        took = clock() - start
        if len(raw) > max_bytes:
            return BoundedRead(bytes(raw), took, f"{len(raw)} bytes in {took:.1f} s and still streaming "
                               f"(read capped at {max_bytes} bytes)")
        if took > seconds:
            return BoundedRead(bytes(raw), took, f"still streaming after {took:.1f} s ({len(raw)} bytes)")
    return BoundedRead(bytes(raw), clock() - start, None)


def check_stream_ends_within(read: BoundedRead, limit: int, situation: str) -> ChatResult:
    """A stream under max_tokens=`limit` ends by itself, with finish_reason tool_calls or length and at
    most `limit` completion tokens when it reports usage. Returns the stream as a ChatResult."""
    shown = excerpt(read.raw.decode("utf-8", "replace")[-1500:], 1500)
    if read.cut is not None:
        fail(f"{situation} with max_tokens={limit}, the stream did not end: {read.cut} (SGLang #13514)",
             f"last bytes read:\n{shown}")
    stream = read_sse([read.raw])
    chunks = stream.chunks()
    finish = None
    usage = None
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0 and choice.get("finish_reason"):
                finish = choice["finish_reason"]
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
    text = assemble_content(chunks).get(0, "")
    message = {"role": "assistant", "content": text, "tool_calls": assemble_tool_calls(chunks)}
    result = ChatResult(text=text, finish_reason=finish, usage=usage, message=message, streamed=True,
                        raw=read.raw.decode("utf-8", "replace"), chunks=chunks)
    check_finish_reason(result, ["tool_calls", "length"], f"{situation} with max_tokens={limit}")
    used = (usage or {}).get("completion_tokens")
    if isinstance(used, int) and not isinstance(used, bool):
        require(used <= limit, f"{situation}, the stream reports {used} completion tokens, more than "
                f"max_tokens={limit}", shown)
    return result


CALL_MARKERS: tuple[str, ...] = ("<tool_call>", '{"name"', "[TOOL_CALLS]", "<|python_tag|>")
"""Text that opens a call in the common tool templates (Hermes, Mistral, Llama 3): a call the model began
in its text, which the server's parser left there."""


def answer_words(result: ChatResult) -> str:
    """What an answer was, in the words a finding uses: its calls, its finish_reason, the tokens it spent
    and how much of it was text ('0 tool calls, finish_reason 'length' after 128 completion tokens, 412
    characters of text with no call started')."""
    names = [str((c.get("function") or {}).get("name")) for c in result.tool_calls if isinstance(c, dict)]
    calls = f"{len(names)} tool call{'' if len(names) == 1 else 's'}"
    if names:
        calls += f" ({', '.join(names)})"
    used = (result.usage or {}).get("completion_tokens")
    spent = f" after {used} completion tokens" if isinstance(used, int) and not isinstance(used, bool) else ""
    started = [m for m in CALL_MARKERS if m in result.text]
    text = f"{len(result.text)} characters of text"
    if result.text and not names:
        text += f" in which a call starts ({started[0]})" if started else " with no call started"
    return f"{calls}, finish_reason {result.finish_reason!r}{spent}, {text}"


def _same_answer(a: ChatResult, b: ChatResult) -> bool:
    """The same text, finish_reason and calls (names and arguments; call ids differ between answers)."""
    def calls(r: ChatResult) -> list[tuple[object, object]]:
        return [((c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
                for c in r.tool_calls if isinstance(c, dict)]
    return a.text == b.text and a.finish_reason == b.finish_reason and calls(a) == calls(b)


def check_forced_choice(result: ChatResult, name: str | None,
                        auto: Callable[[], ChatResult] | None = None) -> None:
    """An answer to a forced tool_choice (`name`, or 'required' for None) holds a call (of `name`).

    When it does not, `auto` answers the same request with tool_choice 'auto', and the failure says
    what was seen beside it, in observed terms: the calls, the finish_reason, the tokens spent on text
    and whether a call had started in it. An answer the same as auto's shows the forced choice changed
    nothing (llama-server b11434 reads a named choice as auto and says so only in its log; its
    'required' grammar allows any text before the call, so the text runs to the limit as with auto).
    """
    choice = f"the named tool_choice ({name})" if name else "tool_choice 'required'"
    names = sorted({str((c.get("function") or {}).get("name")) for c in result.tool_calls
                    if isinstance(c, dict)})
    if result.tool_calls and (name is None or name in names):
        return
    seen = answer_words(result)
    shown = f"{result.describe()}\nmessage: {excerpt(json.dumps(result.message), 400)}"
    other = auto() if auto is not None else None
    same = other is not None and _same_answer(result, other)
    if same:
        seen = f"the answer is the same as with tool_choice 'auto' — {seen}"
    elif other is not None:
        seen += f" (with tool_choice 'auto': {answer_words(other)})"
    if name is None and not result.tool_calls and result.finish_reason == "length":
        # What was seen, not why: a constraint that allows text before the call (llama-server
        # b11434's grammar) and a choice read as auto both end so.
        fail(f"{choice} gave no tool call within the token limit: {seen}", shown)
    fail(f"{choice} was not honoured{f' (calls {names})' if names else ''}: {seen}", shown)
