"""Each structured-output check fails against the fake server with its fault, and passes without."""

from __future__ import annotations

import pytest

from tests.conftest import RunSuite, one_run_per_fault

SUITE = "test_structured_output"
FAULT_TABLE = [
    ("json_object_invalid", "test_json_object_mode_answers_a_json_object[non-stream]"),
    ("structured_stream_broken", "test_json_object_mode_answers_a_json_object[stream]"),
    ("json_schema_ignored", "test_json_schema_output_validates_against_the_schema[non-stream]"),
    ("json_schema_ignored", "test_json_schema_output_validates_against_the_schema[stream]"),
    ("structured_stream_broken", "test_json_schema_output_validates_against_the_schema[stream]"),
]
# -k cannot select one parameter id: whole test functions run, those of one fault together.
SELECT = one_run_per_fault((fault, check.split("[")[0]) for fault, check in FAULT_TABLE)


def test_every_check_passes_on_the_correct_fake(run_suite: RunSuite) -> None:
    clean = run_suite(SUITE)
    for _, check in FAULT_TABLE:
        assert clean.outcome(check) == "passed", clean.output[-2000:]
    assert set(clean.outcomes.values()) == {"passed"}, clean.outcomes


@pytest.mark.parametrize(("fault", "check"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, fault: str, check: str) -> None:
    faulty = run_suite(SUITE, faults=[fault], select=SELECT[fault])
    assert faulty.outcome(check) == "failed", faulty.output[-2000:]
