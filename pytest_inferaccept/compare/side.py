"""The framework-selection view: several runs side by side, one column per run.

Rows: the run's conditions (those that differ are flagged with '≠'), each capability, each
distinct finding of any run grouped by area (how many of its checks failed in each run), each SLO
figure and each load figure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_inferaccept.baseline.conditions import conditions_of
from pytest_inferaccept.baseline.extras import server_version
from pytest_inferaccept.baseline.figures import load_runs, unit_of
from pytest_inferaccept.compare.side_findings import CAUSE_AREA, cause_cells, finding_rows
from pytest_inferaccept.expectations import check_id
from pytest_inferaccept.model import RunDocument

SHOWN_FIGURES = ("ttft_p95", "tpot_p95", "e2e_p95", "throughput", "request_rate", "error_rate", "goodput")
Row = tuple[str, list[str]]


def head_rows(docs: list[RunDocument]) -> list[Row]:
    """The verdict and the server's version of each run."""
    return [("verdict", [d.verdict.status for d in docs]),
            ("server version", [(server_version(d.server.version_info) if d.server else None) or "?"
                                for d in docs])]


def condition_rows(docs: list[RunDocument]) -> list[Row]:
    """A row per condition; a label starting with '≠' marks one whose values differ."""
    out: list[Row] = []
    conditions = [conditions_of(d) for d in docs]
    for key in dict.fromkeys(k for c in conditions for k in c):
        label = next(c[key][0] for c in conditions if key in c)
        cells = [_cell(c[key][1]) if key in c else "-" for c in conditions]
        out.append((("≠ " if len(set(cells)) > 1 else "  ") + label, cells))
    return out


def capability_rows(docs: list[RunDocument]) -> list[Row]:
    """A row per capability any run knows: its status in each run."""
    caps = dict.fromkeys(name for d in docs for name in d.capabilities)
    return [(f"capability {name}", [d.capabilities[name].status if name in d.capabilities else "-"
                                    for d in docs]) for name in caps]


def finding_lines(docs: list[RunDocument]) -> list[Row]:
    """The findings as terminal rows: a heading, then per area its findings, each with a short label."""
    out: list[Row] = [("findings (failed of the checks run)", [""] * len(docs))]
    stopped = cause_cells(docs)
    if stopped is not None:
        out += [(f"  {CAUSE_AREA}", [""] * len(docs)), ("    stopped during the run", list(stopped))]
    area = None
    for row in finding_rows(docs):
        if row.area != area:
            area = row.area
            out.append((f"  {area}", [""] * len(docs)))
        out.append((f"    {row.label}", list(row.cells)))
    if len(out) == 1:
        out[0] = ("findings", ["none"] * len(docs))
    return out


def figure_groups(docs: list[RunDocument]) -> list[tuple[str, list[Row]]]:
    """Per load run (check id and label), a row per shown figure: p95 latencies, rates, errors."""
    out: list[tuple[str, list[Row]]] = []
    runs = [load_runs(d) for d in docs]
    for where in dict.fromkeys(w for r in runs for w in r):
        group: list[Row] = []
        for key in SHOWN_FIGURES:
            cells = []
            for r in runs:
                fig = r[where].figures.get(key) if where in r else None
                cells.append(fig.show(unit_of(key)) if fig else "-")
            if any(c != "-" for c in cells):
                group.append((key, cells))
        if group:
            out.append((where, group))
    return out


def figure_rows(docs: list[RunDocument]) -> list[Row]:
    """A row per shown figure of each load run, labelled with the figure and the run ('ttft_p95 <check>')."""
    return [(f"{key} {where}", cells) for where, group in figure_groups(docs) for key, cells in group]


CORRECTNESS_GROUP = "correctness (known-answer set)"


def correctness_rows(docs: list[RunDocument]) -> list[Row]:
    """The known-answer set's accuracy with its interval, unanswered share and self-flip rate per run
    (none when no run graded it); a set that differs between runs is marked, as conditions are."""
    found = [next((t.correctness for t in d.tests if t.correctness is not None), None) for d in docs]
    if not any(found):
        return []
    sets = ["-" if c is None else f"{c.set} ({c.accuracy.n} items)" for c in found]
    out: list[Row] = [(("≠ " if len(set(sets)) > 1 else "  ") + "set", sets)]
    out.append(("accuracy", ["-" if c is None else f"{c.accuracy.correct}/{c.accuracy.n} "
                             f"{c.accuracy.correct / c.accuracy.n:.1%} [{c.accuracy.low:.1%}, "
                             f"{c.accuracy.high:.1%}]" for c in found]))
    out.append(("unanswered", ["-" if c is None else str(c.accuracy.unanswered) for c in found]))
    out.append(("self-flip rate", ["-" if c is None else f"{c.self_flip_rate:.1%} ({c.self_flips})"
                                   for c in found]))
    return out


def rows(docs: list[RunDocument]) -> list[Row]:
    """The table's rows: (label, one cell per run); a label starting with '≠' marks a difference."""
    graded = correctness_rows(docs)
    if graded:
        graded = [(CORRECTNESS_GROUP, [""] * len(docs)),
                  *((label if label.startswith("≠") else f"  {label.strip()}", cells)
                    for label, cells in graded)]
    return (head_rows(docs) + condition_rows(docs) + capability_rows(docs) + finding_lines(docs)
            + graded + slo_rows(docs) + figure_rows(docs))


def slo_groups(docs: list[RunDocument]) -> list[tuple[str, list[Row]]]:
    """Per load test (check id), a row per SLO key: measured value, status and limit in each run."""
    found: dict[str, dict[str, list[str]]] = {}
    for column, doc in enumerate(docs):
        for test in doc.tests:
            for load in test.load:
                for row in (load.slo.rows if load.slo else []):
                    group = found.setdefault(check_id(test.nodeid), {})
                    cells = group.setdefault(f"SLO {row.key}", ["-"] * len(docs))
                    shown = "-" if row.measured is None else f"{row.measured:.4g}"
                    cells[column] = f"{shown} {row.status} (limit {row.limit:g})" if row.limit else shown
    return [(where, list(group.items())) for where, group in found.items()]


def slo_rows(docs: list[RunDocument]) -> list[Row]:
    """A row per SLO key of each load test, labelled 'SLO <key> <check>'."""
    return [(f"{key} {where}", cells) for where, group in slo_groups(docs) for key, cells in group]


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        value = ", ".join(f"{k}={v}" for k, v in value.items() if v is not None)
    text = "-" if value is None or value == "" else str(value)
    return text if len(text) <= 40 else text[:39] + "…"


def table(names: list[str], docs: list[RunDocument], clean: Callable[[str], str] = str) -> str:
    """The side-by-side view as a plain-text table; `clean` scrubs each text before it is aligned."""
    body = [(clean(label), [clean(c) for c in cells]) for label, cells in rows(docs)]
    names = [clean(name) for name in names]
    width = max(len(label) for label, _ in body)
    widths = [max(len(names[i]), *(len(cells[i]) for _, cells in body)) for i in range(len(docs))]
    lines = ["  ".join([" " * width, *(n.ljust(w) for n, w in zip(names, widths, strict=True))])]
    for label, cells in body:
        padded = (c.ljust(w) for c, w in zip(cells, widths, strict=True))
        lines.append("  ".join([label.ljust(width), *padded]))
    return "\n".join(line.rstrip() for line in lines)
