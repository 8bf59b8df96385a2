"""Statistics and SLO verdicts over load-run records: pure functions, no I/O (docs/statistics.md)."""

from __future__ import annotations

from pytest_inferaccept.stats.clustered import (
    SKEW_MEAN_MIN_SAMPLES,
    clustered_mean_estimate,
    clustered_min_answers,
    clustered_quantile_estimate,
    skew_mean_estimate,
)
from pytest_inferaccept.stats.percentiles import (
    PERCENTILE_LEVELS,
    Estimate,
    mean_estimate,
    min_sample_size,
    order_statistic_ranks,
    proportion_estimate,
    quantile,
    quantile_estimate,
)
from pytest_inferaccept.stats.selfcheck import (
    ClientLoad,
    Lag,
    SelfCheck,
    Thresholds,
    bottleneck_reasons,
    steady_concurrency,
)
from pytest_inferaccept.stats.slo import RunsEvaluation, SloEvaluation, SloRow, evaluate, evaluate_runs
from pytest_inferaccept.stats.summary import METRICS, LoadSummary, MetricSummary, summarize

__all__ = [
    "METRICS",
    "PERCENTILE_LEVELS",
    "SKEW_MEAN_MIN_SAMPLES",
    "ClientLoad",
    "Estimate",
    "Lag",
    "LoadSummary",
    "MetricSummary",
    "RunsEvaluation",
    "SelfCheck",
    "SloEvaluation",
    "SloRow",
    "Thresholds",
    "bottleneck_reasons",
    "clustered_mean_estimate",
    "clustered_min_answers",
    "clustered_quantile_estimate",
    "evaluate",
    "evaluate_runs",
    "mean_estimate",
    "min_sample_size",
    "order_statistic_ranks",
    "proportion_estimate",
    "quantile",
    "quantile_estimate",
    "skew_mean_estimate",
    "steady_concurrency",
    "summarize",
]
