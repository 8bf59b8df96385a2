"""Options of the capacity scenarios (--capacity, --ladder, --soak-duration, ...), resolved once.

Plain data beside `settings`, which resolves it; the capacity room above reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from pytest_inferaccept.stats.projection import (
    DEFAULT_HORIZON_S,
    Horizon,
    ProjectionInputError,
    parse_bytes,
    parse_horizon,
)

DEFAULT_LADDER = (1, 2, 4, 8, 16, 32)
DEFAULT_STEP_DURATION = 120.0
"""A step's time bound unless --capacity-step-duration is given: the request count sizes a step (from
the SLO, or --capacity-step-requests), and this only ends one the server cannot finish. At 120 s a
level judged against error_rate=0.01 or a p99 (368 requests at least) needs 3.1 requests/s; at
30 s it would need 12.3, more than many servers answer at c=1."""


class CapacitySettingsError(ValueError):
    """A capacity option that cannot be used; the message names the option."""


@dataclass(frozen=True, kw_only=True)
class CapacitySettings:
    """How the capacity scenarios run; each step is bounded in requests and seconds."""

    enabled: bool = False
    """Run the bundled capacity suite (--capacity); a team's own loadgen.ladder(...) always runs."""
    ladder: tuple[int, ...] = DEFAULT_LADDER
    step_requests: int = 80
    """Measured requests per ladder level or sweep step (at least 2 per slot)."""
    step_requests_given: bool = False
    """True when the team set --capacity-step-requests; otherwise a step is sized from the SLO."""
    step_duration: float = DEFAULT_STEP_DURATION
    """The most seconds one level or step may take (it ends at whichever bound comes first)."""
    settle: int = 1
    """Warm-up rounds per level: each slot's first `settle` requests are run and excluded."""
    min_concurrency: int | None = None
    """The least concurrency that must meet the SLOs (--capacity-min); None: any level is a result."""
    breaker_error_rate: float = 0.10
    breaker_latency: float = 30.0
    """Stop climbing once latency p95 (end-to-end) exceeds this many seconds."""
    sweep_rates: tuple[float, ...] | None = None
    """Open-loop rates; None: derived from the ladder's knee when it ran, else 1, 2, 4, 8."""
    soak_duration: float = 0.0
    """Seconds of soak; 0: the soak does not run (it is long by nature)."""
    soak_fraction: float = 0.75
    soak_concurrency: int | None = None
    drift_tolerance: float = 1.0
    """Without an SLO on a latency, its projected growth within the horizon beyond this share of its
    start is a finding (1.0: it would double)."""
    memory_tolerance: float = 1.0
    """Without a known memory budget, projected growth within the horizon beyond this share of the
    memory at the start is a finding (1.0: it would double)."""
    soak_horizon: Horizon = field(default_factory=lambda: Horizon(seconds=DEFAULT_HORIZON_S))
    """How far the soak's drifts are projected: a duration of traffic at the soak's rate, or a count."""
    memory_limit: float | None = None
    """The memory the server has, in bytes (--memory-limit); None: its cgroup's or host's when launched."""
    push_max: int = 256
    context_window: int | None = None
    gpu_telemetry: str | None = None
    rollback_cmd: str | None = None
    """The baseline's command for the rollback drill (--rollback-cmd); None: the drill skips."""
    rollback_within: float = 600.0
    """How long the way back to service may take, in seconds (--rollback-within)."""

    def describe(self) -> dict[str, object]:
        """JSON-ready form."""
        out = asdict(self)
        out["ladder"] = list(self.ladder)
        out["sweep_rates"] = list(self.sweep_rates) if self.sweep_rates else None
        return out


def _number_list(option: str, raw: str, cast: Callable[[str], float]) -> tuple[float, ...]:
    try:
        values = tuple(cast(x.strip()) for x in raw.split(",") if x.strip())
    except ValueError:
        raise CapacitySettingsError(f"{option} {raw!r}: expected a comma-separated list of numbers") from None
    if not values or any(v <= 0 for v in values):
        raise CapacitySettingsError(f"{option} {raw!r}: expected positive numbers")
    if list(values) != sorted(set(values)):
        raise CapacitySettingsError(f"{option} {raw!r}: expected increasing values, each once")
    return values


def _num(
    option: str,
    raw: str | None,
    default: float,
    *,
    integer: bool = False,
    zero: bool = False,
    most: float | None = None,
) -> float:
    if raw is None or raw == "":
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise CapacitySettingsError(
            f"{option} {raw!r}: expected a {'whole ' if integer else ''}number"
        ) from None
    if value < 0 or (value == 0 and not zero) or (most is not None and value > most):
        bound = f" at most {most:g}" if most is not None else ""
        raise CapacitySettingsError(
            f"{option} {raw!r}: expected a {'non-negative' if zero else 'positive'} number{bound}"
        )
    return value


def _parsed(option: str, raw: str | None, parse: Callable[[str], object]) -> object:
    if raw is None or raw == "":
        return None
    try:
        return parse(raw)
    except ProjectionInputError as exc:
        raise CapacitySettingsError(f"{option} {exc}") from None


def resolve_capacity(lookup: Callable[[str], str | None], enabled: bool) -> CapacitySettings:
    """CapacitySettings from raw option values (CLI, else ini, else None)."""
    ladder_raw = lookup("ladder")
    rates_raw = lookup("sweep_rates")
    min_raw = lookup("capacity_min")
    soak_c = lookup("soak_concurrency")
    window = lookup("context_window")
    horizon = _parsed("--soak-horizon", lookup("soak_horizon"), parse_horizon)
    limit = _parsed("--memory-limit", lookup("memory_limit"), parse_bytes)
    return CapacitySettings(
        enabled=enabled,
        ladder=tuple(int(v) for v in _number_list("--ladder", ladder_raw, int))
        if ladder_raw
        else DEFAULT_LADDER,
        step_requests=int(_num("--capacity-step-requests", lookup("step_requests"), 80, integer=True)),
        step_requests_given=lookup("step_requests") is not None,
        step_duration=_num("--capacity-step-duration", lookup("step_duration"), DEFAULT_STEP_DURATION),
        settle=int(_num("--ladder-settle", lookup("settle"), 1, integer=True, zero=True)),
        min_concurrency=int(_num("--capacity-min", min_raw, 1, integer=True)) if min_raw else None,
        breaker_error_rate=_num("--breaker-error-rate", lookup("breaker_error_rate"), 0.10, most=1.0),
        breaker_latency=_num("--breaker-latency", lookup("breaker_latency"), 30.0),
        sweep_rates=_number_list("--sweep-rates", rates_raw, float) if rates_raw else None,
        soak_duration=_num("--soak-duration", lookup("soak_duration"), 0.0, zero=True),
        soak_fraction=_num("--soak-fraction", lookup("soak_fraction"), 0.75, most=1.0),
        soak_concurrency=int(_num("--soak-concurrency", soak_c, 1, integer=True)) if soak_c else None,
        drift_tolerance=_num("--drift-tolerance", lookup("drift_tolerance"), 1.0),
        memory_tolerance=_num("--memory-tolerance", lookup("memory_tolerance"), 1.0),
        soak_horizon=horizon if isinstance(horizon, Horizon) else Horizon(seconds=DEFAULT_HORIZON_S),
        memory_limit=limit if isinstance(limit, float) else None,
        push_max=int(_num("--push-max", lookup("push_max"), 256, integer=True)),
        context_window=int(_num("--context-window", window, 1, integer=True)) if window else None,
        gpu_telemetry=lookup("gpu_telemetry") or None,
        rollback_cmd=lookup("rollback_cmd") or None,
        rollback_within=_num("--rollback-within", lookup("rollback_within"), 600.0),
    )
