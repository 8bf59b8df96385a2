"""A test's load runs as one table: a row per run, the columns a reader compares across levels.

The columns follow the load engine's summary and self-check (docs/statistics.md); a value that
a run did not measure prints as a dash, and a column no run has is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_inferaccept.report.model import LoadResult
from pytest_inferaccept.report.units import fmt_number, fmt_value, spec_label

Getter = Callable[[LoadResult], Any]


def dig(data: Any, *path: str) -> Any:
    """data[path[0]][path[1]]..., or None where any step is missing."""
    for step in path:
        if not isinstance(data, dict):
            return None
        data = data.get(step)
    return data


def _estimate(data: Any) -> Any:
    """An estimate's point value ({"value", "low", "high", "n"}), or the value itself."""
    return data.get("value") if isinstance(data, dict) else data


def _latency(metric: str, stat: str) -> Getter:
    def get(run: LoadResult) -> Any:
        est = dig(run.summary, "metrics", metric, stat)
        if isinstance(est, dict) and est.get("censored"):
            return CENSORED  # the percentile falls on failed requests: slower than any limit
        return _estimate(est)

    return get


CENSORED = "∞ (failed)"
"""How a latency figure that falls on failed requests prints."""


def _total(key: str) -> Getter:
    return lambda run: dig(run.selfcheck, "total", key)


def _lengths(key: str) -> Getter:
    """A token-length spread as 'p50 / p90 / p99' (the workload's realised length distribution)."""

    def get(run: LoadResult) -> str | None:
        spread = dig(run.summary, key)
        if not isinstance(spread, dict) or spread.get("p50") is None:
            return None
        return " / ".join(fmt_number(spread.get(p)) for p in ("p50", "p90", "p99"))

    return get


def _achieved(run: LoadResult) -> str | None:
    total = dig(run.selfcheck, "total") or {}
    for what in ("concurrency", "rate"):
        asked, got = total.get(f"asked_{what}"), total.get(f"achieved_{what}")
        if isinstance(asked, (int, float)) and isinstance(got, (int, float)):
            return f"{fmt_number(got)} of {fmt_number(asked)}"
    return None


@dataclass(frozen=True)
class Column:
    """One column: its heading, where its value is, and how it prints."""

    title: str
    get: Getter
    unit_key: str = ""

    def cell(self, run: LoadResult) -> str:
        """The printed value for one run."""
        value = self.get(run)
        if value is None:
            return "—"
        if value == CENSORED:
            return CENSORED
        return fmt_value(self.unit_key, value) if self.unit_key else fmt_number(value)


COLUMNS: tuple[Column, ...] = (
    Column("requests", lambda run: dig(run.summary, "counts", "measured")),
    Column("failed", lambda run: dig(run.summary, "counts", "failed")),
    Column("error rate", lambda run: _estimate(dig(run.summary, "error_rate")), "error_rate"),
    Column("TTFT p50", _latency("ttft", "p50"), "ttft_p50"),
    Column("TTFT p95", _latency("ttft", "p95"), "ttft_p95"),
    Column("TPOT p95", _latency("tpot", "p95"), "tpot_p95"),
    Column("ITL p95", _latency("itl", "p95"), "itl_p95"),
    Column("e2e p95", _latency("e2e", "p95"), "e2e_p95"),
    Column("output tokens/s", lambda run: dig(run.summary, "throughput_tokens_per_s")),
    Column("requests/s", lambda run: dig(run.summary, "request_rate_per_s")),
    Column("goodput", lambda run: _estimate(dig(run.summary, "goodput", "fraction")), "goodput_min"),
    Column("token counts from", lambda run: dig(run.summary, "usage", "source")),
    Column("prompt tokens p50 / p90 / p99", _lengths("prompt_tokens")),
    Column("output tokens p50 / p90 / p99", _lengths("output_tokens_per_request")),
    Column("achieved load", _achieved),
    Column("loop lag p99", lambda run: dig(run.selfcheck, "total", "loop_lag_s", "p99"), "itl_p99"),
    Column("client CPU", _total("cpu_utilisation"), "error_rate"),
)
"""Known columns, in the order they print (units borrowed from the SLO key that shares them)."""


def _flat_extras(runs: list[LoadResult]) -> list[Column]:
    # A summary in a shape this table does not know still shows its plain numbers.
    keys = dict.fromkeys(k for run in runs for k, v in run.summary.items()
                         if isinstance(v, (int, float, str, bool)) and k not in _KNOWN_SCALARS)
    return [Column(key, _summary_key(key)) for key in keys]


def _summary_key(key: str) -> Getter:
    return lambda run: run.summary.get(key)


_KNOWN_SCALARS = {"confidence", "output_tokens", "throughput_tokens_per_s", "request_rate_per_s",
                  "coalesced_fraction"}


def load_table(runs: list[LoadResult]) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """(column headings, rows) for a test's load runs."""
    columns = [c for c in (*COLUMNS, *_flat_extras(runs)) if any(c.get(run) is not None for run in runs)]
    headings = ("load", *(c.title for c in columns))
    rows = tuple((spec_label(run.spec), *(c.cell(run) for c in columns)) for run in runs)
    return headings, rows
