"""Settings of the robustness suites, read in one place into a frozen object."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

PolicyName = Literal["strict", "standard", "lenient"]
POLICIES: tuple[PolicyName, ...] = ("strict", "standard", "lenient")

ENV_POLICY = "INFERACCEPT_STATUS_POLICY"
ENV_FUZZ_EXAMPLES = "INFERACCEPT_FUZZ_EXAMPLES"
ENV_FUZZ_SEED = "INFERACCEPT_FUZZ_SEED"
ENV_FUZZ_BUDGET = "INFERACCEPT_FUZZ_BUDGET"
ENV_SUITE_BUDGET = "INFERACCEPT_ROBUSTNESS_BUDGET"
ENV_LIVENESS_TIMEOUT = "INFERACCEPT_LIVENESS_TIMEOUT"
ENV_LONG_PROMPT_WORDS = "INFERACCEPT_LONG_PROMPT_WORDS"


@dataclass(frozen=True, kw_only=True)
class RobustnessConfig:
    """How strictly answers to bad input are judged, and how much fuzzing is done."""

    policy: PolicyName = "standard"
    """strict: only the expected 4xx in the OpenAI envelope passes; standard: another 4xx or a
    non-OpenAI error body warns; lenient: any 4xx with a JSON error body passes."""
    fuzz_examples: int = 50
    """How many generated requests the fuzz test sends at most."""
    fuzz_seed: int | None = None
    """Seed for the fuzz generator (replays a finding); None: random, derandomised under CI."""
    fuzz_budget: float = 40.0
    """Seconds of generation the fuzz test spends at most before it stops exploring."""
    suite_budget: float = 900.0
    """Seconds the whole robustness catalogue may take; later cases are marked not judged."""
    liveness_timeout: float = 30.0
    """Seconds the 1-token completion after each bad request may take."""
    long_prompt_words: int = 200_000
    """Words in the over-long prompt (one word is at least one token in every common tokenizer);
    must exceed the server's context window."""


def _number(environ: Mapping[str, str], name: str, default: float, *, integer: bool = False,
            minimum: float = 0.0) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"${name} must be {kind} > {minimum:g}, got {raw!r}") from None
    if not value > minimum or value != value or value == float("inf"):
        raise ValueError(f"${name} must be > {minimum:g}, got {raw!r}")
    return value


def load_config(environ: Mapping[str, str] | None = None) -> RobustnessConfig:
    """Resolve the robustness settings from the environment; raise ValueError naming what is allowed."""
    env = os.environ if environ is None else environ
    policy = env.get(ENV_POLICY, "").strip() or "standard"
    if policy not in POLICIES:
        raise ValueError(f"${ENV_POLICY} {policy!r} is unknown; allowed: {', '.join(POLICIES)}")
    seed_raw = env.get(ENV_FUZZ_SEED, "").strip()
    try:
        seed = int(seed_raw) if seed_raw else None
    except ValueError:
        raise ValueError(f"${ENV_FUZZ_SEED} must be an integer, got {seed_raw!r}") from None
    return RobustnessConfig(
        policy=policy,  # type: ignore[arg-type,unused-ignore]  # checked against POLICIES above
        fuzz_examples=int(_number(env, ENV_FUZZ_EXAMPLES, 50, integer=True)),
        fuzz_seed=seed,
        fuzz_budget=_number(env, ENV_FUZZ_BUDGET, 40.0),
        suite_budget=_number(env, ENV_SUITE_BUDGET, 900.0),
        liveness_timeout=_number(env, ENV_LIVENESS_TIMEOUT, 30.0),
        long_prompt_words=int(_number(env, ENV_LONG_PROMPT_WORDS, 200_000, integer=True)),
    )
