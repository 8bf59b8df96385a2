"""What every capacity scenario shares: a step becomes a row, and the result is built in one place.

A scenario runs bounded load steps through a `measure` callable (the `loadgen` fixture's, so every
step uses the session's server, key, bounds and records file), samples telemetry beside them,
turns each step into a row (`step_row`, a `CapacityStep` or its kind's step type) and ends with
`conclude`: its status, decided once from the failing steps, the client's limits and the
scenario's own judgement, in that order, beside its headline, findings, explanations, series and
the SLO its steps were judged with. Everything it builds is the run model's own type (model.py's
capacity section), so the results document writes it as built. Each scenario is a module of
its own (`ladder`, `sweep`, `soak`, `push`, `push_length`, `recovery`, `lengths`, `interference`,
`prefix_cache`, `multi_turn`; `climb` is what the ladder and the sweep share, `effects` what the
last four share); the words they all share are here. Nothing here imports pytest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, TypeVar, overload

from pytest_inferaccept.model import (
    CapacityExplanation,
    CapacityFindings,
    CapacityParams,
    CapacityScenario,
    CapacitySeries,
    CapacityStep,
    CapacityTelemetry,
)

if TYPE_CHECKING:
    from pytest_inferaccept.capacity.sampler import Sampler
    from pytest_inferaccept.markers import SloSpec
    from pytest_inferaccept.run.load import LoadResult

Status = Literal["pass", "fail", "invalid"]
Kind = str
"""A kind of scenario registered in scenario_kinds.py (the report words, draws and charts each by
kind: report/capacity_kinds.py, else generically from the registry)."""
Measure = Callable[..., "LoadResult"]
"""measure(tag, **loadgen.run keyword arguments) -> LoadResult, not judged on its own."""
Alive = Callable[[], tuple[bool, str]]
"""Does the server still answer a small request? (ok, what was seen)."""
Say = Callable[[str], None]
"""Where a scenario tells its progress, one line a step (the terminal's `inferaccept:` lines)."""
Judgement = tuple[Status, str]
"""A scenario's own finding against the server: "fail" or "invalid", and why, in one sentence."""
CapacityResult = CapacityScenario
"""One scenario's outcome: the run model's own type, as the results document and the report take it."""
Step = TypeVar("Step", bound=CapacityStep)


def quiet(_: str) -> None:
    """The default `say`: print nothing."""


def conclude(
    *,
    kind: Kind,
    label: str,
    steps: Sequence[CapacityStep],
    params: CapacityParams,
    headline: str,
    slo: SloSpec | None,
    failing: str = "",
    bound: str = "",
    judged: Sequence[Judgement] = (),
    failures_when_bound: bool = False,
    findings: CapacityFindings | None = None,
    explanations: Sequence[CapacityExplanation] = (),
    series: CapacitySeries | None = None,
    telemetry: CapacityTelemetry | None = None,
    notes: Sequence[str] = (),
) -> CapacityScenario:
    """A scenario's result, its status decided once: failing steps, then the client's limits, then its own.

    `failing` is the first failing step's `failure_text` when the scenario counts failing steps:
    it fails the scenario whatever else holds (the server broke, the client did not), leads the
    reasons and the headline. `bound` says how the client limited the scenario: without a failing
    step the scenario is invalid for it, and its own `judged` findings say nothing about the
    server, so they are left out (those that fail are kept after it with `failures_when_bound`).
    Otherwise any "fail" judgement fails the scenario, else any "invalid" one makes it invalid.
    `slo` is the SLO its steps were judged with, recorded beside the result. A step whose answers
    broke a per-request consistency rule (load/consistency.py) fails the scenario the same way.
    """
    from pytest_inferaccept.load.consistency import findings as inconsistent
    from pytest_inferaccept.scenario_kinds import by_name

    by_name(kind)  # a kind the results, the report and the runner know of: registered, or an error here
    # Answers that contradict themselves (two finish_reasons, usage against the stream) are the
    # server's fault at any load and whatever the client did: they fail the scenario like `failing`.
    broken = [line for step in steps if step.consistency is not None
              for line in inconsistent(step.consistency)]
    reasons = [failing] if failing else []
    reasons += broken
    lead = failing or (broken[0] if broken else "")
    if bound:
        reasons.append(bound)
        own = [why for status, why in judged if status == "fail"] if failures_when_bound else []
    else:
        own = [why for _, why in judged]
    reasons += own
    status: Status = ("fail" if lead else "invalid" if bound
                      else "fail" if any(s == "fail" for s, _ in judged)
                      else "invalid" if judged else "pass")
    return CapacityScenario(
        kind=kind, label=label, status=status, headline=f"{lead}; {headline}" if lead else headline,
        reasons=reasons, findings=findings if findings is not None else CapacityFindings(), steps=list(steps),
        explanations=list(explanations), series=series if series is not None else CapacitySeries(),
        telemetry=telemetry, notes=list(notes), params=params, slo=slo.to_json() if slo is not None else None)


def telemetry_of(sampler: Sampler) -> CapacityTelemetry:
    """What the sampler read beside the scenario, as the results keep it."""
    return CapacityTelemetry.model_validate(sampler.to_json())


def judged_with(results: Sequence[LoadResult]) -> SloSpec | None:
    """The SLO a scenario's steps were judged with (the first step's; None without a step or an SLO)."""
    return results[0].slo if results else None


@overload
def step_row(level: float, result: LoadResult, peaks: Mapping[str, float] | None = None, *,
             failing_above: float = 0.5) -> CapacityStep: ...


@overload
def step_row(level: float, result: LoadResult, peaks: Mapping[str, float] | None = None, *,
             failing_above: float = 0.5, into: type[Step]) -> Step: ...


def step_row(level: float, result: LoadResult, peaks: Mapping[str, float] | None = None, *,
             failing_above: float = 0.5, into: type[CapacityStep] = CapacityStep) -> CapacityStep:
    """One step's figures: counts, latency percentiles, throughput, achieved load, SLO, telemetry peaks.

    `failures` says what failed, by kind, and `failing` whether the step failed as a whole: its
    failures other than load shedding (429/503) are conclusively more than `failing_above` of
    its requests, or every request failed (see capacity/failures.py). `failure_text` names them
    ("under concurrency 2, 38 of 40 answers were incomplete: no content, no finish_reason").
    `into` is the step type of a kind that adds figures of its own (set on the row afterwards).
    """
    from pytest_inferaccept.capacity.failures import describe

    s = result.summary
    measured = [r for r in result.records if not r.warmup]
    failed = [r for r in measured if not r.ok]
    total = result.run.selfcheck.get("total") or {}
    failures = describe(result.records, result.run.spec, failing_above=failing_above)

    def answered(metric: str, stat: str) -> float | None:
        # Latency over the answered requests (descriptive: the knee and the charts read it); the
        # failures are in `failed`, `failures` and `failing`, and the SLO judged every request.
        return result.stat(metric, stat, successful=True)

    return into(
        level=level,
        label=result.label,
        measured=s.counts.measured,
        failed=s.counts.failed,
        error_rate=result.error_rate,
        throughput_tokens_per_s=s.throughput_tokens_per_s,
        request_rate_per_s=s.request_rate_per_s,
        achieved_concurrency=total.get("achieved_concurrency"),
        asked_rate=total.get("asked_rate"),
        achieved_rate=total.get("achieved_rate"),
        slo_status=result.evaluation.status if result.evaluation is not None else None,
        slo_failures="; ".join(result.evaluation.messages("fail")) if result.evaluation else "",
        slo_by_failures=_by_failures(result),
        # --client-check warn: the step is judged anyway; the reasons stay as warnings.
        client_bound=list(result.client_bound) if result.client_check != "warn" else [],
        client_warnings=list(result.client_bound) if result.client_check == "warn" else [],
        error_classes=dict(Counter(r.error for r in failed if r.error)),
        error_statuses={str(k): v for k, v in Counter(r.status for r in failed if r.status).items()},
        stopped_by=result.run.stopped_by,
        telemetry=dict(peaks or {}),
        failures=failures,
        failing=failures.failing,
        failure_text=failures.text,
        ttft_p50=answered("ttft", "p50"), ttft_p95=answered("ttft", "p95"), ttft_p99=answered("ttft", "p99"),
        e2e_p50=answered("e2e", "p50"), e2e_p95=answered("e2e", "p95"), e2e_p99=answered("e2e", "p99"),
        itl_p50=answered("itl", "p50"), itl_p95=answered("itl", "p95"), itl_p99=answered("itl", "p99"),
        consistency=result.consistency,
    )


def _by_failures(result: LoadResult) -> str:
    """The step's SLO rows that failed requests alone decided, in words ('' when none did).

    They are the server's whatever the client did, save timeouts and stalls measured by a
    client that was itself the bottleneck: with those among the failures the step stays undecided.
    """
    from pytest_inferaccept.stats.slo import CLIENT_CLOCKED

    if result.evaluation is None:
        return ""
    rows = [row.message for row in result.evaluation.rows if row.status == "fail" and row.by_failures]
    late = result.client_bound and any(r.error in CLIENT_CLOCKED for r in result.records if not r.warmup)
    return "" if late else "; ".join(rows)


def not_measured(sampler: Sampler) -> list[str]:
    """A note for each telemetry source that gave nothing."""
    return [f"not measured: {a}" for a in sampler.absent()]


def ms(seconds: float | None) -> str:
    """'870 ms', '2.35 s' or 'n/a'."""
    if seconds is None:
        return "n/a"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def failure_kinds(row: CapacityStep) -> str:
    """' (HTTP 503 ×52)', ' (incomplete ×20)' for a step's failures by kind, or ''.

    An error answer is named by its status; a failure after a 200 (an incomplete answer, a
    stream cut) by its class, never as "HTTP 200".
    """
    if row.failures is not None:
        kinds = row.failures.kinds
    else:  # a row from before failures were described: statuses of error answers only
        kinds = {f"HTTP {s}": n for s, n in sorted(row.error_statuses.items()) if int(s) >= 300}
    short: Counter[str] = Counter()
    for kind, n in kinds.items():
        short[kind.split(" (")[0]] += n
    return f" ({', '.join(f'{k} ×{n}' for k, n in short.most_common())})" if short else ""


def error_statuses(row: CapacityStep) -> str:
    """' (HTTP 400 ×16)' for a step's failed answers by status, or ''."""
    counts = row.error_statuses
    return f" ({', '.join(f'HTTP {s} ×{n}' for s, n in sorted(counts.items()))})" if counts else ""
