"""The open-loop rate sweep: Poisson arrivals at each rate, up to the breaker.

The highest rate that meets the SLOs, the knee, and the send rate achieved against the one asked
(see climb.py and docs/capacity.md). Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capacity.analysis import knee_caveat
from pytest_inferaccept.capacity.climb import climb
from pytest_inferaccept.capacity.scenarios import CapacityResult, Measure, Say, quiet
from pytest_inferaccept.model import CapacityKnee, CapacityParams, CapacityStep

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.run.load import LoadResult


def sweep(
    measure: Measure,
    sampler: Sampler,
    *,
    rates: Sequence[float],
    requests: int,
    duration: float,
    slo: SloSpec | None,
    breaker_errors: float,
    breaker_latency_s: float,
    min_rate: float | None = None,
    label: str,
    workload: Any = None,
    seed: int = 0,
    knee: CapacityKnee | Mapping[str, Any] | None = None,
    say: Say = quiet,
) -> CapacityResult:
    """Open loop (Poisson arrivals) at each rate, each step bounded by `requests` and `duration`.

    `knee` is the ladder's knee (its `findings.knee`) when the rates were chosen around it: an
    unconfirmed one is said in the notes and the headline, since the rates inherit its doubt.
    """

    def step(rate: float) -> LoadResult:
        return measure(
            f"rate={rate:g}",
            rate=rate,
            requests=max(requests, 1),
            duration=duration,
            warmup=2,
            workload=workload,
            seed=seed,
        )

    def achieved(row: CapacityStep) -> None:
        asked, got = row.asked_rate, row.achieved_rate
        row.achieved_fraction = got / asked if asked and got is not None else None

    params = CapacityParams(rates=list(rates), requests_per_step=requests, max_seconds_per_step=duration,
                            breaker_error_rate=breaker_errors, breaker_latency_s=breaker_latency_s,
                            min_rate=min_rate)
    caveat = knee_caveat(knee)
    if caveat:
        params.basis_caveat = caveat
    return climb(kind="sweep", label=label, levels=rates, run_step=step, sampler=sampler, slo=slo,
                 breaker_errors=breaker_errors, breaker_latency_s=breaker_latency_s, min_level=min_rate,
                 params=params, say=say, each_row=achieved, caveat=caveat)
