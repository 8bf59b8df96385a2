"""A paired verdict on lm-evaluation-harness runs, from the per-sample logs lm-eval itself wrote
(tests/data/lmeval/README.md: lm-eval 0.4.13 against the fake server, clean and `quality_drop`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_inferaccept.correctness.lmeval import main

DATA = Path(__file__).parent / "data" / "lmeval"
CLEAN = DATA / "clean.jsonl"
DROP = DATA / "quality_drop.jsonl"


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _flipped(path: Path, out: Path, doc_ids: set[int]) -> Path:
    """The samples of `path` with the grade of the given documents turned over (a noisy repeat)."""
    rows = _rows(path)
    for row in rows:
        if row["doc_id"] in doc_ids:
            row["exact_match"] = 1.0 - float(row["exact_match"])  # type: ignore[arg-type]
    return _write(out, rows)


def test_two_clean_lm_eval_runs_pass_and_say_the_noise_was_not_measured(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, CLEAN, CLEAN)
    assert code == 0
    assert "64 of 80 right, 80.0%" in out
    assert "GO: accuracy fell by 0.0 points (0 items right→wrong, 0 wrong→right, of 80" in out
    assert "drop between -4.5 and +4.5 points" in out
    assert "noise not measured" in out and "--again" in out


def test_a_quality_drop_run_is_no_go_naming_the_drop_and_the_documents(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, CLEAN, DROP)
    assert code == 1
    assert "NO-GO: accuracy fell by 23.8 points (19 items right→wrong, 0 wrong→right, of 80" in out
    assert "drop between +10.4 and +34.6 points" in out
    assert "McNemar one-sided p = 1.91e-06" in out
    assert "right → wrong: 19 documents (first 10)" in out
    assert "doc 1 (target '36'): '36' → '37'" in out


def test_the_command_runs_as_a_module_and_exits_with_the_verdict() -> None:
    command = [sys.executable, "-m", "pytest_inferaccept.correctness.lmeval", str(CLEAN), str(DROP)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert "NO-GO" in done.stdout


def test_json_output_carries_every_figure_of_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, CLEAN, DROP, "--json")
    doc = json.loads(out)
    assert code == 1
    assert doc["status"] == "fail" and doc["metric"] == "exact_match" and doc["noise_measured"] is False
    (row,) = doc["filters"]
    assert (row["filter"], row["n"], row["b"], row["c"]) == ("none", 80, 19, 0)
    assert row["drop"] == pytest.approx(19 / 80)
    assert row["drop_low"] > 0.05 and row["self_flip"] is None
    assert len(row["right_to_wrong"]) == 19 and row["wrong_to_right"] == []


def test_a_malformed_line_is_unusable_and_names_the_file_and_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = CLEAN.read_text(encoding="utf-8").splitlines()
    lines[6] = lines[6][:40]  # line 7 cut short, as a full disk would leave it
    bad = tmp_path / "samples_cut.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = _run(capsys, CLEAN, bad)
    assert code == 2 and out == ""
    assert f"{bad} line 7: not valid JSON" in err


def test_a_line_without_a_document_id_is_refused_by_the_schema(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rows = _rows(CLEAN)
    rows[2]["doc_id"] = "two"
    del rows[4]["doc_id"]
    code, _, err = _run(capsys, _write(tmp_path / "a.jsonl", rows), CLEAN)
    assert code == 2
    assert "a.jsonl line 3: not an lm-eval sample: doc_id: Input should be a valid integer" in err


def test_a_missing_metric_names_the_metrics_the_file_has(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, CLEAN, DROP, "--metric", "acc")
    assert code == 2
    assert f"{CLEAN}: no metric 'acc'; this file has: exact_match" in err
    rows = _rows(CLEAN)
    for row in rows:
        row["bleu"] = row.pop("exact_match")
        row["metrics"] = ["bleu"]
    code, _, err = _run(capsys, _write(tmp_path / "bleu.jsonl", rows), CLEAN)
    assert code == 2
    assert "none of acc, exact_match in every file; this file has: bleu; name a 0/1 metric" in err


def test_acc_is_judged_before_other_metrics_and_a_graded_score_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rows = _rows(CLEAN)
    for row in rows:  # a multiple-choice task logs acc and acc_norm
        row["acc"] = row["acc_norm"] = row.pop("exact_match")
        row["metrics"] = ["acc", "acc_norm"]
    mc = _write(tmp_path / "mc.jsonl", rows)
    code, out, _ = _run(capsys, mc, mc)
    assert code == 0 and "(metric acc)" in out
    rows[9]["acc_norm"] = 0.5
    code, _, err = _run(capsys, mc, _write(tmp_path / "mc2.jsonl", rows), "--metric", "acc_norm")
    assert code == 2
    assert "mc2.jsonl line 10: acc_norm = 0.5 is not a right/wrong score (0 or 1)" in err


def test_a_different_document_under_the_same_id_or_twice_in_one_file_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rows = _rows(CLEAN)
    rows[11]["doc_hash"] = "0" * 64
    code, _, err = _run(capsys, CLEAN, _write(tmp_path / "other.jsonl", rows))
    assert code == 2 and "other.jsonl line 12: doc_id 11 is a different document" in err
    rows = _rows(CLEAN)
    code, _, err = _run(capsys, CLEAN, _write(tmp_path / "twice.jsonl", rows + rows[:1]))
    assert code == 2 and "twice.jsonl line 81: doc_id 0 (filter 'none') again, first on line 1" in err


def test_a_repeat_of_the_candidate_measures_the_noise(capsys: pytest.CaptureFixture[str]) -> None:
    # lm-eval's second run against the unchanged fake wrote a file identical to the first
    code, out, _ = _run(capsys, CLEAN, CLEAN, "--again", CLEAN)
    assert code == 0
    assert "self-flip rate 0.0% (0 of 80 items changed grade when answered twice)" in out
    assert "noise not measured" not in out


def test_a_noisy_repeat_turns_go_into_cannot_decide(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    noisy = _flipped(CLEAN, tmp_path / "again.jsonl", set(range(0, 80, 10)))  # 8 of 80 flip: 10%
    code, out, _ = _run(capsys, CLEAN, CLEAN, "--again", noisy)
    assert code == 3
    assert "cannot decide: accuracy fell by 0.0 points" in out
    assert "self-flip rate 10.0% (8 of 80 items changed grade when answered twice), above 5%" in out


def test_a_conclusive_drop_stays_no_go_despite_a_noisy_repeat(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    noisy = _flipped(DROP, tmp_path / "again.jsonl", set(range(0, 80, 10)))
    code, out, _ = _run(capsys, CLEAN, DROP, "--again", noisy)
    assert code == 1
    assert "NO-GO: accuracy fell by 23.8 points" in out and "self-flip rate 10.0%" in out


def test_each_filter_is_judged_on_its_own_and_a_small_run_says_not_enough_data(
        capsys: pytest.CaptureFixture[str]) -> None:
    before, after = DATA / "filters_clean.jsonl", DATA / "filters_quality_drop.jsonl"
    code, out, _ = _run(capsys, before, after)
    assert code == 3
    assert "filter 'flexible-extract': 20 documents" in out and "filter 'strict-match': 20 documents" in out
    assert out.count("not enough data: accuracy fell by 20.0 points (4 items right→wrong, 0 wrong→right, "
                     "of 20") == 2
    assert "about 23 items would decide if the rates stayed as measured" in out
    code, out, _ = _run(capsys, before, after, "--filter", "strict-match")
    assert code == 3 and "flexible-extract" not in out
    code, _, err = _run(capsys, before, after, "--filter", "none")
    assert code == 2 and "no filter 'none' in both files; they share: flexible-extract, strict-match" in err


def test_a_wider_tolerance_in_points_lets_the_small_run_pass(capsys: pytest.CaptureFixture[str]) -> None:
    small = DATA / "filters_clean.jsonl"
    code, out, _ = _run(capsys, small, small, "--tolerance", "20")
    assert code == 0 and "tolerance 20.0 points" in out
    code, out, _ = _run(capsys, small, small)
    assert code == 3 and "tolerance 5.0 points" in out
