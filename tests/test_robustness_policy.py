"""The status policy, the catalogue data, the config and the curl renderer, without a server."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from pytest_inferaccept.robustness import CASES_BY_ID, CATALOGUE, Params, build, classify, load_config
from pytest_inferaccept.robustness.curl import render_curl
from pytest_inferaccept.robustness.policy import error_shape

ENVELOPE = json.dumps({"error": {"message": "bad", "type": "invalid_request_error", "param": None,
                                 "code": None}})
REJECT = CASES_BY_ID["role_unknown"]
BOUND = CASES_BY_ID["top_p_upper_bound"]
LONG = CASES_BY_ID["prompt_over_context"]


def test_catalogue_has_at_least_40_cases_with_unique_ids() -> None:
    assert len(CATALOGUE) >= 40
    assert len({c.id for c in CATALOGUE}) == len(CATALOGUE)


def test_every_case_builds_for_a_server() -> None:
    params = Params(model="m", embedding_model="e", long_prompt_words=1000)
    for case in CATALOGUE:
        spec = build(case, params)
        assert spec.path.startswith("/v1/")
        assert b"{model}" not in spec.body and b"{long_prompt}" not in spec.body, case.id


def test_json_cases_carry_the_model_name() -> None:
    body = json.loads(build(REJECT, Params(model="my/model")).body)
    assert body["model"] == "my/model"


def test_the_expected_400_in_the_envelope_passes() -> None:
    assert classify(REJECT, 400, ENVELOPE, 0.1).outcome == "pass"


def test_a_5xx_fails_under_every_policy() -> None:
    for policy in ("strict", "standard", "lenient"):
        assert classify(REJECT, 500, ENVELOPE, 0.1, policy=policy).outcome == "fail"  # type: ignore[arg-type]


def test_a_2xx_to_invalid_input_fails() -> None:
    judgement = classify(REJECT, 200, "{}", 0.1)
    assert judgement.outcome == "fail" and "answered 200 to invalid input" in judgement.reason


def test_422_instead_of_400_warns_by_default_fails_when_strict_passes_when_lenient() -> None:
    assert classify(REJECT, 422, ENVELOPE, 0.1).outcome == "warn"
    assert classify(REJECT, 422, ENVELOPE, 0.1, policy="strict").outcome == "fail"
    assert classify(REJECT, 422, ENVELOPE, 0.1, policy="lenient").outcome == "pass"


def test_a_non_openai_error_body_warns_by_default() -> None:
    flat = json.dumps({"error": "bad", "error_type": "validation"})
    assert classify(REJECT, 400, flat, 0.1).outcome == "warn"
    assert classify(REJECT, 400, flat, 0.1, policy="strict").outcome == "fail"
    assert classify(REJECT, 400, "Bad Request", 0.1, policy="lenient").outcome == "warn"


def test_rejecting_an_inclusive_bound_fails() -> None:
    judgement = classify(BOUND, 422, ENVELOPE, 0.1, policy="lenient")
    assert judgement.outcome == "fail" and "rejected a valid request" in judgement.reason
    assert classify(BOUND, 200, "{}", 0.1).outcome == "pass"


def test_no_answer_fails_with_the_timing() -> None:
    judgement = classify(REJECT, None, b"", 30.0, error="no answer within 30s")
    assert judgement.outcome == "fail" and "30.0s" in judgement.reason


def test_a_silently_truncated_prompt_fails_even_for_an_either_case() -> None:
    body = json.dumps({"choices": [], "usage": {"prompt_tokens": 2000, "completion_tokens": 1}})
    judgement = classify(LONG, 200, body, 0.1, prompt_words=200_000)
    assert judgement.outcome == "fail" and "silent truncation" in judgement.reason


def test_an_error_inside_a_200_stream_is_named() -> None:
    sse = 'data: {"error": {"message": "too long"}}\n\ndata: [DONE]\n\n'
    judgement = classify(CASES_BY_ID["prompt_over_context_stream"], 200, sse, 0.1)
    assert judgement.outcome == "fail" and "inside the stream" in judgement.reason


def test_error_shapes_are_told_apart() -> None:
    assert error_shape(ENVELOPE) == "openai"
    assert error_shape('{"detail": "x"}') == "other_json"
    assert error_shape("oops") == "not_json"
    assert error_shape(b"") == "empty"


def test_config_reads_the_environment_and_names_allowed_values() -> None:
    cfg = load_config({"INFERACCEPT_STATUS_POLICY": "strict", "INFERACCEPT_FUZZ_SEED": "42",
                       "INFERACCEPT_FUZZ_EXAMPLES": "10", "INFERACCEPT_FUZZ_BUDGET": "5"})
    assert (cfg.policy, cfg.fuzz_seed, cfg.fuzz_examples, cfg.fuzz_budget) == ("strict", 42, 10, 5.0)
    assert load_config({}).policy == "standard"
    with pytest.raises(ValueError, match="allowed: strict, standard, lenient"):
        load_config({"INFERACCEPT_STATUS_POLICY": "nice"})
    with pytest.raises(ValueError, match="INFERACCEPT_FUZZ_EXAMPLES"):
        load_config({"INFERACCEPT_FUZZ_EXAMPLES": "many"})


def test_curl_never_contains_the_api_key() -> None:
    command = render_curl("http://h:1", "POST", "/v1/chat/completions",
                          {"Authorization": "Bearer sk-secret", "Content-Type": "application/json"},
                          b"{}", authenticated=True)
    assert "sk-secret" not in command and "$INFERACCEPT_API_KEY" in command


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("case_id", ["role_unknown", "invalid_utf8", "deep_nesting", "prompt_over_context",
                                     "lone_surrogate"])
def test_curl_command_reproduces_the_exact_body(case_id: str) -> None:
    spec = build(CASES_BY_ID[case_id], Params(model="m'x", long_prompt_words=5000))
    command = render_curl("http://h:1", spec.method, spec.path, spec.headers, spec.body)
    # run the command's body part through bash instead of curl: it must print the very same bytes
    data = command.split(" --data-binary ", 1)[1]
    script = f"cat {data[1:]}" if data.startswith("@") else f"printf %s {data}"
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout
    assert out == spec.body


def test_docs_list_every_catalogue_case() -> None:
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "robustness.md").read_text()
    missing = [c.id for c in CATALOGUE if f"`{c.id}`" not in text]
    assert not missing
