"""pytest-html integration: the verdict and plain-words answer in its summary, capability and
outcome columns, and each test's evidence as an extra. Active only when pytest-html is installed
and writing a report (--html); the standalone page (--inferaccept-html) needs none of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import pytest

from pytest_inferaccept.plugin.keys import FINISHED_KEY, SESSION_KEY

if TYPE_CHECKING:
    from pytest_inferaccept.model import RunDocument

_PLUGIN_NAME = "inferaccept-pytest-html"


def register_if_wanted(config: pytest.Config) -> None:
    """Register the hooks when pytest-html will write a report in this (main) process."""
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("html"):
        return
    if not config.getoption("htmlpath", None):
        return
    config.pluginmanager.register(PytestHtmlHooks(config), _PLUGIN_NAME)


def _payload(report: Any) -> dict[str, Any] | None:
    for key, value in getattr(report, "user_properties", ()):
        if key == "inferaccept" and isinstance(value, dict):
            return value
    return None


def _acceptance_outcome(report: Any, payload: dict[str, Any]) -> str:
    """The outcome in the report's words: a capability gate's skip says unsupported or broken."""
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        head = reason.partition(":")[0]
        if head in ("unsupported", "broken"):
            return head
    if report.failed and report.when != "call":
        return "error"
    return str(report.outcome)


class PytestHtmlHooks:
    """pytest-html's hooks, fed from the same data as the JSON and the standalone page."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list[str], summary: list[str], postfix: list[str],
                                    session: pytest.Session) -> None:
        """Put the verdict, its reasons and the answer in plain words above pytest-html's table."""
        from pytest_inferaccept.report.html import summary_fragment

        document = self._document()
        if document is not None:
            prefix.append(summary_fragment(document))

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        """Add the capability and acceptance-outcome columns."""
        cells.insert(2, '<th class="sortable" data-column-type="inferaccept-capability">Capability</th>')
        cells.insert(3, '<th class="sortable" data-column-type="inferaccept-outcome">Acceptance</th>')

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: Any, cells: list[str]) -> None:
        """Fill the two columns from the test's inferaccept data (empty for other tests)."""
        from markupsafe import escape

        payload = _payload(report)
        caps = ", ".join(payload.get("capabilities") or []) if payload else ""
        outcome = _acceptance_outcome(report, payload) if payload else ""
        cells.insert(2, f'<td class="col-inferaccept-capability">{escape(caps)}</td>')
        cells.insert(3, f'<td class="col-inferaccept-outcome">{escape(outcome)}</td>')

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Attach the test's evidence as an HTML extra (before pytest-html reads the extras)."""
        payload = _payload(report)
        if not payload or not payload.get("evidence"):
            return
        from pytest_inferaccept.report.html import evidence_fragment

        fragment = evidence_fragment(payload, self._settings_json())
        if fragment:
            # pytest-html ships no type information: its extras module is loaded by name.
            extras: Any = importlib.import_module("pytest_html.extras")
            report.extras = [*getattr(report, "extras", []), extras.html(fragment)]  # type: ignore[attr-defined]

    def _settings_json(self) -> dict[str, Any]:
        return dict(self.config.stash[SESSION_KEY].settings.describe())

    def _document(self) -> RunDocument | None:
        """The finished run (pytest-html renders after the plugin's own session finish)."""
        finished = self.config.stash.get(FINISHED_KEY, None)
        return finished.run if finished is not None else None
