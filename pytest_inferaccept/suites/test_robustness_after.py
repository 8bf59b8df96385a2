"""After the robustness suites: /health still tells the truth and the server still serves.

This module sorts after test_fuzz.py and test_robustness.py, so pytest runs it after them.
"""

from __future__ import annotations

import time

import httpx
import pytest

from pytest_inferaccept.checks import require
from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.robustness.send import liveness
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.suites._harness import config_or_exit

pytestmark = pytest.mark.inferaccept_liveness


def test_server_is_healthy_and_serving_after_the_robustness_suite(
        inferaccept_settings: Settings, http_client: httpx.Client, model: str,
        inferaccept_evidence: Evidence) -> None:
    settings = inferaccept_settings
    limit = min(settings.request_timeout, config_or_exit(settings).liveness_timeout)
    try:
        health = http_client.get("/health", timeout=httpx.Timeout(limit, connect=settings.connect_timeout))
        health_seen = f"HTTP {health.status_code}"
        healthy = health.status_code == 200
    except httpx.HTTPError as exc:
        health_seen, healthy = f"no answer ({type(exc).__name__})", False
    start = time.monotonic()
    problem = liveness(http_client, model, timeout=limit, connect_timeout=settings.connect_timeout)
    elapsed = time.monotonic() - start
    inferaccept_evidence.record("health_after", health_seen)
    inferaccept_evidence.record("completion_after_s", round(elapsed, 3))
    require(healthy and problem is None,
            f"after the robustness suite /health answers {health_seen} and a 1-token completion "
            f"{'worked' if problem is None else 'failed: ' + problem} ({elapsed:.1f}s); expected a "
            "healthy server that serves, with /health agreeing")
