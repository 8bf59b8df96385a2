"""Each streaming check fails with its fault and passes without."""

from __future__ import annotations

import pytest

from tests.conftest import RunSuite, one_run_per_fault

CAPS = ["--capabilities", "chat,stream,stream_usage,n", "--request-timeout", "5"]

FAULT_TABLE = [
    ("stream_no_done", "test_stream_is_well_formed_sse_ending_with_done", "[DONE]"),
    ("stream_content_type_wrong", "test_stream_is_well_formed_sse_ending_with_done", "content-type"),
    ("stream_inconsistent_id", "test_stream_chunks_share_one_id_with_one_role_and_one_finish",
     "different ids"),
    ("stream_no_role", "test_stream_chunks_share_one_id_with_one_role_and_one_finish", "role"),
    ("stream_double_finish", "test_stream_chunks_share_one_id_with_one_role_and_one_finish",
     "expected exactly one"),
    ("finish_reason_invalid", "test_stream_chunks_share_one_id_with_one_role_and_one_finish",
     "eos_token"),
    ("stream_error_chunk", "test_stream_chunks_share_one_id_with_one_role_and_one_finish",
     "the engine failed while generating"),
    ("stream_text_differs", "test_streamed_text_equals_the_non_streamed_text", "differs"),
    ("stream_error_chunk", "test_streamed_text_equals_the_non_streamed_text",
     "the engine failed while generating"),
    ("usage_every_chunk", "test_usage_arrives_once_at_the_end_when_asked", "vLLM #7262"),
    ("usage_chunk_with_choices", "test_usage_arrives_once_at_the_end_when_asked", "LiteLLM #28735"),
    ("usage_without_asking", "test_no_usage_is_streamed_unless_asked", "llama.cpp #16048"),
    ("n_wrong_indices", "test_n_choices_stream_with_indices_from_zero", "indices"),
    ("ignore_n", "test_n_choices_stream_with_indices_from_zero", "indices"),
    ("stream_text_differs", "test_openai_sdk_streams_the_same_text", "differs"),
    ("stream_error_chunk", "test_openai_sdk_streams_the_same_text", "the engine failed while generating"),
]
"""(fault, check that must fail with it, text the failure message must contain)."""
SELECT = one_run_per_fault((fault, check) for fault, check, _ in FAULT_TABLE)
"""The checks of one fault run together; each row reads its own check's outcome and message."""


def test_every_streaming_check_passes_on_the_correct_fake_without_warnings(run_suite: RunSuite) -> None:
    clean = run_suite("test_streaming", args=CAPS)
    assert clean.outcomes and set(clean.outcomes.values()) == {"passed"}, clean.output[-3000:]
    assert "warning:" not in clean.output, clean.output[-3000:]


@pytest.mark.parametrize(("fault", "check", "evidence"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, fault: str, check: str, evidence: str) -> None:
    faulty = run_suite("test_streaming", faults=[fault], select=SELECT[fault], args=CAPS)
    assert faulty.outcome(check) == "failed", faulty.output[-3000:]
    assert evidence in faulty.failure(check), faulty.output[-3000:]
