"""The comparison as text: the terminal's "changed since the baseline" section and the offline table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_inferaccept.model import BaselineComparison

MAX_LINES = 25
MARK = {"regression": "WORSE", "improvement": "better", "changed": "changed", "untrusted": "untrusted"}
ORDER = {"regression": 0, "untrusted": 1, "changed": 2, "improvement": 3}


def section_lines(section: BaselineComparison) -> list[tuple[str, str]]:
    """The `baseline` section as (text, colour) lines; colour is '', 'red', 'yellow' or 'green'."""
    out: list[tuple[str, str]] = []
    if section.error:
        return [(f"changed since the baseline: not compared: {section.error}", "yellow")]
    run = section.run
    head = (f"changed since the baseline ({section.path}, {run.started_at or '?'}, "
            f"verdict {run.verdict or '?'}): ")
    count = len(section.regressions)
    head += f"{count} regression(s)" if count else "no regression"
    out.append((head, "red" if count else "green"))
    for cond in section.conditions:
        effect = "figures not compared" if cond.effect == "untrusted" else "flagged"
        out.append((f"  condition differs ({effect}): {cond.label}: {_short(cond.before)} → "
                    f"{_short(cond.after)}", "yellow"))
    changes = sorted(section.changes, key=lambda c: ORDER.get(c.status, 9))
    colour = {"regression": "red", "untrusted": "yellow", "improvement": "green"}
    for change in changes[:MAX_LINES]:
        out.append((f"  {MARK.get(change.status, change.status):<9} {change.detail[:300]}",
                    colour.get(change.status, "")))
    if len(changes) > MAX_LINES:
        out.append((f"  … and {len(changes) - MAX_LINES} more (see the results file)", ""))
    answers = section.answers
    if answers is not None and answers.compared:
        rate = answers.exact_match_rate
        out.append((f"  answers: {answers.identical} of {answers.compared} identical "
                    f"({(rate or 0) * 100:.0f}% exact match; drift policy {answers.policy})", ""))
    if not changes and not section.conditions:
        out.append(("  nothing changed beyond the tolerances", ""))
    return out


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
