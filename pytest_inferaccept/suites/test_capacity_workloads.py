"""How the workload moves latency (--capacity): latency per input and output length bucket, short
prompts delayed by long ones, a shared prefix against unique prompts, and multi-turn conversations.

Informational: each reports its figures and passes unless nothing could be measured (fail) or the
client limited it (INVALID); every step is bounded by --capacity-step-duration seconds. The context
window (--context-window, else what the server reports) caps the lengths. docs/capacity.md has
the details.
"""

from __future__ import annotations

from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.loadgen import LoadGen


def test_latency_by_length_bucket(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    loadgen.require_capacity()
    result = loadgen.lengths()
    inferaccept_evidence.note(result.headline)


def test_long_prompts_delay_short_ones(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    loadgen.require_capacity()
    result = loadgen.interference()
    inferaccept_evidence.note(result.headline)


def test_shared_prefix_against_unique_prompts(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    loadgen.require_capacity()
    result = loadgen.prefix_cache()
    inferaccept_evidence.note(result.headline)


def test_multi_turn_conversations(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    loadgen.require_capacity()
    result = loadgen.multi_turn()
    inferaccept_evidence.note(result.headline)
