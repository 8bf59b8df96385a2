"""What the fake model answers to one request: text, tool calls, logprobs and token counts."""

from __future__ import annotations

import hashlib
import json
import math
import random
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_inferaccept.fake import knowns, textgen
from pytest_inferaccept.fake.config import FakeConfig

PREFIX_CHARS = 200
"""How much of a chat prompt the prefix cache remembers."""
PREFIX_HIT_SAVES = 0.8
"""The share of a prompt's prefill time a prefix-cache hit skips."""


@dataclass
class Choice:
    """One generated choice, with the token pieces that make up its content."""

    index: int
    pieces: list[str] = field(default_factory=list)
    finish_reason: str = "stop"
    completion_tokens: int = 0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    stop_hit: str | None = None
    """The stop sequence that ended the text, if one did."""
    reasoning: list[str] = field(default_factory=list)
    """Reasoning tokens produced before the content (`FakeConfig.reasoning_tokens`)."""
    known: bool = False
    """The content is a known answer the fake worked out (`fake.knowns`), which `quality_drop` spoils."""
    runner_up: str | None = None
    """The token a near tie put second at TIE_AT (None: the word after the pick's, `tie_runner_up`)."""
    logprob_shift: float = 0.0
    """Nats taken from every logprob (`logprob_shift`: numerics that change no greedy pick)."""
    first_options: tuple[str, ...] = ()
    """The first token's candidates, most likely (the greedy pick) first, with FIRST_TOKEN_PROBS."""
    sampled: bool = False
    """The first token was drawn from `first_options` (temperature > 0), not taken greedily."""

    @property
    def text(self) -> str:
        """The content as one string."""
        return "".join(self.pieces)


def _limit(body: Mapping[str, Any]) -> int | None:
    value = body.get("max_completion_tokens")
    if value is None:
        value = body.get("max_tokens")
    return int(value) if value is not None else None


def _stops(body: Mapping[str, Any]) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


FIRST_TOKEN_PROBS: tuple[float, ...] = tuple(0.5 ** k / (2 - 0.5 ** 19) for k in range(20))
"""The fake model's distribution of a word answer's first token (it sums to 1): the greedy word,
then alt1, alt2, ... each half as likely as the one before. Sampling draws from it, logprobs report it."""


def _greedy_only(body: Mapping[str, Any]) -> bool:
    """top_k 1, or a top_p below the most likely first token's probability, leaves only the greedy pick."""
    top_k, top_p = body.get("top_k"), body.get("top_p")
    return top_k == 1 or (isinstance(top_p, int | float) and top_p < FIRST_TOKEN_PROBS[0])


def _first_from_table(stream: Iterator[str], rng: random.Random, greedy: str | None, temperature: float,
                      choice: Choice) -> Iterator[str]:
    """The word stream with its first token drawn from the first-token distribution at `temperature`
    (`greedy`: the greedy first word; None when this stream is the greedy one)."""
    first = next(stream, None)
    if first is None:
        return
    alternatives = (f"alt{k}" for k in range(1, len(FIRST_TOKEN_PROBS)))
    choice.first_options = (first if greedy is None else greedy, *alternatives)
    if greedy is not None:
        choice.sampled = True
        # Relative to the most likely token, so that a tiny temperature cannot underflow every weight.
        weights = [math.exp(math.log(p / FIRST_TOKEN_PROBS[0]) / temperature) for p in FIRST_TOKEN_PROBS]
        first = rng.choices(choice.first_options, weights)[0]
    yield first
    yield from stream


def generate_text(prompt: str, body: Mapping[str, Any], index: int, max_natural: int,
                  json_schema: Mapping[str, Any] | None = None, json_mode: bool = False) -> Choice:
    """Generate one choice's content, honouring max_tokens and stop sequences exactly."""
    temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
    if _greedy_only(body):
        temperature = 0.0
    seed = body.get("seed")
    rng = textgen.make_rng(prompt, temperature=temperature, seed=seed, choice=index)
    limit = _limit(body)
    stops = _stops(body)
    choice = Choice(index=index)
    if json_mode or json_schema is not None:
        text = textgen.json_text(json_schema, rng)
        pieces = [text[i:i + 6] for i in range(0, len(text), 6)]
        if limit is not None and limit < len(pieces):
            choice.pieces, choice.finish_reason = pieces[:limit], "length"
        else:
            choice.pieces = pieces
        choice.completion_tokens = len(choice.pieces)
        return choice
    answer = knowns.known_answer(prompt)
    if answer is not None and not stops:
        pieces = knowns.pieces(answer)
        choice.known = True
        choice.pieces = pieces[:limit] if limit is not None else pieces
        choice.finish_reason = "length" if len(choice.pieces) < len(pieces) else "stop"
        choice.completion_tokens = len(choice.pieces)
        return choice
    produced = ""
    greedy = None if temperature == 0 else next(textgen.tokens(
        textgen.make_rng(prompt, temperature=0, seed=None, choice=index), max_natural))
    for token in _first_from_table(textgen.tokens(rng, max_natural), rng, greedy, temperature, choice):
        if limit is not None and choice.completion_tokens >= limit:
            choice.finish_reason = "length"
            return choice
        choice.completion_tokens += 1
        produced += token
        choice.pieces.append(token)
        hits = sorted((produced.find(s), i) for i, s in enumerate(stops) if s in produced)
        if hits:
            choice.pieces = _truncate(choice.pieces, hits[0][0])
            choice.finish_reason = "stop"
            choice.stop_hit = stops[hits[0][1]]
            return choice
    choice.finish_reason = "stop"
    return choice


def think_first(body: Mapping[str, Any], reasoning_tokens: int) -> tuple[int, Mapping[str, Any]]:
    """How many reasoning tokens an answer produces before its content, and the request as the
    content sees it: reasoning uses up max_tokens first, as on real reasoning servers, so the
    content gets what is left (nothing, finish_reason length, when the reasoning took it all)."""
    limit = _limit(body)
    if not reasoning_tokens:
        return 0, body
    count = reasoning_tokens if limit is None else min(reasoning_tokens, limit)
    rest = dict(body)
    if limit is not None:
        rest.pop("max_completion_tokens", None)
        rest["max_tokens"] = limit - count
    return count, rest


def add_reasoning(choice: Choice, prompt: str, count: int) -> None:
    """Give a choice `count` deterministic reasoning tokens, counted in its completion tokens."""
    rng = textgen.make_rng(prompt + "\x00reasoning", temperature=0, seed=None, choice=choice.index)
    words = [rng.choice(textgen.WORDS) for _ in range(count)]
    choice.reasoning = [w if i == 0 or w in ",." else " " + w for i, w in enumerate(words)]
    choice.completion_tokens += count


def reasoning_fields(where: str, text: str) -> dict[str, str]:
    """The message or delta fields that carry reasoning text, as `FakeConfig.reasoning_field` says."""
    if where == "both":
        return {"reasoning_content": text, "reasoning": text}
    return {where: text}


HARMONY_FINAL = "<|channel|>final<|message|>"
"""The Harmony header of gpt-oss's answer channel, which a broken parser leaves in the content."""
HARMONY_TOOL_SUFFIX = "<|channel|>commentary"
"""What a broken Harmony parser leaves after a tool's name (vLLM #32587)."""


def _truncate(pieces: list[str], cut: int) -> list[str]:
    """Keep the pieces up to character `cut` (a stop sequence may span several tokens)."""
    out: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) >= cut:
            if cut > used:
                out.append(piece[: cut - used])
            break
        out.append(piece)
        used += len(piece)
    return out


def tool_calls_for(body: Mapping[str, Any], prompt_last_user: str, rng_prompt: str) -> list[dict[str, Any]]:
    """Decide which tools the fake model calls, and with which arguments."""
    tools: Sequence[Mapping[str, Any]] = body.get("tools") or []
    choice = body.get("tool_choice", "auto")
    if not tools or choice == "none":
        return []
    functions = {t["function"]["name"]: t["function"] for t in tools}
    if isinstance(choice, Mapping):
        chosen = [choice["function"]["name"]]
    else:
        lowered = prompt_last_user.lower()
        chosen = [name for name in functions if name.lower() in lowered]
        if choice == "required" and not chosen:
            chosen = [next(iter(functions))]
        if body.get("parallel_tool_calls") is False:
            chosen = chosen[:1]
    rng = textgen.make_rng(rng_prompt, temperature=0, seed=None)
    calls = []
    for name in chosen:
        params = functions[name].get("parameters") or {"type": "object", "properties": {}}
        calls.append({
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(textgen.instance_for(params, rng))},
        })
    return calls


TIE_AT = 1
"""The token of a seeded-word answer where the fake model has a near tie (its runner-up TIE_GAP behind)."""
TIE_GAP = 0.2
LOGPROB_SHIFT = 0.05
"""What `logprob_shift` takes from every logprob: a numeric change no greedy pick sees."""


def _has_tie(choice: Choice) -> bool:
    """Seeded-word answers have a near tie at TIE_AT; known answers are sure of every token."""
    return not choice.known and not choice.tool_calls and len(choice.pieces) > TIE_AT


def tie_runner_up(piece: str) -> str:
    """The runner-up of a near tie: the vocabulary's next word, with the pick's leading space."""
    word = piece.strip()
    following = textgen.WORDS[(textgen.WORDS.index(word) + 1) % len(textgen.WORDS)] \
        if word in textgen.WORDS else textgen.WORDS[0]
    return (" " if piece.startswith(" ") else "") + following


def logprobs_for(choice: Choice, top: int) -> dict[str, Any]:
    """Logprobs whose tokens concatenate to the choice's content."""
    content = []
    for i, piece in enumerate(choice.pieces):
        lp = -0.05 * (i % 7 + 1) - choice.logprob_shift
        if i == 0 and piece in choice.first_options:
            # The first token reports the distribution it was (or would have been) sampled from.
            table = [(tok, math.log(p) - choice.logprob_shift)
                     for tok, p in zip(choice.first_options, FIRST_TOKEN_PROBS, strict=True)]
            lp = dict(table)[piece]
            content.append({"token": piece, "logprob": lp, "bytes": list(piece.encode()), "top_logprobs": [
                {"token": tok, "logprob": v, "bytes": list(tok.encode())} for tok, v in table[:top]]})
            continue
        alts = [{"token": piece, "logprob": lp, "bytes": list(piece.encode())}]
        if i == TIE_AT and _has_tie(choice):
            second = choice.runner_up or tie_runner_up(piece)
            alts.append({"token": second, "logprob": lp - TIE_GAP, "bytes": list(second.encode())})
        alts += [{"token": f" alt{k}", "logprob": lp - k, "bytes": list(f" alt{k}".encode())}
                 for k in range(1, top)]
        content.append({"token": piece, "logprob": lp, "bytes": list(piece.encode()),
                        "top_logprobs": alts[:top]})
    return {"content": content, "refusal": None}


def tool_call_choice(index: int, calls: list[dict[str, Any]], body: Mapping[str, Any]) -> Choice:
    """A choice holding tool calls; a token limit below the calls' length cuts them (finish length)."""
    tokens = sum(textgen.count_tokens(c["function"]["arguments"]) + 2 for c in calls)
    limit = _limit(body)
    if limit is None or limit >= tokens:
        return Choice(index=index, finish_reason="tool_calls", tool_calls=calls, completion_tokens=tokens)
    # Cut like a real model would: the first call's arguments stop mid-way, later calls never start.
    first = calls[0]
    args = first["function"]["arguments"]
    partial = args[: max(1, len(args) * limit // tokens)]
    cut = {**first, "function": {**first["function"], "arguments": partial}}
    return Choice(index=index, finish_reason="length", tool_calls=[cut], completion_tokens=limit)


def request_faults(body: Mapping[str, Any], faults: frozenset[str]) -> dict[str, Any]:
    """The request as a faulty server reads it (parameters dropped or misread)."""
    from pytest_inferaccept.fake.validation import ApiError

    out = dict(body)
    if "tool_result_rejected" in faults and any(m.get("role") == "tool" for m in out["messages"]):
        raise ApiError(400, "messages with role 'tool' are not supported", param="messages")
    stop = out.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if "stop_list_first_only" in faults and isinstance(stop, list):
        stops = stops[:1]
    if "stop_multi_token_ignored" in faults:
        stops = [s for s in stops if len(s.split()) <= 1]
    out["stop"] = None if "stop_ignored" in faults or not stops else stops
    for key in ("max_tokens", "max_completion_tokens"):
        if f"{key}_ignored" in faults:
            out.pop(key, None)
    if "nondeterministic_temp0" in faults and out.get("temperature") == 0 and out.get("seed") is None:
        out["temperature"] = 1.0
    if "seed_ignored" in faults:
        out.pop("seed", None)
    if "temperature_ignored" in faults:
        out["temperature"] = 0  # every answer greedy, whatever the request asks
    if "default_sampling_changed" in faults and out.get("temperature") is None:
        out["temperature"] = 0  # a request that sets no sampling parameter is answered greedily
    choice = out.get("tool_choice")
    if choice == "none" and "tool_choice_none_ignored" in faults:
        out["tool_choice"] = "auto"
    if choice == "required" and "tool_required_ignored" in faults:
        out["tool_choice"] = "auto"
    if isinstance(choice, Mapping) and "tool_named_ignored" in faults:
        out["tool_choice"] = "auto"
    elif isinstance(choice, Mapping) and "tool_named_wrong" in faults:
        others = [t["function"]["name"] for t in out.get("tools") or []
                  if t["function"]["name"] != choice["function"]["name"]]
        if others:
            out["tool_choice"] = {"type": "function", "function": {"name": others[0]}}
    fmt_type = (out.get("response_format") or {}).get("type")
    if fmt_type == "json_schema" and "json_schema_ignored" in faults:
        out["response_format"] = {"type": "json_object"}
    if fmt_type == "json_object" and "json_object_invalid" in faults:
        out.pop("response_format")
    if out.get("tool_choice", "auto") == "auto" and "tools_unprompted_silent" in faults:
        out["tool_choice"] = "none"  # the model answers in text unless a choice forces a call
    return out


def choice_faults(choices: list[Choice], faults: frozenset[str],
                  body: Mapping[str, Any] | None = None) -> None:
    """Spoil generated choices the way a faulty server answers (`body`: the request, as read)."""
    if body is not None:
        reasoning_faults(choices, body, faults)
        if "quality_drop" in faults and knowns.spoiled(textgen.prompt_text(body.get("messages") or ())):
            for c in choices:
                if c.known:
                    c.pieces = knowns.pieces(knowns.wrong_answer(c.text))
                    c.completion_tokens = len(c.pieces)
    for c in choices:
        if "sampled_frequencies_off" in faults and c.sampled and c.pieces and c.pieces[0] in c.first_options:
            # Every candidate equally likely, whatever the reported logprobs say (reproducible per text).
            pick = random.Random(hashlib.sha256(c.text.encode()).digest()).choice(c.first_options)
            c.pieces[0] = pick
        if "greedy_near_tie_jitter" in faults and _has_tie(c) and random.random() < 0.5:
            # Repeats of one greedy request flip only at the near tie, as batch numerics do.
            c.pieces[TIE_AT], c.runner_up = tie_runner_up(c.pieces[TIE_AT]), c.pieces[TIE_AT]
        if "near_tie_flip" in faults and _has_tie(c):
            # The near tie's runner-up wins and the old pick comes second: the text changes, no grade does.
            c.pieces[TIE_AT], c.runner_up = tie_runner_up(c.pieces[TIE_AT]), c.pieces[TIE_AT]
        if "logprob_shift" in faults:
            c.logprob_shift = LOGPROB_SHIFT
        if "tokenizer_drops_spaces" in faults:
            c.pieces = [p.lstrip(" ") for p in c.pieces]
        if c.stop_hit and "stop_included" in faults:
            c.pieces.append(c.stop_hit)
        if c.stop_hit and "stop_finish_reason_wrong" in faults:
            c.finish_reason = "stop_sequence"
        if c.finish_reason == "length" and not c.tool_calls and "length_finish_reason_wrong" in faults:
            c.finish_reason = "stop"
        if c.finish_reason == "length" and "length_usage_miscounted" in faults:
            c.completion_tokens += 1
        if c.tool_calls:
            if "no_parallel_tool_calls" in faults:
                c.tool_calls = c.tool_calls[:1]
            if c.finish_reason == "tool_calls" and "tool_finish_reason_stop" in faults:
                c.finish_reason = "stop"
            if c.finish_reason == "length" and "tool_length_finish_wrong" in faults:
                c.finish_reason = "tool_calls"
            for call in c.tool_calls:
                fn = call["function"]
                if "harmony_in_tool_name" in faults:
                    fn["name"] += HARMONY_TOOL_SUFFIX
                if "tool_args_invalid_json" in faults:
                    fn["arguments"] = fn["arguments"].rstrip("}")
                if "tool_args_schema_violation" in faults:
                    fn["arguments"] = "{}"


CROWD = 2
"""The load faults act with more than this many chat requests in the server (the request itself counted)."""
NON_TIE_AT = 3
"""The token the non-tie load faults change (no near tie there: the pick leads its alternatives by 1 nat)."""


def load_request_faults(body: Mapping[str, Any], faults: frozenset[str], in_flight: int) -> dict[str, Any]:
    """The request as a server that misreads it under load reads it (`in_flight`: chat requests in it)."""
    out = dict(body)
    if "seed_ignored_under_load" in faults and in_flight > CROWD:
        out.pop("seed", None)
    return out


def load_faults(choices: list[Choice], faults: frozenset[str], body: Mapping[str, Any], *, in_flight: int,
                warm_prefix: bool) -> None:
    """Change greedy answers the way a batch-variant server or a faulty prefix cache does."""
    greedy = body.get("temperature") == 0 or _greedy_only(body)
    for c in choices:
        if c.known or c.tool_calls:
            continue
        changed = (greedy and in_flight > CROWD and "batch_variant_greedy" in faults) or \
            (warm_prefix and "prefix_cache_changes_output" in faults)
        if changed and len(c.pieces) > NON_TIE_AT:
            c.pieces[NON_TIE_AT] = tie_runner_up(c.pieces[NON_TIE_AT])
        if greedy and in_flight > CROWD and "near_tie_batch_variance" in faults and _has_tie(c):
            c.pieces[TIE_AT], c.runner_up = tie_runner_up(c.pieces[TIE_AT]), c.pieces[TIE_AT]


def wrong_when_busy(choices: list[Choice], cfg: FakeConfig, *, in_flight: int, broken: bool) -> bool:
    """Spoil known answers the way a server that is wrong under load is (`wrong_above_inflight`), or one
    an overload left broken (`stays_wrong_after_overload`); returns whether the server is broken now."""
    over = cfg.stays_wrong_after_overload
    broken = broken or (over is not None and in_flight > over)
    busy = cfg.wrong_above_inflight is not None and in_flight > cfg.wrong_above_inflight
    if broken or busy:
        for c in choices:
            if c.known:
                c.pieces = knowns.pieces(knowns.wrong_answer(c.text))
                c.completion_tokens = len(c.pieces)
    return broken


def reasoning_faults(choices: list[Choice], body: Mapping[str, Any], faults: frozenset[str]) -> None:
    """Spoil the reasoning and the answers around it (and agent follow-ups) the way faulty servers do."""
    messages = body.get("messages") or []
    tool_results = sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "tool")
    follow_up = bool(messages) and isinstance(messages[-1], Mapping) and messages[-1].get("role") == "tool"
    stops = _stops(body)
    for c in choices:
        if c.tool_calls:
            continue
        if c.reasoning and stops and "stop_inside_reasoning" in faults:
            thought = "".join(c.reasoning)
            hits = [thought.find(s) for s in stops if s in thought]
            if hits:  # the stop matched inside the reasoning: it ends there, no answer follows
                c.reasoning = _truncate(c.reasoning, min(hits))
                c.pieces, c.finish_reason, c.stop_hit = [], "stop", None
                c.completion_tokens = len(c.reasoning)
        spent = bool(c.reasoning) and not c.pieces and c.finish_reason == "length"
        if spent and "reasoning_length_hidden" in faults:
            c.finish_reason = "stop"
        if c.reasoning and "think_in_content" in faults:
            c.pieces.insert(0, f"<think>{''.join(c.reasoning)}</think>\n\n")
        if "harmony_in_content" in faults:
            c.pieces.insert(0, HARMONY_FINAL)
        if follow_up and tool_results >= 2 and "agent_followup_empty" in faults:
            c.pieces, c.finish_reason, c.completion_tokens = [], "stop", len(c.reasoning)


def runs_away(body: Mapping[str, Any], faults: frozenset[str]) -> bool:
    """True when a streamed answer sends tool calls without end (tool_required_runaway)."""
    return ("tool_required_runaway" in faults and bool(body.get("stream"))
            and body.get("tool_choice") == "required" and bool(body.get("tools")))


def stream_faults(choices: list[Choice], body: Mapping[str, Any], faults: frozenset[str]) -> None:
    """Spoil choices about to be streamed the way a faulty server streams."""
    json_out = (body.get("response_format") or {}).get("type") in ("json_object", "json_schema")
    for c in choices:
        if c.stop_hit and "stop_partial_leak_stream" in faults:
            c.pieces.append(c.stop_hit[: max(1, len(c.stop_hit) // 2)])
        if json_out and c.pieces and "structured_stream_broken" in faults:
            c.pieces.insert(0, c.pieces[0])
        if "tool_stream_args_duplicated" in faults:
            # The arguments travel in one fragment; doubling it is the same as sending it twice.
            for call in c.tool_calls:
                call["function"]["arguments"] *= 2


def args_as_objects(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls whose arguments are the parsed object instead of a JSON string (TGI #2461)."""
    out = []
    for call in calls:
        try:
            args: Any = json.loads(call["function"]["arguments"])
        except ValueError:
            args = call["function"]["arguments"]
        out.append({**call, "function": {**call["function"], "arguments": args}})
    return out


def batch_factor(batch_slowdown: float, running: int) -> float:
    """How much slower a token is while `running` generations share the batch (1.0 when alone or
    when `batch_slowdown` is 0)."""
    if not batch_slowdown:
        return 1.0
    return 1.0 + batch_slowdown * max(running - 1, 0)


def first_token_delay(cfg: FakeConfig, *, running: int, uptime: float, prompt_tokens: int,
                      prefix_hit: bool = False) -> float:
    """Seconds from a request getting its slot to its first token: `ttft` (slowed by the batch),
    plus the latency creep of `uptime` seconds of serving, plus the prefill of its prompt (80 %
    cheaper on a prefix-cache hit). Exactly `cfg.ttft` when no capacity knob is set."""
    delay = cfg.ttft * batch_factor(cfg.batch_slowdown, running)
    if cfg.latency_creep:
        delay += cfg.latency_creep * uptime / 60.0
    if cfg.prefill_per_token:
        prefill = cfg.prefill_per_token * prompt_tokens
        delay += prefill * (1.0 - PREFIX_HIT_SAVES) if prefix_hit else prefill
    return delay


def token_delay(cfg: FakeConfig, running: int) -> float:
    """Seconds between two tokens while `running` generations are in progress."""
    return cfg.itl * batch_factor(cfg.batch_slowdown, running)


def prompt_prefix(messages: Sequence[Mapping[str, Any]]) -> str:
    """The prefix-cache key of a chat prompt: the first characters of its concatenated contents."""
    parts = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        parts.append(str(content or ""))
    return "".join(parts)[:PREFIX_CHARS]


class PrefixCache:
    """The prompt prefixes seen lately: a bounded set that forgets the least recently used first."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._seen: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, prefix: object) -> bool:
        return prefix in self._seen

    def lookup(self, prefix: str) -> bool:
        """True when `prefix` was seen before; either way it is remembered now."""
        hit = prefix in self._seen
        if hit:
            self._seen.move_to_end(prefix)
        else:
            self._seen[prefix] = None
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)
        return hit
