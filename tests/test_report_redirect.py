"""A /metrics that redirects (a LiteLLM gateway: 307 to /metrics/) is followed and judged, not refused."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import RunSuite


def test_a_redirecting_metrics_endpoint_is_followed_judged_and_the_redirect_recorded(
        run_suite: RunSuite, tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    run = run_suite("test_metrics", faults=["metrics_redirect"], args=["--inferaccept-json", str(results)])
    assert set(run.outcomes.values()) == {"passed"}, run.output[-3000:]
    document = json.loads(results.read_text(encoding="utf-8"))
    probe = document["capabilities"]["metrics"]["probe"]
    assert probe["status"] == "supported"
    assert probe["detail"].startswith("after a redirect (307 to /metrics/) HTTP 200")
    for test in document["tests"]:
        notes = test["evidence"].get("notes", [])
        assert any("GET /metrics answered 307 to /metrics/: followed" in n for n in notes), test["nodeid"]
        statuses = [e["status"] for e in test["evidence"]["exchanges"]]
        assert 307 in statuses and 200 in statuses
        hop = next(e for e in test["evidence"]["exchanges"] if e["status"] == 307)
        assert hop["response_headers"]["location"] == "/metrics/"

