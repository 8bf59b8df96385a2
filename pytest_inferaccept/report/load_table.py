"""A test's load runs as one table: a row per run, the columns a reader compares across levels.

The columns follow the load engine's summary and self-check (docs/statistics.md); a value that
a run did not measure prints as a dash, and a column no run has is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_inferaccept.model import ClientLoad, Estimate, LoadResult, RequestCounts, Spread
from pytest_inferaccept.report.units import cut_short, fmt_number, fmt_value, spec_label, workload_label
from pytest_inferaccept.stats.summary import content_never_came

Getter = Callable[[LoadResult], Any]


def _estimate(est: Estimate | None) -> int | float | None:
    """An estimate's point value."""
    return est.value if est is not None else None


def _latency(metric: str, stat: str) -> Getter:
    def get(run: LoadResult) -> Any:
        latency = run.summary.latency(metric)
        est = latency.stat(stat) if latency is not None else None
        if est is not None and est.censored:
            # the percentile falls on failed requests (or, for TTFT, on answers whose content never
            # came): slower than any limit
            counts = _counts(run)
            if content_never_came(metric, counts.failed, counts.no_content):
                return NO_CONTENT
            return CENSORED
        return _estimate(est)

    return get


def _ttft_any_apart(run: LoadResult) -> Any:
    """TTFT p95 to the first token of any kind, where it stands apart from TTFT p95 (to the first
    content token) by more than a tenth: a reasoning model thinking before it answers, or answers
    that were only tool calls. Where the two agree the column is left out."""
    content, any_token = _latency("ttft", "p95")(run), _latency("ttft_any_token", "p95")(run)
    if not isinstance(any_token, (int, float)):
        return None
    if isinstance(content, (int, float)) and abs(content - any_token) <= 0.1 * max(content, any_token):
        return None
    return any_token


TTFT_ANY_NOTE = (
    "TTFT waits for the first content token; TTFT any token for the first token of any kind "
    "(reasoning, content or a tool call), as MLPerf measures it. Where they stand apart, the model "
    "reasons (or calls tools) before it answers: a user sees activity after the second and the "
    "answer after the first. Judge the one your users wait for: @slo(ttft_p95=...) or "
    "@slo(ttft_any_p95=...).")
"""The note under a load table that shows both TTFT figures."""

CENSORED = "∞ (failed)"
"""How a latency figure that falls on failed requests prints."""
NO_CONTENT = "∞ (no content)"
"""How TTFT prints when it falls on answers that carried no content (only reasoning or tool calls)."""


def _counts(run: LoadResult) -> RequestCounts:
    return run.summary.counts or RequestCounts()


def _total(run: LoadResult) -> ClientLoad:
    """The client's account of the whole run (all fields None where it gave none)."""
    return run.selfcheck.total or ClientLoad()


def _lengths(spread: Callable[[LoadResult], Spread | None]) -> Getter:
    """A token-length spread as 'p50 / p90 / p99' (the workload's realised length distribution)."""

    def get(run: LoadResult) -> str | None:
        found = spread(run)
        if found is None or found.p50 is None:
            return None
        return " / ".join(fmt_number(p) for p in (found.p50, found.p90, found.p99))

    return get


def _achieved(run: LoadResult) -> str | None:
    total = _total(run)
    for asked, got in ((total.asked_concurrency, total.achieved_concurrency),
                       (total.asked_rate, total.achieved_rate)):
        if asked is not None and got is not None:
            return f"{fmt_number(got)} of {fmt_number(asked)}"
    return None


def _loop_lag_p99(run: LoadResult) -> int | float | None:
    lag = _total(run).loop_lag_s
    return lag.p99 if lag is not None else None


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
        if value in (CENSORED, NO_CONTENT):
            return str(value)
        return fmt_value(self.unit_key, value) if self.unit_key else fmt_number(value)


def _requests(run: LoadResult) -> int | str | None:
    """Measured requests; 'measured of asked' where the run measured fewer than it asked for."""
    measured, asked = _counts(run).measured, run.spec.requests
    if measured is not None and asked is not None and measured < asked and cut_short(run):
        return f"{measured} of {asked}"
    return measured


def _stopped(run: LoadResult) -> str | None:
    """What ended a run that measured fewer requests than it asked for (None: it ran as asked)."""
    if not cut_short(run):
        return None
    if run.stopped_by == "duration" and run.spec.duration is not None:
        return f"its {fmt_number(run.spec.duration)} s limit"
    if run.stopped_by == "max_seconds" and run.spec.max_seconds is not None:
        return f"the {fmt_number(run.spec.max_seconds)} s safety limit"
    return run.stopped_by


RESULT_COLUMNS: tuple[Column, ...] = (
    Column("requests", _requests),
    Column("failed", lambda run: _counts(run).failed),
    Column("error rate", lambda run: _estimate(run.summary.error_rate), "error_rate"),
    Column("TTFT p50", _latency("ttft", "p50"), "ttft_p50"),
    Column("TTFT p95", _latency("ttft", "p95"), "ttft_p95"),
    Column("TTFT any token p95", _ttft_any_apart, "ttft_p95"),
    Column("TPOT p95", _latency("tpot", "p95"), "tpot_p95"),
    Column("ITL p95", _latency("itl", "p95"), "itl_p95"),
    Column("e2e p95", _latency("e2e", "p95"), "e2e_p95"),
    Column("output tokens/s", lambda run: run.summary.throughput_tokens_per_s),
    Column("requests/s", lambda run: run.summary.request_rate_per_s),
    Column("goodput", lambda run: _estimate(run.summary.goodput.fraction if run.summary.goodput else None),
           "goodput_min"),
)
"""What the server did: counts, latencies, throughput (the first table, the one a reader compares)."""

CONDITION_COLUMNS: tuple[Column, ...] = (
    Column("stopped by", _stopped),
    Column("token counts from", lambda run: run.summary.usage.source if run.summary.usage else None),
    Column("prompt tokens p50 / p90 / p99", _lengths(lambda run: run.summary.prompt_tokens)),
    Column("output tokens p50 / p90 / p99", _lengths(lambda run: run.summary.output_tokens_per_request)),
    Column("achieved load", _achieved),
    Column("loop lag p99", _loop_lag_p99, "itl_p99"),
    Column("client CPU", lambda run: _total(run).cpu_utilisation, "error_rate"),
)
"""How the figures were made: the workload's realised lengths and the client's account of itself."""

COLUMNS: tuple[Column, ...] = (*RESULT_COLUMNS, *CONDITION_COLUMNS)
"""Known columns, in the order they print (units borrowed from the SLO key that shares them)."""


def load_note(runs: list[LoadResult]) -> str:
    """What a reader needs to read the table: why two TTFT figures, when both show."""
    return TTFT_ANY_NOTE if any(_ttft_any_apart(run) is not None for run in runs) else ""


Table = tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]
"""(column headings, rows): the first column names each run's load."""


def _table(runs: list[LoadResult], columns: tuple[Column, ...], *, workload: bool) -> Table:
    shown = [c for c in columns if any(c.get(run) is not None for run in runs)]
    headings = ("load", *(c.title for c in shown))
    rows = tuple((spec_label(run.spec, workload=workload), *(c.cell(run) for c in shown)) for run in runs)
    return headings, rows


def load_table(runs: list[LoadResult]) -> Table:
    """(column headings, rows) for a test's load runs: every column in one table."""
    return _table(runs, COLUMNS, workload=True)


def shared_workload(runs: list[LoadResult]) -> str:
    """The workload every run sent, in words; empty when they differ (each row then names its own)."""
    said = {workload_label(run.spec) for run in runs}
    return said.pop() if len(said) == 1 else ""


@dataclass(frozen=True)
class LoadTables:
    """A test's load runs as two narrower tables that fit a page: what the server did, then how the
    figures were made (workload lengths, the client's self-check); the workload named once above."""

    workload: str
    results: Table
    conditions: Table


def load_tables(runs: list[LoadResult]) -> LoadTables:
    """The two tables of a test's load runs (the columns of `load_table`, split in two)."""
    workload = shared_workload(runs)
    return LoadTables(workload=workload,
                      results=_table(runs, RESULT_COLUMNS, workload=not workload),
                      conditions=_table(runs, CONDITION_COLUMNS, workload=not workload))
