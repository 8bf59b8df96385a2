"""Checks of the service endpoints: /health and /v1/models."""

from __future__ import annotations

from typing import Any

from pytest_inferaccept.checks._base import fail, require
from pytest_inferaccept.evidence import excerpt


def check_models_list(status: int, body: Any, served_model: str) -> list[str]:
    """GET /v1/models must be {object: list, data: [{id, object: model, ...}]} naming the model."""
    require(status == 200, f"/v1/models answered {status}, expected 200", excerpt(str(body), 300))
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        fail("/v1/models is not {object: list, data: [...]}", excerpt(str(body), 300))
    ids = []
    for i, entry in enumerate(body["data"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            fail(f"/v1/models data[{i}] has no string id", excerpt(str(entry), 200))
        ids.append(entry["id"])
    require(served_model in ids, f"/v1/models does not list the model under test {served_model!r}",
            f"listed: {ids}")
    return ids


def check_response_model(response_model: object, listed: list[str]) -> None:
    """The `model` field of a response must be one of the ids /v1/models lists."""
    require(response_model in listed,
            f"response names model {response_model!r}, which /v1/models does not list",
            f"listed: {listed}")


def check_models_shape(body: Any) -> list[str]:
    """/v1/models must be {object: list, data: [{id, object: model, created, owned_by}]}; returns warnings.

    Wrong values fail; absent object/created/owned_by only warn, since real servers omit some.
    """
    warnings: list[str] = []
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        fail("/v1/models is not {object: list, data: [...]}", excerpt(str(body), 300))
    if "object" not in body:
        warnings.append("/v1/models has no top-level object: 'list'")
    else:
        require(body["object"] == "list", f"/v1/models object is {body['object']!r}, expected 'list'",
                excerpt(str(body), 300))
    for i, entry in enumerate(body["data"]):
        where = f"/v1/models data[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
            fail(f"{where} has no non-empty string id", excerpt(str(entry), 200))
        missing = [k for k in ("object", "created", "owned_by") if entry.get(k) is None]
        if missing:
            warnings.append(f"{where} ({entry['id']}) lacks {', '.join(missing)}")
        if entry.get("object") is not None:
            require(entry["object"] == "model", f"{where}.object is {entry['object']!r}, expected 'model'",
                    excerpt(str(entry), 200))
        created = entry.get("created")
        if created is not None:
            require(isinstance(created, int) and not isinstance(created, bool),
                    f"{where}.created is {created!r}, expected unix seconds as an integer",
                    excerpt(str(entry), 200))
        owner = entry.get("owned_by")
        if owner is not None:
            require(isinstance(owner, str), f"{where}.owned_by is {owner!r}, expected a string")
    return warnings
