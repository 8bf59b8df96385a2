"""The machine-readable results document (format: docs/results-json.md)."""

from __future__ import annotations

import json
import os
import platform
import socket
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_inferaccept._version import __version__
from pytest_inferaccept.model import SCHEMA_ID as SCHEMA
from pytest_inferaccept.run.ledger import now as _now
from pytest_inferaccept.run.session import AcceptanceSession
from pytest_inferaccept.scrub import MASK, secret_key_name

MAX_NAMED = 10
"""How many deselected checks the document names (it counts them all)."""


def build_body(session: AcceptanceSession) -> dict[str, Any]:
    """The document of a finished session without its decision: everything the baseline comparison
    and the verdict read (`assemble` adds the verdict and the comparison)."""
    server = session.servers.current
    return {
        "schema": SCHEMA,
        "conditions": {
            "plugin_version": __version__,
            "python": platform.python_version(),
            "client_host": socket.gethostname(),
            "client_platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "started_at": session.ledger.started_at,
            "finished_at": session.ledger.finished_at or _now(),
            "settings": session.settings.describe(),
            "pytest_version": _version_of("pytest"),
            "load_average": _load_average(),
            "declared": {key: (MASK if secret_key_name(key) else value)
                         for key, value in session.settings.conditions},
        },
        "server": server.model_dump(mode="json") if server else None,
        "problems": list(session.ledger.problems),
        "other_failures": list(session.ledger.other_failures),
        "exit_status": session.ledger.exit_status,
        "capabilities": session.capability_matrix(),
        "causes": [cause.model_dump(mode="json") for cause in session.outages.causes],
        "deselected": {"count": len(session.ledger.deselected),
                       "examples": session.ledger.deselected[:MAX_NAMED]},
        "tests": session.ledger.entries(),
    }


def assemble(body: dict[str, Any], verdict: dict[str, Any],
             baseline: dict[str, Any] | None) -> dict[str, Any]:
    """The whole document, each part as written: the body with the verdict after its schema id, the
    comparison last."""
    return {"schema": body["schema"], "verdict": verdict,
            **{k: v for k, v in body.items() if k != "schema"}, "baseline": baseline}


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
