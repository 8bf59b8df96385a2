"""Protocol checks: plain functions that raise CheckFailed with a title and the evidence."""

from __future__ import annotations

from pytest_inferaccept.checks._base import CheckFailed, fail, require

__all__ = ["CheckFailed", "fail", "require"]
