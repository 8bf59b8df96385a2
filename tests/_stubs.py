"""Stand-ins for the telemetry a scenario samples, where a test makes its steps up."""

from __future__ import annotations

from typing import Any


class NullSampler:
    """A telemetry sampler that samples nothing."""

    def __enter__(self) -> NullSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def now(self) -> float:
        return 0.0

    def peaks(self, since: float = 0.0, until: float = 0.0) -> dict[str, float]:
        return {}

    def absent(self) -> list[str]:
        return []

    def to_json(self) -> dict[str, Any]:
        return {}
