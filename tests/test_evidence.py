"""Evidence keeps the exchanges a test made, cut to size, with secrets removed."""

from __future__ import annotations

import httpx
import pytest

from pytest_inferaccept.evidence import MAX_EXCHANGES, Evidence, redact
from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.http import make_client


def test_the_recording_client_keeps_request_status_and_body_without_the_key() -> None:
    evidence = Evidence(secrets=("sk-abc",))
    with FakeServer(api_key="sk-abc") as server, make_client(
            server.url, api_key="sk-abc", request_timeout=5, connect_timeout=2,
            evidence=lambda: evidence) as client:
        client.post("/v1/chat/completions", json={
            "model": "fake-chat", "max_tokens": 2, "messages": [{"role": "user", "content": "sk-abc"}]})
        with client.stream("POST", "/v1/chat/completions", json={
                "model": "fake-chat", "max_tokens": 2, "stream": True,
                "messages": [{"role": "user", "content": "hi"}]}) as resp:
            resp.read()
    first, second = evidence.exchanges
    assert first.status == 200 and '"choices"' in first.response_body
    assert "sk-abc" not in str(evidence.model_dump(mode="json", exclude_defaults=True))
    assert second.response_body.startswith("data: ")


def test_an_unreachable_server_is_recorded_as_an_error() -> None:
    evidence = Evidence()
    with make_client("http://127.0.0.1:9", api_key=None, request_timeout=2, connect_timeout=1,
                     evidence=lambda: evidence) as client, pytest.raises(httpx.ConnectError):
        client.get("/health")
    assert evidence.exchanges[0].error and "ConnectError" in evidence.exchanges[0].error


def test_evidence_keeps_the_first_and_latest_exchanges_and_counts_the_rest() -> None:
    from pytest_inferaccept.evidence import Exchange

    evidence = Evidence()
    for i in range(30):
        evidence.add_exchange(Exchange(method="GET", url=f"/x/{i}"))
    urls = [e.url for e in evidence.exchanges]
    assert len(urls) == MAX_EXCHANGES
    assert urls[0] == "/x/0" and urls[-1] == "/x/29"
    assert evidence.model_dump(mode="json", exclude_defaults=True)["dropped_exchanges"] == 30 - MAX_EXCHANGES


def test_secret_looking_keys_are_redacted_in_nested_server_info() -> None:
    info = {"server_args": {"api_key": "k1", "model": "m", "nested": [{"hf_token": "t"}]},
            "usage": {"prompt_tokens": 3, "max_tokens": 8}}
    assert redact(info) == {"server_args": {"api_key": "***", "model": "m",
                                            "nested": [{"hf_token": "***"}]},
                            "usage": {"prompt_tokens": 3, "max_tokens": 8}}
