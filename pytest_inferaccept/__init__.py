"""pytest-inferaccept: acceptance tests for OpenAI-compatible LLM inference servers.

The names a team's own tests and tools use, importable from here:

    from pytest_inferaccept import LoadGen, LoadResult, SloSpec, Evidence

They load on first use, so the plugin itself stays cheap to import (pytest imports this package
before every run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_inferaccept._lazy import lazy_names
from pytest_inferaccept._version import __version__

_EXPORTS: dict[str, str] = {
    # the loadgen fixture and what a run gives back
    "LoadGen": "pytest_inferaccept.loadgen",
    "LoadResult": "pytest_inferaccept.run.load",
    "LoadInputError": "pytest_inferaccept.loadgen",
    "CapacityResult": "pytest_inferaccept.capacity.scenarios",
    "RequestRecord": "pytest_inferaccept.load.records",
    "LoadSummary": "pytest_inferaccept.stats.summary",
    "Estimate": "pytest_inferaccept.stats.percentiles",
    "SloEvaluation": "pytest_inferaccept.stats.slo",
    "SloRow": "pytest_inferaccept.stats.slo",
    # markers, parsed
    "SloSpec": "pytest_inferaccept.markers",
    "LatencyLimit": "pytest_inferaccept.markers",
    # evidence and findings
    "Evidence": "pytest_inferaccept.evidence",
    "CheckFailed": "pytest_inferaccept.checks._base",
    # the server under test and the results document
    "ServerUnderTest": "pytest_inferaccept.server",
    "RunDocument": "pytest_inferaccept.model",
}

__all__ = [
    "CapacityResult", "CheckFailed", "Estimate", "Evidence", "LatencyLimit", "LoadGen", "LoadInputError",
    "LoadResult", "LoadSummary", "RequestRecord", "RunDocument", "ServerUnderTest", "SloEvaluation",
    "SloRow", "SloSpec", "__version__",
]

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.scenarios import CapacityResult
    from pytest_inferaccept.checks._base import CheckFailed
    from pytest_inferaccept.evidence import Evidence
    from pytest_inferaccept.load.records import RequestRecord
    from pytest_inferaccept.loadgen import LoadGen, LoadInputError
    from pytest_inferaccept.markers import LatencyLimit, SloSpec
    from pytest_inferaccept.model import RunDocument
    from pytest_inferaccept.run.load import LoadResult
    from pytest_inferaccept.server import ServerUnderTest
    from pytest_inferaccept.stats.percentiles import Estimate
    from pytest_inferaccept.stats.slo import SloEvaluation, SloRow
    from pytest_inferaccept.stats.summary import LoadSummary


# Nothing in the package imports this facade: the rooms take the helper and the version from
# their own modules, so the facade stays above every room and outside every import cycle.
__getattr__ = lazy_names(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
