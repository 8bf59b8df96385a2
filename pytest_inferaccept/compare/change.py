"""One difference between a baseline run and this run, and what it means for the verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["regression", "improvement", "changed", "untrusted"]
"""regression: worse beyond tolerance (NO-GO); improvement: better beyond it; changed: different,
neither better nor worse; untrusted: a figure moved, but the runs' conditions differ too much to say."""

Kind = Literal["capability", "check", "figure", "operator_metric", "server", "answer", "embedding",
               "load_run", "correctness"]


@dataclass(frozen=True, kw_only=True)
class Change:
    """One item that differs between the two runs, with a sentence that gives the figures."""

    kind: Kind
    status: Status
    item: str
    before: Any = None
    after: Any = None
    detail: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"kind": self.kind, "status": self.status, "item": self.item, "before": self.before,
                "after": self.after, "detail": self.detail}
