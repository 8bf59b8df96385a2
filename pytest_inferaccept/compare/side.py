"""The framework-selection view: several runs side by side, one column per run.

Rows: the run's conditions (those that differ are flagged with '≠'), each capability, each check
that failed in some run, each SLO figure and each load figure.
"""

from __future__ import annotations

from typing import Any

from pytest_inferaccept.compare.conditions import conditions_of
from pytest_inferaccept.compare.extras import server_version
from pytest_inferaccept.compare.figures import load_runs, unit_of
from pytest_inferaccept.expectations import check_id
from pytest_inferaccept.report.model import RunDocument

SHOWN_FIGURES = ("ttft_p95", "tpot_p95", "e2e_p95", "throughput", "request_rate", "error_rate", "goodput")
Row = tuple[str, list[str]]


def rows(docs: list[RunDocument]) -> list[Row]:
    """The table's rows: (label, one cell per run); a label starting with '≠' marks a difference."""
    out: list[Row] = [("verdict", [d.verdict.status for d in docs]),
                      ("server version", [(server_version(d.server.version_info) if d.server else None) or "?"
                                          for d in docs])]
    conditions = [conditions_of(d) for d in docs]
    for key in dict.fromkeys(k for c in conditions for k in c):
        label = next(c[key][0] for c in conditions if key in c)
        cells = [_cell(c[key][1]) if key in c else "-" for c in conditions]
        out.append((("≠ " if len(set(cells)) > 1 else "  ") + label, cells))
    caps = dict.fromkeys(name for d in docs for name in d.capabilities)
    for name in caps:
        out.append((f"capability {name}", [d.capabilities[name].status if name in d.capabilities else "-"
                                           for d in docs]))
    outcomes = [{check_id(t.nodeid): t.outcome for t in d.tests} for d in docs]
    failing = dict.fromkeys(cid for o in outcomes for cid, v in o.items() if v in ("failed", "error"))
    for cid in failing:
        out.append((f"failed check {cid}", [o.get(cid, "-") for o in outcomes]))
    out += _slo_rows(docs)
    runs = [load_runs(d) for d in docs]
    for where in dict.fromkeys(w for r in runs for w in r):
        for key in SHOWN_FIGURES:
            cells = []
            for r in runs:
                fig = r[where].figures.get(key) if where in r else None
                cells.append(fig.show(unit_of(key)) if fig else "-")
            if any(c != "-" for c in cells):
                out.append((f"{key} {where}", cells))
    return out


def _slo_rows(docs: list[RunDocument]) -> list[Row]:
    found: dict[str, list[str]] = {}
    for column, doc in enumerate(docs):
        for test in doc.tests:
            for load in test.load:
                for row in (load.slo.rows if load.slo else []):
                    label = f"SLO {row.key} {check_id(test.nodeid)}"
                    cells = found.setdefault(label, ["-"] * len(docs))
                    shown = "-" if row.measured is None else f"{row.measured:.4g}"
                    cells[column] = f"{shown} {row.status} (limit {row.limit:g})" if row.limit else shown
    return list(found.items())


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        value = ", ".join(f"{k}={v}" for k, v in value.items() if v is not None)
    text = "-" if value is None or value == "" else str(value)
    return text if len(text) <= 40 else text[:39] + "…"


def table(names: list[str], docs: list[RunDocument]) -> str:
    """The side-by-side view as a plain-text table."""
    body = rows(docs)
    width = max(len(label) for label, _ in body)
    widths = [max(len(names[i]), *(len(cells[i]) for _, cells in body)) for i in range(len(docs))]
    lines = ["  ".join([" " * width, *(n.ljust(w) for n, w in zip(names, widths, strict=True))])]
    for label, cells in body:
        padded = (c.ljust(w) for c, w in zip(cells, widths, strict=True))
        lines.append("  ".join([label.ljust(width), *padded]))
    return "\n".join(line.rstrip() for line in lines)
