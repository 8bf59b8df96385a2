"""Reading a ladder: the knee, the highest level that meets the SLOs, and why things changed.

Pure functions over per-level rows, so each rule is testable with known numbers.

The knee. Between two consecutive levels a -> b (concurrency or rate), the scaling efficiency is

    e = (T_b / T_a - 1) / (b / a - 1)

where T is the throughput (output tokens/s; requests/s when the answers carry no tokens). A
server that still has room scales linearly, e ~ 1; a saturated one adds nothing, e ~ 0. The
knee is the level a where e < `efficiency` (default 0.25: doubling the load adds less than a
quarter more throughput) while the latency p95 (end-to-end, else TTFT) at b is more than
`latency_rise` (default 25%) above a's. Both must hold: a flat throughput with flat latency is
an under-loaded client, and a latency rise with growing throughput is batching at work.

Read off two raw points, that rule lets one disturbed level move the knee (in a seeded
simulation with 20% noise on each level's throughput and p95 it was wrong in 27% of ladders).
So the knee is read off every level at once:

1. Where is the bend? Beyond the knee the throughput stays flat, so the throughput per unit of
   load falls with slope 1 in log(load). In a closed loop (the ladder) the latency then grows in
   proportion to the load (Little's law), so w = log(latency) - log(throughput per unit of load)
   is flat below the knee and rises with slope 2 above it; both figures count. In an open loop
   (the sweep) latency already climbs below capacity as queues form, so only the throughput per
   unit of load is used (flat, then slope 1). The knee candidate is the level at which that
   broken line fits best (least squares over every level); the last level as the bend means
   "no bend within the levels".
2. Does the rule hold there? A broken line with free slopes on each side of the candidate is
   fitted to log(throughput) and to log(latency) over every level, and the rule above is
   applied to the fitted values from the candidate to the next level.
3. Is it confirmed? Only when at least two levels lie beyond the knee, so that saturation is
   seen to persist; a knee with one level beyond it (the last pair of the ladder) is reported
   as not confirmed, and says so.

With a server of K slots and a doubling ladder that contains K, the rule finds exactly K; with
K between two levels it finds the level on either side of K.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from pytest_inferaccept.model import CapacityExplanation, CapacityKnee, CapacityStep, ExplanationEvidence

KNEE_EFFICIENCY = 0.25
KNEE_LATENCY_RISE = 0.25
CLOSED_LOOP_SLOPE = 2.0
"""Slope of w = log(latency) - log(throughput / load) against log(load) beyond a closed loop's knee."""
OPEN_LOOP_SLOPE = 1.0
"""Slope of log(load / throughput) against log(load) beyond an open loop's knee."""


def _knee(level: float | None, reason: str, efficiency: list[float | None], *, confirmed: bool = False,
          certainty: str = "", levels_beyond: int = 0) -> CapacityKnee:
    """Where throughput stopped growing while latency climbed (None: not within the levels), with the rule."""
    return CapacityKnee(level=level, reason=reason, efficiency=efficiency,
                        method={"efficiency_below": KNEE_EFFICIENCY, "latency_rise_above": KNEE_LATENCY_RISE},
                        confirmed=confirmed, certainty=certainty, levels_beyond=levels_beyond)


def throughput_of(row: CapacityStep) -> float | None:
    """A level's throughput: output tokens/s, else requests/s."""
    tokens = row.throughput_tokens_per_s
    return tokens if tokens else row.request_rate_per_s


def latency_of(row: CapacityStep) -> float | None:
    """A level's latency p95: end-to-end, else TTFT."""
    return row.e2e_p95 if row.e2e_p95 is not None else row.ttft_p95


def _least_squares(columns: list[list[float]], y: list[float]) -> list[float]:
    """The fitted values of y on `columns` (a few, linearly independent) by least squares."""
    m = len(columns)
    a = [[sum(p * q for p, q in zip(ci, cj, strict=True)) for cj in columns]
         + [sum(p * q for p, q in zip(ci, y, strict=True))] for ci in columns]
    for i in range(m):  # Gauss-Jordan with partial pivoting on the normal equations
        pivot = max(range(i, m), key=lambda r: abs(a[r][i]))
        a[i], a[pivot] = a[pivot], a[i]
        if a[i][i] == 0:
            continue
        for r in range(m):
            if r != i:
                f = a[r][i] / a[i][i]
                a[r] = [x - f * z for x, z in zip(a[r], a[i], strict=True)]
    coef = [a[i][m] / a[i][i] if a[i][i] else 0.0 for i in range(m)]
    return [sum(c * col[k] for c, col in zip(coef, columns, strict=True)) for k in range(len(y))]


def _broken_line(x: list[float], y: list[float], j: int) -> list[float]:
    """Fitted values of a continuous line bending at x[j], with a free slope on each side."""
    n = len(x)
    columns = [[1.0] * n]
    if j > 0:
        columns.append([min(xi, x[j]) for xi in x])
    if j < n - 1:
        columns.append([max(0.0, xi - x[j]) for xi in x])
    return _least_squares(columns, y)


def _bend(x: list[float], w: list[float], slope: float) -> int:
    """Index of the level where w, flat then rising with `slope`, fits best (the last: no bend)."""
    best, where = math.inf, len(x) - 1
    for j in range(len(x)):
        y = [wi - slope * max(0.0, xi - x[j]) for xi, wi in zip(x, w, strict=True)]
        mean = sum(y) / len(y)
        sse = sum((v - mean) ** 2 for v in y)
        if sse < best - 1e-12:
            best, where = sse, j
    return where


def _clean(x: float) -> float:
    """Round away floating-point dust (-1e-16 must not print as -0%)."""
    return 0.0 if abs(x) < 1e-9 else x


def find_knee(
    rows: Sequence[CapacityStep],
    *,
    efficiency: float = KNEE_EFFICIENCY,
    latency_rise: float = KNEE_LATENCY_RISE,
    unit: str = "c",
    closed_loop: bool = True,
) -> CapacityKnee:
    """The knee of a ladder (closed loop) or sweep (open loop) whose rows carry `level`, throughput and
    latency figures, read off every level."""
    effs: list[float | None] = []
    for lower, upper in pairwise(rows):
        ta, tb = throughput_of(lower), throughput_of(upper)
        grow = upper.level / lower.level - 1 if lower.level else 0
        effs.append((tb / ta - 1) / grow if ta and tb is not None and grow > 0 else None)
    usable: list[CapacityStep] = []
    for r in sorted(rows, key=lambda r: r.level):  # one row per level, each with both figures
        if (r.level or 0) > 0 and (throughput_of(r) or 0) > 0 and (latency_of(r) or 0) > 0 and (
                not usable or r.level > usable[-1].level):
            usable.append(r)
    top = rows[-1].level if rows else None
    if top is None:
        return _knee(None, "no levels measured", effs)
    growing = f"not reached: throughput kept growing with the load up to {unit}={top:g}"
    if len(usable) < 2:
        return _knee(None, f"{growing} (fewer than two levels with throughput and latency)", effs)
    x = [math.log(r.level) for r in usable]
    u = [math.log(throughput_of(r) or 0.0) for r in usable]
    v = [math.log(latency_of(r) or 0.0) for r in usable]
    if closed_loop:
        j = _bend(x, [vi - ui + xi for xi, ui, vi in zip(x, u, v, strict=True)], CLOSED_LOOP_SLOPE)
    else:
        j = _bend(x, [xi - ui for xi, ui in zip(x, u, strict=True)], OPEN_LOOP_SLOPE)
    if j == len(usable) - 1:
        return _knee(None, growing, effs)
    fu, fv = _broken_line(x, u, j), _broken_line(x, v, j)
    a, b = usable[j].level, usable[j + 1].level
    t_ratio, l_ratio = math.exp(fu[j + 1] - fu[j]), math.exp(fv[j + 1] - fv[j])
    eff = _clean((t_ratio - 1) / (b / a - 1))
    grew, rose = _clean(t_ratio - 1), _clean(l_ratio - 1)
    latencies = f"({math.exp(fv[j]):.3g} s to {math.exp(fv[j + 1]):.3g} s)"
    fitted = f"the lines fitted through all {len(usable)} levels"
    if not (eff < efficiency and rose > latency_rise):
        return _knee(None, efficiency=effs, reason=(
            f"{growing}: at the sharpest bend, from {unit}={a:g} to {unit}={b:g}, {fitted} grow throughput "
            f"{grew:+.0%} (scaling efficiency {eff:.2f}; a knee needs < {efficiency:g}) and latency p95 "
            f"{rose:+.0%} {latencies} (a knee needs > {latency_rise:+.0%})"))
    figures = (f"from {unit}={a:g} to {unit}={b:g} throughput grew {grew:+.0%} (scaling efficiency "
               f"{eff:.2f} < {efficiency:g}) while latency p95 rose {rose:+.0%} {latencies}, on {fitted}")
    beyond = len(usable) - 1 - j
    if beyond >= 2:
        certainty = (f"confirmed: saturation persists through the {beyond} levels beyond it "
                     f"(up to {unit}={usable[-1].level:g})")
    else:
        certainty = (f"not confirmed: only {unit}={b:g} lies beyond it, so one disturbed level could have "
                     f"made it; a level above {unit}={b:g} would confirm it")
    return _knee(a, figures, effs, confirmed=beyond >= 2, certainty=certainty, levels_beyond=beyond)


def knee_caveat(knee: CapacityKnee | Mapping[str, Any] | None) -> str:
    """'' for a confirmed knee or none; else a phrase for what was derived from it, e.g. a soak's basis.

    `knee` is a ladder's `findings.knee` (or that knee as a mapping); one without `confirmed` (an
    older document) is taken as it was reported.
    """
    if knee is None:
        return ""
    found = knee if isinstance(knee, CapacityKnee) else CapacityKnee.model_validate(knee)
    if found.level is None or found.confirmed:
        return ""
    beyond = found.levels_beyond
    return (f"the ladder's knee at c={found.level:g}, which is not confirmed (only {beyond} "
            f"level{'' if beyond == 1 else 's'} beyond it)")


def max_slo_level(rows: Sequence[CapacityStep], *, unit: str = "c") -> tuple[float | None, str]:
    """The highest level, counting up from the first, at which every SLO passed; and why it stops there.

    Levels are read in order: the first that fails, cannot be judged (too few samples) or was
    limited by the client ends the count, so a lucky pass above a failing level never counts.
    """
    best: float | None = None
    for row in rows:
        status = row.slo_status
        level = row.level
        if row.client_bound:
            return best, f"{unit}={level:g} could not be judged: the client limited the run"
        if status == "pass":
            best = level
            continue
        if status == "fail":
            return best, f"at {unit}={level:g}: {row.slo_failures or 'SLO not met'}"
        if status in ("not_enough_data", "invalid"):
            return best, f"{unit}={level:g} could not be judged: not enough data"
        return best, "no SLO given"
    top = rows[-1].level if rows else None
    return best, (f"every level passed, up to {unit}={top:g}" if top is not None else "no levels measured")


def breaker(row: CapacityStep, *, max_error_rate: float, max_latency_s: float) -> str | None:
    """Why climbing should stop after this level (errors or latency past the breaker), or None."""
    err = row.error_rate
    if err is not None and err > max_error_rate:
        return f"error rate {err:.1%} > {max_error_rate:.0%}"
    lat = latency_of(row)
    if lat is not None and lat > max_latency_s:
        return f"latency p95 {lat:.3g} s > {max_latency_s:g} s"
    return None


def explain(rows: Sequence[CapacityStep], knee: float | None, *,
            unit: str = "c") -> list[CapacityExplanation]:
    """Structured explanations drawn from the figures: queueing, KV cache full, errors, client-bound.

    Each has its kind, level, text and the evidence behind it; the report phrases them, the JSON keeps them.
    """
    out: list[CapacityExplanation] = []
    first_error = next((r for r in rows if r.failed > 0), None)
    if first_error is not None:
        out.append(CapacityExplanation(
            kind="errors_begin", level=first_error.level,
            text=f"errors begin at {unit}={first_error.level:g}: {first_error.failed} of "
                 f"{first_error.measured} failed ({first_error.error_classes})",
            evidence=ExplanationEvidence(error_classes=first_error.error_classes,
                                         statuses=first_error.error_statuses)))
    out += [CapacityExplanation(kind="client_bound", level=r.level,
                                text=f"at {unit}={r.level:g} the client was the bottleneck: "
                                     + "; ".join(r.client_bound),
                                evidence=ExplanationEvidence(reasons=r.client_bound))
            for r in rows if r.client_bound]
    if knee is not None:
        past = [r for r in rows if r.level > knee]
        at = next((r for r in rows if r.level == knee), None)
        waiting = [(r.level, r.telemetry.get("waiting")) for r in past]
        grows = [w for w in waiting if w[1] is not None and w[1] > 0]
        if at is not None:
            throughput = {str(r.level): throughput_of(r) for r in [at, *past]}
        if at is not None and grows:
            out.append(CapacityExplanation(
                kind="queueing", level=knee,
                text=f"beyond {unit}={knee:g} requests queue: the server's waiting gauge peaks at "
                     + ", ".join(f"{v:g} ({unit}={lvl:g})" for lvl, v in grows)
                     + " while throughput stays flat",
                evidence=ExplanationEvidence(waiting_peak={str(lvl): v for lvl, v in waiting},
                                             throughput=throughput)))
        elif at is not None:
            gauge = any(w[1] is not None for w in waiting)
            out.append(CapacityExplanation(
                kind="saturated", level=knee,
                text=f"beyond {unit}={knee:g} throughput stays flat while latency climbs"
                     + ("" if gauge else " (the server exposes no waiting gauge to show the queue)"),
                evidence=ExplanationEvidence(throughput=throughput)))
    full = [r for r in rows if (r.telemetry.get("kv_cache") or 0) >= 0.95]
    if full:
        out.append(CapacityExplanation(
            kind="kv_cache_full", level=full[0].level,
            text=f"the KV cache is full (≥95%) from {unit}={full[0].level:g}",
            evidence=ExplanationEvidence(
                kv_cache_peak={str(r.level): r.telemetry["kv_cache"] for r in full})))
    return out
