"""Checks of structured output: JSON text that parses and validates against a JSON schema."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.evidence import excerpt


def schema_errors(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Every way `instance` violates `schema` (JSON Schema draft 2020-12), as readable lines."""
    import jsonschema  # type: ignore[import-untyped, unused-ignore]

    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in validator.iter_errors(instance)]


def parse_json_text(text: str, what: str, finish_reason: str | None) -> Any:
    """Parse a model's JSON output; fail with the text when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as exc:
        cut = " (the output was cut by the token limit)" if finish_reason == "length" else ""
        fail(f"{what} is not valid JSON{cut}: {exc}", f"text: {excerpt(text, 600)!r}")


def check_json_object(text: str, what: str, finish_reason: str | None) -> dict[str, Any]:
    """The text is one JSON object (json_object mode)."""
    value = parse_json_text(text, what, finish_reason)
    if not isinstance(value, dict):
        fail(f"{what} is JSON but a {type(value).__name__}, not an object", f"text: {excerpt(text, 400)!r}")
    return value


def check_schema_instance(text: str, schema: Mapping[str, Any], what: str,
                          finish_reason: str | None) -> Any:
    """The text is JSON that validates against the schema (json_schema mode)."""
    value = parse_json_text(text, what, finish_reason)
    errors = schema_errors(value, schema)
    require(not errors, f"{what} does not match the requested JSON schema: {errors[0] if errors else ''}",
            f"all errors: {errors[:6]}\ntext: {excerpt(text, 500)!r}\n"
            f"schema: {excerpt(json.dumps(schema), 500)}")
    return value
