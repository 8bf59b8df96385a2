"""Fuzzing: generated requests around the contract never get a 5xx, a hang or a dead server.

Bounded: at most $INFERACCEPT_FUZZ_EXAMPLES requests and $INFERACCEPT_FUZZ_BUDGET seconds of
exploration. A finding names its seed ($INFERACCEPT_FUZZ_SEED replays it) and the shrunk request
as a curl command.
"""

from __future__ import annotations

import os
import random
import time
from datetime import timedelta

import httpx
from hypothesis import HealthCheck, Phase, given, seed, settings

from pytest_inferaccept.checks import fail
from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.robustness.cases import CHAT_PATH, JSON_TYPE, RequestSpec
from pytest_inferaccept.robustness.config import ENV_FUZZ_SEED, PolicyName
from pytest_inferaccept.robustness.policy import classify
from pytest_inferaccept.robustness.strategies import FUZZ_CASE, FuzzRequest, fuzz_requests
from pytest_inferaccept.server import ServerUnderTest
from pytest_inferaccept.settings import Settings
from pytest_inferaccept.suites._harness import Harness, config_or_exit


def _seed(configured: int | None) -> int:
    """The configured seed; a fixed one under CI (derandomised); else a fresh random one."""
    if configured is not None:
        return configured
    if os.environ.get("CI"):
        return 0
    return random.SystemRandom().randrange(2**32)


def test_generated_requests_never_break_the_server(inferaccept_settings: Settings, http_client: httpx.Client,
                                                   model: str, inferaccept_server: ServerUnderTest,
                                                   inferaccept_evidence: Evidence) -> None:
    cfg = config_or_exit(inferaccept_settings)
    harness = Harness.for_test(inferaccept_settings, cfg, http_client, model, inferaccept_server,
                               inferaccept_evidence)
    run_seed = _seed(cfg.fuzz_seed)
    replay = f"replay with --fuzz-seed {run_seed} (or {ENV_FUZZ_SEED}={run_seed})"
    # the envelope is a property of every 4xx here: only lenient lets a foreign error body pass
    policy: PolicyName = "lenient" if cfg.policy == "lenient" else "strict"
    fatal: list[str] = []
    failing: set[bytes] = set()
    sent = [0]
    started = time.monotonic()
    per_example = harness.timeout() + harness.timeout(cfg.liveness_timeout) + 10

    @seed(run_seed)
    @settings(max_examples=cfg.fuzz_examples, deadline=timedelta(seconds=per_example), database=None,
              derandomize=False, suppress_health_check=list(HealthCheck), print_blob=False,
              phases=[Phase.explicit, Phase.generate, Phase.shrink])
    @given(fuzz_requests(model))
    def probe(req: FuzzRequest) -> None:
        # a dead or hung server ends the run at once: shrinking would cost a timeout per step
        if fatal:
            return
        over_budget = time.monotonic() - started > cfg.fuzz_budget
        if over_budget and req.body not in failing:
            return
        spec = RequestSpec(case_id="fuzz", method="POST", path=CHAT_PATH,
                           headers={"Content-Type": JSON_TYPE}, body=req.body, stream=req.stream)
        sent[0] += 1
        answer = harness.send(spec)
        if answer.status is None:
            fatal.append(f"no answer to a generated request: {answer.error} ({replay})\n"
                         f"request: {harness.curl(spec)}")
            return
        dead = None if answer.status == 200 and answer.error is None else harness.dead_after(spec)
        if dead:
            fatal.append(f"{dead}\n({replay})")
            return
        judgement = classify(FUZZ_CASE, answer.status, answer.body, answer.elapsed, policy=policy,
                             error=answer.error)
        if judgement.outcome == "fail":
            failing.add(req.body)
            fail(judgement.reason, f"request: {harness.curl(spec)}\n({replay})")
        if judgement.outcome == "warn":
            harness.evidence.warn(f"fuzz: {judgement.reason}")

    try:
        probe()
    finally:
        inferaccept_evidence.record("fuzz", {"seed": run_seed, "requests": sent[0],
                                             "seconds": round(time.monotonic() - started, 2)})
    if fatal:
        fail(fatal[0].splitlines()[0], "\n".join(fatal[0].splitlines()[1:]))
