"""Names a package exports from its modules, each imported on first use (PEP 562).

A module of its own so that a package of any room (`stats`, the facade) can use it without
importing the facade, which sits above every room.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, exports: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A package's `__getattr__`: a name of `exports` is imported from its module on first use and
    kept in `namespace` (the package's globals), so later lookups are plain attribute reads."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
