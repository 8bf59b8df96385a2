"""The verdict: GO, NO-GO or INVALID, from outcomes and session problems."""

from __future__ import annotations

from typing import Any

from pytest_inferaccept.model import CheckResult
from pytest_inferaccept.verdict import EXIT_CODES, decide


def _o(outcome: str, **kw: Any) -> CheckResult:
    return CheckResult.model_validate({"nodeid": f"t::{outcome}", "outcome": outcome, **kw})


def test_all_passed_is_go_with_exit_code_zero() -> None:
    v = decide([_o("passed"), _o("skipped")])
    assert (v.status, EXIT_CODES[v.status]) == ("GO", 0)


def test_a_failure_or_an_error_is_no_go() -> None:
    assert decide([_o("passed"), _o("failed", message="ttft 2.1 s > 0.8 s")]).status == "NO-GO"
    v = decide([_o("passed"), _o("error")])
    assert (v.status, EXIT_CODES[v.status]) == ("NO-GO", 1)


def test_a_session_problem_makes_the_run_invalid_whatever_the_tests_did() -> None:
    v = decide([_o("failed")], problems=["server unreachable at http://127.0.0.1:9"])
    assert (v.status, EXIT_CODES[v.status]) == ("INVALID", 6)
    assert v.reasons == ["server unreachable at http://127.0.0.1:9"]


def test_nothing_judged_is_invalid() -> None:
    assert decide([]).status == "INVALID"
    assert decide([_o("skipped"), _o("xfailed")]).status == "INVALID"


def test_a_test_that_could_not_judge_makes_the_run_invalid_not_no_go() -> None:
    v = decide([_o("passed"), _o("failed", evidence={"invalid": "client-bound"})])
    assert v.status == "INVALID"


def test_warnings_are_carried_but_do_not_change_go() -> None:
    v = decide([_o("passed", evidence={"warnings": ["422 instead of 400"]})])
    assert v.status == "GO"
    assert v.warnings == ["422 instead of 400"]
