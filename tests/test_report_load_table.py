"""The load table shows TTFT to the first token of any kind beside TTFT to the first content token
only where the two stand apart (a reasoning model), with a note that says which to judge."""

from __future__ import annotations

from typing import Any

from pytest_inferaccept.model import LoadResult, RequestCounts
from pytest_inferaccept.report.load_table import TTFT_ANY_NOTE, load_note, load_table


def _run(ttft_p95: float, any_p95: float) -> LoadResult:
    def latency(p95: float) -> dict[str, Any]:
        return {"unit": "s", "n": 40, "p95": {"value": p95, "low": p95 * 0.9, "high": p95 * 1.1, "n": 40}}

    return LoadResult.model_validate({
        "label": "t", "spec": {"concurrency": 2, "kind": "chat"},
        "summary": {"metrics": {"ttft": latency(ttft_p95), "ttft_any_token": latency(any_p95)}}})


def test_a_reasoning_server_gets_both_ttft_columns_and_the_note() -> None:
    runs = [_run(ttft_p95=1.8, any_p95=0.12)]  # 1.7 s of reasoning before the answer
    headings, rows = load_table(runs)
    assert "TTFT p95" in headings and "TTFT any token p95" in headings
    cells = dict(zip(headings, rows[0], strict=True))
    assert (cells["TTFT p95"], cells["TTFT any token p95"]) == ("1.8 s", "120 ms")
    assert load_note(runs) == TTFT_ANY_NOTE
    assert "ttft_any_p95" in TTFT_ANY_NOTE and "reasons" in TTFT_ANY_NOTE


def test_a_server_whose_first_token_is_content_shows_one_ttft_and_no_note() -> None:
    runs = [_run(ttft_p95=0.30, any_p95=0.29)]
    headings, _ = load_table(runs)
    assert "TTFT any token p95" not in headings
    assert load_note(runs) == ""


def test_ttft_on_answers_without_content_says_so_rather_than_failed() -> None:
    run = _run(ttft_p95=0.3, any_p95=0.1)
    run.summary.metrics["ttft"].p95.censored = True  # type: ignore[union-attr]
    run.summary.counts = RequestCounts(measured=40, failed=0, no_content=40)
    headings, rows = load_table([run])
    cells = dict(zip(headings, rows[0], strict=True))
    assert cells["TTFT p95"] == "∞ (no content)"
    run.summary.counts = RequestCounts(measured=40, failed=3, no_content=0)
    headings, rows = load_table([run])
    assert dict(zip(headings, rows[0], strict=True))["TTFT p95"] == "∞ (failed)"
