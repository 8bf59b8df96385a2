"""Stash keys: where the plugin keeps its state on config and items."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_inferaccept.markers import CapabilitySpec, SloSpec
from pytest_inferaccept.run.session import AcceptanceSession

SESSION_KEY = pytest.StashKey[AcceptanceSession]()
CAPABILITY_KEY = pytest.StashKey[CapabilitySpec]()
SLO_KEY = pytest.StashKey[SloSpec | None]()
ACCEPTANCE_KEY = pytest.StashKey[bool]()

if TYPE_CHECKING:
    from pytest_inferaccept.evidence import Evidence
    from pytest_inferaccept.model import CapacityScenario
    from pytest_inferaccept.run.finish import FinishedRun
    from pytest_inferaccept.run.load import LoadResult

EVIDENCE_KEY: pytest.StashKey[Evidence] = pytest.StashKey()
LOAD_KEY = pytest.StashKey[list["LoadResult"]]()
"""The load runs a test made through `loadgen` (judged when the test ends)."""
CAPACITY_KEY = pytest.StashKey[list["CapacityScenario"]]()
"""The capacity scenarios a test ran through `loadgen` (each judged as one scenario)."""
CORRECTNESS_KEY = pytest.StashKey[dict[str, Any]]()
"""The correctness suite's section (the known-answer set's answers and accuracy, plain JSON)."""
FINISHED_KEY: pytest.StashKey[FinishedRun] = pytest.StashKey()
"""The finished run (document and verdict, built once at session finish) that every output reads."""
