"""One load run's result: the engine's run, its statistics and how the SLO judged it.

It sits below both the `loadgen` fixture's object that makes it and the capacity scenarios that
read it, so neither imports the other for it. No pytest here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.markers import SloSpec

if TYPE_CHECKING:
    from pytest_inferaccept import model
    from pytest_inferaccept.load import LoadRun
    from pytest_inferaccept.stats import LoadSummary, SloEvaluation


@dataclass(kw_only=True)
class LoadResult:
    """One `loadgen.run`: the engine's run, its statistics, and how the SLO judged it."""

    label: str
    run: LoadRun
    summary: LoadSummary
    slo: SloSpec | None
    evaluation: SloEvaluation | None
    """None when no SLO applies: the run was measured and recorded, not judged."""
    client_bound: list[str] = field(default_factory=list)
    """Why the client, not the server, limited the run (empty: the measurement is trustworthy)."""
    client_check: str = "strict"
    """How the run treats a client-bound measurement (--client-check): strict or warn."""
    correctness: model.UnderLoadCorrectness | None = None
    """Known-answer items graded alone, inside this run and after it (None: not graded)."""

    @property
    def records(self) -> list[Any]:
        """Every request's record (warm-up included, flagged)."""
        return self.run.records

    def stat(self, metric: str, stat: str = "p95", *, successful: bool = False) -> float | None:
        """A latency statistic in seconds, e.g. stat("ttft", "p95"); None when not measured.

        Failed requests count as slower than any limit, so the figure is infinite when it falls
        on them; `successful=True` gives the descriptive figure over successful requests only.
        """
        figures = self.summary.metrics_successful if successful else self.summary.metrics
        summary = figures.get(metric)
        est = summary.stat(stat) if summary is not None else None
        return None if est is None else est.value

    @cached_property
    def consistency(self) -> model.LoadConsistency:
        """Per-request consistency of the measured answers (one finish_reason, usage that agrees)."""
        from pytest_inferaccept.load.consistency import check_consistency, load_words

        return check_consistency(self.run.records, load=load_words(self.run.spec))

    @property
    def error_rate(self) -> float | None:
        """Failed fraction of the measured requests."""
        return None if self.summary.error_rate is None else self.summary.error_rate.value

    @property
    def throughput(self) -> float | None:
        """Output tokens per second over the measured window."""
        return self.summary.throughput_tokens_per_s

    def entry(self) -> model.LoadResult:
        """The test's `load` entry in the results document, in the run model."""
        from pytest_inferaccept import model
        from pytest_inferaccept.stats.slo import judgement_view
        from pytest_inferaccept.stats.summary import document_view

        summary = document_view(self.summary)
        summary.consistency = self.consistency
        # The engine's own parts (spec, selfcheck, server metrics) are plain JSON it wrote; the
        # model reads them as they are.
        return model.LoadResult.model_validate({
            "label": self.label,
            "spec": self.run.spec,
            "stopped_by": self.run.stopped_by,
            "summary": summary,
            "slo": None if self.evaluation is None else judgement_view(self.evaluation),
            "slo_limits": self.slo.to_json() if self.slo is not None else None,
            "selfcheck": {**self.run.selfcheck, "client_bound": list(self.client_bound),
                          "client_check": self.client_check},
            "server_metrics": self.run.server_metrics,
            **({"correctness": self.correctness} if self.correctness is not None else {}),
        })
