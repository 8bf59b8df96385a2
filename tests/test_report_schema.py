"""The results document has a published JSON Schema, generated from the typed run model."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from pytest_inferaccept.report import schema
from pytest_inferaccept.report.model import load
from tests._report_runs import report_run

LOAD_ENTRY: dict[str, Any] = {
    "spec": {"concurrency": 8, "requests": 200},
    "summary": {"counts": {"measured": 200, "failed": 0}, "throughput_tokens_per_s": 412.5},
    "slo": {"status": "pass", "confidence": 0.95, "point_estimate": False, "rows": [
        {"key": "ttft_p95", "limit": 0.5, "measured": 0.31, "ci_low": 0.29, "ci_high": 0.34, "n": 200,
         "margin": 0.38, "status": "pass", "basis": "interval", "method": "order statistics",
         "needed_n": None, "min_n": 72, "message": "ttft_p95 = 0.31 s (95% CI 0.29–0.34, n=200) ≤ 0.50 s"}]},
    "selfcheck": {"mode": "closed", "total": {"asked_concurrency": 8, "achieved_concurrency": 7.98}},
}


def _validator() -> jsonschema.protocols.Validator:
    document = json.loads(schema.SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document)


def test_the_committed_schema_is_what_the_model_generates() -> None:
    assert schema.SCHEMA_PATH.read_text(encoding="utf-8") == schema.render(), \
        "run: python -m pytest_inferaccept.report.schema"
    assert schema.main(["--check"]) == 0


def test_the_schema_command_rewrites_the_file_and_check_notices_a_stale_one(tmp_path: Any) -> None:
    target = tmp_path / "results.schema.json"
    assert schema.main(["--output", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == schema.render()
    target.write_text("{}\n", encoding="utf-8")
    assert schema.main(["--check", "--output", str(target)]) == 1


@pytest.mark.parametrize("name", ["go", "nogo", "invalid", "hostile"])
def test_every_document_the_plugin_writes_validates(name: str, pytester: pytest.Pytester,
                                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    document = report_run(name, pytester, tmp_path_factory).document
    _validator().validate(document)
    assert load(document).verdict.status == document["verdict"]["status"]


def test_a_document_with_load_results_and_unknown_keys_validates() -> None:
    document = copy.deepcopy(_minimal())
    document["tests"][0]["load"] = [LOAD_ENTRY]
    document["tests"][0]["a_key_from_a_later_release"] = {"x": 1}
    _validator().validate(document)
    assert load(document).tests[0].load[0].slo is not None


@pytest.mark.parametrize(("path", "value"), [(("verdict", "status"), "MAYBE"),
                                              (("conditions", "settings", "api_key"), "sk-real-key"),
                                              (("tests", 0, "outcome"), "won")])
def test_a_document_that_breaks_the_contract_is_rejected(path: tuple[Any, ...], value: Any) -> None:
    document = copy.deepcopy(_minimal())
    node: Any = document
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        _validator().validate(document)
    with pytest.raises(ValidationError):
        load(document)


def _minimal() -> dict[str, Any]:
    return {
        "schema": "pytest-inferaccept/results/1",
        "verdict": {"status": "GO", "reasons": ["1 checks passed"], "warnings": [], "counts": {"passed": 1}},
        "conditions": {"plugin_version": "0.1.0", "python": "3.11.7", "client_host": "ci",
                       "client_platform": "Linux", "cpu_count": 2, "started_at": "2026-01-01T00:00:00+00:00",
                       "finished_at": "2026-01-01T00:01:00+00:00", "settings": {"api_key": "<set>"}},
        "server": None, "problems": [], "capabilities": {},
        "tests": [{"nodeid": "t.py::test_a", "outcome": "passed", "duration_s": 0.1}],
    }
