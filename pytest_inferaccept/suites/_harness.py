"""What the robustness suites share: settings from the session, a budget clock, send-and-judge."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
import pytest

from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.robustness.cases import RequestSpec
from pytest_inferaccept.robustness.config import RobustnessConfig, load_config
from pytest_inferaccept.robustness.curl import render_curl
from pytest_inferaccept.robustness.send import Answer, liveness, send
from pytest_inferaccept.server import ServerUnderTest
from pytest_inferaccept.settings import Settings


def config_or_exit(settings: Settings) -> RobustnessConfig:
    """The robustness settings resolved with the plugin's options (CLI, ini, then environment)."""
    if settings.robustness is not None:
        return settings.robustness
    try:
        return load_config()
    except ValueError as exc:
        pytest.exit(f"inferaccept robustness: {exc}", returncode=4)


@dataclass
class Budget:
    """A wall-clock budget shared by the tests of one suite."""

    seconds: float
    started: float

    def left(self) -> float:
        """Seconds left (may be negative)."""
        return self.seconds - (time.monotonic() - self.started)


@dataclass(frozen=True)
class Harness:
    """Clients, timeouts and evidence for sending bad requests and checking the server lives on."""

    config: RobustnessConfig
    server: ServerUnderTest
    chat_client: httpx.Client
    model: str
    evidence: Evidence
    request_timeout: float
    connect_timeout: float
    authenticated: bool
    budget: Budget | None = None

    @classmethod
    def for_test(cls, s: Settings, config: RobustnessConfig, client: httpx.Client,
                 model: str, server: ServerUnderTest, evidence: Evidence,
                 budget: Budget | None = None) -> Harness:
        """Build the harness from the session settings."""
        return cls(config=config, server=server, chat_client=client, model=model, evidence=evidence,
                   request_timeout=s.request_timeout, connect_timeout=s.connect_timeout,
                   authenticated=bool(s.api_key), budget=budget)

    def timeout(self, cap: float | None = None) -> float:
        """The per-request limit: the session's request timeout, within what the budget leaves."""
        limit = min(self.request_timeout, cap) if cap else self.request_timeout
        if self.budget is not None:
            limit = min(limit, max(self.budget.left(), 1.0))
        return limit

    def curl(self, spec: RequestSpec, base_url: str | None = None) -> str:
        """The request as a curl command (API key as $INFERACCEPT_API_KEY)."""
        return render_curl(base_url or self.server.base_url, spec.method, spec.path, spec.headers,
                           spec.body, authenticated=self.authenticated)

    def send(self, spec: RequestSpec, client: httpx.Client | None = None) -> Answer:
        """Send one request under the per-request limit and record its timing."""
        answer = send(client or self.chat_client, spec, timeout=self.timeout(),
                      connect_timeout=self.connect_timeout)
        self.evidence.record(f"{spec.case_id}.elapsed_s", round(answer.elapsed, 3))
        return answer

    def dead_after(self, spec: RequestSpec, base_url: str | None = None) -> str | None:
        """None when a 1-token completion still works; else the failure message naming the request."""
        problem = liveness(self.chat_client, self.model,
                           timeout=self.timeout(self.config.liveness_timeout),
                           connect_timeout=self.connect_timeout)
        if problem is None:
            return None
        return (f"server stopped answering after {spec.case_id}: {self.curl(spec, base_url)}\n"
                f"the 1-token completion afterwards: {problem}")
