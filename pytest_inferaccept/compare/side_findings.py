"""The side-by-side's findings: one row per distinct finding, grouped by the area its checks test.

A finding is what the report calls one (report.words.findings: the failed checks of one
capability, or the cases of one parametrized check), so a robustness catalogue that fails 20 of
its cases is one row with "20 of 40 failed", not 20 rows labelled with 140-character test ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_inferaccept.capabilities import CAPABILITIES
from pytest_inferaccept.model import CheckResult, RunDocument
from pytest_inferaccept.report.words import Finding, finding_key, findings, first_line, short_name

LABEL_MAX = 44
"""The longest finding label the terminal prints (the area heading above it says where)."""
JUDGED = ("passed", "failed", "error", "xpassed")
CAUSE_AREA = "server"


@dataclass(frozen=True, kw_only=True)
class FindingRow:
    """One distinct finding across the runs: how many of its checks failed in each."""

    area: str
    """Where its checks live: the test file without 'test_' and '.py' ('robustness')."""
    key: str
    """The report's grouping key (report.words.finding_key), the same in every run."""
    label: str
    """A short label for a terminal row, at most LABEL_MAX characters."""
    title: str
    """The finding in the report's words (the capability and what it means, or the check's name)."""
    cells: tuple[str, ...]
    """Per run: '12 of 40 failed', '40 passed', 'skipped' or '-' (no such check ran)."""
    failed: tuple[int, ...]
    """Per run: how many of its checks failed."""
    seen: tuple[str, ...]
    """Per run: what its first failed check saw, or ''."""
    cases: tuple[tuple[str, tuple[str, ...]], ...]
    """Each check that failed in some run: its name and its outcome in each run."""


def area_of(test: CheckResult) -> str:
    """The area a check tests: its file's name without 'test_' and '.py' ('robustness')."""
    path = (test.file or test.nodeid.split("::", 1)[0]).rsplit("/", 1)[-1]
    name = path.removesuffix(".py")
    return name.removeprefix("test_") or name or "tests"


def clip(text: str, limit: int = LABEL_MAX) -> str:
    """The text cut to `limit` characters, with '…' where it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _label(key: str) -> str:
    """A capability by its name; a check by its name without 'test_' (the area heading says where)."""
    return clip(key if key in CAPABILITIES else key.removeprefix("test_"))


def _cell(tests: list[CheckResult], failed: int) -> str:
    if not tests:
        return "-"
    ran = [t for t in tests if t.outcome in JUDGED]
    passed = sum(t.outcome == "passed" for t in ran)
    if failed:
        return f"{failed} of {len(ran)} failed"
    if not ran:
        return "skipped"
    return f"{passed} passed" if passed == len(ran) else f"{passed} of {len(ran)} passed"


def finding_rows(docs: list[RunDocument]) -> list[FindingRow]:
    """A row per distinct finding of any run, areas in the order the runs' checks meet them."""
    per_doc = [{f.key: f for f in findings(doc) if f.cause is None} for doc in docs]
    first: dict[str, Finding] = {}
    for found in per_doc:
        for key, finding in found.items():
            first.setdefault(key, finding)
    tests = [{t.nodeid: t for t in doc.tests} for doc in docs]
    areas: dict[str, str] = {}
    for key, finding in first.items():
        test = next(t[finding.nodeids[0]] for t in tests if finding.nodeids[0] in t)
        areas[key] = area_of(test)
    rows: list[FindingRow] = []
    for area in dict.fromkeys(areas.values()):
        for key in (k for k, a in areas.items() if a == area):
            rows.append(_row(docs, per_doc, key, first[key], area))
    return rows


def _row(docs: list[RunDocument], per_doc: list[dict[str, Finding]], key: str, finding: Finding,
         area: str) -> FindingRow:
    mine = [[t for t in doc.tests if finding_key(t) == key] for doc in docs]
    failed = tuple(len(found[key].nodeids) if key in found else 0 for found in per_doc)
    failing = dict.fromkeys(n for found in per_doc if key in found for n in found[key].nodeids)
    outcomes = [{t.nodeid: t.outcome for t in doc.tests} for doc in docs]
    cases = tuple((short_name(nodeid), tuple(o.get(nodeid, "-") for o in outcomes)) for nodeid in failing)
    return FindingRow(
        area=area, key=key, label=_label(key), title=finding.title,
        cells=tuple(_cell(t, n) for t, n in zip(mine, failed, strict=True)), failed=failed,
        seen=tuple(found[key].seen if key in found else "" for found in per_doc), cases=cases)


def cause_cells(docs: list[RunDocument]) -> tuple[str, ...] | None:
    """Per run: whether the server stopped during it (and how many checks that cost); None if it never did."""
    if not any(doc.causes for doc in docs):
        return None
    return tuple("; ".join(f"{c.kind}: {len({n for n in (c.during, *c.consequences) if n})} checks"
                           for c in doc.causes) or "no" for doc in docs)


def cause_lines(docs: list[RunDocument]) -> tuple[str, ...]:
    """Per run: the causes' own lines (the report's words), for the page."""
    return tuple("; ".join(first_line(c.summary, 400) for c in doc.causes) for doc in docs)
