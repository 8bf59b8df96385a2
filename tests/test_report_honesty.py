"""What the report and the terminal say is what the run measured: the client's own reasons, the
requests a time limit cut, the load traffic that exercised chat, the SLO each marker gave, the
same findings in the terminal as on the page, and a test-writing mistake told as one."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.load.engine import LoadRun
from pytest_inferaccept.model import load
from pytest_inferaccept.report.words import answer, limitations
from pytest_inferaccept.run.load import LoadResult
from pytest_inferaccept.stats import bottleneck_reasons, summarize
from tests._processes import FAKE_CMD
from tests._report_runs import Page
from tests.test_readme import README
from tests.test_report_schema import _minimal

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ASYNC_WITHOUT_MARKER = '''
async def test_async_chat_without_its_marker(async_openai_client, model):
    answer = await async_openai_client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hello"}], max_tokens=4)
    assert answer.choices[0].message.content
'''
PLAIN_CHECK = '''
def test_models_are_listed(http_client):
    assert http_client.get("/v1/models").status_code == 200
'''
ASKED = 2000
"""Requests the bundled load test asks for in the new user's run: far more than its 1 s limit holds."""


# -- the client's reasons, as the load test writes them --------------------------------------------------


def _client_bound_document(client_check: str) -> dict[str, Any]:
    """A document holding one load run made the way the loadgen fixture makes it, its client 31% short."""
    total = {"worker": None, "asked_concurrency": 64, "achieved_concurrency": 20.0, "asked_rate": None,
             "achieved_rate": None, "schedule_lag_s": None,
             "loop_lag_s": {"p50": 0.001, "p99": 0.004, "max": 0.009},
             "cpu_s": 30.0, "wall_s": 60.0, "cpu_utilisation": 0.5}
    selfcheck = {"mode": "closed", "total": total, "workers": []}
    run = LoadRun(spec={"kind": "chat", "concurrency": 64, "requests": 300}, records=[], window=(0.0, 1.0),
                  selfcheck=selfcheck, server_metrics={}, stopped_by="requests")
    result = LoadResult(label="t", run=run, summary=summarize([], (0.0, 1.0)), slo=None, evaluation=None,
                        client_bound=bottleneck_reasons(selfcheck), client_check=client_check)
    document = copy.deepcopy(_minimal())
    document["tests"][0]["load"] = [result.entry().model_dump(mode="json", exclude_unset=True)]
    return document


def test_a_client_bound_run_is_explained_by_the_self_checks_own_reasons() -> None:
    found = " | ".join(limitations(load(_client_bound_document("strict"))))
    assert ("Client-bound in test_a at concurrency 64, 300 requests: the client could not keep 64 requests "
            "in flight: 20.0 on average (31%); the measurements describe the client, not the server.") \
        in found
    assert "could not keep the asked load" not in found


def test_a_client_lag_judged_anyway_is_told_as_judged_anyway_with_its_reasons() -> None:
    found = " | ".join(limitations(load(_client_bound_document("warn"))))
    assert ("The client lagged in test_a at concurrency 64, 300 requests (judged anyway, as --client-check "
            "warn asks): the client could not keep 64 requests in flight: 20.0 on average (31%)") in found
    assert "Client-bound" not in found


# -- a new user's run: the README's example, an unmarked async test, the bundled load and tools suites ---


@dataclass
class Run:
    """One inner run: its exit status, terminal output, results document and page."""

    ret: int
    output: str
    document: dict[str, Any]
    html: str
    html_path: Path


_RUNS: dict[str, Run] = {}


def _readme_example() -> str:
    found = re.search(r"<!-- example: .*? -->\n```python\n(.*?)```", README.read_text(encoding="utf-8"),
                      re.DOTALL)
    assert found, "the README lost its example block"
    return found.group(1)


def _run(name: str, pytester: pytest.Pytester) -> Run:
    """The inner run called `name`, made on first use (the tests below read one run each)."""
    if name in _RUNS:
        return _RUNS[name]
    out = pytester.path / "out"
    if name == "new_user":
        pytester.makepyfile(test_example=_readme_example(), test_async_unmarked=ASYNC_WITHOUT_MARKER)
        fake = f"{FAKE_CMD} --ttft 0.02 --itl 0.002 --fault tool_required_ignored --fault tool_args_object"
        argv = ["test_example.py", "test_async_unmarked.py", "--pyargs",
                "pytest_inferaccept.suites.test_load", "pytest_inferaccept.suites.test_tools",
                "--capabilities", "chat,tools",
                "--load-requests", str(ASKED), "--load-duration", "1", "--client-check", "warn"]
    else:  # the unmarked async test beside a check that passes, and nothing else
        pytester.makepyfile(test_async_unmarked=ASYNC_WITHOUT_MARKER, test_plain=PLAIN_CHECK)
        fake = f"{FAKE_CMD} --ttft 0.01 --itl 0.001"
        argv = []
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--server-cmd", fake, *argv,
                                          "--inferaccept-json", str(out / "r.json"),
                                          "--inferaccept-html", str(out / "r.html"))
    run = Run(ret=int(result.ret), output=str(result.stdout),
              document=json.loads((out / "r.json").read_text(encoding="utf-8")),
              html=(out / "r.html").read_text(encoding="utf-8"), html_path=out / "r.html")
    _RUNS[name] = run
    return run


def _test(run: Run, name: str) -> dict[str, Any]:
    return next(t for t in run.document["tests"] if t["nodeid"].endswith(name))


def _summary(run: Run) -> list[str]:
    """The terminal summary's lines, from its section heading to where the results were written."""
    text = run.output.split("= inferaccept =", 1)[1]
    return text.split("inferaccept: results written", 1)[0].splitlines()[1:]


def test_load_traffic_counts_as_exercising_chat_and_streaming(pytester: pytest.Pytester) -> None:
    run = _run("new_user", pytester)
    capabilities = run.document["capabilities"]
    assert capabilities["chat"]["status"] == "supported", capabilities["chat"]
    assert capabilities["chat"]["tests"].get("passed", 0) >= 2  # the README's load test and the bundled one
    assert "stream_usage" in _test(run, "test_service_levels_hold_under_load")["capabilities"]
    assert re.search(r"\n  chat +supported +required", run.output)


def test_a_run_cut_short_by_its_time_limit_says_how_many_requests_were_measured_and_why(
        pytester: pytest.Pytester) -> None:
    run = _run("new_user", pytester)
    (measured_run,) = _test(run, "test_service_levels_hold_under_load")["load"]
    measured = measured_run["summary"]["counts"]["measured"]
    assert measured_run["stopped_by"] == "duration" and 0 < measured < ASKED
    said = " ".join(answer(load(run.document)))
    assert (f"Only {measured} of the {ASKED} requests asked were measured: the run's 1 s limit ended it "
            "first.") in said
    assert f"at concurrency 4, {ASKED} requests (at most 1 s)" in said
    page = Page(run.html)
    load_text = " ".join(page.text_of["load"].split())
    assert f"{measured} of {ASKED}" in load_text and "its 1 s limit" in load_text
    assert f"only {measured} of the {ASKED} requests asked were measured" in page.text_of["limitations"]


def test_the_slo_each_marker_gives_is_said_per_test(pytester: pytest.Pytester) -> None:
    run = _run("new_user", pytester)
    assert ("inferaccept: SLO of test_our_chat_traffic_meets_the_slo: ttft_p95=0.8, tpot_p95=0.06, "
            "error_rate=0.05 (its @slo marker)") in run.output
    summary = _summary(run)
    assert ("SLO: test_our_chat_traffic_meets_the_slo: ttft_p95 ≤ 800 ms, tpot_p95 ≤ 60 ms, error_rate ≤ 5 % "
            "(its @slo marker)") in summary
    assert "SLO: test_service_levels_hold_under_load: none given (measured, not judged)" in summary
    conditions = " ".join(Page(run.html).text_of["conditions"].split())
    assert "test_our_chat_traffic_meets_the_slo: ttft_p95 ≤ 800 ms" in conditions


def test_the_terminal_groups_the_failed_checks_into_the_findings_the_page_shows(
        pytester: pytest.Pytester) -> None:
    run = _run("new_user", pytester)
    assert run.document["verdict"]["status"] == "NO-GO"
    failed = [t for t in run.document["tests"] if t["outcome"] == "failed"]
    summary = _summary(run)
    listed = [line for line in summary if line.startswith("  - ")]
    boxed = Page(run.html).text_of["verdict"]
    # One line per finding, with the number of checks it stands for, as in the page's verdict box.
    assert any(line.endswith(" checks)") and line.startswith("  - tool_choice_required (") for line in listed)
    assert len(listed) < len(failed)
    for line in listed:
        said = re.sub(r"^\S*::", "", re.sub(r" \(\d+ checks?\)$", "", line[4:]))  # the page names no file
        assert said[:60] in " ".join(boxed.split()), line
    assert f"({len(failed)} failed checks in all, grouped above by what they found" in "\n".join(summary)
    assert not any(t["nodeid"] in line for t in failed for line in listed)


def test_the_readme_tools_example_says_a_missing_tool_call_plainly(pytester: pytest.Pytester) -> None:
    # The fake server treats 'required' as 'auto' here and the prompt does not name the tool, so no
    # call comes back: a real small model does the same (llama.cpp with SmolLM2).
    run = _run("new_user", pytester)
    booking = _test(run, "test_our_booking_tool_gets_called")
    assert booking["outcome"] == "failed"
    assert booking["message"].startswith(
        "AssertionError: tool_choice='required' but no tool call; the answer:")
    assert "TypeError" not in booking["message"]
    assert booking["capabilities"] == ["tool_choice_required"]


def test_an_unmarked_async_test_is_told_how_to_run_and_is_undecided_not_a_finding(
        pytester: pytest.Pytester) -> None:
    run = _run("new_user", pytester)
    unmarked = _test(run, "test_async_chat_without_its_marker")
    why = unmarked["evidence"]["invalid"]
    assert "Add @pytest.mark.asyncio to the test, or set asyncio_mode = auto" in why
    assert "You need to install a suitable plugin" not in unmarked["message"]
    lines = [line for line in _summary(run) if "test_async_chat_without_its_marker" in line]
    assert len(lines) == 1 and "undecided" in lines[0], lines


def test_an_unmarked_async_test_alone_makes_the_run_invalid_not_no_go(pytester: pytest.Pytester) -> None:
    run = _run("async_alone", pytester)
    assert run.document["verdict"]["status"] == "INVALID" and run.ret == 6, run.output
    assert "test_async_chat_without_its_marker is an async def test that nothing runs" in run.output
    assert _test(run, "test_models_are_listed")["outcome"] == "passed"


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install "
                                              "chromium)")
def test_the_load_tables_fit_a_1280_pixel_window(pytester: pytest.Pytester, tmp_path: Path) -> None:
    run = _run("new_user", pytester)
    # The page forbids scripts; a copy without that rule measures how wide the laid-out page is.
    measured = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", run.html).replace(
        "</body>", "<script>document.body.dataset.width = document.documentElement.scrollWidth;</script>"
                   "</body>")
    page = tmp_path / "measured.html"
    page.write_text(measured, encoding="utf-8")
    assert CHROMIUM is not None
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,900", "--dump-dom",
               page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    width = re.search(r'data-width="(\d+)"', done.stdout)
    assert width is not None, done.stdout[:500]
    assert int(width.group(1)) <= 1280
