"""The acceptance session: one object per run that the plugin's hooks hand off to.

No pytest here. It holds four concerns, each its own object: the server's lifecycle
(`servers`, run/servers.py), its stops and their consequences (`outages`, run/outages.py), the
capability probes (`capabilities`, run/probing.py) and the outcome ledger (`ledger`,
run/ledger.py); what needs more than one of them — the capability matrix and the verdict — is here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capabilities import CAPABILITIES
from pytest_inferaccept.progress import EVERY, FIRST_AFTER, Progress
from pytest_inferaccept.run.ledger import RunLedger
from pytest_inferaccept.run.outages import OutageLedger
from pytest_inferaccept.run.probing import CapabilityProbes
from pytest_inferaccept.run.servers import ServerManager
from pytest_inferaccept.scrub import Scrubber, url_password
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.verdict import decide

if TYPE_CHECKING:
    from pytest_inferaccept.baseline.gate import Findings
    from pytest_inferaccept.model import CheckResult, Verdict

Log = Callable[[str], None]


class AcceptanceSession:
    """State of one acceptance run."""

    def __init__(self, settings: Settings, log_dir: Path, log: Log = print,
                 progress: Log | None = None) -> None:
        self.settings = settings
        self.scrubber = Scrubber([settings.api_key, url_password(settings.server_url or ""),
                                  url_password(settings.embedding_url or "")])
        self._log = log
        self._progress = log if progress is None else progress
        self.progress_timing = (FIRST_AFTER, EVERY)
        """(first line after, then at most one line every) seconds, for every Progress."""
        self.ledger = RunLedger()
        self.servers = ServerManager(settings, log_dir, self.scrubber, log=self.log,
                                     progress_line=self.progress_line, progress=self.progress,
                                     problems=self.ledger.problems)
        self.outages = OutageLedger(self.servers, self.scrubber, self.log)
        self.capabilities = CapabilityProbes(settings, self.servers)
        self.servers.on_cause = self.outages.add
        if settings.api_key:
            # Whether the server enforces the team's key is a finding of every run that gives one.
            self.servers.on_ready = self._probe_key

    def _probe_key(self) -> None:
        self.capabilities.probe("auth")

    def log(self, line: str) -> None:
        """Show a line to the user, scrubbed (always: use progress() for lines -q should hide)."""
        self._log(self.scrubber.text(line))

    def progress_line(self, line: str) -> None:
        """Show a progress line, scrubbed; nothing under -q."""
        self._progress(self.scrubber.text(line))

    def progress(self, phase: str) -> Progress:
        """Progress of one long phase: `update(text)` often, `done(text)` once (lines throttled)."""
        first_after, every = self.progress_timing
        return Progress(phase, self.progress_line, first_after=first_after, every=every)

    def capability_matrix(self) -> dict[str, dict[str, Any]]:
        """Per capability: required or probed, what the probe saw, and how its tests went.

        When checks ran against more than one model (--all-models), each row also gets `models`:
        each model's status by the same rules, over that model's checks only. The checks that ran
        once, unparametrized, ran against the model under test and count for it; the probes asked
        that model too, so only its column falls back on what a probe saw.
        """
        matrix: dict[str, dict[str, Any]] = {}
        # A check that failed only because the server had already stopped says nothing about
        # the capability it exercises.
        aftermath = {test for cause in self.outages.causes for test in cause.consequences}
        entries = list(self.ledger.outcomes.values())
        default = self.servers.current.model if self.servers.current else None
        models = self._models_checked(entries, default)
        for name in CAPABILITIES:
            probe = self.capabilities.probes.get(name)
            tests, status = self._capability_status(name, entries, probe, aftermath)
            if not tests and probe is None and not self.capabilities.is_required(name):
                continue
            row: dict[str, Any] = {"required": self.capabilities.is_required(name), "status": status,
                                   "probe": probe.model_dump(mode="json") if probe else None, "tests": tests}
            if len(models) > 1:
                row["models"] = {
                    model: self._capability_status(
                        name, [e for e in entries if (e.model if e.model is not None else default) == model],
                        probe if model == default else None, aftermath)[1]
                    for model in models}
            matrix[name] = row
        return matrix

    def _models_checked(self, entries: list[CheckResult], default: str | None) -> list[str]:
        """The models checks ran against by name, in the order the server lists them."""
        named = {e.model for e in entries if e.model}
        if not named:
            return []
        if default is not None:
            named.add(default)
        listed = list(self.servers.current.served_models) if self.servers.current else []
        return sorted(named, key=lambda m: (listed.index(m) if m in listed else len(listed), m))

    def _capability_status(self, name: str, entries: list[CheckResult], probe: Any,
                           aftermath: set[str]) -> tuple[dict[str, int], str]:
        """(outcome counts of the capability's tests among `entries`, the status they and the probe give)."""
        tests: dict[str, int] = {}
        judged_bad = 0
        for entry in entries:
            if name in entry.capabilities:
                tests[entry.outcome] = tests.get(entry.outcome, 0) + 1
                judged_bad += entry.outcome in ("failed", "error") and entry.nodeid not in aftermath
        if judged_bad:
            status = "broken"
        elif probe is not None and probe.status != "supported":
            status = probe.status
        elif tests.get("passed"):
            status = "supported"
        else:
            status = probe.status if probe else "not exercised"
        return tests, status

    def verdict(self, baseline: Findings | None = None) -> Verdict:
        """The go/no-go decision for this run; `baseline`: what the comparison with the baseline found."""
        warnings = [
            f"optional capability {name} is broken (its tests were skipped): {probe.detail}"
            for name, probe in self.capabilities.probes.items()
            if probe.status == "broken" and not self.capabilities.is_required(name)
        ]
        from pytest_inferaccept.keycheck import key_findings

        warned, failures = key_findings(self.settings.api_key, self.capabilities.probes.get("auth"),
                                        required=self.capabilities.is_required("auth"))
        # What got worse since the baseline is a NO-GO.
        regressions, changed = (baseline.regressions, baseline.warnings) if baseline is not None else ([], [])
        return decide(list(self.ledger.outcomes.values()), self.ledger.problems,
                      extra_warnings=[*warnings, *warned, *changed],
                      causes=[cause.sentence() for cause in self.outages.causes],
                      deselected=len(self.ledger.deselected),
                      failures=[*failures, *regressions])
