"""What the upgrade gate compares and how strictly: tolerances per figure, the answer-drift policy.

Plain data beside `settings`, which resolves it; the comparison room above reads it. Standard
library only: the settings import this module when the plugin loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

LATENCIES: tuple[str, ...] = ("ttft", "tpot", "itl", "e2e")
STATS: tuple[str, ...] = ("p50", "p95", "p99")
LATENCY_TOLERANCE = 0.10
"""Relative: a latency regresses when its new interval lies above the old one by more than 10%."""

TAIL_TOLERANCE = 0.25
"""p99s, and every ITL figure: a tail moves with the client host's own scheduling between runs,
and the ITL interval pools the gaps of one answer as if they were independent, so it is too
narrow; two clean runs on a busy 2-core client differed by up to 20% there."""


def _default(metric: str, stat: str) -> float:
    return TAIL_TOLERANCE if metric == "itl" or stat == "p99" else LATENCY_TOLERANCE


DEFAULT_TOLERANCES: dict[str, float] = {
    **{f"{metric}_{stat}": _default(metric, stat) for metric in LATENCIES for stat in STATS},
    "throughput": 0.10,   # relative, output tokens/s
    "request_rate": 0.10,  # relative, requests/s
    "error_rate": 0.01,   # absolute: one percentage point more failed requests
    "goodput": 0.05,      # absolute: five points fewer requests within the SLO
}
"""Every figure the gate compares, with its default tolerance."""

ABSOLUTE: frozenset[str] = frozenset({"error_rate", "goodput"})
"""Figures that are fractions already: their tolerance is in points, not relative."""

DriftPolicy = Literal["warn", "fail"]


class PolicyError(ValueError):
    """A bad gate option; the message names what is allowed."""


@dataclass(frozen=True, kw_only=True)
class GateSettings:
    """The upgrade gate's options, resolved once."""

    baseline_path: Path | None = None
    tolerances: tuple[tuple[str, float], ...] = ()
    """Overrides given with --regression-tolerance, as (figure, fraction)."""
    answer_drift: DriftPolicy = "warn"
    answer_threshold: float = 0.9
    """A changed answer less similar than this to the baseline's has drifted."""
    answers_file: Path | None = None

    def tolerance(self, figure: str) -> float:
        """The tolerance for one figure: its own override, else its metric's, else the default."""
        given = dict(self.tolerances)
        metric = figure.split("_p", 1)[0] if figure.split("_")[-1] in STATS else figure
        for key in (figure, metric):
            if key in given:
                return given[key]
        return DEFAULT_TOLERANCES.get(figure, LATENCY_TOLERANCE)

    def describe(self) -> dict[str, object]:
        """JSON-ready form: every tolerance in force, overrides applied."""
        return {"tolerances": {key: self.tolerance(key) for key in DEFAULT_TOLERANCES},
                "answer_drift": self.answer_drift, "answer_threshold": self.answer_threshold,
                "answers_file": str(self.answers_file) if self.answers_file else None}


def parse_tolerances(text: str | None) -> tuple[tuple[str, float], ...]:
    """Parse KEY=FRACTION lines; a key is a figure (ttft_p95, throughput) or a latency (all its stats)."""
    allowed = (*DEFAULT_TOLERANCES, *LATENCIES)
    found: dict[str, float] = {}
    for line in (text or "").replace(",", "\n").splitlines():
        entry = line.strip()
        if not entry:
            continue
        key, sep, raw = entry.partition("=")
        key = key.strip()
        if not sep or key not in allowed:
            raise PolicyError(f"--regression-tolerance {entry!r}: expected KEY=FRACTION with KEY one of "
                              f"{', '.join(allowed)}")
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not 0 <= value <= 10:
            raise PolicyError(f"--regression-tolerance {entry!r}: the fraction must be a number from 0 "
                              "to 10 (0.1 = 10%)")
        found[key] = value
    return tuple(found.items())


def parse_gate(baseline: str | None, tolerances: str | None, drift: str | None, threshold: str | None,
               answers_file: str | None) -> GateSettings:
    """Build GateSettings from raw option values."""
    policy = (drift or "warn").strip()
    if policy not in ("warn", "fail"):
        raise PolicyError(f"--answer-drift {policy!r} is unknown; allowed: warn, fail")
    try:
        minimum = float(threshold) if threshold else 0.9
    except ValueError:
        minimum = -1.0
    if not 0 <= minimum <= 1:
        raise PolicyError(f"--answer-drift-threshold {threshold!r} must be a similarity from 0 to 1")
    if answers_file:
        _check_answers_file(Path(answers_file))
    return GateSettings(baseline_path=Path(baseline) if baseline else None,
                        tolerances=parse_tolerances(tolerances),
                        answer_drift="fail" if policy == "fail" else "warn", answer_threshold=minimum,
                        answers_file=Path(answers_file) if answers_file else None)


def _check_answers_file(path: Path) -> None:
    """Read the team's prompts once when the run starts: a bad file stops it as a usage error, before
    anything is sent, instead of failing the answer checks (and calling the chat capability broken)."""
    from pytest_inferaccept.answers import AnswersFileError, load_answers_file  # standard library only

    try:
        load_answers_file(path)
    except AnswersFileError as exc:
        raise PolicyError(str(exc)) from None
