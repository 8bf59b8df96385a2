"""The Capacity section: each scenario drawn from the results document, marked, charted, and escaped.

The data is a real run's capacity scenarios against the fake server (tests/data/capacity_results.json:
a ladder with its knee at c=4 and SLOs met up to c=8, a sweep, a soak, a push that sheds load with
503 and a prompt-length push refused with 400), trimmed to the capacity tests.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_inferaccept.model import load
from pytest_inferaccept.report import capacity_view, charts, schema
from pytest_inferaccept.report.html import render
from pytest_inferaccept.report.words import NO_LOAD, answer, limitations
from tests._report_runs import Page
from tests.test_report_schema import _minimal

DATA = Path(__file__).with_name("data") / "capacity_results.json"
LADDER_SENTENCE = ("Serves 8 concurrent users within your SLOs (TTFT p95 ≤ 300 ms, error rate ≤ 5 %); "
                   "beyond 4, requests queue: the server's waiting gauge grows while throughput stays flat.")
SCRIPT = "<script>alert('headline')</script>"
DETAIL = "<img src=x onerror=alert('detail')>"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def document() -> dict[str, Any]:
    """A fresh copy of the recorded capacity run."""
    loaded: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return loaded


def _scenario(document: dict[str, Any], kind: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for t in document["tests"] for c in t.get("capacity", [])
                                 if c["kind"] == kind)
    return found


def _text(html: str) -> str:
    """The page's visible words, one space between each."""
    page = Page(html)
    return " ".join(page.text_of["capacity"].split())


def _rows(html: str, css: str) -> list[str]:
    """The level cell of every row of a level table with this class."""
    return re.findall(rf'<tr class="{css}">\s*<td class="level">([^<]*)<', html)


def test_the_recorded_document_validates_against_the_schema_and_the_model(document: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(schema.SCHEMA_PATH.read_text(encoding="utf-8")))
    validator.validate(document)
    run = load(document)
    kinds = [c.kind for t in run.tests for c in t.capacity]
    assert kinds == ["ladder", "sweep", "soak", "push", "push_length"]
    ladder = run.tests[0].capacity[0]
    assert ladder.findings.knee is not None and ladder.findings.knee.level == 4
    assert ladder.findings.max_slo_level == 8
    assert ladder.steps[3].telemetry["waiting"] == 4
    assert run.tests[3].capacity[0].findings.boundary is not None
    assert run.tests[3].capacity[0].findings.boundary.retry_after == 52


def test_a_capacity_entry_must_say_pass_fail_or_invalid(document: dict[str, Any]) -> None:
    _scenario(document, "ladder")["status"] = "great"
    validator = jsonschema.Draft202012Validator(json.loads(schema.SCHEMA_PATH.read_text(encoding="utf-8")))
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(document)


def test_the_section_draws_every_scenario_with_its_status_and_headline(document: dict[str, Any]) -> None:
    html = render(document)
    page = Page(html)
    assert "capacity" in page.ids
    assert "#capacity" in [a.get("href") for a in page.tags("a")]
    text = _text(html)
    for number, title in enumerate(["Concurrency ladder", "Open-loop rate sweep", "Soak", "Push to failure",
                                    "Prompt length boundary"], start=1):
        anchor = f"capacity-{number}"
        assert anchor in page.ids
        section = " ".join(page.text_of[anchor].split())
        assert section.startswith(f"pass {title}"), section[:80]
    assert "meets the SLOs up to c=8; knee at c=4; at c=16 TTFT p95 is 518 ms and 70% fail" in text
    # Every link in the section goes to an anchor on the page (the scenario's check among them).
    hrefs = [str(a["href"]) for a in page.tags("a") if a.get("href")]
    assert [h for h in hrefs if h[1:] not in page.ids] == []


def test_the_ladder_table_marks_the_knee_and_the_highest_level_within_the_slos(
        document: dict[str, Any]) -> None:
    html = render(document)
    assert _rows(html, "knee") == ["c=4"]
    assert _rows(html, "best") == ["c=8", "22.88 req/s"]
    table = capacity_view.level_table(load(document).tests[0].capacity[0])
    assert table is not None
    assert table.columns[:7] == ("requests", "failed", "TTFT p50", "TTFT p95", "e2e p95", "tokens/s", "req/s")
    assert {"achieved concurrency", "peak waiting", "peak KV cache", "peak memory"} <= set(table.columns)
    assert "peak GPU memory" not in table.columns  # no GPU was sampled: the column is left out
    by_level = {row.level: row for row in table.rows}
    assert [m[1] for m in by_level["c=4"].marks] == ["knee"]
    assert [m[1] for m in by_level["c=8"].marks] == ["highest within the SLOs"]
    top = dict(zip(table.columns, by_level["c=16"].cells, strict=True))
    assert (top["failed"].text, top["failed"].detail) == ("28", "HTTP 503 ×28")
    assert top["peak waiting"].text == "8" and top["peak memory"].text == "200 MiB"
    assert by_level["c=16"].slo == "fail" and by_level["c=8"].slo == "pass"
    assert any(n.startswith("c=16: SLO missed: ttft_p95 = 0.52 s") for n in table.footnotes)
    text = _text(html)
    assert "knee c=4: from c=4 to c=8 throughput grew -4%" in text
    assert "highest within the SLOs c=8 (at c=16:" in text
    assert "queueing at c=4 beyond c=4 requests queue" in text


def test_the_sweep_shows_the_asked_and_achieved_rate(document: dict[str, Any]) -> None:
    table = capacity_view.level_table(load(document).tests[1].capacity[0])
    assert table is not None and table.level_title == "rate asked"
    first = dict(zip(table.columns, table.rows[0].cells, strict=True))
    assert first["send rate: achieved of asked (req/s)"].text == "3.83 of 3.82"
    assert first["send rate: achieved of asked (req/s)"].detail == "100%"
    assert "achieved concurrency" not in table.columns
    assert any("client warning (judged anyway)" in n for n in table.footnotes)


def test_the_soak_shows_its_checks_and_window_medians(document: dict[str, Any]) -> None:
    html = render(document)
    section = " ".join(Page(html).text_of["capacity-3"].split())
    for line in ("TTFT drift pass TTFT stable: -3 ms over 14 s", "end-to-end latency drift pass",
                 "memory growth pass memory (/metrics process_resident_memory_bytes) stable",
                 "error onset pass no request failed", "the window medians (15 windows)",
                 "concurrency 3 (0.75 × the ladder's knee at c=4)"):
        assert line in section, line
    view = capacity_view.capacity_views(load(document), lambda _: "#x")[2]
    assert view.windows[0] == ("0.5 s", "54.4 ms", "223 ms", "0")


def test_the_push_says_where_and_how_it_failed(document: dict[str, Any]) -> None:
    page = Page(render(document))
    push = " ".join(page.text_of["capacity-4"].split())
    for line in ("At the boundary: sheds load gracefully", "boundary c=32",
                 "why there error rate 81.2% > 10%", "failed answers 52 (HTTP 503 ×52)",
                 "rejected with 429 / 503 52, 52 with Retry-After",
                 "median rejection time 20.7 ms", "answers afterwards yes (HTTP 200 in 0.06 s)"):
        assert line in push, line
    length = " ".join(page.text_of["capacity-5"].split())
    for line in ("At the boundary: clean refusal", "boundary 2048 tokens", "failed answers 3 (HTTP 400 ×3)",
                 "context window not reported"):
        assert line in length, line
    assert "answered HTTP 400" not in length  # a clean refusal is not a problem
    assert "SLO missed" not in length


def test_a_push_that_falls_over_lists_its_problems(document: dict[str, Any]) -> None:
    push = _scenario(document, "push")
    push["status"] = "fail"
    push["headline"] = "falls over at c=32 instead of shedding load: answered HTTP 500 ×40"
    push["reasons"] = [push["headline"]]
    push["findings"]["boundary"].update(graceful=False, statuses={"500": 40},
                                        problems=["answered HTTP 500 ×40"])
    page = Page(render(document))
    text = " ".join(page.text_of["capacity-4"].split())
    assert text.startswith("fail Push to failure")
    assert "At the boundary: falls over" in text and "answered HTTP 500 ×40" in text
    sentences = answer(load(document))
    assert ("Pushed past capacity, it falls over at 32 concurrent users instead of shedding load: answered "
            "HTTP 500 ×40.") in sentences


def test_the_notes_say_which_telemetry_was_absent(document: dict[str, Any]) -> None:
    text = " ".join(Page(render(document)).text_of["capacity-1"].split())
    assert "not measured: GPU: nvidia-smi is not on PATH" in text
    assert "Telemetry sampled every 1 s (21 samples): running (/metrics vllm:num_requests_running)" in text


def test_the_charts_are_inline_svg_with_the_tables_still_there(document: dict[str, Any],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    drawn = charts.capacity_charts(load(document))
    assert sorted(drawn) == ["capacity-1", "capacity-2", "capacity-3"]  # the pushes have no chart
    caption, svg = drawn["capacity-1"][0]
    assert caption.startswith("Throughput and latency p95 against concurrency: test_concurrency_ladder")
    assert svg.startswith("<svg") and "knee: c=4" in svg and "highest within the SLOs: c=8" in svg
    assert "TTFT p95 limit" in svg
    assert "latency per window" in drawn["capacity-3"][0][1]
    html = render(document)
    assert html.count("<svg") == 3
    monkeypatch.setattr(charts, "available", lambda: False)
    plain = render(document)
    assert "<svg" not in plain and "<figure" not in plain
    assert _rows(plain, "best") == ["c=8", "22.88 req/s"]


def test_the_plain_words_answer_uses_the_ladder(document: dict[str, Any]) -> None:
    run = load(document)
    sentences = answer(run)
    assert sentences[0] == "Passed every acceptance check that ran (5 checks)."
    assert LADDER_SENTENCE in sentences
    after = sentences[sentences.index(LADDER_SENTENCE) + 1]
    assert after == ("At 16 concurrent users: TTFT p95 518 ms, error rate 70 % (28 of 40 failed: "
                     "HTTP 503 ×28).")
    assert ("Over a 15 s soak at 3 concurrent users: TTFT stable, end-to-end latency stable, memory stable, "
            "no request failed.") in sentences
    assert any(s.startswith("Pushed past capacity, it sheds load gracefully at 32 concurrent users: "
                            "52 rejected with HTTP 503 (52 with Retry-After)") for s in sentences)
    assert NO_LOAD not in sentences and NO_LOAD not in limitations(run)
    page = Page(render(document))
    assert LADDER_SENTENCE in " ".join(page.text_of["answer"].split())


def test_the_ladder_sentence_follows_the_data(document: dict[str, Any]) -> None:
    ladder = _scenario(document, "ladder")
    ladder["explanations"] = [e for e in ladder["explanations"] if e["kind"] != "queueing"]
    ladder["explanations"].append({"kind": "saturated", "level": 4, "text": "", "evidence": {}})
    sentences = answer(load(document))
    assert ("Serves 8 concurrent users within your SLOs (TTFT p95 ≤ 300 ms, error rate ≤ 5 %); beyond 4, "
            "throughput stays flat while latency climbs.") in sentences
    ladder["findings"].update(max_slo_level=None, knee={"level": None, "reason": "not reached"})
    for step in ladder["steps"]:
        step["slo_status"] = "fail"
    assert ("Misses your SLOs (TTFT p95 ≤ 300 ms, error rate ≤ 5 %) even at 1 concurrent user; throughput "
            "kept growing up to 16 concurrent users (no knee within the levels measured).") \
        in answer(load(document))
    ladder["status"] = "invalid"
    ladder["reasons"] = ["the client was the bottleneck already at c=1: loop lag 80 ms"]
    assert ("The ladder could not judge the server: the client was the bottleneck already at c=1: loop lag "
            "80 ms.") in answer(load(document))


def test_a_document_without_capacity_renders_as_before() -> None:
    document = _minimal()
    run = load(document)
    assert answer(run) == ["Passed every acceptance check that ran (1 checks).", NO_LOAD]
    html = render(document)
    page = Page(html)
    assert "capacity" not in page.ids and 'href="#capacity"' not in html
    assert "No load test ran in this run" in html
    assert charts.capacity_charts(run) == {}


def test_server_text_in_a_scenario_is_printed_as_text(document: dict[str, Any]) -> None:
    ladder = _scenario(document, "ladder")
    ladder["headline"] = SCRIPT
    ladder["reasons"] = [f"reason {SCRIPT}"]
    ladder["notes"].append(f"note {DETAIL}")
    ladder["explanations"][0]["text"] = f"errors begin: {DETAIL}"
    ladder["steps"][4]["error_statuses"] = {DETAIL: 28}
    ladder["steps"][4]["slo_failures"] = f"ttft_p95 {SCRIPT}"
    ladder["telemetry"]["series"][0]["source"] = f"/metrics {SCRIPT}"
    soak = _scenario(document, "soak")
    soak["findings"]["checks"]["errors"].update(
        status="fail", text=f"1 of 207 failed; the first 3.0 s into the soak (http_5xx: {SCRIPT} {DETAIL})")
    soak["status"] = "fail"
    soak["reasons"] = [soak["findings"]["checks"]["errors"]["text"]]
    push = _scenario(document, "push")
    push["findings"]["boundary"].update(graceful=False, alive_detail=DETAIL, why=SCRIPT, problems=[DETAIL])
    html = render(document)
    page = Page(html)
    assert not page.tags("script") and not page.tags("img")
    assert [n for _, attrs in page.elements for n in attrs if n.lower().startswith("on")] == []
    assert SCRIPT not in html and DETAIL not in html
    assert "&lt;script&gt;alert(&#39;headline&#39;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(&#39;detail&#39;)&gt;" in html
    text = _text(html)
    assert SCRIPT in text and DETAIL in text  # shown, as text
    soak_words = next(s for s in answer(load(document)) if s.startswith("Over a 15 s soak"))
    assert SCRIPT in soak_words and SCRIPT in " ".join(page.text_of["answer"].split())


def test_an_unknown_kind_of_scenario_is_still_shown(document: dict[str, Any]) -> None:
    extra = copy.deepcopy(_scenario(document, "push"))
    extra.update(kind="tsunami", headline="held a burst of 64 at once", findings={}, steps=[],
                 explanations=[])
    document["tests"][-1]["capacity"].append(extra)
    page = Page(render(document))
    assert "capacity-6" in page.ids
    assert " ".join(page.text_of["capacity-6"].split()).startswith("pass tsunami")
    assert "Tsunami (test_prompt_length_boundary): held a burst of 64 at once." in answer(load(document))


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install "
                                             "chromium)")
def test_chromium_draws_the_section_with_no_script(document: dict[str, Any], tmp_path: Path) -> None:
    _scenario(document, "ladder")["headline"] = SCRIPT
    page_path = tmp_path / "capacity.html"
    page_path.write_text(render(document), encoding="utf-8")
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--dump-dom", page_path.as_uri()],
        capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = Page(done.stdout)
    assert "capacity-1" in dom.ids and not dom.tags("script")
    assert SCRIPT in " ".join(dom.text_of["capacity-1"].split())
    assert [line for line in done.stderr.splitlines() if ":CONSOLE" in line] == []


def test_capacity_levels_judged_on_the_point_estimate_are_a_limitation(document: dict[str, Any]) -> None:
    said = [s for s in limitations(load(document)) if "point estimate" in s]
    assert said == ["The SLOs in test_concurrency_ladder, test_prompt_length_boundary, test_push_to_failure, "
                    "test_rate_sweep, test_soak were judged on the point "
                    "estimate, not on its confidence interval (--slo-judge point): a level that passes "
                    "there is weaker evidence."]
    document["conditions"]["settings"]["load"]["slo_judge"] = "interval"
    assert not [s for s in limitations(load(document)) if "point estimate" in s]


def test_every_kind_the_scenarios_write_has_its_entry_and_each_reading_its_function() -> None:
    from typing import get_args

    from pytest_inferaccept.report.capacity_kinds import KINDS, Facts, Plot, Sentences, kind_of
    from pytest_inferaccept.report.capacity_view import PARTS
    from pytest_inferaccept.report.charts import PLOTS
    from pytest_inferaccept.report.words import CAPACITY_SENTENCES
    from pytest_inferaccept.scenario_kinds import NAMES

    package = Path(capacity_view.__file__).resolve().parent.parent
    written = {kind for path in (package / "capacity").glob("*.py")
               for kind in re.findall(r'conclude\(\s*kind="(\w+)"', path.read_text(encoding="utf-8"))}
    assert len(written) >= 8, written  # the scan finds the scenarios (the ladder and sweep conclude in climb)
    assert sorted(written - set(NAMES)) == []  # every kind written is registered
    assert sorted(set(KINDS) - set(NAMES)) == []
    # a registered kind without words of its own is drawn from its registry line, never as a bare name
    assert all(kind_of(name).title != name for name in NAMES)
    assert set(CAPACITY_SENTENCES) == set(get_args(Sentences))
    assert set(PARTS) == set(get_args(Facts))
    assert set(PLOTS) == set(get_args(Plot))


EFFECTS = Path(__file__).with_name("data") / "capacity_effects.json"
"""A real run's failure recovery (the fake server killed and restarted) beside the workload-effect
scenarios of the project's own tests against the fake server: latency by length bucket, long prompts
against short ones (two slots), a shared prefix served from the cache, and multi-turn conversations."""


def test_the_recovery_and_workload_effect_scenarios_show_their_own_figures() -> None:
    document = json.loads(EFFECTS.read_text(encoding="utf-8"))
    page = Page(render(document))
    section = {n: " ".join(page.text_of[f"capacity-{n}"].split()) for n in range(1, 6)}
    expected = {
        1: ["pass Failure recovery", "ready again 2.1 s after the kill",
            "first good answer 2.2 s after the kill",
            "requests lost about 52.4 at the 24 requests/s this level served (before the kill)",
            "in flight at the kill 4 (stream_error ×4)", "failed requests 4661 of 4765 (clean errors)"],
        2: ["pass Latency by prompt and answer length", "context window 2048 tokens",
            "TTFT p50 by input length short 29.4 ms, medium 351 ms, long 890 ms",
            "e2e p95 by output length short 43.7 ms, medium 40.6 ms",
            "input long 1536–1952 1768 long 4", "input very_long not run not run: beyond the context window",
            "output medium 256–512 35 short, not the one asked"],
        3: ["fail Long prompts against short ones", "short TTFT p95 75.3 ms alone, 436 ms mixed",
            "p95 ratio, mixed / alone ×5.80 (95% interval ×5.72 to ×6.01)",
            "counts as interference above ×2; the test allows ×1.1",
            "alone, c=4 24 of 24 70.2 ms 75.3 ms", "mixed (25% long), c=4 24 of 24 105 ms 436 ms 8 of 8",
            "interference at c=4 long prompts delay short ones: TTFT p95 ×5.8"],
        4: ["pass Shared prefix against unique prompts", "TTFT p50 63.2 ms shared, 298 ms unique (×0.21)",
            "prefix-cache hit rate 100 % shared, 0 % unique",
            "shared, c=2 512 576 579 counted (p50) 8 100 % hit rate 100% (4632 of 4632 prompt tokens)",
            "prefix cache at c=2 a shared 512-token prefix lowers TTFT p50 ×0.21"],
        5: ["pass Multi-turn conversations", "conversations 4 of 4 turns at c=2",
            "TTFT p50 by turn 1: 107 ms, 2: 243 ms, 3: 378 ms, 4: 514 ms",
            "last turn against the first ×4.80",
            "TTFT per 1000 prompt tokens +498 ms", "turn 4 4 4 1019 counted (p50) 515 ms 0 514 ms"],
    }
    for n, lines in expected.items():
        for line in lines:
            assert line in section[n], (n, line, section[n][:600])
    # Each kind's step table: its own row names and columns, no SLO column (none of them is judged on one).
    views = {view.kind: view for view in capacity_view.capacity_views(load(document), lambda t: "#")}
    tables = {kind: view.table for kind, view in views.items()}
    assert all(t is not None and not t.has_slo for t in tables.values())
    turns = tables["multi_turn"]
    assert turns is not None and turns.level_title == "turn" and "requests" not in turns.columns
    assert [r.level for r in turns.rows] == ["turn 1", "turn 2", "turn 3", "turn 4"]
    lengths = tables["length"]
    assert lengths is not None and lengths.columns[:3] == ("tokens asked", "tokens counted (p50)", "answered")
    said = answer(load(document))
    assert any(s.startswith("Long prompts against short ones (test_it): short prompts' TTFT p95 75 ms")
               for s in said), said
