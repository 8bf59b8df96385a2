"""The endpoints evaluation harnesses depend on: prompt logprobs through echo, and /tokenize.

lm-evaluation-harness scores its loglikelihood tasks (multiple choice: ARC, HellaSwag, MMLU...)
through POST /v1/completions with echo, logprobs and one generated token, and sums the logprobs
of the prompt's continuation tokens. A server that answers 200 with logprobs for the generated
token only gives every choice the same score: exactly chance (llama.cpp #27174). /tokenize is how
harnesses and gateways count and budget a prompt; it must count what the chat path feeds the
model, and that prompt must not carry a doubled BOS (a template that writes one and a tokenizer
that adds another).
"""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks._base import fail, is_int, require
from pytest_inferaccept.checks.chat import ok_json_object
from pytest_inferaccept.evidence import Evidence, excerpt

COMPLETIONS = "/v1/completions"
ECHO_PROMPT = "The capital of France is Paris. The capital of Italy is"
"""ASCII words, so every token's text is whole characters (a byte-split token has no string)."""
CHAT: list[dict[str, str]] = [{"role": "system", "content": "Answer in one word."},
                              {"role": "user", "content": "What is the capital of France?"}]
BOS_PROBE_TEXT = "Hello world"
ROUNDING = 1e-5
"""How far above 0 a logprob may round (nats): float32 log-softmax of a near-certain token."""
CHANCE = ("a loglikelihood task (lm-evaluation-harness's multiple-choice tasks) sums the continuation's "
          "logprobs out of these entries: without the prompt's entries every choice sums alike and "
          "the task scores exactly chance (llama.cpp #27174)")


def _choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        fail("the completion has no choices[0] object", excerpt(str(data), 400))
    return choices[0]


def _count(usage: object, key: str) -> int:
    value = usage.get(key) if isinstance(usage, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        fail(f"usage.{key} is {value!r}, expected an integer >= 0", excerpt(str(usage), 300))
    return value


def _lists(logprobs: object) -> tuple[list[Any], list[Any], list[Any] | None] | str:
    """(tokens, token_logprobs, text_offset or None), or what is wrong with the logprobs object."""
    if not isinstance(logprobs, dict):
        return f"choices[0].logprobs is {excerpt(repr(logprobs), 80)}, expected an object"
    tokens, values, offsets = (logprobs.get(k) for k in ("tokens", "token_logprobs", "text_offset"))
    if not isinstance(tokens, list) or not isinstance(values, list):
        if isinstance(logprobs.get("content"), list):
            return (f"logprobs come in the chat shape (logprobs.content, {len(logprobs['content'])} entries) "
                    "instead of the legacy tokens / token_logprobs / text_offset lists harnesses read")
        return f"logprobs has no tokens and token_logprobs lists (keys {sorted(logprobs)})"
    return tokens, values, offsets if isinstance(offsets, list) else None


def _value_problems(values: list[Any]) -> list[str]:
    """token_logprobs: the first may be null (nothing precedes it), the rest finite and <= 0."""
    problems = []
    for i, value in enumerate(values):
        if value is None and i == 0:
            continue
        if value is None:
            problems.append(f"token_logprobs[{i}] is null (only the first token may have none): a harness "
                            "summing them fails or drops the token")
        elif not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            problems.append(f"token_logprobs[{i}] is {value!r}, expected a finite number")
        elif value > ROUNDING:
            problems.append(f"token_logprobs[{i}] is {value}, above 0: not a log-probability")
    return problems


def _spelling_problems(tokens: list[Any], values: list[Any], offsets: list[Any] | None,
                       text: str) -> list[str]:
    """The tokens spell the echoed text (a first token with no logprob, such as a BOS written as
    text, may stand outside it), and text_offset gives each token's place in it."""
    if not all(isinstance(t, str) for t in tokens):
        return ["logprobs.tokens holds non-strings"]
    skip = 0
    if "".join(tokens) != text and tokens and values and values[0] is None and "".join(tokens[1:]) == text:
        skip = 1
    spelled = "".join(tokens[skip:])
    if spelled != text:
        return [f"the tokens spell {excerpt(spelled, 120)!r}, the echoed text is {excerpt(text, 120)!r}: a "
                "harness that maps tokens to characters misplaces the continuation"]
    if offsets is None:
        return []
    problems = []
    if len(offsets) != len(tokens):
        problems.append(f"text_offset has {len(offsets)} entries for {len(tokens)} tokens")
    else:
        at = 0
        for i in range(skip, len(tokens)):
            if offsets[i] != at:
                problems.append(f"text_offset[{i}] is {offsets[i]!r}, but the tokens before it spell {at} "
                                "characters: a harness finding the continuation by offset (lm-eval's gguf "
                                "backend) starts it at the wrong token")
                break
            at += len(tokens[i])
    return problems


@pytest.mark.capability("echo_logprobs")
def test_echo_returns_logprobs_for_the_prompt_tokens(http_client: httpx.Client, model: str,
                                                     inferaccept_evidence: Evidence) -> None:
    body = {"model": model, "prompt": ECHO_PROMPT, "echo": True, "logprobs": 1, "max_tokens": 1,
            "temperature": 0}
    data = ok_json_object(http_client.post(COMPLETIONS, json=body), "completion with echo and logprobs", body)
    choice = _choice(data)
    text = choice.get("text")
    prompt_tokens = _count(data.get("usage"), "prompt_tokens")
    completion_tokens = _count(data.get("usage"), "completion_tokens")
    expected = prompt_tokens + completion_tokens
    problems = []
    echoed = isinstance(text, str) and text.startswith(ECHO_PROMPT)
    if not echoed:
        problems.append(f"echo is not honoured: the text {excerpt(repr(text), 120)} does not start with the "
                        f"prompt {ECHO_PROMPT!r}, so a harness cannot find the continuation in it")
    logprobs = choice.get("logprobs")
    lists = _lists(logprobs)
    entries = None
    if isinstance(lists, str):
        problems.append(lists)
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        entries = len(content) if isinstance(content, list) else None
    else:
        tokens, values, offsets = lists
        entries = len(tokens)
        if len(values) != entries:
            problems.append(f"token_logprobs has {len(values)} entries for {entries} tokens")
        problems += _value_problems(values)
        if echoed and isinstance(text, str):
            problems += _spelling_problems(tokens, values, offsets, text)
        if offsets is None:
            inferaccept_evidence.warn("echo logprobs carry no text_offset: harnesses that find the "
                                      "continuation by character offset (lm-eval's gguf backend) cannot")
    if entries is not None and entries < expected:
        what = ("no token" if not entries else "the generated tokens only" if entries <= completion_tokens
                else "only part of the prompt")
        problems.insert(0, f"echo with logprobs returned {entries} logprob entries for a "
                           f"{prompt_tokens}-token prompt and {completion_tokens} generated token(s) "
                           f"(at least {expected} expected): the logprobs cover {what}")
    inferaccept_evidence.record("echo_logprobs", {"prompt_tokens": prompt_tokens,
                                                  "completion_tokens": completion_tokens,
                                                  "logprob_entries": entries, "echoed": echoed})
    if problems:
        counted = "no" if entries is None else entries
        measured = (f"measured: prompt {ECHO_PROMPT!r} (usage.prompt_tokens {prompt_tokens}), max_tokens 1 "
                    f"(usage.completion_tokens {completion_tokens}), {counted} logprob entries, text "
                    f"{excerpt(repr(text), 120)}")
        fail(problems[0], "\n".join([*problems[1:], measured, f"what it means: {CHANCE}"]))


def _object(resp: httpx.Response) -> dict[str, Any] | None:
    """The JSON object of a 200 answer, or None."""
    if resp.status_code != 200:
        return None
    try:
        data = resp.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _ids(resp: httpx.Response) -> list[int] | None:
    """The token ids of a /tokenize answer (either shape, with or without pieces), or None."""
    data = _object(resp)
    tokens = data.get("tokens") if data else None
    if not isinstance(tokens, list):
        return None
    ids: list[Any] = [t.get("id") if isinstance(t, dict) else t for t in tokens]
    return ids if all(is_int(i) for i in ids) else None


def _said(resp: httpx.Response) -> str:
    return f"HTTP {resp.status_code} {excerpt(resp.text, 100)}"


def _chat_prompt_ids(client: httpx.Client, model: str) -> dict[str, list[int]]:
    """The chat prompt's ids by every route the server offers to tokenize it as the chat path does;
    skips naming what was tried when there is none."""
    found: dict[str, list[int]] = {}
    tried = []
    resp = client.post("/tokenize", json={"model": model, "messages": CHAT})
    data, ids = _object(resp), _ids(resp)
    # llama.cpp answers this body 200 with no tokens and no count: vLLM's shape carries `count`.
    if isinstance(data, dict) and is_int(data.get("count")) and ids:
        require(data["count"] == len(ids),
                f"/tokenize says count {data['count']} but lists {len(ids)} tokens", excerpt(resp.text, 300))
        found["POST /tokenize with the chat messages (vLLM)"] = ids
    else:
        tried.append(f"POST /tokenize with messages: {_said(resp)}")
    resp = client.post("/apply-template", json={"messages": CHAT})
    prompt = (_object(resp) or {}).get("prompt")
    if isinstance(prompt, str) and prompt:
        # llama-server's chat path tokenizes the rendered template with special tokens on.
        tokenized = client.post("/tokenize", json={"content": prompt, "add_special": True})
        ids = _ids(tokenized)
        if ids:
            found["POST /apply-template, then /tokenize with add_special (llama.cpp)"] = ids
        else:
            tried.append(f"POST /tokenize of the /apply-template prompt: {_said(tokenized)}")
    else:
        tried.append(f"POST /apply-template: {_said(resp)}")
    if not found:
        pytest.skip("tokenize: the server offers no way to tokenize a chat prompt as its chat path does: "
                    + "; ".join(tried))
    return found


def _chat_prompt_tokens(client: httpx.Client, model: str) -> int:
    body = {"model": model, "messages": CHAT, "temperature": 0, "max_tokens": 1}
    data = ok_json_object(client.post("/v1/chat/completions", json=body), "chat completion", body)
    return _count(data.get("usage"), "prompt_tokens")


@pytest.mark.capability("tokenize")
def test_tokenized_chat_prompt_counts_as_usage_prompt_tokens(http_client: httpx.Client, model: str,
                                                             inferaccept_evidence: Evidence) -> None:
    routes = _chat_prompt_ids(http_client, model)
    prompt_tokens = _chat_prompt_tokens(http_client, model)
    inferaccept_evidence.record("tokenize_counts", {**{r: len(ids) for r, ids in routes.items()},
                                                    "usage.prompt_tokens": prompt_tokens})
    wrong = {route: ids for route, ids in routes.items() if len(ids) != prompt_tokens}
    if wrong:
        ids = next(iter(wrong.values()))
        off = prompt_tokens - len(ids)
        fail(f"/tokenize counts the chat prompt as {len(ids)} tokens, the chat answer's usage.prompt_tokens "
             f"says {prompt_tokens} ({off:+d})",
             "\n".join([*(f"{r}: {len(i)} tokens, first ids {i[:4]}" for r, i in routes.items()),
                        "the same messages as a chat request (temperature 0, max_tokens 1): "
                        f"usage.prompt_tokens {prompt_tokens}",
                        "what it means: a harness or gateway that counts, budgets or truncates prompts with "
                        f"/tokenize is off by {abs(off)} token(s) a request; a difference of one with a BOS "
                        "in front on one side only is a BOS one path adds and the other does not"]))


def _bos(client: httpx.Client, model: str) -> tuple[int | None, str]:
    """The BOS id and how it was found: the id the tokenizer puts in front of a text with special
    tokens on, else the token the server names as BOS (llama.cpp GET /props), else None."""
    how = "the tokenizer answered no text with and without special tokens"
    shapes = (("llama.cpp", {"content": BOS_PROBE_TEXT, "add_special": True},
               {"content": BOS_PROBE_TEXT, "add_special": False}),
              ("vLLM", {"model": model, "prompt": BOS_PROBE_TEXT, "add_special_tokens": True},
               {"model": model, "prompt": BOS_PROBE_TEXT, "add_special_tokens": False}))
    for shape, on, off in shapes:
        with_special = _ids(client.post("/tokenize", json=on))
        without = _ids(client.post("/tokenize", json=off))
        if not with_special or not without:
            continue
        if with_special[1:] == without:
            first = with_special[0]
            return first, (f"the tokenizer puts id {first} in front of {BOS_PROBE_TEXT!r} with special "
                           f"tokens on ({shape} /tokenize: {len(with_special)} ids with, {len(without)} "
                           "without)")
        how = (f"the tokenizer adds no BOS of its own ({shape} /tokenize: the same ids with and without "
               "special tokens)")
        break
    resp = client.get("/props")
    named = (_object(resp) or {}).get("bos_token")
    if isinstance(named, str) and named:
        ids = _ids(client.post("/tokenize", json={"content": named, "add_special": False}))
        if ids and len(ids) == 1:
            return ids[0], f"{how}; GET /props names the BOS {named!r}, which /tokenize makes id {ids[0]}"
    return None, f"{how}, and the server names no BOS token (GET /props: HTTP {resp.status_code})"


def leading_repeats(ids: list[int], bos: int | None) -> int:
    """How many times the prompt's front repeats the BOS id (its first id when the BOS is unknown)."""
    first = ids[0] if bos is None and ids else bos
    return next((n for n, i in enumerate(ids) if i != first), len(ids))


@pytest.mark.capability("tokenize")
def test_chat_prompt_starts_with_at_most_one_bos_token(http_client: httpx.Client, model: str,
                                                       inferaccept_evidence: Evidence) -> None:
    routes = _chat_prompt_ids(http_client, model)
    bos, how = _bos(http_client, model)
    leading = {route: leading_repeats(ids, bos) for route, ids in routes.items()}
    inferaccept_evidence.record("bos", {"id": bos, "found_by": how, "leading": leading})
    if bos is None:
        # A doubled BOS is the first id twice: with the BOS unknown, that is still visible.
        inferaccept_evidence.note(f"BOS id unknown ({how}): checked that the chat prompt does not start "
                                  "with the same id twice")
    doubled = {route: n for route, n in leading.items() if n > 1}
    if doubled:
        route, n = next(iter(doubled.items()))
        title = (f"the chat prompt starts with {n} BOS tokens (id {bos}), by {route}" if bos is not None else
                 f"the chat prompt starts with the same id {n} times (id {routes[route][0]}), by {route}: "
                 "the BOS id is unknown, but a doubled BOS looks like this")
        fail(title,
             "\n".join([*(f"{r}: first ids {ids[:6]}" for r, ids in routes.items()),
                        f"the BOS id: {how}",
                        "what it means: the model reads a sequence it was never trained on (the chat "
                        "template writes a BOS and the tokenizer adds another); answers degrade while "
                        "every endpoint stays green"]))
