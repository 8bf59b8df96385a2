"""Service readiness: the server says what it serves and tells the truth about its health."""

from __future__ import annotations

import time

import httpx
import pytest

from pytest_inferaccept.checks import require
from pytest_inferaccept.checks.chat import ok_json
from pytest_inferaccept.checks.infra import check_models_list, check_models_shape, check_response_model
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.server import ServerUnderTest


@pytest.mark.inferaccept_core
def test_models_endpoint_lists_the_model_under_test(http_client: httpx.Client, model: str) -> None:
    resp = http_client.get("/v1/models")
    check_models_list(resp.status_code, resp.json() if resp.status_code == 200 else resp.text, model)


@pytest.mark.inferaccept_core
def test_responses_name_a_listed_model(http_client: httpx.Client, model: str) -> None:
    listed = [m["id"] for m in http_client.get("/v1/models").json().get("data", [])]
    resp = http_client.post("/v1/chat/completions", json={
        "model": model, "max_tokens": 4, "temperature": 0,
        "messages": [{"role": "user", "content": "Hello"}]})
    require(resp.status_code == 200, f"chat completion answered {resp.status_code}", resp.text[:300])
    check_response_model(resp.json().get("model"), listed)


def test_health_agrees_with_a_real_completion(http_client: httpx.Client, model: str,
                                              inferaccept_server: ServerUnderTest,
                                              inferaccept_evidence: Evidence) -> None:
    health = http_client.get("/health")
    inferaccept_evidence.record("health_status", health.status_code)
    limit = min(15.0, http_client.timeout.read or 15.0)
    start = time.monotonic()
    try:
        resp = http_client.post("/v1/chat/completions", timeout=httpx.Timeout(limit, connect=5.0),
                                json={"model": model, "max_tokens": 1, "temperature": 0,
                                      "messages": [{"role": "user", "content": "Hi"}]})
        works, seen = resp.status_code == 200, f"HTTP {resp.status_code}"
    except httpx.TimeoutException:
        works, seen = False, f"no answer within {limit:.0f} s"
    elapsed = time.monotonic() - start
    inferaccept_evidence.record("completion_seconds", round(elapsed, 3))
    healthy = health.status_code == 200
    require(healthy == works,
            f"/health says {'healthy' if healthy else 'unhealthy'} ({health.status_code}) but a "
            f"1-token completion {'worked' if works else 'did not'} ({seen}, {elapsed:.1f}s)",
            f"health body: {health.text[:200]}")


def test_health_answers_200(http_client: httpx.Client, inferaccept_evidence: Evidence) -> None:
    start = time.monotonic()
    health = http_client.get("/health")
    elapsed = time.monotonic() - start
    inferaccept_evidence.record("health", {"status": health.status_code, "seconds": round(elapsed, 4),
                                           "body": excerpt(health.text, 200)})
    require(health.status_code == 200, f"/health answered {health.status_code}, expected 200 on a "
            "server that is up", excerpt(health.text, 200))


def test_models_list_has_the_openai_shape(http_client: httpx.Client,
                                          inferaccept_evidence: Evidence) -> None:
    for warning in check_models_shape(ok_json(http_client.get("/v1/models"), "/v1/models")):
        inferaccept_evidence.warn(warning)


def test_server_identifies_itself(inferaccept_server: ServerUnderTest,
                                  inferaccept_evidence: Evidence) -> None:
    # Never a failure: many servers have no version endpoint; the report must say so, though.
    info = inferaccept_server.version_info
    inferaccept_evidence.record("version_info", info)
    if not info:
        inferaccept_evidence.warn("the server does not identify itself: none of /version, /props, "
                                  "/info, /get_server_info, /api/version answered")
