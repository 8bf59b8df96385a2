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
