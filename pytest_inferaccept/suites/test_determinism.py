"""Determinism beside other traffic and across the prefix cache: does a temperature-0 request give the
alone answer inside a batch of concurrent fillers, does a warm prefix cache give the cold answer, and
does a fixed seed give the same sample alone and under load (docs/correctness.md, "Determinism").

Each repeat is compared with the reference answer by the near-tie rule (`correctness.ties`): a flip
between two picks within half a nat is numerics, recorded as a figure; any other change is a
finding. A server declared batch-invariant (`--capabilities batch_invariant`) must answer
identically every time.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks import fail
from pytest_inferaccept.checks.generation import CHAT_PATH
from pytest_inferaccept.correctness.determinism import (
    FILLERS,
    Answer,
    Fillers,
    Tally,
    cache_counters,
    cache_proof,
    counter_growth,
    read_answer,
)
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.server import ServerUnderTest
from pytest_inferaccept.settings import Settings

GREEDY_PROMPTS = (
    "Write a short paragraph about the sea, the wind and a small boat.",
    "Explain in a few sentences how a bicycle works.",
)
GREEDY_TOKENS = 32
LOAD_REPEATS = 3
"""Repeats of each request inside the fillers' batches."""
SEED = 4321
SEED_PROMPT = "Write a long story about a fox who finds a lantern in the forest. Once upon a time"
SEED_TOKENS = 32
PREFIX_REPEATS = 3
"""Fresh long prefixes, each answered cold, then warm."""
PREFIX_TOKENS = 32
TOP_LOGPROBS = 5
PREFIX_DOCUMENT = (
    "The harbour of Eastwick has a lighthouse on a granite point at the end of a long stone pier. "
    "The keeper lives in a cottage beside the tower with a grey cat and a shelf of old almanacs. "
    "Every evening at dusk she climbs one hundred and twelve steps, trims the wick, winds the clockwork "
    "that turns the lens, and writes the weather, the wind direction and the ships she has seen in a "
    "leather log book. Three ships call at the harbour most weeks: the Marigold, a fishing boat with a "
    "red hull; the Peregrine, a mail steamer that arrives on Tuesdays; and the Halcyon, a schooner that "
    "carries timber from the northern forests. In winter the storms come from the north-east and the "
    "waves break over the pier, so the keeper stores oil, candles and biscuits in the cellar for weeks "
    "at a time. In summer visitors walk along the pier to watch the seals on the rocks below the point, "
    "and the keeper sells postcards of the tower for a penny each. The lens was made in 1872 by a "
    "workshop in Paris; it has eight panels of prisms and throws a white flash every five seconds that "
    "sailors can see twenty miles out to sea. The village school teaches the children the signal "
    "patterns of every light on the coast, and each spring the keeper paints the lantern room white."
)
"""About 280 tokens of text shared by the cold and warm requests (after a fresh id per repeat)."""
QUESTION = "Question: what does the keeper do every evening? Answer in two sentences."
WARMING_QUESTION = "Question: which ships call at the harbour? Name them."


def _strict(settings: Settings) -> bool:
    """The team declared the server batch-invariant: every repeat must be identical."""
    return "batch_invariant" in settings.capabilities


def _request(model: str, prompt: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}],
            **extra}


def _ask(client: httpx.Client, body: dict[str, Any]) -> Answer:
    """One answer with logprobs (top 5) where the server gives them, without where it refuses them."""
    with_lp = {**body, "logprobs": True, "top_logprobs": TOP_LOGPROBS, "stream": False}
    resp = client.post(CHAT_PATH, json=with_lp)
    if 400 <= resp.status_code < 500:
        with_lp = {**body, "stream": False}
        resp = client.post(CHAT_PATH, json=with_lp)
    if resp.status_code != 200:
        fail(f"chat completion answered HTTP {resp.status_code}, expected 200",
             f"request: {excerpt(json.dumps(with_lp), 400)}\nbody: {excerpt(resp.text, 600)}")
    try:
        return read_answer(resp.json())
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        fail("chat completion has no choices[0].message", excerpt(resp.text, 600))


def _under_load(client: httpx.Client, fillers: Fillers, body: dict[str, Any]) -> tuple[Answer, int]:
    """Send a probe while fillers are being answered; return its answer and how many were."""
    busy = fillers.busy() or fillers.wait_busy(timeout=10.0)
    return _ask(client, body), busy


def _conclude(tally: Tally, evidence: Evidence, *, strict: bool, what: str, key: str,
              answers: Callable[[], str]) -> None:
    """Record the figures; fail on a real change (on any difference when strict)."""
    evidence.record(key, {**tally.to_json(), "judged": "identical or fail (batch_invariant)" if strict
                          else "real changes fail, near ties are figures"})
    evidence.note(f"{what}: {tally.describe()}")
    if not tally.classifiable():
        evidence.note("the server returned no logprobs for some answers: those were judged changed vs "
                      "identical only, a near tie could not be told from a real change")
    bad = tally.failing(strict=strict)
    if not bad:
        near = tally.counts()["near_tie"]
        if near:
            evidence.note(f"{near} near ties (first differing token within half a nat): batch or kernel "
                          "numerics, not a defect")
        return
    first = bad[0]
    kinds = {r.check.kind for r in bad}
    if strict and kinds == {"near_tie"}:
        why = "the server is declared batch-invariant (--capabilities batch_invariant), but"
    else:
        why = "real change:" if "real_change" in kinds else "changed (no logprobs to tell a near tie):"
    fail(f"{what}: {why} {len(bad)} of {len(tally.repeats)} repeats differ; {first.label}: {first.detail}",
         f"{tally.describe()}\n{answers()}")


def _no_load_seen(busy: list[int], fillers: Fillers, evidence: Evidence) -> None:
    """Say how many probes found no filler being answered (those are not counted); skip when all did."""
    if busy.count(0):
        evidence.note(f"{busy.count(0)} of {len(busy)} probes were sent while no filler was being answered: "
                      "not counted as under load")
    if not any(busy):
        pytest.skip(f"not enough data: no filler was being answered when any probe was sent "
                    f"({json.dumps(fillers.to_json())}); nothing was compared under load")


@pytest.mark.capability("chat")
def test_greedy_answer_is_the_same_alone_and_inside_a_batch(http_client: httpx.Client, model: str,
                                                            inferaccept_settings: Settings,
                                                            inferaccept_evidence: Evidence) -> None:
    strict = _strict(inferaccept_settings)
    bodies = [_request(model, p, GREEDY_TOKENS, temperature=0) for p in GREEDY_PROMPTS]
    alone = [[_ask(http_client, b), _ask(http_client, b)] for b in bodies]
    baseline = Tally()
    for prompt, (first, again) in zip(GREEDY_PROMPTS, alone, strict=True):
        baseline.add(f"{prompt!r} alone again", first, again, names=("the first alone answer", "the second"))
    loaded = Tally()
    busy: list[int] = []
    texts: list[str] = []
    with Fillers(http_client, model, FILLERS) as fillers:
        fillers.wait_busy()
        for _ in range(LOAD_REPEATS):
            for prompt, body, (_, ref) in zip(GREEDY_PROMPTS, bodies, alone, strict=True):
                answer, seen = _under_load(http_client, fillers, body)
                busy.append(seen)
                texts.append(answer.text)
                if seen:
                    loaded.add(f"{prompt!r} beside {seen} fillers", ref, answer, seen,
                               names=("the alone answer", "the answer in the batch"))
    inferaccept_evidence.record("fillers", {**fillers.to_json(), "busy_at_each_probe": busy})
    inferaccept_evidence.record("alone_again", baseline.to_json())
    inferaccept_evidence.note(f"temperature 0 alone, asked twice: {baseline.describe()}; the answers in a "
                              "batch are compared with the second, which reads its prompt from the same "
                              "cache state as they do")
    _no_load_seen(busy, fillers, inferaccept_evidence)

    def shown() -> str:
        refs = "\n".join(f"alone {i}: {excerpt(a[1].text, 200)!r}" for i, a in enumerate(alone))
        return refs + "\n" + "\n".join(f"in a batch {i}: {excerpt(t, 200)!r}" for i, t in enumerate(texts))

    _conclude(loaded, inferaccept_evidence, strict=strict, key="alone_vs_batch", answers=shown,
              what=f"temperature 0 inside a batch of up to {FILLERS} fillers (most answered at once: "
                   f"{fillers.most_streaming}) against alone")


def _scrape(client: httpx.Client, server: ServerUnderTest) -> dict[str, float]:
    """The prefix-cache hit counters on /metrics now (empty when there is no /metrics or none)."""
    try:
        resp = client.get(f"{server.base_url}/metrics", follow_redirects=True)
    except httpx.HTTPError:
        return {}
    return cache_counters(resp.text) if resp.status_code == 200 else {}


@pytest.mark.capability("chat")
def test_warm_prefix_cache_gives_the_cold_answer(http_client: httpx.Client, model: str,
                                                 inferaccept_server: ServerUnderTest,
                                                 inferaccept_settings: Settings,
                                                 inferaccept_evidence: Evidence) -> None:
    strict = _strict(inferaccept_settings)
    tally = Tally()
    warm: list[Answer] = []
    pairs: list[tuple[str, Answer, Answer]] = []
    warm_growth: dict[str, float] = {}
    for _ in range(PREFIX_REPEATS):
        # A fresh id first: no earlier request can have put this prefix in the cache.
        document = f"Document {secrets.token_hex(4)}.\n{PREFIX_DOCUMENT}\n\n"
        body = _request(model, document + QUESTION, PREFIX_TOKENS, temperature=0)
        cold = _ask(http_client, body)
        _ask(http_client, _request(model, document + WARMING_QUESTION, PREFIX_TOKENS, temperature=0))
        before = _scrape(http_client, inferaccept_server)
        hot = _ask(http_client, body)
        for name, grown in counter_growth(before, _scrape(http_client, inferaccept_server)).items():
            warm_growth[name] = warm_growth.get(name, 0.0) + grown / PREFIX_REPEATS
        warm.append(hot)
        pairs.append((document[:17], cold, hot))
        tally.add(f"prefix {document[:17]!r}", cold, hot, names=("the cold answer", "the warm answer"))
    control_doc = f"Document {secrets.token_hex(4)}.\n{PREFIX_DOCUMENT}\n\n"
    before = _scrape(http_client, inferaccept_server)
    control = _ask(http_client, _request(model, control_doc + QUESTION, PREFIX_TOKENS, temperature=0))
    control_growth = counter_growth(before, _scrape(http_client, inferaccept_server))
    proof = cache_proof(warm, control, warm_growth, control_growth)
    inferaccept_evidence.record("prefix_cache", {"proven": proof.proven, "how": proof.how,
                                                 "cold_cached": [p[1].cached_tokens for p in pairs],
                                                 "warm_cached": [a.cached_tokens for a in warm],
                                                 "control_cached": control.cached_tokens,
                                                 "prompt_tokens": warm[0].prompt_tokens})
    inferaccept_evidence.note(("cache hit shown: " if proof.proven else "") + proof.how)

    def shown() -> str:
        return "\n".join(f"{doc}: cold {excerpt(c.text, 160)!r}\n{doc}: warm {excerpt(h.text, 160)!r}"
                         for doc, c, h in pairs)

    _conclude(tally, inferaccept_evidence, strict=strict, key="cold_vs_warm", answers=shown,
              what=f"temperature 0 with a ~{warm[0].prompt_tokens or '?'}-token prompt, warm prefix cache "
                   f"against cold ({'hit shown' if proof.proven else 'no proof of a hit'})")


@pytest.mark.capability("seed")
def test_fixed_seed_gives_the_same_sample_alone_and_under_load(http_client: httpx.Client, model: str,
                                                               inferaccept_settings: Settings,
                                                               inferaccept_evidence: Evidence) -> None:
    strict = _strict(inferaccept_settings)
    body = _request(model, SEED_PROMPT, SEED_TOKENS, temperature=1.0, seed=SEED)
    first, again = _ask(http_client, body), _ask(http_client, body)
    baseline = Tally()
    baseline.add("alone again", first, again, names=("the first alone sample", "the second"))
    inferaccept_evidence.record("alone_again", baseline.to_json())
    inferaccept_evidence.note(f"seed {SEED} alone, asked twice: {baseline.describe()} (judged by "
                              "test_fixed_seed_repeats_the_sampled_answer); the samples under load are "
                              "compared with the second, which reads its prompt from the same cache state")
    tally = Tally()
    busy: list[int] = []
    texts = [first.text, again.text]
    with Fillers(http_client, model, FILLERS) as fillers:
        fillers.wait_busy()
        started = time.monotonic()
        for _ in range(LOAD_REPEATS):
            answer, seen = _under_load(http_client, fillers, body)
            busy.append(seen)
            texts.append(answer.text)
            if seen:
                tally.add(f"beside {seen} fillers", again, answer, seen,
                          names=("the alone sample", "the sample under load"))
    inferaccept_evidence.record("fillers", {**fillers.to_json(), "busy_at_each_probe": busy,
                                            "seconds_under_load": round(time.monotonic() - started, 2)})
    _no_load_seen(busy, fillers, inferaccept_evidence)

    def shown() -> str:
        labels = ["alone", "alone again", *(f"under load {i}" for i in range(len(texts) - 2))]
        return "\n".join(f"{label}: {excerpt(t, 200)!r}" for label, t in zip(labels, texts, strict=True))

    _conclude(tally, inferaccept_evidence, strict=strict, key="seed_alone_vs_load", answers=shown,
              what=f"seed {SEED} at temperature 1, beside up to {FILLERS} fillers against alone")
