"""Capacity and stability (--capacity): a concurrency ladder to the knee, an open-loop sweep, a push
to failure in concurrency and in prompt length, and a soak (--soak-duration).

Each scenario is bounded in requests and seconds per step (--capacity-step-requests,
--capacity-step-duration) and stops by itself; a circuit breaker (--breaker-error-rate,
--breaker-latency) ends a climb early. The SLO (--slo, --slo-profile) decides the highest
compliant level; --capacity-min N makes a level below N a NO-GO. docs/capacity.md has the rules.
The ladder, the soak and the push grade known-answer items beside every load and after it
(--correctness-under-load; docs/correctness.md, "Under load"). A traffic spike and a burst of
cancelled requests follow the push.
"""

from __future__ import annotations

import pytest

from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.loadgen import LoadGen


def test_concurrency_ladder(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    loadgen.require_capacity()
    result = loadgen.ladder(graded=True)
    inferaccept_evidence.note(result.headline)


def test_rate_sweep(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    loadgen.require_capacity()
    plan = loadgen.rates_around_knee()  # the rates, why these, and the ladder knee they were built on
    result = loadgen.sweep(plan)
    result.notes.insert(0, f"rates: {plan.why}")
    inferaccept_evidence.note(f"rates {', '.join(f'{r:g}' for r in plan.rates)} req/s ({plan.why}): "
                              f"{result.headline}")


def test_soak(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    loadgen.require_capacity()
    duration = loadgen.settings.capacity.soak_duration
    if not duration:
        pytest.skip("the soak runs with --soak-duration SECONDS")
    result = loadgen.soak(duration=duration, plan=loadgen.soak_level(), graded=True)
    inferaccept_evidence.note(result.headline)


def test_push_to_failure(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    loadgen.require_capacity()
    result = loadgen.push(graded=True)
    inferaccept_evidence.note(result.headline)


def test_traffic_spike(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    """Steady traffic at the soak's level, four times it for 30 s, back for 60 s: failures during
    the spike, shedding or queueing, and the time until latency is back within the SLO."""
    loadgen.require_capacity()
    result = loadgen.scenario("spike")
    inferaccept_evidence.note(result.headline)


def test_cancelled_requests_free_the_server(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    """A burst of streams cut mid-answer and connections closed early: the server's gauges back at
    rest, no tokens generated for nobody, nothing hung, requests after as fast as before."""
    loadgen.require_capacity()
    result = loadgen.scenario("cancel")
    inferaccept_evidence.note(result.headline)


def test_prompt_length_boundary(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    loadgen.require_capacity()
    result = loadgen.push_length()
    inferaccept_evidence.note(result.headline)
