"""Checks of non-streamed chat and legacy completion responses: shape, usage, n, logprobs."""

from __future__ import annotations

from typing import Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.checks._base import is_int as _is_int
from pytest_inferaccept.checks._base import show as _show
from pytest_inferaccept.evidence import excerpt

FINISH_REASONS: frozenset[str] = frozenset({"stop", "length", "tool_calls", "content_filter"})
"""The finish_reason values the contract allows (function_call is the deprecated spelling)."""


def check_finish_reason(reason: object, where: str) -> None:
    """finish_reason must be one of the contract's values."""
    require(reason in FINISH_REASONS,
            f"{where} finish_reason is {reason!r}, expected one of {sorted(FINISH_REASONS)}")


def check_chat_completion(body: object) -> list[str]:
    """A chat.completion object: id, object, created, model, choices, usage; returns warnings."""
    if not isinstance(body, dict):
        fail("chat completion is not a JSON object", _show(body))
    warnings: list[str] = []
    require(isinstance(body.get("id"), str) and body["id"], "chat completion has no non-empty string id",
            _show(body))
    require(body.get("object") == "chat.completion",
            f"chat completion object is {body.get('object')!r}, expected 'chat.completion'", _show(body))
    require(_is_int(body.get("created")), f"chat completion created is {body.get('created')!r}, "
            "expected unix seconds as an integer", _show(body))
    require(isinstance(body.get("model"), str) and body["model"],
            f"chat completion model is {body.get('model')!r}, expected the model id", _show(body))
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        fail("chat completion has no choices", _show(body))
    for i, choice in enumerate(choices):
        where = f"choices[{i}]"
        require(isinstance(choice, dict), f"{where} is not an object", _show(choice))
        require(_is_int(choice.get("index")), f"{where}.index is {choice.get('index')!r}, expected an int",
                _show(choice))
        msg = choice.get("message")
        if not isinstance(msg, dict):
            fail(f"{where}.message is not an object", _show(choice))
        require(msg.get("role") == "assistant",
                f"{where}.message.role is {msg.get('role')!r}, expected 'assistant'", _show(choice))
        content = msg.get("content")
        require(content is None or isinstance(content, str),
                f"{where}.message.content is {type(content).__name__}, expected a string or null",
                _show(choice))
        if content is None and not msg.get("tool_calls"):
            # vLLM #17357: with thinking off, the answer landed in reasoning_content and content
            # was null; a client reading content gets nothing.
            elsewhere = next((k for k in ("reasoning_content", "reasoning") if msg.get(k)), None)
            require(elsewhere is None,
                    f"{where}.message.content is null and the answer is in {elsewhere} "
                    "(vLLM #17357): a client reading content gets nothing", _show(choice))
            warnings.append(f"{where}.message.content is null without tool_calls")
        check_finish_reason(choice.get("finish_reason"), where)
        if "logprobs" not in choice:
            warnings.append(f"{where} has no logprobs field (the contract has it, nullable)")
    check_usage_shape(body.get("usage"))
    return warnings


def check_usage_shape(usage: object) -> None:
    """usage must hold integer prompt_tokens, completion_tokens and total_tokens."""
    require(isinstance(usage, dict), f"usage is {_show(usage, 200)}, expected an object")
    assert isinstance(usage, dict)
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(key)
        require(isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                f"usage.{key} is {value!r}, expected an integer >= 0",
                _show(usage))


def check_usage_arithmetic(usage: object, *, max_tokens: int | None, n: int = 1) -> None:
    """total = prompt + completion, and completion_tokens <= n * max_tokens."""
    check_usage_shape(usage)
    assert isinstance(usage, dict)
    prompt: int
    completion: int
    total: int
    prompt, completion, total = usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]
    require(total == prompt + completion,
            f"usage.total_tokens is {total}, expected prompt_tokens + completion_tokens = "
            f"{prompt} + {completion} = {prompt + completion}", _show(usage))
    require(prompt > 0, "usage.prompt_tokens is 0 for a non-empty prompt", _show(usage))
    if max_tokens is not None:
        require(completion <= max_tokens * n,
                f"usage.completion_tokens is {completion}, more than max_tokens={max_tokens}"
                + (f" x n={n}" if n > 1 else ""), _show(usage))


def check_choice_indices(choices: object, n: int, what: str = "response") -> None:
    """Exactly n choices whose indices are 0..n-1."""
    require(isinstance(choices, list), f"{what} choices is not a list", _show(choices))
    assert isinstance(choices, list)
    indices = sorted(c.get("index", -1) for c in choices if isinstance(c, dict))
    require(len(choices) == n, f"asked n={n}, {what} has {len(choices)} choice(s)",
            f"indices: {indices}")
    require(indices == list(range(n)), f"asked n={n}, {what} choice indices are {indices}, "
            f"expected {list(range(n))}")


def logprob_text(entries: list[dict[str, Any]]) -> tuple[str, str]:
    """The text the logprob tokens spell, and how it was rebuilt ('bytes' or 'token')."""
    if entries and all(isinstance(e.get("bytes"), list) for e in entries):
        # Byte-level tokens (a multi-byte character split over tokens) only join via their bytes.
        raw = b"".join(bytes(e["bytes"]) for e in entries)
        return raw.decode("utf-8", "replace"), "bytes"
    return "".join(str(e.get("token", "")) for e in entries), "token"


def check_logprobs(choice: dict[str, Any], top_logprobs: int) -> list[str]:
    """choices[i].logprobs.content: one entry per token, logprob <= 0, tokens spell the content."""
    warnings: list[str] = []
    lp = choice.get("logprobs")
    require(isinstance(lp, dict) and isinstance(lp.get("content"), list),
            f"logprobs asked, choice.logprobs is {_show(lp, 200)}, expected {{content: [...]}}")
    assert isinstance(lp, dict)
    entries: list[dict[str, Any]] = lp["content"]
    content = (choice.get("message") or {}).get("content") or ""
    require(entries or not content, "logprobs.content is empty although the message has content",
            _show(choice))
    for i, entry in enumerate(entries):
        where = f"logprobs.content[{i}]"
        require(isinstance(entry, dict) and isinstance(entry.get("token"), str),
                f"{where} has no string token", _show(entry))
        value = entry.get("logprob")
        require(isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 1e-6,
                f"{where}.logprob is {value!r}, expected a number <= 0", _show(entry))
        top = entry.get("top_logprobs")
        if top_logprobs:
            require(isinstance(top, list) and top,
                    f"top_logprobs={top_logprobs} asked, {where}.top_logprobs is {_show(top, 100)}",
                    _show(entry))
            assert isinstance(top, list)
            # Some servers add the sampled token to the top list; more than that is wrong.
            require(len(top) <= top_logprobs + 1,
                    f"top_logprobs={top_logprobs} asked, {where} has {len(top)} alternatives")
            if len(top) != top_logprobs:
                warnings.append(f"top_logprobs={top_logprobs} asked, {where} has {len(top)}")
    text, how = logprob_text(entries)
    if text != content and choice.get("finish_reason") == "stop" and entries:
        # vLLM reports the sampled end-of-turn token (e.g. <|im_end|>) as a last entry, though the
        # content leaves it out: the tokens still spell the content, plus the token that ended it.
        head, _ = logprob_text(entries[:-1])
        if head == content:
            warnings.append(f"logprobs end with the stop token {entries[-1].get('token')!r}, "
                            "which the content leaves out")
            return warnings
    require(text == content,
            f"logprob tokens (joined by {how}) spell {excerpt(text, 200)!r}, but the message content "
            f"is {excerpt(content, 200)!r}", f"{len(entries)} logprob entries")
    return warnings


def check_text_completion(body: object) -> None:
    """A legacy text_completion: id, object, created, model, choices[text, index, logprobs, finish_reason]."""
    if not isinstance(body, dict):
        fail("completion is not a JSON object", _show(body))
    require(isinstance(body.get("id"), str) and body["id"], "completion has no non-empty string id",
            _show(body))
    require(body.get("object") == "text_completion",
            f"completion object is {body.get('object')!r}, expected 'text_completion'", _show(body))
    require(_is_int(body.get("created")), f"completion created is {body.get('created')!r}, "
            "expected an integer", _show(body))
    require(isinstance(body.get("model"), str), "completion has no model", _show(body))
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        fail("completion has no choices", _show(body))
    for i, choice in enumerate(choices):
        where = f"choices[{i}]"
        require(isinstance(choice, dict) and isinstance(choice.get("text"), str),
                f"{where}.text is not a string", _show(choice))
        require(_is_int(choice.get("index")), f"{where}.index is {choice.get('index')!r}, expected an int",
                _show(choice))
        require("logprobs" in choice, f"{where} has no logprobs field (null when not asked)",
                _show(choice))
        check_finish_reason(choice.get("finish_reason"), where)
    check_usage_shape(body.get("usage"))


def error_envelope(body: object) -> tuple[bool, str]:
    """Whether a body is the OpenAI error envelope {error: {message, ...}}, and why not."""
    if not isinstance(body, dict) or "error" not in body:
        return False, "body has no 'error' member"
    err = body["error"]
    if not isinstance(err, dict):
        return False, f"'error' is {type(err).__name__}, expected an object {{message, type, param, code}}"
    if not isinstance(err.get("message"), str):
        return False, "'error' has no string message"
    return True, ""


def ok_json(resp: Any, what: str, request: object = None) -> Any:
    """The JSON body of an httpx response that must be 200; CheckFailed with the evidence otherwise
    (the `request`, when given, beside the body of an answer that is not 200)."""
    body = excerpt(resp.text, 400)
    require(resp.status_code == 200, f"{what} answered {resp.status_code}, expected 200",
            body if request is None else f"request: {_show(request)}\nbody: {body}")
    try:
        return resp.json()
    except ValueError:
        fail(f"{what} answered 200 with a body that is not JSON", body)


def ok_json_object(resp: Any, what: str, request: object = None) -> dict[str, Any]:
    """`ok_json` for an answer that must be a JSON object."""
    data = ok_json(resp, what, request)
    require(isinstance(data, dict), f"{what} answered 200 with JSON that is not an object",
            excerpt(resp.text, 400))
    return data  # type: ignore[no-any-return]
