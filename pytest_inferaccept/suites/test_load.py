"""Service levels under load: one closed-loop run at --load-concurrency, judged by the team's SLO.

The SLO comes from --slo KEY=VALUE (repeatable) or --slo-profile FILE; without one the run is
measured and recorded (results JSON, --inferaccept-records), not judged. The load is bounded by
--load-requests and --load-duration and stops by itself. Known-answer items are graded alone,
beside the load and after it (--correctness-under-load; docs/correctness.md, "Under load"): answers
that go wrong under the load, or stay wrong after it, are a NO-GO whatever the SLO says.
"""

from __future__ import annotations

import math

from pytest_inferaccept.capacity.failures import describe
from pytest_inferaccept.checks import fail
from pytest_inferaccept.evidence import Evidence
from pytest_inferaccept.loadgen import LoadGen


def test_service_levels_hold_under_load(loadgen: LoadGen, inferaccept_evidence: Evidence) -> None:
    with loadgen.graded() as grading:
        result = loadgen.run()  # --load-concurrency, --load-requests, --load-duration
    summary = result.summary
    inferaccept_evidence.note(
        f"{summary.counts.measured} requests at concurrency {result.run.spec.get('concurrency')}: "
        f"TTFT p50 {_ms(result.stat('ttft', 'p50'))}, p95 {_ms(result.stat('ttft', 'p95'))}; "
        f"TPOT p95 {_ms(result.stat('tpot', 'p95'))}; "
        f"{summary.throughput_tokens_per_s or 0:.1f} output tokens/s; {summary.counts.failed} failed")
    ttft = summary.metrics.get("ttft")
    client_mean = ttft.mean.value if ttft is not None and ttft.mean is not None else None
    for name, hist in (result.run.server_metrics.get("histograms") or {}).items():
        if hist.get("role") == "ttft" and hist.get("count"):
            # The server's own clock starts when it receives the request; the client's at send.
            inferaccept_evidence.note(f"server-reported TTFT mean {_ms(hist.get('mean'))} ({name}, "
                                      f"{hist['count']:.0f} requests) beside the client's {_ms(client_mean)}")
    if loadgen.slo is None:
        inferaccept_evidence.note("no SLO given (--slo, --slo-profile): measured, not judged")
    if grading is not None:
        # A load whose own answers mostly broke fails by them (the SLO or the failures' rule says so);
        # its items are figures then, not a second finding.
        broken = describe(result.records, result.run.spec).failing
        graded = result.correctness = grading.outcome(failing=[loadgen.label] if broken else [])
        inferaccept_evidence.note(graded.text)
        if graded.status == "fail":
            fail("answers went wrong under load", "; ".join(graded.reasons))


def _ms(seconds: float | None) -> str:
    if seconds is not None and math.isinf(seconds):
        return "∞ (failed requests)"
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"
