"""Each infra check (health, models, version, metrics) fails with its fault and passes without."""

from __future__ import annotations

import pytest

from tests.conftest import RunSuite, one_run_per_fault

CAPS = ["--capabilities", "chat,metrics", "--request-timeout", "5"]

FAULT_TABLE = [
    ("test_service", "health_down", "test_health_answers_200", "failed"),
    ("test_service", "models_shape_bad", "test_models_list_has_the_openai_shape", "failed"),
    ("test_service", "version_missing", "test_server_identifies_itself", "warned"),
    ("test_metrics", "metrics_missing", "test_metrics_is_valid_prometheus_text", "failed"),
    ("test_metrics", "metrics_invalid", "test_metrics_is_valid_prometheus_text", "failed"),
    ("test_metrics", "metrics_counter_reset", "test_metrics_counters_never_decrease", "failed"),
    ("test_metrics", "metrics_renamed", "test_metrics_expose_what_operators_rely_on", "failed"),
    ("test_metrics", "metrics_old_names_frozen", "test_metrics_expose_what_operators_rely_on", "failed"),
]
"""(suite module, fault, check, outcome with the fault): 'warned' = passes with a warning."""
SELECT = one_run_per_fault(((module, fault), check) for module, fault, check, _ in FAULT_TABLE)
"""The checks of one (module, fault) run together; each row reads its own check's outcome."""

WARNINGS = {"test_server_identifies_itself": "does not identify itself"}


@pytest.mark.parametrize("module", ["test_service", "test_metrics"])
def test_every_check_passes_on_the_correct_fake_without_warnings(run_suite: RunSuite,
                                                                  module: str) -> None:
    clean = run_suite(module, args=CAPS)
    assert clean.outcomes and set(clean.outcomes.values()) == {"passed"}, clean.output[-3000:]
    assert "warning:" not in clean.output, clean.output[-3000:]


@pytest.mark.parametrize(("module", "fault", "check", "expected"), FAULT_TABLE)
def test_check_fails_with_its_fault(run_suite: RunSuite, module: str, fault: str, check: str,
                                    expected: str) -> None:
    faulty = run_suite(module, faults=[fault], select=SELECT[module, fault], args=CAPS)
    if expected == "warned":
        assert faulty.outcome(check) == "passed", faulty.output[-3000:]
        assert WARNINGS[check] in faulty.output, faulty.output[-3000:]
    else:
        assert faulty.outcome(check) == "failed", faulty.output[-3000:]


def test_metrics_renamed_reports_renamed_and_missing_names(run_suite: RunSuite) -> None:
    check = "test_metrics_expose_what_operators_rely_on"
    faulty = run_suite("test_metrics", faults=["metrics_renamed"],
                       select=SELECT["test_metrics", "metrics_renamed"], args=CAPS)
    assert "essential operator metric(s) missing" in faulty.failure(check), faulty.output[-3000:]
    assert "ttft (vllm:time_to_first_token_seconds)" in faulty.failure(check), faulty.output[-3000:]


def test_old_names_served_beside_new_ones_pass_when_they_count_along(run_suite: RunSuite) -> None:
    both = run_suite("test_metrics", args=CAPS, metrics_names="both")
    assert set(both.outcomes.values()) == {"passed"}, both.output[-3000:]
    assert "warning:" not in both.output, both.output[-3000:]
    frozen = run_suite("test_metrics", faults=["metrics_old_names_frozen"],
                       select=SELECT["test_metrics", "metrics_old_names_frozen"], args=CAPS)
    failure = frozen.failure("test_metrics_expose_what_operators_rely_on")
    assert "vllm:time_per_output_token_seconds_count" in failure and "stayed at 0" in failure, failure
