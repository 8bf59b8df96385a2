"""The figures of a run the gate compares: per load run, latencies with intervals, rates, errors."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_inferaccept.expectations import check_id
from pytest_inferaccept.gate_settings import LATENCIES, STATS
from pytest_inferaccept.model import Estimate, LoadResult, LoadSelfcheck, RunBody


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One measured figure: the point estimate and its confidence interval (None: no interval)."""

    value: float
    low: float | None = None
    high: float | None = None
    n: int | None = None

    def show(self, unit: str) -> str:
        """The value with its interval, e.g. '0.052 s [0.050, 0.055]'."""
        text = _fmt(self.value, unit)
        if self.low is not None and self.high is not None:
            text += f" [{_num(self.low)}, {_num(self.high)}]"
        return text


def _num(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"


def _fmt(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value * 100:.2f}%"
    return f"{_num(value)} {unit}".rstrip()


UNITS: dict[str, str] = {"throughput": "tok/s", "request_rate": "req/s", "error_rate": "%", "goodput": "%"}
"""Unit per figure that is not a latency in seconds."""

HIGHER_IS_BETTER = frozenset({"throughput", "request_rate", "goodput"})


def unit_of(key: str) -> str:
    """The unit a figure is shown in."""
    return UNITS.get(key, "s")


@dataclass(frozen=True, kw_only=True)
class LoadFigures:
    """The figures of one load run, and what it was asked to do (two runs compare only on equal asks)."""

    where: str
    """check id and the run's label, e.g. 'test_load.py::test_x [concurrency=4]'."""
    spec: dict[str, Any]
    client_bound: bool
    slo_limits: dict[str, Any]
    figures: dict[str, Figure]


def _estimate(given: Estimate | Mapping[str, Any] | None) -> Figure | None:
    """The figure of an estimate (typed, or as the document writes it); None when it has no value."""
    if given is None:
        return None
    est = given if isinstance(given, Estimate) else Estimate.model_validate(given)
    low = None if est.low is None else float(est.low)
    if est.censored:
        # the figure falls on failed requests (slower than any limit): infinite, never dropped, so
        # a baseline comparison sees the regression instead of losing the figure
        return Figure(value=math.inf, low=math.inf if low is None else low, high=math.inf, n=est.n)
    if est.value is None:
        return None
    high = None if est.high is None else float(est.high)
    return Figure(value=float(est.value), low=low, high=high, n=est.n)


def figures_of(load: LoadResult) -> dict[str, Figure]:
    """Every comparable figure of one load run."""
    summary = load.summary
    out: dict[str, Figure] = {}
    for metric in LATENCIES:
        latency = summary.latency(metric)
        for stat in STATS:
            est = _estimate(latency.stat(stat) if latency is not None else None)
            if est is not None:
                out[f"{metric}_{stat}"] = est
    for key, value in (("throughput", summary.throughput_tokens_per_s),
                       ("request_rate", summary.request_rate_per_s)):
        if value is not None:
            out[key] = Figure(value=float(value))
    err = _estimate(summary.error_rate)
    if err is not None:
        out["error_rate"] = err
    good = _estimate(summary.goodput.fraction if summary.goodput is not None else None)
    if good is not None:
        out["goodput"] = good
    return out


def load_runs(document: RunBody) -> dict[str, LoadFigures]:
    """Every load run of a document, keyed by where it ran (test and label, or position)."""
    out: dict[str, LoadFigures] = {}
    for test in document.tests:
        for index, load in enumerate(test.load):
            label = load.label
            where = check_id(test.nodeid)
            if len(test.load) > 1:
                shown = label if label and label != test.nodeid else f"run {index + 1}"
                where += f" [{shown}]"
            # the ask as the document wrote it: two runs compare only where every key agrees
            out[where] = LoadFigures(where=where, spec=load.spec.model_dump(exclude_unset=True),
                                     client_bound=_client_bound(load.selfcheck),
                                     slo_limits=dict(load.slo_limits or {}),
                                     figures=figures_of(load))
    return out


def _client_bound(selfcheck: LoadSelfcheck) -> bool:
    """True when the client limited the run and the team did not accept that (--client-check warn)."""
    return bool(selfcheck.client_bound) and selfcheck.client_check != "warn"
