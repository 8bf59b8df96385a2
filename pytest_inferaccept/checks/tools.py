"""Checks of tool calling: call shape, arguments as a JSON string that fits the schema, finish_reason."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.checks.generation import ChatResult
from pytest_inferaccept.checks.structured import schema_errors
from pytest_inferaccept.evidence import excerpt


def functions_of(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The parameter schema of every tool, by function name."""
    return {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}


def check_tool_calls(result: ChatResult, tools: Sequence[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    """Every call is {id, type: function, function: {name, arguments}} naming a declared tool, with
    `arguments` a string of JSON that validates against that tool's parameter schema.

    Returns (name, parsed arguments) per call.
    """
    schemas = functions_of(tools)
    mode = "streamed" if result.streamed else "non-stream"
    out = []
    for i, call in enumerate(result.tool_calls):
        where = f"{mode} tool_calls[{i}]"
        shown = excerpt(json.dumps(call), 500)
        if not isinstance(call, dict):
            fail(f"{where} is not an object", shown)
        require(isinstance(call.get("id"), str) and call["id"], f"{where} has no id", shown)
        require(call.get("type") == "function", f"{where}.type is {call.get('type')!r}, expected 'function'",
                shown)
        fn = call.get("function")
        if not isinstance(fn, dict):
            fail(f"{where} has no function object", shown)
        name = fn.get("name")
        require(name in schemas, f"{where} calls {name!r}, which is not among the tools {sorted(schemas)}",
                shown)
        args = fn.get("arguments")
        if not isinstance(args, str):
            fail(f"{where}.function.arguments is a JSON {type(args).__name__}, expected a string holding "
                 "JSON (TGI #2461)", shown)
        try:
            parsed = json.loads(args)
        except ValueError as exc:
            fail(f"{where}.function.arguments is not valid JSON: {exc}", f"arguments: {args[:400]!r}")
        errors = schema_errors(parsed, schemas[str(name)])
        require(not errors, f"{where} arguments do not match {name}'s parameter schema: {errors[:1]}",
                f"arguments: {args[:400]!r}\nschema: {excerpt(json.dumps(schemas[str(name)]), 400)}")
        out.append((str(name), parsed))
    return out


def check_finish_reason(result: ChatResult, allowed: Collection[str], situation: str) -> None:
    """finish_reason must be one of `allowed` in this situation."""
    require(result.finish_reason in allowed,
            f"finish_reason is {result.finish_reason!r} {situation}, expected "
            f"{' or '.join(repr(a) for a in allowed)}",
            f"{result.describe()}\ntool_calls: {excerpt(json.dumps(result.tool_calls), 300)}")


def require_calls(result: ChatResult, situation: str) -> None:
    """At least one tool call must be present."""
    require(result.tool_calls, f"no tool call {situation}",
            f"{result.describe()}\nmessage: {excerpt(json.dumps(result.message), 400)}")
