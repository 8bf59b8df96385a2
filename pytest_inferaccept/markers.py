"""The `slo` and `capability` markers, parsed into frozen typed objects."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pytest_inferaccept.capabilities import CAPABILITIES

LATENCY_METRICS: tuple[str, ...] = ("ttft", "ttft_any", "itl", "tpot", "e2e")
"""ttft: to the first content token; ttft_any: to the first generated token of any kind
(content, reasoning or tool call: the MLPerf Endpoints definition) that carries a character other
than whitespace."""
PERCENTILES: tuple[str, ...] = ("50", "75", "90", "95", "99", "999")
_LATENCY_KEY = re.compile(r"^(ttft_any|ttft|itl|tpot|e2e)_(p(?:50|75|90|95|99|999)|mean|max)$")

RATE_KEYS: dict[str, str] = {
    "error_rate": "maximum fraction of failed requests, 0..1",
    "throughput_min": "minimum output tokens per second over the whole window",
    "request_rate_min": "minimum completed requests per second",
    "goodput_min": "minimum fraction of requests meeting every latency limit, 0..1",
}
COUNT_KEYS: dict[str, str] = {
    "min_samples": "fewest measured requests that may support a verdict (default: per percentile)",
}
GOODPUT_KEYS: dict[str, str] = {
    "goodput_ttft_ms": "ttft",
    "goodput_tpot_ms": "tpot",
    "goodput_e2el_ms": "e2e",
}
"""vLLM's goodput limits (`vllm bench serve --goodput ttft:500 tpot:50 e2el:2000`) under its names and
in its unit, milliseconds, each to the plugin metric it limits: a request is good when it succeeded
and every named value is at or under its limit. Given, they replace the limits goodput would
otherwise take from the latency keys; they need goodput_min to be judged."""

SLO_SIGNATURE = (
    "slo(*, ttft_p95=None, itl_p99=None, tpot_p95=None, e2e_p99=None, ..., error_rate=None, "
    "throughput_min=None, request_rate_min=None, goodput_min=None, goodput_ttft_ms=None, "
    "goodput_tpot_ms=None, goodput_e2el_ms=None, min_samples=None): "
    "SLO limits for the load this test runs. Latency keys are <metric>_<stat> with metric in "
    "ttft, ttft_any, itl, tpot, e2e and stat in p50, p75, p90, p95, p99, p999, mean, max (seconds); "
    "goodput_<ttft|tpot|e2el>_ms are vLLM's per-request goodput limits, in milliseconds."
)
CAPABILITY_SIGNATURE = (
    "capability(*names): the test needs these server capabilities ("
    + ", ".join(CAPABILITIES)
    + "). Required ones (--capabilities) must pass; others are probed once and the test is "
    "skipped as 'unsupported: ...' when the server lacks them."
)


class MarkerError(ValueError):
    """A marker used with arguments the plugin does not accept."""


def allowed_slo_keys() -> list[str]:
    """Every key the slo marker accepts."""
    latency = [f"{m}_p{p}" for m in LATENCY_METRICS for p in PERCENTILES]
    latency += [f"{m}_{s}" for m in LATENCY_METRICS for s in ("mean", "max")]
    return latency + list(RATE_KEYS) + list(GOODPUT_KEYS) + list(COUNT_KEYS)


@dataclass(frozen=True, kw_only=True)
class LatencyLimit:
    """One latency limit: a statistic of a metric must not exceed `limit` seconds."""

    metric: str
    stat: str
    limit: float

    @property
    def key(self) -> str:
        """The marker key this limit came from, e.g. ttft_p95."""
        return f"{self.metric}_{self.stat}"


@dataclass(frozen=True, kw_only=True)
class SloSpec:
    """Validated SLO limits from one `slo` marker."""

    latency: tuple[LatencyLimit, ...] = ()
    error_rate: float | None = None
    throughput_min: float | None = None
    request_rate_min: float | None = None
    goodput_min: float | None = None
    goodput_ttft_ms: float | None = None
    goodput_tpot_ms: float | None = None
    goodput_e2el_ms: float | None = None
    min_samples: int | None = None

    def goodput_limits(self) -> dict[str, float]:
        """The goodput_*_ms limits given, per plugin metric, in seconds (empty: none given)."""
        out: dict[str, float] = {}
        for key, metric in GOODPUT_KEYS.items():
            value = getattr(self, key)
            if value is not None:
                out[metric] = value / 1000.0
        return out

    def to_json(self) -> dict[str, float | int]:
        """Return the limits as a flat JSON-ready mapping of marker keys."""
        out: dict[str, float | int] = {lim.key: lim.limit for lim in self.latency}
        for key in (*RATE_KEYS, *GOODPUT_KEYS, *COUNT_KEYS):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def parse_slo(args: Sequence[object], kwargs: Mapping[str, object]) -> SloSpec:
    """Validate an slo marker's arguments; reject positional args and unknown keys."""
    if args:
        raise MarkerError("slo takes keyword arguments only, e.g. @pytest.mark.slo(ttft_p95=0.5)")
    if not kwargs:
        raise MarkerError("slo needs at least one limit, e.g. @pytest.mark.slo(ttft_p95=0.5)")
    unknown = sorted(k for k in kwargs if not _LATENCY_KEY.match(k) and k not in RATE_KEYS
                     and k not in COUNT_KEYS and k not in GOODPUT_KEYS)
    if unknown:
        raise MarkerError(
            f"slo got unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed_slo_keys())}"
        )
    latency: list[LatencyLimit] = []
    values: dict[str, float | int | None] = {}
    for key, raw in kwargs.items():
        if raw is None:
            continue
        if key == "min_samples":
            if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
                raise MarkerError(f"slo min_samples must be a positive integer, got {raw!r}")
            values[key] = raw
            continue
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
            raise MarkerError(f"slo {key} must be a finite number, got {raw!r}")
        value = float(raw)
        if value <= 0 and key != "error_rate":
            raise MarkerError(f"slo {key} must be > 0, got {raw!r}")
        if key in ("error_rate", "goodput_min") and not 0 <= value <= 1:
            raise MarkerError(f"slo {key} is a fraction in 0..1, got {raw!r}")
        match = _LATENCY_KEY.match(key)
        if match:
            latency.append(LatencyLimit(metric=match.group(1), stat=match.group(2), limit=value))
        else:
            values[key] = value
    goodput_given = [key for key in GOODPUT_KEYS if values.get(key) is not None]
    if goodput_given and values.get("goodput_min") is None:
        raise MarkerError(
            f"slo {', '.join(goodput_given)} say(s) which requests count as good, but nothing judges "
            "them: add goodput_min, the least fraction of measured requests that must be good "
            "(e.g. goodput_min=0.9)")
    return SloSpec(
        latency=tuple(latency),
        error_rate=_as_float(values.get("error_rate")),
        throughput_min=_as_float(values.get("throughput_min")),
        request_rate_min=_as_float(values.get("request_rate_min")),
        goodput_min=_as_float(values.get("goodput_min")),
        goodput_ttft_ms=_as_float(values.get("goodput_ttft_ms")),
        goodput_tpot_ms=_as_float(values.get("goodput_tpot_ms")),
        goodput_e2el_ms=_as_float(values.get("goodput_e2el_ms")),
        min_samples=_as_int(values.get("min_samples")),
    )


def _as_float(value: float | int | None) -> float | None:
    return None if value is None else float(value)


def _as_int(value: float | int | None) -> int | None:
    return None if value is None else int(value)


S = TypeVar("S")


@dataclass(frozen=True, kw_only=True)
class SloInForce(Generic[S]):
    """The SLO a test is judged against and whether its own @slo marker gave it."""

    slo: S | None
    """The limits in force; None: no marker and no session SLO (the load is measured, not judged)."""
    from_marker: bool


def slo_in_force(marker: S | None, session: S | None) -> SloInForce[S]:
    """Which SLO judges a test, decided here only: its @slo marker, else the session's (--slo, --slo-profile).

    Generic so the judge (SloSpec objects) and the report (the limits a results document keeps)
    ask the same rule. A marker counts when it is there, even one whose every value is None: the
    load is then judged against no limit, and the report must say so rather than name the session's.
    """
    if marker is not None:
        return SloInForce(slo=marker, from_marker=True)
    return SloInForce(slo=session, from_marker=False)


@dataclass(frozen=True, kw_only=True)
class CapabilitySpec:
    """The capabilities a test needs, from every `capability` marker on it."""

    names: tuple[str, ...]


def parse_capabilities(marks: Sequence[tuple[Sequence[object], Mapping[str, object]]]) -> CapabilitySpec:
    """Merge the (args, kwargs) of every capability marker; reject unknown names and keywords."""
    names: list[str] = []
    for args, kwargs in marks:
        if kwargs:
            raise MarkerError(
                f"capability takes capability names only, got keyword(s) {', '.join(kwargs)}"
            )
        if not args:
            raise MarkerError("capability needs at least one name, e.g. capability('tools')")
        for arg in args:
            if not isinstance(arg, str) or arg not in CAPABILITIES:
                raise MarkerError(
                    f"capability {arg!r} is unknown; allowed: {', '.join(CAPABILITIES)}"
                )
            names.append(arg)
    return CapabilitySpec(names=tuple(dict.fromkeys(names)))
