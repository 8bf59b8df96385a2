"""The fake server is a correct, deterministic server when no fault is on."""

from __future__ import annotations

import json

import httpx
import pytest

from pytest_inferaccept.checks.sse import assemble_content, read_sse
from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.fake.faults import validate_faults


def _chat(client: httpx.Client, **extra: object) -> httpx.Response:
    body: dict[str, object] = {"model": "fake-chat", "temperature": 0,
                               "messages": [{"role": "user", "content": "tell me a story"}]}
    body.update(extra)
    return client.post("/v1/chat/completions", json=body)


def test_temperature_zero_is_deterministic_and_streaming_gives_the_same_text(
        fake_server: FakeServer) -> None:
    with httpx.Client(base_url=fake_server.url) as client:
        first = _chat(client).json()["choices"][0]["message"]["content"]
        assert first == _chat(client).json()["choices"][0]["message"]["content"]
        with client.stream("POST", "/v1/chat/completions", json={
                "model": "fake-chat", "temperature": 0, "stream": True,
                "messages": [{"role": "user", "content": "tell me a story"}]}) as resp:
            stream = read_sse(resp.iter_raw())
    assert stream.done and not stream.problems
    assert assemble_content(stream.chunks())[0] == first


def test_a_stop_sequence_spanning_tokens_cuts_the_text_exactly(fake_server: FakeServer) -> None:
    with httpx.Client(base_url=fake_server.url) as client:
        full = _chat(client).json()["choices"][0]["message"]["content"]
        words = full.split(" ")
        stop = " ".join(words[2:4])  # two tokens: the stop spans a token boundary
        cut = _chat(client, stop=[stop]).json()["choices"][0]
    assert cut["finish_reason"] == "stop"
    assert cut["message"]["content"] == full[: full.index(stop)]


def test_max_tokens_ends_with_length_and_counts_exactly(fake_server: FakeServer) -> None:
    with httpx.Client(base_url=fake_server.url) as client:
        answer = _chat(client, max_tokens=3).json()
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 3


def test_timing_is_configurable(fake_server: FakeServer) -> None:
    fake_server.reconfigure(ttft=0.2, itl=0.0)
    with httpx.Client(base_url=fake_server.url) as client:
        answer = _chat(client, max_tokens=2)
    assert answer.elapsed.total_seconds() >= 0.2


def test_invalid_requests_get_the_openai_error_envelope(fake_server: FakeServer) -> None:
    with httpx.Client(base_url=fake_server.url) as client:
        bad = _chat(client, temperature=3)
        body = client.post("/v1/chat/completions", content=b"{not json",
                           headers={"content-type": "application/json"})
    assert bad.status_code == 400
    assert set(bad.json()["error"]) == {"message", "type", "param", "code"}
    assert body.status_code == 400 and "error" in json.loads(body.text)


def test_unknown_fault_names_are_rejected_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown fault.*known: health_lies"):
        validate_faults(["made_up"])


@pytest.mark.parametrize("temperature", [None, 0])
def test_a_prompt_with_a_lone_surrogate_is_answered(fake_server: FakeServer, temperature: int | None) -> None:
    # A JSON escape for a lone UTF-16 surrogate, as the robustness catalogue sends it.
    body = ('{"model": "fake-chat", "max_tokens": 2, "messages": [{"role": "user", "content": "a\\ud800b"}]'
            + ("" if temperature is None else f', "temperature": {temperature}') + "}")
    with httpx.Client(base_url=fake_server.url) as client:
        resp = client.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text
