"""Sampling honesty and determinism alone: does temperature sample, do top_k=1 and a tiny top_p give
the greedy answer, do sampled tokens follow the server's own probabilities, does a stream say what
the non-streamed answer says, and do greedy and seeded requests repeat (docs/correctness.md,
"Sampling and determinism").

Differing answers are told apart with the near-tie rule (`correctness.ties.classify`) where the
server returns logprobs: a flip between two picks within half a nat is numerics, not a defect.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks import fail
from pytest_inferaccept.checks.generation import CHAT_PATH, completion_tokens, post_chat, stream_chat
from pytest_inferaccept.correctness.ties import TieCheck, classify
from pytest_inferaccept.evidence import Evidence, excerpt

# An open request: any model continues it, and sampling gives it many continuations.
OPEN_PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle. Once upon a time"
ANSWER_TOKENS = 24
SAMPLED_ANSWERS = 10
MIN_DISTINCT = 5
"""Temperature 1 must give at least this many distinct answers in SAMPLED_ANSWERS."""
GREEDY_REPEATS = 5
SEED_REPEATS = 3
SEED = 1234
FREQUENCY_SAMPLES = 200
"""Single-token samples of the frequency test: enough to catch a server that ignores temperature
or samples from another distribution (tests/test_sampling_stats.py), cheap at max_tokens 1."""
FREQUENCY_CONCURRENCY = 4
TOP_LOGPROBS = 20
# Prompts whose first answer token is uncertain; the one with the flattest reported first token is used.
FREQUENCY_PROMPTS = (
    "Say one word, any word.",
    "Name an animal.",
    "Write a sentence about anything you like.",
)
FULL_DISTRIBUTION = {"top_p": 1.0, "top_k": -1, "min_p": 0.0}
"""Sampling with nothing cut away (top_k -1 and min_p 0 switch off llama.cpp's and vLLM's extra
filters); servers that refuse the extra keys are sampled with top_p 1 alone."""


@dataclass
class Answer:
    """The first choice of a non-streamed chat completion, with its logprobs when returned."""

    text: str
    finish_reason: str | None
    logprobs: list[dict[str, Any]] | None


def _body(model: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": ANSWER_TOKENS,
                            "messages": [{"role": "user", "content": OPEN_PROMPT}]}
    body.update(extra)
    return {k: v for k, v in body.items() if v is not None}


def _send(client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    return client.post(CHAT_PATH, json={**body, "stream": False})


def _answer(resp: httpx.Response, body: dict[str, Any]) -> Answer:
    """Read an answer; fail unless the server answered 200 with choices[0].message."""
    if resp.status_code != 200:
        fail(f"chat completion answered HTTP {resp.status_code}, expected 200",
             f"request: {excerpt(json.dumps(body), 400)}\nbody: {excerpt(resp.text, 600)}")
    try:
        choice = resp.json()["choices"][0]
        content = choice["message"].get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        fail("chat completion has no choices[0].message", excerpt(resp.text, 600))
    kept = choice.get("logprobs")
    logprobs = kept.get("content") if isinstance(kept, dict) else None
    return Answer(text=content if isinstance(content, str) else "", finish_reason=choice.get("finish_reason"),
                  logprobs=logprobs if isinstance(logprobs, list) and logprobs else None)


def _ask(client: httpx.Client, body: dict[str, Any]) -> Answer:
    """One answer with logprobs (top 5) where the server gives them, plain where it refuses them."""
    with_lp = {**body, "logprobs": True, "top_logprobs": 5}
    resp = _send(client, with_lp)
    if 400 <= resp.status_code < 500:
        return _answer(_send(client, body), body)
    return _answer(resp, with_lp)


def _differences(first: Answer, others: list[Answer]) -> list[TieCheck]:
    return [classify(first.logprobs, other.logprobs, text_a=first.text, text_b=other.text)
            for other in others]


def _tally(checks: list[TieCheck]) -> dict[str, int]:
    kinds = ("same", "near_tie", "real_change", "not_classifiable")
    return {kind: sum(c.kind == kind for c in checks) for kind in kinds}


def _first_real(checks: list[TieCheck]) -> TieCheck | None:
    return next((c for c in checks if c.kind in ("real_change", "not_classifiable")), None)


# --- sampling honesty ---------------------------------------------------------------------------------


@pytest.mark.capability("chat")
def test_temperature_one_gives_varied_answers_to_an_open_prompt(http_client: httpx.Client, model: str,
                                                                inferaccept_evidence: Evidence) -> None:
    body = _body(model, temperature=1.0)
    texts = [_answer(_send(http_client, body), body).text for _ in range(SAMPLED_ANSWERS)]
    distinct = len(set(texts))
    inferaccept_evidence.record("distinct_at_temperature_1", distinct)
    inferaccept_evidence.note(f"temperature 1: {distinct} of {SAMPLED_ANSWERS} answers to an open prompt "
                              "distinct")
    if distinct < MIN_DISTINCT:
        fail(f"temperature ignored: only {distinct} distinct answers in {SAMPLED_ANSWERS} at temperature 1 "
             f"(at least {MIN_DISTINCT} expected from an open prompt)",
             "\n".join(f"{i}: {excerpt(t, 200)!r}" for i, t in enumerate(texts)))


def _check_greedy_filter(client: httpx.Client, model: str, evidence: Evidence, name: str,
                         value: float) -> None:
    """A sampled request whose filter leaves only the most likely token must give the greedy answer."""
    greedy = _ask(client, _body(model, temperature=0))
    body = _body(model, temperature=1.0, **{name: value})
    probe = _send(client, body)
    if 400 <= probe.status_code < 500:
        evidence.note(f"{name}={value} refused: HTTP {probe.status_code}")
        pytest.skip(f"the server does not accept {name}={value}: HTTP {probe.status_code} "
                    f"{excerpt(probe.text, 200)}")
    filtered = _ask(client, body)
    evidence.record("greedy_text", greedy.text)
    evidence.record("filtered_text", filtered.text)
    check = classify(greedy.logprobs, filtered.logprobs, text_a=greedy.text, text_b=filtered.text)
    evidence.record("difference", check.kind)
    if check.kind == "same":
        return
    if check.kind == "near_tie":
        evidence.note(f"{name}={value} at temperature 1 differs from greedy only at a near tie: "
                      f"{check.reason}")
        return
    fail(f"{name}={value} at temperature 1 is not the greedy answer, so the filter is ignored: "
         f"{check.reason}",
         f"greedy:   {excerpt(greedy.text, 300)!r}\n{name}={value}: {excerpt(filtered.text, 300)!r}")


@pytest.mark.capability("chat")
def test_top_k_one_gives_the_greedy_answer(http_client: httpx.Client, model: str,
                                           inferaccept_evidence: Evidence) -> None:
    _check_greedy_filter(http_client, model, inferaccept_evidence, "top_k", 1)


@pytest.mark.capability("chat")
def test_top_p_near_zero_gives_the_greedy_answer(http_client: httpx.Client, model: str,
                                                 inferaccept_evidence: Evidence) -> None:
    _check_greedy_filter(http_client, model, inferaccept_evidence, "top_p", 1e-9)


def _first_position(client: httpx.Client, model: str, prompt: str) -> list[dict[str, Any]] | None:
    """The reported top alternatives of the greedy answer's first token (None: none returned)."""
    for top in (TOP_LOGPROBS, 5):
        body = {"model": model, "max_tokens": 1, "temperature": 0, "logprobs": True, "top_logprobs": top,
                "messages": [{"role": "user", "content": prompt}]}
        resp = _send(client, body)
        if 400 <= resp.status_code < 500:
            continue
        lp = _answer(resp, body).logprobs
        alternatives = (lp or [{}])[0].get("top_logprobs")
        return alternatives if isinstance(alternatives, list) and alternatives else None
    return None


def _sampled_first_token(client: httpx.Client, body: dict[str, Any]) -> str:
    answer = _answer(_send(client, body), body)
    return str(answer.logprobs[0]["token"]) if answer.logprobs else answer.text


@pytest.mark.capability("logprobs")
def test_sampled_first_tokens_follow_the_reported_probabilities(http_client: httpx.Client, model: str,
                                                                inferaccept_evidence: Evidence) -> None:
    from pytest_inferaccept.correctness.sampling import detects_greedy, frequency_test, reported_probabilities

    reported: dict[str, float] = {}
    prompt = ""
    for candidate in FREQUENCY_PROMPTS:
        alternatives = _first_position(http_client, model, candidate)
        probs = reported_probabilities(alternatives or [])
        if probs and (not reported or max(probs.values()) < max(reported.values())):
            reported, prompt = probs, candidate
    if not reported:
        pytest.skip("the server returned no top_logprobs for the first token: nothing to compare the "
                    "samples with")
    inferaccept_evidence.record("frequency_prompt", prompt)
    body: dict[str, Any] = {"model": model, "max_tokens": 1, "temperature": 1.0, "logprobs": True,
                            "messages": [{"role": "user", "content": prompt}], **FULL_DISTRIBUTION}
    if 400 <= _send(http_client, body).status_code < 500:
        for key in ("top_k", "min_p"):
            body.pop(key)
        inferaccept_evidence.note("top_k -1 / min_p 0 refused: sampled with top_p 1 and the server's other "
                                  "defaults")
    with ThreadPoolExecutor(FREQUENCY_CONCURRENCY) as pool:
        sampled = list(pool.map(lambda _: _sampled_first_token(http_client, body), range(FREQUENCY_SAMPLES)))
    result = frequency_test(reported, sampled)
    inferaccept_evidence.record("first_token_frequencies", result.to_json())
    inferaccept_evidence.note(result.describe())
    if not detects_greedy(reported, FREQUENCY_SAMPLES):
        inferaccept_evidence.warn(f"the first token is too certain (p = {result.top_probability:.3f}) for "
                                  f"{FREQUENCY_SAMPLES} samples to tell sampling from greedy")
    if result.fails:
        fail("sampled first tokens do not follow the server's own reported probabilities: "
             f"{result.describe()}",
             f"prompt {prompt!r} at temperature 1; a server that ignores temperature samples only "
             f"{result.top_token!r}, one that samples from another distribution (or reports logprobs of "
             "another) spreads the samples otherwise")


@pytest.mark.capability("chat")
def test_default_sampling_diversity_is_recorded(http_client: httpx.Client, model: str,
                                                inferaccept_evidence: Evidence) -> None:
    from pytest_inferaccept.correctness.sampling import diversity

    body = _body(model)  # no temperature, top_p or seed: the server's (or model's) defaults decide
    texts = [_answer(_send(http_client, body), body).text for _ in range(SAMPLED_ANSWERS)]
    figure = diversity(texts)
    inferaccept_evidence.record("default_sampling", figure.to_json())
    inferaccept_evidence.note(f"without sampling parameters: {figure.describe()}")
    if not any(texts):
        fail(f"no text in {SAMPLED_ANSWERS} answers without sampling parameters, no diversity to measure")


# --- streaming and determinism ------------------------------------------------------------------------


@pytest.mark.capability("stream")
def test_stream_equals_non_stream_at_temperature_zero(http_client: httpx.Client, model: str,
                                                      inferaccept_evidence: Evidence) -> None:
    body = _body(model, temperature=0)
    plain = post_chat(http_client, body)
    streamed = stream_chat(http_client, {**body, "stream_options": {"include_usage": True}})
    context = f"non-stream: {plain.describe()}\nstream:     {streamed.describe()}"
    if plain.text != streamed.text:
        at = next((i for i, (a, b) in enumerate(zip(plain.text, streamed.text, strict=False)) if a != b),
                  min(len(plain.text), len(streamed.text)))
        fail(f"the streamed text differs from the non-streamed text of the same temperature-0 request "
             f"(first difference at character {at}; {len(streamed.text)} vs {len(plain.text)} characters)",
             context)
    if plain.finish_reason != streamed.finish_reason:
        fail(f"finish_reason differs: {streamed.finish_reason!r} streamed, {plain.finish_reason!r} not",
             context)
    a, b = completion_tokens(plain), completion_tokens(streamed)
    if a is None or b is None:
        inferaccept_evidence.note("usage.completion_tokens missing on "
                                  f"{'the stream' if b is None else 'the non-streamed answer'}: not compared")
    elif a != b:
        fail(f"usage.completion_tokens differs: {b} streamed, {a} not, for the same text", context)


@pytest.mark.capability("chat")
def test_greedy_answer_repeats_alone(http_client: httpx.Client, model: str,
                                     inferaccept_evidence: Evidence) -> None:
    body = _body(model, temperature=0)
    answers = [_ask(http_client, body) for _ in range(GREEDY_REPEATS)]
    checks = _differences(answers[0], answers[1:])
    tally = _tally(checks)
    inferaccept_evidence.record("greedy_repeats", {"repeats": GREEDY_REPEATS, **tally})
    inferaccept_evidence.note(f"temperature 0 repeated alone {GREEDY_REPEATS} times: against the first, "
                              f"{tally['same']} identical, {tally['near_tie']} near ties, "
                              f"{tally['real_change']} real changes, {tally['not_classifiable']} "
                              "unclassifiable")
    worst = _first_real(checks)
    if worst is not None:
        what = "changed at a non-tie" if worst.kind == "real_change" else \
            "changed (no logprobs to tell a tie)"
        changed = tally["real_change"] + tally["not_classifiable"]
        fail(f"the same temperature-0 request, repeated alone, {what} in {changed} of "
             f"{GREEDY_REPEATS - 1} repeats: {worst.reason}",
             "\n".join(f"{i}: {excerpt(a.text, 200)!r}" for i, a in enumerate(answers)))


@pytest.mark.capability("seed")
def test_fixed_seed_repeats_the_sampled_answer(http_client: httpx.Client, model: str,
                                               inferaccept_evidence: Evidence) -> None:
    body = _body(model, temperature=1.0, seed=SEED)
    answers = [_ask(http_client, body) for _ in range(SEED_REPEATS)]
    checks = _differences(answers[0], answers[1:])
    tally = _tally(checks)
    inferaccept_evidence.record("seed_repeats", {"repeats": SEED_REPEATS, "seed": SEED, **tally})
    worst = _first_real(checks)
    if worst is not None:
        changed = tally["real_change"] + tally["not_classifiable"]
        fail(f"seed ignored: seed {SEED} at temperature 1 gave different answers in {changed} of "
             f"{SEED_REPEATS - 1} repeats: {worst.reason}",
             "\n".join(f"{i}: {excerpt(a.text, 200)!r}" for i, a in enumerate(answers)))
    if tally["near_tie"]:
        inferaccept_evidence.note(f"seed {SEED}: {tally['near_tie']} of {SEED_REPEATS - 1} repeats differ "
                                  "at a near tie only")
