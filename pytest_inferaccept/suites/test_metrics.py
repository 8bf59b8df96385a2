"""GET /metrics: valid Prometheus text, counters that only grow, the metrics operators rely on."""

from __future__ import annotations

import time

import httpx
import pytest

from pytest_inferaccept.checks import require
from pytest_inferaccept.checks.metrics import (
    PROFILES,
    Scrape,
    check_counters_monotonic,
    check_old_names_count_along,
    check_operator_metrics,
    detect_profile,
    operator_metrics_table,
    parse_metrics,
    rename_findings,
    renamed_metrics,
    stale_old_names,
)
from pytest_inferaccept.evidence import Evidence, excerpt
from pytest_inferaccept.server import ServerUnderTest

pytestmark = pytest.mark.capability("metrics")


def _scrape(client: httpx.Client, evidence: Evidence) -> Scrape:
    # Followed as a Prometheus scraper follows it (a LiteLLM gateway answers 307 to /metrics/);
    # the redirect is kept as a note.
    resp = client.get("/metrics", follow_redirects=True)
    for hop in resp.history:
        note = (f"GET {hop.url.path} answered {hop.status_code} to {hop.headers.get('location', '?')}: "
                "followed, as a Prometheus scraper does")
        if note not in evidence.notes:
            evidence.note(note)
    require(resp.status_code == 200, f"/metrics answered {resp.status_code}, expected 200",
            excerpt(resp.text, 300))
    return parse_metrics(resp.text)


def _traffic(client: httpx.Client, model: str) -> None:
    resp = client.post("/v1/chat/completions", json={
        "model": model, "max_tokens": 4, "temperature": 0,
        "messages": [{"role": "user", "content": "Count to three."}]})
    require(resp.status_code == 200, f"chat completion answered {resp.status_code}", excerpt(resp.text, 300))


def test_metrics_is_valid_prometheus_text(http_client: httpx.Client,
                                          inferaccept_evidence: Evidence) -> None:
    scrape = _scrape(http_client, inferaccept_evidence)
    inferaccept_evidence.record("metric_families", len({n for n, _ in scrape.samples}))
    # The names themselves, so that a baseline comparison sees a metric that disappeared or was renamed.
    families = {n.removesuffix("_total") for n in scrape.types
                if not n.endswith(("_bucket", "_count", "_sum", "_created"))}
    inferaccept_evidence.record("metric_names", sorted(families)[:500])


def test_metrics_counters_never_decrease(http_client: httpx.Client, model: str,
                                         inferaccept_evidence: Evidence) -> None:
    before = _scrape(http_client, inferaccept_evidence)
    _traffic(http_client, model)
    after = _scrape(http_client, inferaccept_evidence)
    grew = check_counters_monotonic(before, after)
    inferaccept_evidence.record("counters_grown", grew[:20])
    if not grew:
        inferaccept_evidence.warn("no counter grew across a completion: the counters may lag or "
                                  "not count requests")


def test_metrics_expose_what_operators_rely_on(http_client: httpx.Client, model: str,
                                               inferaccept_server: ServerUnderTest,
                                               inferaccept_evidence: Evidence) -> None:
    _traffic(http_client, model)  # some servers only expose a series once it has a sample
    scrape = _scrape(http_client, inferaccept_evidence)
    profile = detect_profile(scrape.names, inferaccept_server.version_info)
    if profile is None:
        inferaccept_evidence.warn(f"no known server profile ({', '.join(PROFILES)}) matches the metric "
                                  "names; operator metrics not judged")
        inferaccept_evidence.record("metric_names", sorted(scrape.names)[:100])
        return
    table = operator_metrics_table(profile, scrape.names)
    inferaccept_evidence.record("operator_metrics", {"profile": profile, "metrics": table})
    renames = renamed_metrics(profile, scrape.names)
    if renames:
        inferaccept_evidence.record("renamed_metrics", renames)
    notes, warnings = rename_findings(renames)
    for note in notes:
        inferaccept_evidence.note(note)
    for warning in [*check_operator_metrics(table, profile), *warnings]:
        inferaccept_evidence.warn(warning)
    if any(row["served"] == "both" for row in renames):
        # An old name kept beside its new one must still count: compare both across a completion.
        _traffic(http_client, model)
        after = _scrape(http_client, inferaccept_evidence)
        stale = stale_old_names(scrape, after, renames)
        if stale:  # a server that publishes its counters late gets a second look
            time.sleep(0.5)
            stale = stale_old_names(scrape, _scrape(http_client, inferaccept_evidence), renames)
        check_old_names_count_along(stale)
