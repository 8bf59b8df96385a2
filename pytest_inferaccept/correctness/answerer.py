"""Send known-answer items to an OpenAI-compatible /v1/chat/completions and keep what grading needs."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from pytest_inferaccept.correctness.items import Item

SEED = 1234
"""The fixed seed sent with every item: a server that honours it answers the same way each run."""

KEPT_LOGPROB_TOKENS = 32
"""Logprobs are kept for the first tokens of each answer only: enough to find where two answers part."""


@dataclass(frozen=True)
class Answer:
    """What the server answered to one item (content only; reasoning is not graded)."""

    item_id: str
    text: str | None
    finish_reason: str | None
    logprobs: list[dict[str, Any]] | None
    """The first tokens' logprobs (OpenAI chat shape), or None when the server returned none."""
    error: str | None = None


@dataclass
class _Shared:
    """What one batch learns as it goes: whether the server takes logprobs at all."""

    logprobs: bool = True


def _body(item: Item, model: str, seed: int, logprobs: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": item.chat_messages(), "temperature": 0,
                            "seed": seed, "max_tokens": item.token_budget()}
    if logprobs:
        body.update(logprobs=True, top_logprobs=5)
    return body


def _read(item: Item, data: Any) -> Answer:
    """An Answer from a chat completion body; a body without a usable choice is an error."""
    try:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        content = message.get("content")
        lp = (choice.get("logprobs") or {}).get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return Answer(item.id, None, None, None, f"no choice in the response: {str(data)[:200]}")
    if content is not None and not isinstance(content, str):
        return Answer(item.id, None, None, None, f"content is not text: {str(content)[:200]}")
    kept = [dict(t) for t in lp[:KEPT_LOGPROB_TOKENS]] if isinstance(lp, list) and lp else None
    return Answer(item.id, content or "", choice.get("finish_reason"), kept)


async def _ask(client: httpx.AsyncClient, item: Item, model: str, seed: int, shared: _Shared,
               gate: asyncio.Semaphore) -> Answer:
    import httpx

    async with gate:
        want = shared.logprobs
        try:
            resp = await client.post("/v1/chat/completions", json=_body(item, model, seed, want))
            if resp.status_code == 400 and want:
                # a server that rejects logprobs still answers the item; later items skip them
                shared.logprobs = False
                resp = await client.post("/v1/chat/completions", json=_body(item, model, seed, False))
            if resp.status_code != 200:
                return Answer(item.id, None, None, None, f"HTTP {resp.status_code}: {resp.text[:200]}")
            return _read(item, resp.json())
        except httpx.HTTPError as exc:
            return Answer(item.id, None, None, None, f"{type(exc).__name__}: {exc}"[:300])
        except ValueError as exc:  # a 200 whose body is not JSON
            return Answer(item.id, None, None, None, f"response is not JSON: {exc}"[:300])


async def answer_items(base_url: str, model: str, items: Sequence[Item], *, concurrency: int = 4,
                       seed: int = SEED, api_key: str | None = None, timeout: float = 120.0,
                       transport: httpx.AsyncBaseTransport | None = None) -> list[Answer]:
    """Answer every item greedily with a fixed seed, at most `concurrency` at a time, in item order."""
    import httpx

    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    gate = asyncio.Semaphore(concurrency)
    shared = _Shared()
    async with httpx.AsyncClient(base_url=base_url.rstrip("/").removesuffix("/v1"), headers=headers,
                                 timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
                                 transport=transport) as client:
        return list(await asyncio.gather(*(_ask(client, item, model, seed, shared, gate) for item in items)))
