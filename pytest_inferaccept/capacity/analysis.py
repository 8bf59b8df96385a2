"""Reading a ladder: the knee, the highest level that meets the SLOs, and why things changed.

Pure functions over per-level rows, so each rule is testable with known numbers.

The knee. Between two consecutive levels a -> b (concurrency or rate), the scaling efficiency is

    e = (T_b / T_a - 1) / (b / a - 1)

where T is the throughput (output tokens/s; requests/s when the answers carry no tokens). A
server that still has room scales linearly, e ~ 1; a saturated one adds nothing, e ~ 0. The
knee is the first level a where e < `efficiency` (default 0.25: doubling the load adds less than
a quarter more throughput) while the latency p95 (end-to-end, else TTFT) at b is more than
`latency_rise` (default 25%) above a's. Both must hold: a flat throughput with flat latency is
an under-loaded client, and a latency rise with growing throughput is batching at work. With a
server of K slots and a doubling ladder that contains K, the rule finds exactly K; with K
between two levels it finds the level above K's lower neighbour (within one level of K).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

KNEE_EFFICIENCY = 0.25
KNEE_LATENCY_RISE = 0.25


@dataclass(frozen=True, kw_only=True)
class Knee:
    """Where throughput stopped growing while latency climbed (None: not within the levels)."""

    level: float | None
    reason: str
    efficiency: list[float | None]
    """Scaling efficiency from each level to the next."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "level": self.level,
            "reason": self.reason,
            "efficiency": self.efficiency,
            "method": {"efficiency_below": KNEE_EFFICIENCY, "latency_rise_above": KNEE_LATENCY_RISE},
        }


def throughput_of(row: Mapping[str, Any]) -> float | None:
    """A level's throughput: output tokens/s, else requests/s."""
    tokens = row.get("throughput_tokens_per_s")
    return tokens if tokens else row.get("request_rate_per_s")


def latency_of(row: Mapping[str, Any]) -> float | None:
    """A level's latency p95: end-to-end, else TTFT."""
    e2e = row.get("e2e_p95")
    return e2e if e2e is not None else row.get("ttft_p95")


def find_knee(
    rows: Sequence[Mapping[str, Any]],
    *,
    efficiency: float = KNEE_EFFICIENCY,
    latency_rise: float = KNEE_LATENCY_RISE,
    unit: str = "c",
) -> Knee:
    """The knee of a ladder whose rows carry `level`, throughput and latency figures."""
    effs: list[float | None] = []
    knee: float | None = None
    reason = ""
    for a, b in pairwise(rows):
        ta, tb = throughput_of(a), throughput_of(b)
        la, lb = latency_of(a), latency_of(b)
        grow = b["level"] / a["level"] - 1 if a["level"] else 0
        eff = (tb / ta - 1) / grow if ta and tb is not None and grow > 0 else None
        effs.append(eff)
        if knee is not None or eff is None or ta is None or tb is None or la is None or lb is None:
            continue
        if eff < efficiency and lb > la * (1 + latency_rise):
            knee = a["level"]
            reason = (
                f"from {unit}={a['level']:g} to {unit}={b['level']:g} throughput grew "
                f"{tb / ta - 1:+.0%} (scaling efficiency {eff:.2f} < {efficiency:g}) while latency "
                f"p95 rose {lb / la - 1:+.0%} ({la:.3g} s to {lb:.3g} s)"
            )
    if knee is None:
        top = rows[-1]["level"] if rows else None
        reason = (
            f"not reached: throughput kept growing with the load up to {unit}={top:g}"
            if top is not None
            else "no levels measured"
        )
    return Knee(level=knee, reason=reason, efficiency=effs)


def max_slo_level(rows: Sequence[Mapping[str, Any]], *, unit: str = "c") -> tuple[float | None, str]:
    """The highest level, counting up from the first, at which every SLO passed; and why it stops there.

    Levels are read in order: the first that fails, cannot be judged (too few samples) or was
    limited by the client ends the count, so a lucky pass above a failing level never counts.
    """
    best: float | None = None
    for row in rows:
        status = row.get("slo_status")
        level = row["level"]
        if row.get("client_bound"):
            return best, f"{unit}={level:g} could not be judged: the client limited the run"
        if status == "pass":
            best = level
            continue
        if status == "fail":
            return best, f"at {unit}={level:g}: {row.get('slo_failures') or 'SLO not met'}"
        if status in ("not_enough_data", "invalid"):
            return best, f"{unit}={level:g} could not be judged: not enough data"
        return best, "no SLO given"
    top = rows[-1]["level"] if rows else None
    return best, (f"every level passed, up to {unit}={top:g}" if top is not None else "no levels measured")


def breaker(row: Mapping[str, Any], *, max_error_rate: float, max_latency_s: float) -> str | None:
    """Why climbing should stop after this level (errors or latency past the breaker), or None."""
    err = row.get("error_rate")
    if err is not None and err > max_error_rate:
        return f"error rate {err:.1%} > {max_error_rate:.0%}"
    lat = latency_of(row)
    if lat is not None and lat > max_latency_s:
        return f"latency p95 {lat:.3g} s > {max_latency_s:g} s"
    return None


def explain(
    rows: Sequence[Mapping[str, Any]], knee: float | None, *, unit: str = "c"
) -> list[dict[str, Any]]:
    """Structured explanations drawn from the figures: queueing, KV cache full, errors, client-bound.

    Each is {"kind", "level", "text", "evidence": {...}}; the report phrases them, the JSON keeps them.
    """
    out: list[dict[str, Any]] = []
    first_error = next((r for r in rows if (r.get("failed") or 0) > 0), None)
    if first_error is not None:
        out.append(
            {
                "kind": "errors_begin",
                "level": first_error["level"],
                "text": f"errors begin at {unit}={first_error['level']:g}: {first_error['failed']} of "
                f"{first_error['measured']} failed ({first_error.get('error_classes') or {}})",
                "evidence": {
                    "error_classes": first_error.get("error_classes"),
                    "statuses": first_error.get("error_statuses"),
                },
            }
        )
    for r in rows:
        if r.get("client_bound"):
            out.append(
                {
                    "kind": "client_bound",
                    "level": r["level"],
                    "text": f"at {unit}={r['level']:g} the client was the bottleneck: "
                    + "; ".join(r["client_bound"]),
                    "evidence": {"reasons": r["client_bound"]},
                }
            )
    if knee is not None:
        past = [r for r in rows if r["level"] > knee]
        at = next((r for r in rows if r["level"] == knee), None)
        waiting = [(r["level"], r.get("telemetry", {}).get("waiting")) for r in past]
        grows = [w for w in waiting if w[1] is not None and w[1] > 0]
        if at is not None and grows:
            out.append(
                {
                    "kind": "queueing",
                    "level": knee,
                    "text": f"beyond {unit}={knee:g} requests queue: the server's waiting gauge peaks at "
                    + ", ".join(f"{v:g} ({unit}={lvl:g})" for lvl, v in grows)
                    + " while throughput stays flat",
                    "evidence": {
                        "waiting_peak": dict((str(lvl), v) for lvl, v in waiting),
                        "throughput": {str(r["level"]): throughput_of(r) for r in [at, *past]},
                    },
                }
            )
        elif at is not None:
            out.append(
                {
                    "kind": "saturated",
                    "level": knee,
                    "text": f"beyond {unit}={knee:g} throughput stays flat while latency climbs"
                    + (
                        ""
                        if any(w[1] is not None for w in waiting)
                        else " (the server exposes no waiting gauge to show the queue)"
                    ),
                    "evidence": {"throughput": {str(r["level"]): throughput_of(r) for r in [at, *past]}},
                }
            )
    full = [r for r in rows if (r.get("telemetry", {}).get("kv_cache") or 0) >= 0.95]
    if full:
        out.append(
            {
                "kind": "kv_cache_full",
                "level": full[0]["level"],
                "text": f"the KV cache is full (≥95%) from {unit}={full[0]['level']:g}",
                "evidence": {"kv_cache_peak": {str(r["level"]): r["telemetry"]["kv_cache"] for r in full}},
            }
        )
    return out
