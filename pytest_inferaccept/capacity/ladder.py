"""The concurrency ladder: a closed loop at each concurrency, up to the breaker.

Its knee, the highest concurrency that meets the SLOs and why things changed (see climb.py and
docs/capacity.md). Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capacity.climb import climb
from pytest_inferaccept.capacity.scenarios import CapacityResult, Measure, Say, quiet
from pytest_inferaccept.model import CapacityParams

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.run.load import LoadResult


def ladder(
    measure: Measure,
    sampler: Sampler,
    *,
    levels: Sequence[int],
    requests: int,
    duration: float,
    settle: int,
    slo: SloSpec | None,
    breaker_errors: float,
    breaker_latency_s: float,
    min_level: int | None = None,
    label: str,
    workload: Any = None,
    say: Say = quiet,
) -> CapacityResult:
    """Closed loop at each concurrency: `settle` rounds of warm-up per slot, then a measured window."""

    def step(c: float) -> LoadResult:
        n = int(c)
        return measure(
            f"c={n}",
            concurrency=n,
            requests=max(requests, 2 * n),
            duration=duration,
            warmup=n * settle,
            workload=workload,
        )

    params = CapacityParams(levels=list(levels), requests_per_level=requests, max_seconds_per_level=duration,
                            settle_rounds=settle, breaker_error_rate=breaker_errors,
                            breaker_latency_s=breaker_latency_s, min_level=min_level)
    return climb(kind="ladder", label=label, levels=levels, run_step=step, sampler=sampler, slo=slo,
                 breaker_errors=breaker_errors, breaker_latency_s=breaker_latency_s, min_level=min_level,
                 params=params, say=say)
