"""Each chat, legacy-completions and auth check fails with its fault and passes without."""

from __future__ import annotations

import pytest

from tests.conftest import RunSuite, one_run_per_fault

KEY = "inferaccept-test-key"
CAPS = ["--capabilities", "chat,n,logprobs,completions", "--request-timeout", "5"]
AUTH = ["--capabilities", "chat,auth", "--api-key", KEY, "--request-timeout", "5"]

FAULT_TABLE = [
    ("test_chat", "finish_reason_invalid", "test_chat_completion_has_the_openai_shape"),
    ("test_chat", "answer_in_reasoning", "test_chat_completion_has_the_openai_shape"),
    ("test_chat", "usage_total_wrong", "test_usage_adds_up_and_respects_max_tokens"),
    ("test_chat", "ignore_n", "test_n_returns_n_choices_indexed_from_zero"),
    ("test_chat", "n_wrong_indices", "test_n_returns_n_choices_indexed_from_zero"),
    ("test_chat", "no_logprobs", "test_logprobs_spell_the_content"),
    ("test_chat", "logprobs_mismatch", "test_logprobs_spell_the_content"),
    ("test_chat", "unknown_model_200", "test_unknown_model_is_refused_with_404"),
    ("test_completions", "completions_shape_bad", "test_completion_has_the_openai_shape"),
    ("test_completions", "stream_text_differs", "test_streamed_completion_equals_the_non_streamed_one"),
    ("test_auth", "auth_not_enforced", "test_request_without_a_key_is_refused"),
    ("test_auth", "auth_not_enforced", "test_request_with_a_wrong_key_is_refused"),
]
"""(suite module, fault, check that must fail with it)."""
SELECT = one_run_per_fault(((module, fault), check) for module, fault, check in FAULT_TABLE)
"""The checks of one (module, fault) run together; each row reads its own check's outcome."""


def _args(module: str) -> list[str]:
    return AUTH if module == "test_auth" else CAPS


def _config(module: str) -> dict[str, object]:
    return {"api_key": KEY} if module == "test_auth" else {}


@pytest.mark.parametrize("module", ["test_chat", "test_completions", "test_auth"])
def test_every_check_passes_on_the_correct_fake_without_warnings(run_suite: RunSuite,
                                                                  module: str) -> None:
    clean = run_suite(module, args=_args(module), **_config(module))
    assert clean.outcomes and set(clean.outcomes.values()) == {"passed"}, clean.output[-3000:]
    assert "warning:" not in clean.output, clean.output[-3000:]


@pytest.mark.parametrize(("module", "fault", "check"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, module: str, fault: str, check: str) -> None:
    faulty = run_suite(module, faults=[fault], select=SELECT[module, fault], args=_args(module),
                       **_config(module))
    assert faulty.outcome(check) == "failed", faulty.output[-3000:]

