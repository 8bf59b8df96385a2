"""The go/no-go report: the typed run model, its JSON Schema, the HTML page, pytest-html hooks.

Importing this package is cheap; pydantic, Jinja2 and matplotlib load inside the functions that
render a report, never when the plugin loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_inferaccept.model import RunDocument

__all__ = ["write_html"]


def write_html(path: Path, document: RunDocument | dict[str, Any], *, secrets: tuple[str, ...] = ()) -> None:
    """Render a run (or a results document) as one self-contained HTML page at `path`."""
    from pytest_inferaccept.report.html import write

    write(path, document, secrets=secrets)
