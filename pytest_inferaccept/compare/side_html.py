"""The side-by-side as one self-contained HTML page, for the framework-selection decision.

Rendered as the go/no-go page is (report/html.py): jinja2 escapes every value it prints
(autoescape on), the page carries no script and its Content-Security-Policy forbids any. Every
text is scrubbed before it is printed: the secrets given (the CLI passes $INFERACCEPT_API_KEY) and
the shapes `scrub.Scrubber` always masks (a bearer token, a URL's password, a key-like flag).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_inferaccept.compare.side import (
    CORRECTNESS_GROUP,
    capability_rows,
    condition_rows,
    correctness_rows,
    figure_groups,
    head_rows,
    slo_groups,
)
from pytest_inferaccept.compare.side_findings import (
    CAUSE_AREA,
    FindingRow,
    cause_cells,
    cause_lines,
    finding_rows,
)
from pytest_inferaccept.model import RunDocument
from pytest_inferaccept.report.html import environment, mask_printed, page_css, write_page
from pytest_inferaccept.report.words import findings
from pytest_inferaccept.scrub import Scrubber, strip_userinfo


@dataclass(frozen=True)
class Cell:
    """One run's value in a row, with the class that colours it."""

    text: str
    css: str = ""


@dataclass(frozen=True)
class RunColumn:
    """One run: its file, verdict and what it ran against."""

    name: str
    status: str
    status_class: str
    model: str
    server: str
    version: str
    counts: str
    findings: str


@dataclass(frozen=True)
class TableRow:
    """A labelled row with a cell per run; `differs` marks a condition whose values differ."""

    label: str
    cells: tuple[Cell, ...]
    differs: bool = False


@dataclass(frozen=True)
class RowGroup:
    """Rows under one heading: the figures of one load run."""

    name: str
    rows: tuple[TableRow, ...]


@dataclass(frozen=True)
class FindingView:
    """One distinct finding: a cell per run, what each run saw first, and its checks case by case."""

    anchor: str
    title: str
    cells: tuple[Cell, ...]
    seen: tuple[str, ...]
    cases: tuple[tuple[str, tuple[Cell, ...]], ...]


@dataclass(frozen=True)
class AreaView:
    """The findings of one area (a test file: robustness, tools, ...)."""

    name: str
    findings: tuple[FindingView, ...]


@dataclass(frozen=True)
class SidePage:
    """Everything the side-by-side template prints."""

    title: str
    runs: tuple[RunColumn, ...]
    areas: tuple[AreaView, ...]
    capabilities: tuple[TableRow, ...]
    figures: tuple[RowGroup, ...]
    conditions: tuple[TableRow, ...]


_STATUS_CLASS = {"GO": "go", "NO-GO": "nogo"}
_OUTCOME_CLASS = {"passed": "passed", "failed": "failed", "error": "error", "skipped": "skipped",
                  "xfailed": "xfailed", "xpassed": "xpassed"}


def _run_column(name: str, doc: RunDocument, version: str) -> RunColumn:
    server = doc.server
    count = len(findings(doc))
    return RunColumn(
        name=name, status=doc.verdict.status, status_class=_STATUS_CLASS.get(doc.verdict.status, "invalid"),
        model=(server.model if server else doc.conditions.settings.model) or "unknown model",
        server=strip_userinfo(server.base_url if server else (doc.conditions.settings.server_url or "")),
        version=version, counts=", ".join(f"{n} {k}" for k, n in sorted(doc.verdict.counts.items())),
        findings=f"{count} distinct finding{'' if count == 1 else 's'}")


def _finding(number: int, row: FindingRow) -> FindingView:
    cells = tuple(Cell(text, "fail" if failed else ("pass" if text.endswith("passed") else ""))
                  for text, failed in zip(row.cells, row.failed, strict=True))
    cases = tuple((name, tuple(Cell(o, _OUTCOME_CLASS.get(o, "")) for o in outcomes))
                  for name, outcomes in row.cases)
    return FindingView(anchor=f"finding-{number}", title=row.title, cells=cells, seen=row.seen, cases=cases)


def _areas(docs: list[RunDocument]) -> tuple[AreaView, ...]:
    areas: dict[str, list[FindingView]] = {}
    stopped = cause_cells(docs)
    if stopped is not None:
        lines = cause_lines(docs)
        areas[CAUSE_AREA] = [FindingView(
            anchor="finding-stopped", title="the server stopped during the run",
            cells=tuple(Cell(c, "" if c == "no" else "fail") for c in stopped), seen=lines, cases=())]
    for number, row in enumerate(finding_rows(docs), start=1):
        areas.setdefault(row.area, []).append(_finding(number, row))
    return tuple(AreaView(name=name, findings=tuple(rows)) for name, rows in areas.items())


def _rows(rows: list[tuple[str, list[str]]], css: dict[str, str] | None = None) -> tuple[TableRow, ...]:
    out = []
    for label, cells in rows:
        differs = label.startswith("≠")
        shown = tuple(Cell(c, (css or {}).get(c, "")) for c in cells)
        out.append(TableRow(label=label.removeprefix("≠ ").strip(), cells=shown, differs=differs))
    return tuple(out)


def _figures(docs: list[RunDocument]) -> tuple[RowGroup, ...]:
    """The SLO rows and the figures of each load test under one heading (the test's check id)."""
    groups: dict[str, list[tuple[str, list[str]]]] = {}
    graded = correctness_rows(docs)
    if graded:
        groups[CORRECTNESS_GROUP] = graded
    for where, rows in slo_groups(docs) + figure_groups(docs):
        groups.setdefault(where, []).extend(rows)
    return tuple(RowGroup(name=where, rows=_rows(rows)) for where, rows in groups.items())


def build_side_page(names: list[str], docs: list[RunDocument]) -> SidePage:
    """Derive the side-by-side page from the runs' documents (not yet scrubbed: see `render`)."""
    head = dict(head_rows(docs))
    runs = tuple(_run_column(name, doc, version)
                 for name, doc, version in zip(names, docs, head["server version"], strict=True))
    statuses = {"supported": "supported", "broken": "broken", "unsupported": "unsupported",
                "not exercised": "not-exercised"}
    return SidePage(
        title=f"Side by side: {' · '.join(names)}", runs=runs, areas=_areas(docs),
        capabilities=tuple(dataclasses.replace(r, label=r.label.removeprefix("capability "))
                           for r in _rows(capability_rows(docs), statuses)),
        figures=_figures(docs),
        conditions=_rows(condition_rows(docs)))


def _scrubbed(value: Any, scrubber: Scrubber) -> Any:
    """Every text in a view, scrubbed (views are frozen dataclasses, tuples and strings)."""
    if isinstance(value, str):
        return scrubber.text(value)
    if isinstance(value, tuple):
        return tuple(_scrubbed(v, scrubber) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _scrubbed(getattr(value, f.name), scrubber)
                                             for f in dataclasses.fields(value)})
    return value


def render(names: list[str], docs: list[RunDocument], *, secrets: tuple[str, ...] = ()) -> str:
    """The side-by-side page as HTML text, every text scrubbed of `secrets` and secret shapes."""
    from markupsafe import Markup

    scrubber = Scrubber(secrets)
    page = _scrubbed(build_side_page(names, docs), scrubber)
    text: str = environment().get_template("side_by_side.html.j2").render(page=page, css=Markup(page_css()))
    # A last pass catches a secret in the form the template printed it (escaped).
    return mask_printed(text, scrubber.secrets)


def write(path: Path, names: list[str], docs: list[RunDocument], *, secrets: tuple[str, ...] = ()) -> None:
    """Write the page atomically (a half-written file never replaces a good one)."""
    write_page(path, render(names, docs, secrets=secrets))
