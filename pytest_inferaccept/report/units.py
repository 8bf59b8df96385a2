"""How SLO keys and values read on the page: units, direction of the limit, status classes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pytest_inferaccept.model import LoadSpec

_LATENCY = re.compile(r"^(ttft|itl|tpot|e2e)_")
_FRACTIONS = ("error_rate", "goodput_min")
_STATUS_CLASSES: dict[str, tuple[str, ...]] = {
    "pass": ("pass", "passed", "met", "ok", "go"),
    "fail": ("fail", "failed", "missed", "no-go"),
    "nodata": ("not enough data", "not_enough_data", "insufficient", "inconclusive", "invalid"),
}


def is_minimum(key: str) -> bool:
    """True for a limit the measured value must reach (a minimum), not stay under."""
    return key.endswith("_min")


def fmt_value(key: str, value: Any, *, signed: bool = False) -> str:
    """A measured value or limit of an SLO key, in the unit that key is measured in."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if value == float("inf"):
        return "∞ (failed requests)"  # a figure that falls on failures: slower than any limit
    sign = "+" if signed and value > 0 else ""
    if _LATENCY.match(key):
        if abs(value) >= 1:
            return f"{sign}{value:.3g} s"
        return f"{sign}{value * 1000:.3g} ms"
    if key in _FRACTIONS:
        return f"{sign}{value * 100:.3g} %"
    if key == "throughput_min":
        return f"{sign}{value:.4g} tokens/s"
    if key == "request_rate_min":
        return f"{sign}{value:.4g} req/s"
    if isinstance(value, int):
        return f"{sign}{value}"
    return f"{sign}{value:.4g}"


def fmt_margin(margin: float | None) -> str:
    """Headroom as a share of the limit: '+22 %' (good side) or '-360 %' (wrong side)."""
    return "—" if margin is None else f"{margin * 100:+.0f} %"


def status_words(status: str | None) -> str:
    """A status as words: not_enough_data reads 'not enough data'."""
    return (status or "").replace("_", " ")


def fmt_limit(key: str, limit: Any) -> str:
    """The limit with its direction: '≤ 500 ms' or '≥ 20 tokens/s'."""
    return f"{'≥' if is_minimum(key) else '≤'} {fmt_value(key, limit)}"


def status_class(status: str | None) -> str:
    """pass, fail, nodata or other, for a status word from the load engine."""
    word = (status or "").strip().lower()
    for css, words in _STATUS_CLASSES.items():
        if word in words:
            return css
    return "other"


def fmt_number(value: Any) -> str:
    """A plain number for summary tables (4 significant digits), or the value as text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return str(value) if isinstance(value, int) else f"{value:.4g}"


def spec_label(spec: LoadSpec | Mapping[str, Any]) -> str:
    """What a load run asked for, in words: 'concurrency 8, 200 requests'."""
    ask = spec if isinstance(spec, LoadSpec) else LoadSpec.model_validate(spec)
    parts: list[str] = []
    if ask.concurrency is not None:
        parts.append(f"concurrency {ask.concurrency}")
    if ask.rate is not None:
        parts.append(f"{fmt_number(ask.rate)} requests/s")
    if ask.requests is not None:
        parts.append(f"{ask.requests} requests")
    if ask.duration is not None:
        parts.append(f"{fmt_number(ask.duration)} s")
    workload = ask.workload
    if workload is not None:
        # The load engine describes a workload as a mapping: name its kind and its lengths.
        kind = workload.get("type") or workload.get("path") or workload.get("name") or "custom"
        lengths = ", ".join(f"{key} {workload[key]}" for key in ("input", "output") if workload.get(key))
        parts.append(f"{kind} workload" + (f" ({lengths})" if lengths else ""))
    return ", ".join(parts) if parts else "one load run"
