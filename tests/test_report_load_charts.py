"""A test's load runs drawn against the level they asked for: latency, and throughput from the
summary's typed figure (the report reads the model's fields, never keys it does not know)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pytest_inferaccept.model import load
from pytest_inferaccept.report import charts
from tests.test_report_schema import _minimal

pytest.importorskip("matplotlib")


def _document(throughputs: list[float | None]) -> dict[str, Any]:
    document = copy.deepcopy(_minimal())
    document["tests"][0]["load"] = [
        {"label": "t", "spec": {"concurrency": level, "kind": "chat"},
         "summary": {} if tokens is None else {"throughput_tokens_per_s": tokens}}
        for level, tokens in zip((1, 2, 4), throughputs, strict=False)]
    return document


def _captions(document: dict[str, Any]) -> list[str]:
    return [caption for caption, _ in charts.load_charts(load(document))]


def test_throughput_is_drawn_against_concurrency_from_the_typed_figure() -> None:
    document = _document([41.5, 80.0, 150.25])
    drawn = dict(charts.load_charts(load(document)))
    svg = drawn["Throughput against concurrency: test_a"]
    assert svg.startswith("<svg") and "output tokens/s" in svg


def test_no_throughput_chart_when_a_run_has_no_throughput() -> None:
    assert not any(c.startswith("Throughput") for c in _captions(_document([41.5, None, 150.25])))
