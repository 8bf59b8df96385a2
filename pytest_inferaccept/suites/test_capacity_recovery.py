"""Failure recovery (--capacity, a server the plugin launched): kill it mid-load and restart it.

The launched server's process group is killed 3 s into a 20 s closed-loop load and the same
command is started again on the same port. The scenario reports the time to ready, the time to
the first good answer, the requests lost and how they failed; a server that does not come back,
or a client left hanging past the request timeout, fails it. With --rollback-cmd, the rollback
drill stops it, starts the baseline's command on its port and times the way back to service.
docs/capacity.md has the rules.
"""

from __future__ import annotations

from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.loadgen import LoadGen


def test_recovery_after_a_kill(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    loadgen.require_capacity()
    result = loadgen.recovery()  # skips against a server the plugin did not launch
    inferaccept_evidence.note(result.headline)


def test_rollback_drill(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    """Stop the server under test, start the baseline's command (--rollback-cmd), time the way back
    to service (ready, warmed, smoke checks) against --rollback-within, then start the candidate again."""
    loadgen.require_capacity()
    result = loadgen.scenario("rollback")  # skips without --rollback-cmd or a launched server
    inferaccept_evidence.note(result.headline)
