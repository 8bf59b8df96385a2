"""The results document has a published JSON Schema, generated from the typed run model."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args, get_origin

import jsonschema
import pytest
from pydantic import BaseModel, ValidationError

import pytest_inferaccept
from pytest_inferaccept.baseline.figures import load_runs
from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.model import (
    CAPACITY_KINDS,
    SCHEMA_ID,
    LoadResult,
    Masked,
    RunDocument,
    load,
)
from pytest_inferaccept.report import schema
from pytest_inferaccept.report.load_table import load_table
from pytest_inferaccept.scrub import MASK
from tests._report_runs import report_run

PACKAGE = Path(pytest_inferaccept.__file__).parent
TWO_LOAD_RUNS = """
import pytest

@pytest.mark.slo(ttft_p95=2.0, error_rate=0.5)
def test_two_loads(loadgen):
    loadgen.run(concurrency=2, requests=20, warmup=0)
    loadgen.run(rate=40, requests=20, warmup=0, workers=2)
"""

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
                                              (("tests", 0, "outcome"), "won"),
                                              (("exit_status",), "one"),
                                              (("other_failures",), "t.py::test_b failed")])
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


def _types(annotation: Any) -> Iterator[Any]:
    """The annotation and every type inside it (unions, containers, Annotated)."""
    yield annotation
    for arg in get_args(annotation):
        yield from _types(arg)


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """Every model class the document model reaches from `root`."""
    found: list[type[BaseModel]] = []
    todo = [root]
    while todo:
        model = todo.pop()
        if model in found:
            continue
        found.append(model)
        todo += [t for f in model.model_fields.values() for t in _types(f.annotation)
                 if isinstance(t, type) and issubclass(t, BaseModel)]
    return found


def test_every_open_part_of_the_model_says_why_it_is_left_open() -> None:
    def is_open(annotation: Any) -> bool:
        return any(get_origin(t) is dict and get_args(t)[1] is Any for t in _types(annotation))

    open_fields = {f"{model.__name__}.{name}": field.description or ""
                   for model in _models(RunDocument) for name, field in model.model_fields.items()
                   if is_open(field.annotation)}
    unexplained = sorted(name for name, description in open_fields.items() if "left open" not in description)
    assert not unexplained, f"type these in model.py, or say in their description why they are " \
                            f"left open: {unexplained}"
    assert sorted(open_fields) == ["Evidence.values", "LoadResult.server_metrics", "LoadSpec.extra_body",
                                   "LoadSpec.workload", "ServerUnderTest.version_info"]


def test_every_capacity_kind_the_producers_write_is_documented() -> None:
    from pytest_inferaccept.scenario_kinds import NAMES

    sources = sorted((PACKAGE / "capacity").rglob("*.py"))
    written = {kind for path in sources
               for kind in re.findall(r'conclude\(\s*kind="(\w+)"', path.read_text("utf-8"))}
    assert written, "no conclude(kind=\"...\") in pytest_inferaccept/capacity"
    assert written <= set(CAPACITY_KINDS), f"add to CAPACITY_KINDS: {sorted(written - set(CAPACITY_KINDS))}"
    assert CAPACITY_KINDS == NAMES  # the model describes the kinds from their one registry
    described = schema.json_schema()["$defs"]["CapacityScenario"]["properties"]["kind"]["description"]
    assert all(kind in described.split("of ", 1)[1].split(", ") for kind in CAPACITY_KINDS)


def test_the_schema_id_and_the_mask_are_each_written_once() -> None:
    holders = [path.relative_to(PACKAGE).as_posix() for path in sorted(PACKAGE.rglob("*.py"))
               if f'"{SCHEMA_ID}"' in path.read_text("utf-8")]
    assert holders == ["model.py"]
    assert get_args(Masked) == (MASK,)


def test_a_load_run_the_plugin_writes_is_typed_through_and_read_by_attribute(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_two_loads=TWO_LOAD_RUNS)
    with FakeServer() as server:
        result = pytester.runpytest_inprocess("--server-url", server.url, "--inferaccept-json", "r.json",
                                              "--slo-judge", "point", "--client-check", "warn",
                                              "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    document = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    _validator().validate(document)
    (test,) = load(document).tests
    first, second = test.load
    # every key the producers write has a typed field: what is left over is a key the model misses
    missed = {f"{type(part).__name__}: {sorted(part.model_extra)}" for part in _parts(first, second)
              if part.model_extra and not isinstance(part, LoadResult)}
    assert not missed, f"type these in model.py: {missed}"
    assert not first.model_extra and first.server_metrics is not None
    assert (first.label, second.label) == ("test_two_loads.py::test_two_loads",
                                           "test_two_loads.py::test_two_loads#2")
    assert first.slo_limits == {"ttft_p95": 2.0, "error_rate": 0.5}
    assert first.spec.concurrency == 2 and second.spec.rate == 40 and second.spec.workers == 2
    assert first.spec.api_key_set is False  # a flag under a secret-looking name: kept, not masked
    counts = first.summary.counts
    assert counts is not None and counts.measured == 20
    assert first.summary.latency("ttft") is not None and first.summary.latency("ttft_any_token") is not None
    assert second.selfcheck.total is not None and len(second.selfcheck.workers) == 2
    assert second.selfcheck.engine is not None and len(second.selfcheck.engine.per_worker) == 2
    # typed through as sentences (a loaded machine may make the client's own loop late)
    assert all(isinstance(reason, str) and reason for reason in first.selfcheck.client_bound)
    runs = load_runs(load(document))
    assert list(runs) == ["test_two_loads.py::test_two_loads [run 1]",
                          "test_two_loads.py::test_two_loads [test_two_loads.py::test_two_loads#2]"]
    assert {r.slo_limits["ttft_p95"] for r in runs.values()} == {2.0}
    assert all(r.figures["ttft_p95"].n == 20 for r in runs.values())
    headings, rows = load_table(test.load)
    assert headings[:3] == ("load", "requests", "failed")
    assert [row[:3] for row in rows] == [("concurrency 2, 20 requests, synthetic workload (input fixed(64), "
                                          "output fixed(32))", "20", "0"),
                                         ("40 requests/s, 20 requests, synthetic workload (input fixed(64), "
                                          "output fixed(32))", "20", "0")]


def _parts(*roots: BaseModel) -> Iterator[BaseModel]:
    """Every model object under the roots, the roots included."""
    for root in roots:
        yield root
        for name in type(root).model_fields:
            value = getattr(root, name)
            items = value.values() if isinstance(value, dict) else value if isinstance(value, list) \
                else [value]
            yield from _parts(*(v for v in items if isinstance(v, BaseModel)))
