"""The correctness suite end to end on the fake: accuracy alone, its floor, and the paired gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.settings import SettingsError, resolve
from tests.conftest import RunSuite

SUITE = "test_correctness"
CHECK = "test_known_answers_are_graded_against_the_floor"

FAULT_TABLE = [
    ("quality_drop", "known-answer set: NO-GO: accuracy fell by 8.5 points"),
]
"""(fault, what the paired gate against a clean baseline says with it)."""
NUMERIC_FAULTS = [
    ("tokenizer_drops_spaces", "fail", "found", "of them the same answer with its spaces dropped"),
    ("logprob_shift", "pass", "found",
     "logprob drift found: mean |Δ logprob| +0.0500 nats beyond the server's own drift"),
]
"""(fault, the paired accuracy gate's status, the drift tier's status, what the NO-GO's reason says)."""


def _document(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _correctness(document: dict[str, Any]) -> dict[str, Any]:
    return next(t["correctness"] for t in document["tests"] if t.get("correctness"))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results file from the clean fake, made once for the module's baseline comparisons."""
    return tmp_path_factory.mktemp("correctness") / "baseline.json"


def _clean_baseline(run_suite: RunSuite, baseline: Path) -> dict[str, Any]:
    run = run_suite(SUITE, args=["--inferaccept-json", str(baseline)])
    assert run.outcome(CHECK) == "passed", run.output[-3000:]
    return _document(baseline)


def test_the_known_answer_set_is_graded_go_on_the_fake_alone(run_suite: RunSuite, baseline: Path) -> None:
    document = _clean_baseline(run_suite, baseline)
    section = _correctness(document)
    assert document["verdict"]["status"] == "GO"
    assert section["accuracy"]["n"] == 200 and section["accuracy"]["correct"] == 49
    assert section["accuracy"]["low"] < 49 / 200 < section["accuracy"]["high"]
    assert section["self_flips"] == 0 and section["logprobs"] is True
    first = section["answers"][0]
    assert first["id"] == "arithmetic-000" and first["grade"] == "correct" and first["text"] == "7"
    assert first["logprobs"][0]["piece"] == "7" and len(first["logprobs"][0]["top"]) == 5
    assert "kind=copy" in section["by_tag"]
    run = run_suite(SUITE, args=["--inferaccept-json", str(baseline)])
    assert "correctness: 49 of 200 correct (24.5%" in run.output


def test_a_baseline_from_the_same_fake_is_go_with_no_changed_answer(run_suite: RunSuite, baseline: Path,
                                                                    tmp_path: Path) -> None:
    _clean_baseline(run_suite, baseline)
    out = tmp_path / "again.json"
    run = run_suite(SUITE, args=["--inferaccept-baseline", str(baseline), "--inferaccept-json", str(out)])
    document = _document(out)
    paired = document["baseline"]["correctness"]
    assert document["verdict"]["status"] == "GO", run.output[-3000:]
    assert paired["status"] == "pass" and paired["b"] == 0 and paired["c"] == 0 and paired["changed"] == []
    assert paired["drift"]["mean_abs_delta"] == 0
    assert "against the baseline: GO" in run.output


@pytest.mark.parametrize(("fault", "says"), FAULT_TABLE)
def test_a_fault_since_a_clean_baseline_is_no_go_naming_the_drop(
        run_suite: RunSuite, baseline: Path, tmp_path: Path, fault: str, says: str) -> None:
    _clean_baseline(run_suite, baseline)
    out, page = tmp_path / "faulty.json", tmp_path / "faulty.html"
    args = ["--inferaccept-baseline", str(baseline), "--inferaccept-json", str(out),
            "--inferaccept-html", str(page)]
    run = run_suite(SUITE, faults=[fault], args=args)
    document = _document(out)
    paired = document["baseline"]["correctness"]
    assert document["verdict"]["status"] == "NO-GO", run.output[-3000:]
    assert any(says in r for r in document["verdict"]["reasons"]), document["verdict"]["reasons"]
    assert paired["status"] == "fail" and paired["b"] == 17 and paired["c"] == 0
    first = paired["changed"][0]
    assert first["kind"] == "real_change" and first["before_grade"] == "correct"
    html = page.read_text(encoding="utf-8")
    assert 'id="correctness"' in html and "real change" in html
    assert "NO-GO</b></span> against the baseline" in html


@pytest.mark.parametrize(("fault", "gate", "tier", "says"), NUMERIC_FAULTS)
def test_a_tokenizer_or_numerics_fault_since_a_clean_baseline_is_no_go_for_its_own_reason(
        run_suite: RunSuite, baseline: Path, tmp_path: Path, fault: str, gate: str, tier: str,
        says: str) -> None:
    _clean_baseline(run_suite, baseline)
    out = tmp_path / "faulty.json"
    args = ["--inferaccept-baseline", str(baseline), "--inferaccept-json", str(out)]
    run = run_suite(SUITE, faults=[fault], args=args)
    document = _document(out)
    paired = document["baseline"]["correctness"]
    assert document["verdict"]["status"] == "NO-GO", run.output[-3000:]
    assert any(says in r for r in document["verdict"]["reasons"]), document["verdict"]["reasons"]
    assert paired["status"] == gate and paired["drift"]["status"] == tier, paired["drift"]["message"]


def test_near_ties_tipped_the_other_way_change_texts_but_stay_go(
        run_suite: RunSuite, baseline: Path, tmp_path: Path) -> None:
    _clean_baseline(run_suite, baseline)
    out = tmp_path / "ties.json"
    run = run_suite(SUITE, faults=["near_tie_flip"], args=["--inferaccept-baseline", str(baseline),
                                                           "--inferaccept-json", str(out)])
    document = _document(out)
    paired = document["baseline"]["correctness"]
    assert document["verdict"]["status"] == "GO", run.output[-3000:]
    assert paired["status"] == "pass" and paired["b"] == 0 and paired["c"] == 0
    assert paired["changed"] and {ch["kind"] for ch in paired["changed"]} == {"near_tie"}
    drift = paired["drift"]
    assert drift["status"] == "not_found" and drift["diverged_real"] == 0 and drift["diverged_tie"] >= 40


def test_an_accuracy_floor_above_the_interval_fails_the_check(run_suite: RunSuite) -> None:
    run = run_suite(SUITE, args=["--correctness-min", "0.8"])
    assert run.outcome(CHECK) == "failed"
    assert "below the floor" in run.failure(CHECK) and "floor 80.0%" in run.failure(CHECK)


def test_a_floor_inside_the_interval_is_invalid_with_the_reason(
        run_suite: RunSuite, tmp_path: Path) -> None:
    out = tmp_path / "floor.json"
    run = run_suite(SUITE, args=["--correctness-min", "0.25", "--inferaccept-json", str(out)])
    document = _document(out)
    assert run.outcome(CHECK) == "failed"
    assert document["verdict"]["status"] == "INVALID"
    assert "straddles the floor" in " ".join(document["verdict"]["reasons"])
    assert _correctness(document)["floor"]["status"] == "not_enough_data"


def test_a_malformed_team_set_names_its_line_and_the_run_is_invalid(
        run_suite: RunSuite, tmp_path: Path) -> None:
    team = tmp_path / "team.jsonl"
    team.write_text('{"id": "q1", "prompt": "What is 3 + 4? Answer with the number only.", '
                    '"grader": "number", "answer": 7}\n'
                    '{"id": "q2", "prompt": "x", "grader": "numbr", "answer": 7}\n', encoding="utf-8")
    out = tmp_path / "team.json"
    run = run_suite(SUITE, args=["--correctness-set", str(team), "--inferaccept-json", str(out)])
    document = _document(out)
    assert document["verdict"]["status"] == "INVALID"
    reason = " ".join(document["verdict"]["reasons"])
    assert "team.jsonl line 2: unknown grader 'numbr'" in reason
    assert "line 2" in run.failure(CHECK)


def test_server_text_in_the_correctness_section_is_escaped(run_suite: RunSuite, tmp_path: Path) -> None:
    team = tmp_path / "hostile.jsonl"
    team.write_text(json.dumps({"id": "x1", "prompt": "Repeat exactly, with nothing else: <b>bold</b>",
                                "grader": "copy", "answer": "<b>bold</b>",
                                "tags": {"kind": "<script>alert(1)</script>"}}) + "\n", encoding="utf-8")
    page = tmp_path / "hostile.html"
    run_suite(SUITE, args=["--correctness-set", str(team), "--inferaccept-html", str(page)])
    html = page.read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize(("key", "raw", "says"), [
    ("correctness_min", "1.5", "--correctness-min must be an accuracy between 0 and 1"),
    ("correctness_min", "most", "--correctness-min must be an accuracy between 0 and 1"),
    ("correctness_tolerance", "0", "--correctness-tolerance must be a number of points between 0 and 100"),
    ("correctness_tolerance", "five", "--correctness-tolerance must be a number of points between 0 and 100"),
    ("correctness_drift_tolerance", "-1", "--correctness-drift-tolerance must be nats of mean |Δ logprob|"),
    ("correctness_drift_tolerance", "none", "--correctness-drift-tolerance must be nats of mean |Δ logprob|"),
])
def test_a_bad_correctness_option_names_the_allowed_values(key: str, raw: str, says: str) -> None:
    with pytest.raises(SettingsError, match=says.replace("(", r"\(")):
        resolve(lambda k: raw if k == key else None, environ={})


def test_correctness_options_resolve_to_a_fraction_floor_and_tolerance() -> None:
    given = {"correctness_min": "0.8", "correctness_tolerance": "2.5", "correctness_set": "team.jsonl"}
    settings = resolve(given.get, environ={}).correctness
    assert settings.floor == 0.8 and settings.tolerance == 0.025 and str(settings.set_path) == "team.jsonl"
    assert settings.drift_tolerance == 0.02
    assert resolve({"correctness_drift_tolerance": "off"}.get, environ={}).correctness.drift_tolerance is None


def test_a_bad_correctness_option_on_the_command_line_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--correctness-tolerance", "-3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--correctness-tolerance must be a number of points between 0 and 100" in str(result.stderr)
