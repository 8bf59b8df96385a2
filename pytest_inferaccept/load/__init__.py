"""The load engine: workloads, schedules, streaming client, worker processes, telemetry (no pytest).

Importing this package is cheap; the public names load their modules on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_inferaccept.load.engine import (
        LoadInterrupted,
        LoadRun,
        read_records,
        run_load,
        run_load_async,
        write_records,
    )
    from pytest_inferaccept.load.records import ERROR_CLASSES, RequestRecord
    from pytest_inferaccept.load.spec import LoadSpec
    from pytest_inferaccept.load.workloads import (
        Fixed,
        Normal,
        Sampled,
        SyntheticWorkload,
        TraceWorkload,
        Uniform,
        Workload,
        WorkloadError,
        bucket,
        load_trace,
        parse_distribution,
    )

_WHERE = {
    "LoadInterrupted": "engine", "LoadRun": "engine", "LoadSpec": "spec", "read_records": "engine",
    "run_load": "engine", "run_load_async": "engine", "write_records": "engine",
    "ERROR_CLASSES": "records", "RequestRecord": "records",
    "Fixed": "workloads", "Normal": "workloads", "Sampled": "workloads", "SyntheticWorkload": "workloads",
    "TraceWorkload": "workloads", "Uniform": "workloads", "Workload": "workloads",
    "WorkloadError": "workloads", "bucket": "workloads", "load_trace": "workloads",
    "parse_distribution": "workloads",
}

__all__ = [
    "ERROR_CLASSES", "Fixed", "LoadInterrupted", "LoadRun", "LoadSpec", "Normal", "RequestRecord",
    "Sampled", "SyntheticWorkload", "TraceWorkload", "Uniform", "Workload", "WorkloadError", "bucket",
    "load_trace", "parse_distribution", "read_records", "run_load", "run_load_async", "write_records",
]


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (aiohttp and pydantic stay unloaded until then)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
