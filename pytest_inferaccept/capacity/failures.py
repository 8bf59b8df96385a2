"""A step's failed requests in words: which ways they failed, how many, and whether the step failed.

A capacity step whose answers mostly failed measures no capacity: its throughput and latency
are those of a broken server, and a ladder that reads a knee off them hides the failure. So each
step row carries what failed, by kind (an `incomplete` answer split by what it lacked, an error
answer by its status, the other classes by name), and a judgement: the step is *failing* when
the failures other than load shedding (HTTP 429 or 503, the graceful answer to overload) are
conclusively a majority, i.e. the 95% Clopper-Pearson interval of their share lies wholly above
one half, or every request failed. At a push's boundary, `classify` says whether the server shed
load gracefully or how it failed instead. Nothing here imports pytest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from statistics import median
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.load.records import HARNESS_ERROR
from pytest_inferaccept.model import CapacityBoundary, StepFailures
from pytest_inferaccept.stats.percentiles import proportion_interval

if TYPE_CHECKING:
    from pytest_inferaccept.run.load import LoadResult

SHEDDING_STATUSES = frozenset({429, 503})
"""Error answers that are the graceful way to refuse load; never counted as a step failing."""
FAILING_ABOVE = 0.5
"""A step fails when its other failures are conclusively more than this share of its requests."""
INCOMPLETE = "incomplete"


def _kind(r: Any) -> str:
    """One failed request's kind: 'incomplete (no content, no finish_reason)', 'HTTP 500', 'timeout'."""
    if r.error == INCOMPLETE:
        generated = r.first_token_any is not None or bool(r.completion_tokens)
        if r.finish_reason is None:
            lacked = "no finish_reason" if generated else "no content, no finish_reason"
            return f"incomplete ({lacked})"
        return "incomplete (nothing generated)"
    if r.error in ("http_4xx", "http_5xx") and r.status is not None:
        return f"HTTP {r.status}"
    return str(r.error)


def _shed(r: Any) -> bool:
    return r.error in ("http_4xx", "http_5xx") and r.status in SHEDDING_STATUSES


def _where(spec: Mapping[str, Any] | None) -> str:
    """'under concurrency 2, ' or 'at 4 requests/s, ' from a run's spec ('' when it says neither)."""
    spec = spec or {}
    if spec.get("concurrency"):
        return f"under concurrency {spec['concurrency']}, "
    if spec.get("rate"):
        return f"at {spec['rate']:g} requests/s, "
    return ""


def _text(kinds: Counter[str], failed: int, measured: int) -> str:
    """'38 of 40 answers were incomplete: no content, no finish_reason' or '12 of 40 requests failed:
    10 HTTP 500, 2 timeout'."""
    if len(kinds) == 1:
        ((kind, _),) = kinds.items()
        if kind.startswith(INCOMPLETE):
            lacked = kind[len(INCOMPLETE) + 2:-1]
            return f"{failed} of {measured} answers were incomplete: {lacked}"
        return f"{failed} of {measured} requests failed ({kind})"
    return f"{failed} of {measured} requests failed: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common())


def describe(records: Iterable[Any], spec: Mapping[str, Any] | None = None, *,
             failing_above: float = FAILING_ABOVE) -> StepFailures:
    """What a step's measured requests' failures were, and whether they make the step a failing one.

    The kinds count most first; `shed` counts the 429/503 answers, `broken` every other failure,
    `broken_low` is the lower end of the 95% interval of the broken share (None without
    requests); the text is "" when nothing failed, and begins with where the step ran when
    `spec` says: "under concurrency 2, 38 of 40 answers …".
    """
    # A fault in the client's own code is never the server's (the run is INVALID for it elsewhere).
    measured = [r for r in records if not r.warmup and r.error != HARNESS_ERROR]
    failed = [r for r in measured if not r.ok]
    kinds = Counter(_kind(r) for r in failed)
    shed = sum(1 for r in failed if _shed(r))
    broken = len(failed) - shed
    n = len(measured)
    low = proportion_interval(broken, n)[0] if n else None
    # Every request failed is conclusive at any sample size; otherwise the interval must say so.
    failing = broken > 0 and (broken == n or (low is not None and low > failing_above))
    return StepFailures(failed=len(failed), measured=n, kinds=dict(kinds.most_common()), shed=shed,
                        broken=broken, broken_low=low, failing=failing, failing_above=failing_above,
                        text=_where(spec) + _text(kinds, len(failed), n) if failed else "")


def incomplete_text(kinds: Mapping[str, int], measured: int) -> str:
    """'20 of 20 answers were incomplete: no content, no finish_reason' ('' without incomplete ones)."""
    parts = Counter({k: n for k, n in kinds.items() if k.startswith(INCOMPLETE)})
    if not parts:
        return ""
    total = sum(parts.values())
    if len(parts) == 1:
        return _text(parts, total, measured)
    lacked = ", ".join(f"{n} {k[len(INCOMPLETE) + 1:]}" for k, n in parts.most_common())
    return f"{total} of {measured} answers were incomplete: {lacked}"


def classify(result: LoadResult, alive: tuple[bool, str], request_timeout: float) -> CapacityBoundary:
    """How the server failed at a push's boundary: graceful shedding, or not (and why); the caller sets
    where the boundary is (its level or length).

    An answer that came with HTTP 200 and then failed (incomplete, a stream cut) is named by
    what went wrong, never as "answered HTTP 200"; an incomplete answer is never graceful.
    """
    failed = [r for r in result.records if not r.warmup and not r.ok]
    statuses = Counter(r.status for r in failed if r.status is not None)
    classes = Counter(r.error for r in failed if r.error)
    shed = [r for r in failed if r.status in SHEDDING_STATUSES]
    fast = median(r.e2e for r in shed) if shed else None
    hung = [r for r in failed if r.e2e > request_timeout + 2]
    problems = []
    described = describe(result.records)
    empty = incomplete_text(described.kinds, described.measured)
    if empty:
        problems.append(empty)
    # Error answers by status; a 200 that failed afterwards is named by its class below.
    bad_status = {s: n for s, n in statuses.items() if s >= 300 and s not in SHEDDING_STATUSES}
    if bad_status:
        problems.append("answered " + ", ".join(f"HTTP {s} ×{n}" for s, n in sorted(bad_status.items())))
    for cls, n in classes.most_common():
        if cls not in ("http_4xx", "http_5xx", INCOMPLETE, HARNESS_ERROR):
            problems.append(f"{n} request(s) ended in {cls}")
    if hung:
        problems.append(f"{len(hung)} request(s) hung past the request timeout ({request_timeout:g} s)")
    if not alive[0]:
        problems.append(f"the server did not answer afterwards ({alive[1]})")
    if fast is not None and fast > 1.0:
        problems.append(f"rejections were slow (median {fast:.2f} s)")
    retry_after = sum(1 for r in shed if r.retry_after)
    return CapacityBoundary(failed=len(failed), statuses={str(k): v for k, v in statuses.items()},
                            error_classes=dict(classes), shed=len(shed), retry_after=retry_after,
                            rejection_median_s=fast, alive_after=alive[0], alive_detail=alive[1],
                            graceful=not problems and (bool(shed) or not failed), problems=problems)
