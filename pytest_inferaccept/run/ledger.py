"""The run's ledger: what every acceptance test ended as, the run's problems, what it wrote."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_inferaccept.model import CheckResult


def now() -> str:
    """The wall-clock time in the results' form (UTC, seconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class RunLedger:
    """The outcome of every acceptance test, the run's problems, and what the run wrote."""

    def __init__(self) -> None:
        self.outcomes: dict[str, CheckResult] = {}
        """Test id -> its entry in the results' `tests`: the per-test payload with its report
        phases merged, in the run model (validated when it is recorded, dumped once at the end)."""
        self._given: dict[str, dict[str, Any]] = {}
        """Test id -> the same entry as its payloads gave it (plain JSON), where phases merge."""
        self._unread: set[str] = set()
        """Tests whose entry the model could not read (a defect): the document keeps it as given."""
        self.problems: list[str] = []
        """What kept the run from judging the server (it makes the verdict INVALID)."""
        self.other_failures: list[str] = []
        """Tests outside the acceptance verdict that failed or errored, and collection errors."""
        self.deselected: list[str] = []
        """Acceptance tests deselected (-k, -m, --deselect): the verdict covers a subset."""
        self.load_runs: list[tuple[str, Any]] = []
        """(test id, LoadRun) of every load run, for --inferaccept-records."""
        self.capacity_results: list[Any] = []
        """Every capacity scenario of the session, in order (a soak reads the ladder's knee)."""
        self.started_at = now()
        self.finished_at: str | None = None
        self.exit_status: int | None = None
        self.written: list[tuple[str, Path]] = []
        """(what, where) of each file the run wrote at the end: results, report."""

    def record(self, nodeid: str, phase: str, outcome: str, payload: dict[str, Any],
               message: str, duration: float) -> None:
        """Merge one report phase (its payload as pytest carried it: plain JSON) into the test's
        outcome, and read the merged entry into the model: the document keeps only the keys the
        payloads gave, no defaults they did not."""
        from pydantic import ValidationError

        from pytest_inferaccept.model import CheckResult

        entry = self._given.setdefault(nodeid, {"nodeid": nodeid, "outcome": "passed",
                                                "duration_s": 0.0, "message": ""})
        entry["duration_s"] = round(entry["duration_s"] + duration, 6)
        for key, value in payload.items():
            if key == "evidence" and not value:
                continue
            entry[key] = value
        if outcome == "skipped":
            entry["outcome"] = "skipped"
            entry["message"] = message
        elif outcome == "failed":
            entry["outcome"] = "failed" if phase == "call" else "error"
            entry["message"] = entry["message"] or message
        elif outcome in ("xfailed", "xpassed"):
            entry["outcome"] = outcome
        try:
            self.outcomes[nodeid] = CheckResult.model_validate(entry)
            self._unread.discard(nodeid)
        except ValidationError:
            # A defect of the plugin, not of the server: the run goes on with the test's outcome,
            # the document keeps the entry as given, and its validation at the end names the defect
            # (run.finish) while the JSON is still written.
            self.outcomes[nodeid] = CheckResult.model_validate({k: entry[k] for k in _LEDGER_KEYS})
            self._unread.add(nodeid)

    def shift_cause(self, nodeid: str, offset: int) -> None:
        """Renumber the test's `caused_by` by `offset` (a worker's causes appended after others')."""
        entry = self.outcomes[nodeid]
        if entry.caused_by is not None:
            entry.caused_by += offset
            self._given[nodeid]["caused_by"] = entry.caused_by

    def entries(self) -> list[dict[str, Any]]:
        """The results' `tests`: every outcome as JSON, with the keys its payloads gave."""
        return [self._given[nodeid] if nodeid in self._unread else
                entry.model_dump(mode="json", exclude_unset=True) for nodeid, entry in self.outcomes.items()]


_LEDGER_KEYS = ("nodeid", "outcome", "duration_s", "message")
"""The keys of an entry the ledger itself writes (always valid): what readers get of an entry whose
payload the model could not read."""
