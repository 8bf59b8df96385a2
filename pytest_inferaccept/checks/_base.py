"""The failure type every check raises, and the small helpers the checks share."""

from __future__ import annotations

import json
from typing import NoReturn

from pytest_inferaccept.evidence import excerpt


class CheckFailed(AssertionError):
    """A check found the server wrong: a title, then what was measured against what was expected."""

    def __init__(self, title: str, detail: str = "") -> None:
        self.title = title
        self.detail = detail
        super().__init__(f"{title}\n{detail}" if detail else title)


def fail(title: str, detail: str = "") -> NoReturn:
    """Raise CheckFailed."""
    raise CheckFailed(title, detail)


def require(condition: object, title: str, detail: str = "") -> None:
    """Raise CheckFailed(title, detail) unless the condition holds."""
    if not condition:
        raise CheckFailed(title, detail)


def show(value: object, limit: int = 400) -> str:
    """A value as a failure shows it: its JSON (or repr), cut to `limit` characters."""
    try:
        return excerpt(json.dumps(value), limit)
    except (TypeError, ValueError):
        return excerpt(repr(value), limit)


def is_int(value: object) -> bool:
    """An integer in JSON's sense: `True` is no count."""
    return isinstance(value, int) and not isinstance(value, bool)
