"""A fake OpenAI-compatible server with known timing and named fault injection."""

from __future__ import annotations

from pytest_inferaccept.fake.config import FakeConfig
from pytest_inferaccept.fake.faults import FAULTS
from pytest_inferaccept.fake.server import FakeServer

__all__ = ["FAULTS", "FakeConfig", "FakeServer"]
