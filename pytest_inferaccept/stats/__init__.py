"""Statistics and SLO verdicts over load-run records: pure functions, no I/O (docs/statistics.md).

The names below load with their module on first use, so importing one module of this package
(the settings read `stats.projection`) does not import them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_inferaccept._lazy import lazy_names

_EXPORTS: dict[str, str] = {
    "ClientLoad": "pytest_inferaccept.stats.selfcheck",
    "Estimate": "pytest_inferaccept.stats.percentiles",
    "Lag": "pytest_inferaccept.stats.selfcheck",
    "LoadSummary": "pytest_inferaccept.stats.summary",
    "METRICS": "pytest_inferaccept.stats.summary",
    "MetricSummary": "pytest_inferaccept.stats.summary",
    "PERCENTILE_LEVELS": "pytest_inferaccept.stats.percentiles",
    "RunsEvaluation": "pytest_inferaccept.stats.slo",
    "SKEW_MEAN_MIN_SAMPLES": "pytest_inferaccept.stats.clustered",
    "SelfCheck": "pytest_inferaccept.stats.selfcheck",
    "SloEvaluation": "pytest_inferaccept.stats.slo",
    "SloRow": "pytest_inferaccept.stats.slo",
    "Thresholds": "pytest_inferaccept.stats.selfcheck",
    "bottleneck_reasons": "pytest_inferaccept.stats.selfcheck",
    "clustered_mean_estimate": "pytest_inferaccept.stats.clustered",
    "clustered_min_answers": "pytest_inferaccept.stats.clustered",
    "clustered_quantile_estimate": "pytest_inferaccept.stats.clustered",
    "evaluate": "pytest_inferaccept.stats.slo",
    "evaluate_runs": "pytest_inferaccept.stats.slo",
    "mean_estimate": "pytest_inferaccept.stats.percentiles",
    "min_sample_size": "pytest_inferaccept.stats.percentiles",
    "order_statistic_ranks": "pytest_inferaccept.stats.percentiles",
    "proportion_estimate": "pytest_inferaccept.stats.percentiles",
    "quantile": "pytest_inferaccept.stats.percentiles",
    "quantile_estimate": "pytest_inferaccept.stats.percentiles",
    "skew_mean_estimate": "pytest_inferaccept.stats.clustered",
    "steady_concurrency": "pytest_inferaccept.stats.selfcheck",
    "summarize": "pytest_inferaccept.stats.summary",
}


__getattr__ = lazy_names(__name__, _EXPORTS, globals())


if TYPE_CHECKING:
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
