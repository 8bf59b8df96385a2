"""How SLO keys and values read on the page: units, direction of the limit, status classes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pytest_inferaccept.model import LoadResult, LoadSpec

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
    if isinstance(value, int):
        return str(value)
    # Past four digits, '.4g' turns to exponents (1.235e+05 tokens/s): whole numbers read better.
    return f"{value:.0f}" if abs(value) >= 10_000 else f"{value:.4g}"


def spec_label(spec: LoadSpec | Mapping[str, Any], *, workload: bool = True) -> str:
    """What a load run asked for, in words: 'concurrency 8, 200 requests' (and its workload, unless
    `workload` is false: a table whose runs share one names it once, above them)."""
    ask = spec if isinstance(spec, LoadSpec) else LoadSpec.model_validate(spec)
    parts: list[str] = []
    if ask.concurrency is not None:
        parts.append(f"concurrency {ask.concurrency}")
    if ask.rate is not None:
        parts.append(f"{fmt_number(ask.rate)} requests/s")
    if ask.requests is not None and ask.duration is not None:
        # Both given: the run ends at whichever comes first, so the time is a limit, not a length.
        parts.append(f"{ask.requests} requests (at most {fmt_number(ask.duration)} s)")
    elif ask.requests is not None:
        parts.append(f"{ask.requests} requests")
    elif ask.duration is not None:
        parts.append(f"{fmt_number(ask.duration)} s")
    said = workload_label(ask) if workload else ""
    if said:
        parts.append(said)
    return ", ".join(parts) if parts else "one load run"


def workload_label(spec: LoadSpec) -> str:
    """The workload a run sent, in words: 'synthetic workload (input fixed(64), output fixed(32))'."""
    workload = spec.workload
    if workload is None:
        return ""
    # The load engine describes a workload as a mapping: name its kind and its lengths.
    kind = workload.get("type") or workload.get("path") or workload.get("name") or "custom"
    lengths = ", ".join(f"{key} {workload[key]}" for key in ("input", "output") if workload.get(key))
    return f"{kind} workload" + (f" ({lengths})" if lengths else "")


def cut_short(run: LoadResult) -> str:
    """Why a run measured fewer requests than it asked for, as a sentence; empty when it ran as asked.

    'Only 25 of the 100 requests asked were measured: the run's 120 s limit ended it first.'
    A run asked for a duration alone ran as asked when that duration ended it.
    """
    asked, measured = run.spec.requests, run.summary.counts.measured if run.summary.counts else None
    if asked is None or measured is None or measured >= asked:
        return ""
    head = f"Only {measured} of the {asked} requests asked were measured"
    stop = run.stopped_by
    if stop == "duration" and run.spec.duration is not None:
        return f"{head}: the run's {fmt_number(run.spec.duration)} s limit ended it first."
    if stop == "max_seconds" and run.spec.max_seconds is not None:
        return (f"{head}: the {fmt_number(run.spec.max_seconds)} s safety limit on the whole run "
                "(max_seconds) ended it first.")
    if stop == "interrupted":
        return f"{head}: the run was interrupted."
    # Ended by its request count: the few it did not measure were the client's own (told elsewhere).
    return "" if stop in (None, "requests") else f"{head} (the run ended by {stop})."
