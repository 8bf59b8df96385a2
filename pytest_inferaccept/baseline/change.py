"""One difference between a baseline run and this run, and what it means for the verdict."""

from __future__ import annotations

from typing import Any, Literal

from pytest_inferaccept.model import BaselineChange

Status = Literal["regression", "improvement", "changed", "untrusted"]
"""regression: worse beyond tolerance (NO-GO); improvement: better beyond it; changed: different,
neither better nor worse; untrusted: a figure moved, but the runs' conditions differ too much to say."""

Kind = Literal["capability", "check", "figure", "operator_metric", "server", "answer", "embedding",
               "load_run", "correctness"]


def change(*, kind: Kind, status: Status, item: str, detail: str, before: Any = None,
           after: Any = None) -> BaselineChange:
    """One item that differs between the two runs, with a sentence that gives the figures."""
    # Every field given, so that the document writes each change with all six keys.
    return BaselineChange(kind=kind, status=status, item=item, before=before, after=after, detail=detail)
