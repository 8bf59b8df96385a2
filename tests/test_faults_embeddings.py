"""Each embeddings check fails against the fake server with its fault, and passes without."""

from __future__ import annotations

import pytest

from tests.conftest import RunSuite, one_run_per_fault

SUITE = "test_embeddings"
FAULT_TABLE = [
    ("embeddings_indices_wrong", "test_a_list_input_gets_one_embedding_per_item_indexed_in_order"),
    ("no_embeddings", "test_a_string_input_gets_one_embedding"),
    ("embeddings_nan", "test_embedding_vectors_are_finite"),
    ("embeddings_dim_varies", "test_embedding_dimension_is_the_same_for_every_input_and_call"),
    ("embeddings_base64_wrong", "test_base64_embeddings_decode_to_the_float_vectors"),
    ("embeddings_base64_rejected", "test_sdk_default_embeddings_equal_the_float_vectors"),
    ("embeddings_base64_wrong", "test_sdk_default_embeddings_equal_the_float_vectors"),
    ("dimensions_ignored", "test_dimensions_is_honoured_or_refused"),
    ("embeddings_usage_missing", "test_embedding_usage_counts_the_input_tokens"),
]
SELECT = one_run_per_fault((fault, check) for fault, check in FAULT_TABLE)
"""The checks of one fault run together; each row reads its own check's outcome."""


def test_every_check_passes_on_the_correct_fake(run_suite: RunSuite) -> None:
    clean = run_suite(SUITE)
    for _, check in FAULT_TABLE:
        assert clean.outcome(check) == "passed", clean.output[-2000:]
    assert set(clean.outcomes.values()) == {"passed"}, clean.outcomes


@pytest.mark.parametrize(("fault", "check"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, fault: str, check: str) -> None:
    # Embeddings are required here so that a broken endpoint fails instead of being skipped.
    faulty = run_suite(SUITE, faults=[fault], select=SELECT[fault],
                       args=["--capabilities", "chat,embeddings"])
    assert faulty.outcome(check) == "failed", faulty.output[-2000:]
