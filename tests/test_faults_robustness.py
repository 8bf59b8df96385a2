"""Each robustness check fails against the fake server with its fault, and passes without."""

from __future__ import annotations

import pytest

# Imported at collection, before any pytester snapshot: pytester drops the modules a test imported
# when it ends, and a half re-imported fake (new validation.ApiError, old package attribute) would
# answer its own 400s with 500.
import pytest_inferaccept.fake.app  # noqa: F401
from tests.conftest import RunSuite

CATALOGUE_TEST = "test_request_is_answered_by_the_status_policy_and_the_server_survives"
AFTER_TEST = "test_server_is_healthy_and_serving_after_the_robustness_suite"
FUZZ_TEST = "test_generated_requests_never_break_the_server"

CLEAN_MODULES = ("test_fuzz", "test_robustness", "test_robustness_after")
"""One run of every robustness module against the correct fake answers every row's clean check
(test_robustness_after last, as in a user's run)."""
# The same options with and without the fault. An over-long prompt of 6000 words is still three
# times the fake's context window (2048 tokens), and costs a fraction of the default 200000. The
# faults that hang or stall are found when the request timeout runs out: 1 s, where the correct
# fake answers every request of the clean run within 0.1 s, so the clean run still passes with it.
ARGS = ["--request-timeout", "1", "--long-prompt-words", "6000"]

# (fault, suite modules, -k selection, the test that must fail, text its failure must show)
FAULT_TABLE = [
    ("bad_input_500", "test_robustness", "max_tokens_zero", f"{CATALOGUE_TEST}[max_tokens_zero]",
     "answered 500, a server error"),
    ("crash_on_bad_request", "test_robustness", "role_unknown", f"{CATALOGUE_TEST}[role_unknown]",
     "server stopped answering after role_unknown: curl"),
    ("hang_on_long_prompt", "test_robustness", "prompt_over_context and not stream",
     f"{CATALOGUE_TEST}[prompt_over_context]", "no answer within 1s"),
    ("silent_truncation", "test_robustness", "prompt_over_context and not stream",
     f"{CATALOGUE_TEST}[prompt_over_context]", "silent truncation: usage.prompt_tokens="),
    ("long_prompt_stream_200", "test_robustness", "same_status_streamed",
     "test_over_long_prompt_gets_the_same_status_streamed_and_not", "400 without streaming but 200"),
    ("error_plain_text", "test_robustness", "body_not_json", f"{CATALOGUE_TEST}[body_not_json]",
     "answered 500"),
    ("accept_invalid_200", "test_robustness", "messages_empty", f"{CATALOGUE_TEST}[messages_empty]",
     "answered 200 to invalid input"),
    ("reject_bounds", "test_robustness", "top_p_upper_bound", f"{CATALOGUE_TEST}[top_p_upper_bound]",
     "rejected a valid request (top_p 1.0 (inclusive bound)) with 422"),
    ("stream_stall", "test_robustness", "stream_with_usage", f"{CATALOGUE_TEST}[stream_with_usage]",
     "stalled stream: headers after"),
    ("error_shape_flat", "test_robustness", "openai_error_envelope",
     "test_error_answers_use_the_openai_error_envelope", "are not"),
    ("health_lies", "test_robustness_after", None, AFTER_TEST, "/health answers HTTP 200"),
    ("health_down", "test_robustness_after", None, AFTER_TEST, "/health answers HTTP 503"),
    ("crash_on_bad_request", ("test_robustness", "test_robustness_after"), "role_unknown or after_the",
     AFTER_TEST, "a 1-token completion failed"),
    ("bad_input_500", "test_fuzz", None, FUZZ_TEST, "answered 500, a server error"),
    ("crash_on_bad_request", "test_fuzz", None, FUZZ_TEST, "server stopped answering after fuzz: curl"),
    ("error_shape_flat", "test_fuzz", None, FUZZ_TEST, "outside the OpenAI envelope"),
]


@pytest.mark.parametrize(("fault", "modules", "select", "check", "shown"), FAULT_TABLE,
                         ids=[f"{row[0]}-{row[3].split('[')[-1].rstrip(']')[:40]}" for row in FAULT_TABLE])
def test_check_fails_with_its_fault_and_passes_without(run_suite: RunSuite, monkeypatch: pytest.MonkeyPatch,
                                                       fault: str, modules: str | tuple[str, ...],
                                                       select: str | None, check: str, shown: str) -> None:
    monkeypatch.setenv("INFERACCEPT_FUZZ_SEED", "7")
    mods = [modules] if isinstance(modules, str) else list(modules)
    clean = run_suite(CLEAN_MODULES, args=ARGS)
    assert clean.outcome(check) == "passed", clean.output[-3000:]
    faulty = run_suite(mods, faults=[fault], select=select, args=ARGS)
    assert faulty.outcome(check) == "failed", faulty.output[-3000:]
    assert shown in faulty.failure(check), faulty.output[-3000:]
