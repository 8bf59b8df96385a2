"""Authentication: with --api-key, requests without the key or with a wrong one are refused."""

from __future__ import annotations

import httpx
import pytest

from pytest_inferaccept.checks import require
from pytest_inferaccept.checks.chat import error_envelope
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.settings import Settings

pytestmark = pytest.mark.capability("auth")

CHAT = "/v1/chat/completions"


def _api_key(settings: Settings) -> str:
    key = settings.api_key
    if not key:
        pytest.skip("auth checks need the server's key: give --api-key")
    return key


def _send(client: httpx.Client, model: str, authorization: str | None) -> httpx.Response:
    req = client.build_request("POST", CHAT, json={
        "model": model, "max_tokens": 2, "temperature": 0,
        "messages": [{"role": "user", "content": "Hi"}]})
    if authorization is None:
        req.headers.pop("Authorization", None)
    else:
        req.headers["Authorization"] = authorization
    return client.send(req)


def _check_refused(client: httpx.Client, model: str, key: str, authorization: str | None,
                   what: str, evidence: Evidence) -> None:
    # Control first: the right key must work, so a server refusing everything proves nothing.
    control = _send(client, model, f"Bearer {key}")
    require(control.status_code == 200,
            f"with the right key the request answered {control.status_code}, expected 200",
            excerpt(control.text, 300))
    resp = _send(client, model, authorization)
    evidence.record("status", resp.status_code)
    require(resp.status_code in (401, 403),
            f"a request {what} answered {resp.status_code}, expected 401 or 403", excerpt(resp.text, 300))
    try:
        body = resp.json()
    except ValueError:
        body = None
    ok, why = error_envelope(body)
    if not ok:
        if isinstance(body, dict) and "error" in body:
            # e.g. vLLM answers {"error": "Unauthorized"}: refused, with the JSON error member.
            evidence.warn(f"the {resp.status_code} {what} is not the full OpenAI error envelope: {why}")
        else:
            require(False, f"the {resp.status_code} {what} has no JSON error body: {why}",
                    excerpt(resp.text, 300))


def test_request_without_a_key_is_refused(inferaccept_settings: Settings, http_client: httpx.Client,
                                          model: str, inferaccept_evidence: Evidence) -> None:
    key = _api_key(inferaccept_settings)
    _check_refused(http_client, model, key, None, "without a key", inferaccept_evidence)


def test_request_with_a_wrong_key_is_refused(inferaccept_settings: Settings, http_client: httpx.Client,
                                             model: str, inferaccept_evidence: Evidence) -> None:
    key = _api_key(inferaccept_settings)
    _check_refused(http_client, model, key, f"Bearer {key}-wrong", "with a wrong key",
                   inferaccept_evidence)
