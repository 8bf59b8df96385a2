"""Reading a number written as text (shared by the item schema and the number grader)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation


def parse_number(text: str) -> Decimal | None:
    """A number written as text ("1,234", "56.0", "-3", "$12") as a Decimal, or None."""
    s = text.strip().replace("−", "-").lstrip("$€£").rstrip("%").replace(",", "")
    try:
        value = Decimal(s)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None
