"""The machine-readable results document (format: docs/results-json.md)."""

from __future__ import annotations

import json
import os
import platform
import socket
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_inferaccept import __version__
from pytest_inferaccept.scrub import MASK, secret_key_name
from pytest_inferaccept.session import AcceptanceSession, _now
from pytest_inferaccept.verdict import Verdict

SCHEMA = "pytest-inferaccept/results/1"
MAX_NAMED = 10
"""How many deselected checks the document names (it counts them all)."""


def build(session: AcceptanceSession, verdict: Verdict) -> dict[str, Any]:
    """Assemble the results document from a finished session."""
    server = session._server
    return {
        "schema": SCHEMA,
        "verdict": verdict.to_json(),
        "conditions": {
            "plugin_version": __version__,
            "python": platform.python_version(),
            "client_host": socket.gethostname(),
            "client_platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "started_at": session.started_at,
            "finished_at": session.finished_at or _now(),
            "settings": session.settings.describe(),
            "pytest_version": _version_of("pytest"),
            "load_average": _load_average(),
            "declared": {key: (MASK if secret_key_name(key) else value)
                         for key, value in session.settings.conditions},
        },
        "server": server.to_json() if server else None,
        "problems": list(session.problems),
        "other_failures": list(session.other_failures),
        "exit_status": session.exit_status,
        "capabilities": session.capability_matrix(),
        "causes": [cause.to_json() for cause in session.causes],
        "deselected": {"count": len(session.deselected), "examples": session.deselected[:MAX_NAMED]},
        "tests": list(session.outcomes.values()),
        "baseline": session.baseline,
    }


def _version_of(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _load_average() -> list[float] | None:
    # How busy the client was: a loaded client skews every timing it took. Not on Windows.
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def write(path: Path, document: dict[str, Any]) -> None:
    """Write the document atomically (a half-written file never replaces a good one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
