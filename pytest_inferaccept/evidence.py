"""Evidence a test gathers: HTTP exchanges, notes, warnings and measured values.

`Evidence` and `Exchange` are the run model's own classes (model.py): what a test records is
what the results document holds. They load with the model, on first use, so that importing this
module (the plugin does, when pytest starts) stays as cheap as the text helpers it offers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.scrub import BODY_EXCERPT, excerpt, redact

if TYPE_CHECKING:
    from pytest_inferaccept.model import MAX_EXCHANGES, Evidence, Exchange

__all__ = [
    "BODY_EXCERPT", "MAX_EXCHANGES", "Evidence", "Exchange", "excerpt", "headers_that_matter", "redact",
]

_FROM_MODEL = ("Evidence", "Exchange", "MAX_EXCHANGES")


def __getattr__(name: str) -> Any:
    """The model's evidence classes, imported when first asked for (pydantic is not loaded before)."""
    if name in _FROM_MODEL:
        from pytest_inferaccept import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The headers a reader needs to act on a finding (framing, redirects, back-off, who answered);
# the rest (dates, cookies, the Authorization sent) only add noise or risk.
_HEADERS_THAT_MATTER = frozenset({
    "content-type", "content-length", "content-encoding", "transfer-encoding", "location",
    "retry-after", "server", "x-request-id", "request-id", "www-authenticate", "allow",
})


def headers_that_matter(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers worth keeping as evidence (rate-limit headers too), with lower-case names."""
    kept: dict[str, str] = {}
    for name, value in headers:
        low = name.lower()
        if low in _HEADERS_THAT_MATTER or low.startswith("x-ratelimit"):
            kept[low] = value
    return kept
