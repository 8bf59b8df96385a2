"""The failure type every check raises."""

from __future__ import annotations

from typing import NoReturn


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
