"""Robustness: every malformed or hostile request gets a clear answer, and the server lives on.

Each catalogue case (pytest_inferaccept/robustness/cases.py) is sent once, judged by the status
policy ($INFERACCEPT_STATUS_POLICY), and followed by a 1-token completion: a server that stops
answering fails the case with the request that killed it, as a curl command.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from pytest_inferaccept.checks import fail, require
from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.robustness.cases import CASES_BY_ID, CATALOGUE, Case, Params, build
from pytest_inferaccept.robustness.config import RobustnessConfig
from pytest_inferaccept.robustness.policy import classify, error_shape
from pytest_inferaccept.server import ServerUnderTest
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.suites._harness import Budget, Harness, config_or_exit


@pytest.fixture(scope="module")
def robustness_config(inferaccept_settings: Settings) -> RobustnessConfig:
    """The robustness settings (status policy, budgets)."""
    return config_or_exit(inferaccept_settings)


@pytest.fixture(scope="module")
def suite_budget(robustness_config: RobustnessConfig) -> Budget:
    """The wall-clock budget of this module: no run can hang on a slow or stuck server."""
    return Budget(robustness_config.suite_budget, time.monotonic())


@pytest.fixture
def harness(inferaccept_settings: Settings, robustness_config: RobustnessConfig, http_client: httpx.Client,
            model: str, inferaccept_server: ServerUnderTest, inferaccept_evidence: Evidence,
            suite_budget: Budget) -> Harness:
    """Clients, limits and evidence for one robustness check."""
    return Harness.for_test(inferaccept_settings, robustness_config, http_client, model, inferaccept_server,
                            inferaccept_evidence, suite_budget)


def _param(case: Case) -> Any:
    marks = [pytest.mark.capability("embeddings")] if case.endpoint == "embeddings" else []
    return pytest.param(case, id=case.id, marks=marks)


def _params(request: pytest.FixtureRequest, harness: Harness, case: Case) -> Params:
    embedding_model = request.getfixturevalue("embedding_model") if case.endpoint == "embeddings" else ""
    return Params(model=harness.model, embedding_model=embedding_model,
                  long_prompt_words=harness.config.long_prompt_words)


@pytest.mark.parametrize("case", [_param(c) for c in CATALOGUE])
def test_request_is_answered_by_the_status_policy_and_the_server_survives(
        request: pytest.FixtureRequest, harness: Harness, case: Case) -> None:
    assert harness.budget is not None
    if harness.budget.left() <= 0:
        harness.evidence.mark_invalid(f"robustness budget of {harness.config.suite_budget:g}s spent "
                                      f"before {case.id} ($INFERACCEPT_ROBUSTNESS_BUDGET)")
        pytest.skip(f"not judged: robustness budget of {harness.config.suite_budget:g}s spent")
    client, base_url = harness.chat_client, harness.server.base_url
    if case.endpoint == "embeddings":
        client = request.getfixturevalue("embedding_http_client")
        base_url = harness.server.embedding_url or harness.server.base_url
    spec = build(case, _params(request, harness, case))
    answer = harness.send(spec, client)
    judgement = classify(case, answer.status, answer.body, answer.elapsed, policy=harness.config.policy,
                         error=answer.error, prompt_words=spec.prompt_words)
    harness.evidence.record(f"{case.id}.status", answer.status)
    harness.evidence.record(f"{case.id}.judgement", f"{judgement.outcome}: {judgement.reason}")
    dead = harness.dead_after(spec, base_url)
    if dead:
        fail(dead, f"the request itself: {judgement.outcome}: {judgement.reason}")
    if judgement.outcome == "fail":
        fail(judgement.reason, f"request: {harness.curl(spec, base_url)}")
    if judgement.outcome == "warn":
        harness.evidence.warn(f"{case.id}: {judgement.reason}")


def test_over_long_prompt_gets_the_same_status_streamed_and_not(harness: Harness) -> None:
    params = Params(model=harness.model, long_prompt_words=harness.config.long_prompt_words)
    plain = build(CASES_BY_ID["prompt_over_context"], params)
    streamed = build(CASES_BY_ID["prompt_over_context_stream"], params)
    answers = {"non-stream": harness.send(plain), "stream": harness.send(streamed)}
    seen = {mode: (f"HTTP {a.status}" if a.error is None else f"{a.error} (HTTP {a.status})")
            for mode, a in answers.items()}
    harness.evidence.record("over_long_prompt", seen)
    for mode, spec in (("non-stream", plain), ("stream", streamed)):
        require(answers[mode].error is None, f"the over-long prompt ({mode}) got no complete answer: "
                f"{answers[mode].error}", f"request: {harness.curl(spec)}")
    require(answers["stream"].status == answers["non-stream"].status,
            f"an over-long prompt is answered {answers['non-stream'].status} without streaming but "
            f"{answers['stream'].status} when streamed; expected the same status in both modes",
            f"stream body: {answers['stream'].body[:300].decode('utf-8', 'replace')}\n"
            f"request: {harness.curl(streamed)}")


_ENVELOPE_PROBES = ("body_not_json", "role_unknown", "max_tokens_zero", "temperature_above_range")


def test_error_answers_use_the_openai_error_envelope(harness: Harness) -> None:
    params = Params(model=harness.model)
    outside: list[str] = []
    for case_id in _ENVELOPE_PROBES:
        spec = build(CASES_BY_ID[case_id], params)
        answer = harness.send(spec)
        if answer.status is None or not 400 <= answer.status < 600:
            harness.evidence.note(f"{case_id}: HTTP {answer.status} (judged by the catalogue)")
            continue
        if error_shape(answer.body) != "openai":
            outside.append(f"{case_id}: HTTP {answer.status}: "
                           f"{answer.body[:200].decode('utf-8', 'replace') or '<empty>'}")
    if outside and harness.config.policy == "lenient":
        harness.evidence.warn("error bodies outside the OpenAI envelope: " + "; ".join(outside))
        return
    require(not outside, f"{len(outside)} of {len(_ENVELOPE_PROBES)} error answers are not "
            '{"error": {"message": ..., "type": ..., "param": ..., "code": ...}}', "\n".join(outside))
