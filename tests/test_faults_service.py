"""Each service-readiness check fails against the fake server with its fault, and passes without."""

from __future__ import annotations

import pytest

from tests.conftest import RunSuite

FAULT_TABLE = [
    ("models_missing_served", "test_models_endpoint_lists_the_model_under_test"),
    ("wrong_model_field", "test_responses_name_a_listed_model"),
    ("health_lies", "test_health_agrees_with_a_real_completion"),
    ("health_down", "test_health_agrees_with_a_real_completion"),
]


@pytest.mark.parametrize(("fault", "check"), FAULT_TABLE)
def test_check_fails_with_its_fault_and_passes_without(run_suite: RunSuite, fault: str,
                                                       check: str) -> None:
    clean = run_suite("test_service", select=check)
    assert clean.outcome(check) == "passed", clean.output[-2000:]
    # health_lies hangs every completion: the check fails when the 1 s request timeout runs out
    faulty = run_suite("test_service", faults=[fault], select=check,
                       args=["--request-timeout", "1"])
    assert faulty.outcome(check) == "failed", faulty.output[-2000:]
