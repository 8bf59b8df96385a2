"""Reading a previous results document, with a message that names what is wrong with a bad one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_inferaccept.model import SCHEMA_ID, RunDocument


class BaselineError(ValueError):
    """A results file that cannot serve as a baseline: missing, not JSON, truncated, another schema."""


def read_document(path: Path) -> RunDocument:
    """Load and validate a results document; BaselineError says what is wrong and where."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BaselineError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise BaselineError(f"{path}: not a results file (not UTF-8 text)") from None
    return parse_document(text, str(path))


def parse_document(text: str, name: str) -> RunDocument:
    """Validate the text of a results document (see read_document)."""
    if not text.strip():
        raise BaselineError(f"{name}: the file is empty")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        # A document cut short (the writer was killed; a partial upload) starts as one and never ends.
        if text.lstrip().startswith("{") and not text.rstrip().endswith("}"):
            raise BaselineError(f"{name}: truncated: the JSON ends at character {exc.pos} before the "
                                "document is complete (was the run interrupted while writing?)") from None
        where = f"line {exc.lineno}, column {exc.colno}"
        raise BaselineError(f"{name}: not JSON ({exc.msg} at {where})") from None
    if not isinstance(data, dict):
        raise BaselineError(f"{name}: not a results document (a JSON {type(data).__name__}, not an object)")
    schema = data.get("schema")
    if schema != SCHEMA_ID:
        if isinstance(schema, str) and schema.startswith("pytest-inferaccept/results/"):
            raise BaselineError(f"{name}: schema {schema!r} is another version of the results document; "
                                f"this plugin reads {SCHEMA_ID!r}: rerun the baseline with this version")
        raise BaselineError(f"{name}: not a pytest-inferaccept results document (schema {schema!r}, "
                            f"expected {SCHEMA_ID!r})")
    from pydantic import ValidationError

    from pytest_inferaccept.model import load

    try:
        return load(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BaselineError(f"{name}: not a valid results document: {where}: {first['msg']} "
                            f"({exc.error_count()} problem(s))") from None
