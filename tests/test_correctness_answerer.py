"""The answerer sends each item at temperature 0 with a fixed seed and its own max_tokens, at a
bounded concurrency, keeps content (not reasoning), and retries without logprobs when refused."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from pytest_inferaccept.correctness.answerer import SEED, answer_items
from pytest_inferaccept.correctness.graders import grade
from pytest_inferaccept.correctness.items import Item, load_bundled
from pytest_inferaccept.fake import FakeServer


def _items(n: int) -> list[Item]:
    return [Item.model_validate({"id": f"i{k}", "prompt": f"What is {k} + 1?", "grader": "number",
                                 "answer": k + 1, "max_tokens": 5 + k}) for k in range(n)]


def _reply(content: str | None, *, finish: str = "stop", logprobs: Any = None,
           reasoning: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": logprobs}]}


def test_the_fake_servers_answers_come_back_in_item_order_with_first_tokens_logprobs() -> None:
    items = load_bundled()[:12]
    with FakeServer() as server:
        answers = asyncio.run(answer_items(server.url, server.config.model, items, concurrency=3))
    assert [a.item_id for a in answers] == [i.id for i in items]
    assert all(a.error is None and a.text and a.finish_reason in ("stop", "length") for a in answers)
    assert all(a.logprobs and {"token", "logprob", "top_logprobs"} <= a.logprobs[0].keys() for a in answers)
    assert all(len(a.logprobs or []) <= 32 for a in answers)
    # the fake works out sums, products and copies (fake/knowns.py) and answers nothing else right
    from pytest_inferaccept.fake.knowns import known_answer

    for item, answer in zip(items, answers, strict=True):
        prompt = item.chat_messages()[-1]["content"]
        if known_answer(prompt) is None:
            assert not grade(item, answer.text, answer.finish_reason).correct, item.id


def test_the_fake_server_answers_the_same_twice_and_keeps_reasoning_out_of_the_answer() -> None:
    items = load_bundled()[:6]
    with FakeServer() as server:
        first = asyncio.run(answer_items(server.url, server.config.model, items))
        second = asyncio.run(answer_items(server.url, server.config.model, items))
    with FakeServer(reasoning_tokens=4) as thinking:
        reasoned = asyncio.run(answer_items(thinking.url + "/v1", thinking.config.model, items))
    assert [a.text for a in first] == [a.text for a in second]
    assert [a.text for a in reasoned] == [a.text for a in first]


def test_every_request_is_greedy_seeded_with_the_items_max_tokens_and_asks_for_top5_logprobs() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=_reply("1"))

    asyncio.run(answer_items("http://srv", "m", _items(3), transport=httpx.MockTransport(handler)))
    assert sorted(b["max_tokens"] for b in bodies) == [5, 6, 7]
    assert all(b["temperature"] == 0 and b["seed"] == SEED and b["model"] == "m" for b in bodies)
    assert all(b["logprobs"] is True and b["top_logprobs"] == 5 for b in bodies)


def test_a_server_that_refuses_logprobs_with_400_is_asked_again_without_them() -> None:
    seen: list[bool] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append("logprobs" in body)
        if "logprobs" in body:
            return httpx.Response(400, json={"error": {"message": "logprobs not supported"}})
        return httpx.Response(200, json=_reply("4"))

    answers = asyncio.run(answer_items("http://srv", "m", _items(4), concurrency=1,
                                       transport=httpx.MockTransport(handler)))
    assert [a.text for a in answers] == ["4"] * 4
    assert all(a.logprobs is None and a.error is None for a in answers)
    assert seen == [True, False, False, False, False]  # one refusal, then never asked again


def test_concurrency_is_bounded() -> None:
    state = {"now": 0, "most": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        state["now"] += 1
        state["most"] = max(state["most"], state["now"])
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return httpx.Response(200, json=_reply("1"))

    answers = asyncio.run(answer_items("http://srv", "m", _items(20), concurrency=3,
                                       transport=httpx.MockTransport(handler)))
    assert len(answers) == 20
    assert 1 <= state["most"] <= 3


def test_content_is_kept_reasoning_dropped_and_failures_named() -> None:
    replies = iter([httpx.Response(200, json=_reply("2", reasoning="1 + 1 is 3? no, 2")),
                    httpx.Response(200, json=_reply(None, finish="length", reasoning="thinking...")),
                    httpx.Response(500, text="boom"),
                    httpx.Response(200, text="not json")])
    answers = asyncio.run(answer_items("http://srv", "m", _items(4), concurrency=1,
                                       transport=httpx.MockTransport(lambda r: next(replies))))
    assert (answers[0].text, answers[0].finish_reason) == ("2", "stop")
    assert (answers[1].text, answers[1].finish_reason) == ("", "length")
    assert answers[2].error == "HTTP 500: boom" and answers[2].text is None
    assert answers[3].error is not None and "not JSON" in answers[3].error
