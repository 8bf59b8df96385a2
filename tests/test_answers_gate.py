"""The upgrade gate's paths that test_compare_gate.py leaves out: --answer-drift fail and its threshold,
--answers-file, and a baseline measured under other conditions.

Inner runs are in-process (pytester) against fake servers that live as long as this module; each
run is made once, when a test first needs it, and shared by every test that reads it.
"""

from __future__ import annotations

import copy
import json
import math
import socketserver
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.baseline.gate import against_baseline
from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.gate_settings import GateSettings
from pytest_inferaccept.model import load_body

ANSWERS = '''
from pytest_inferaccept.suites.test_answers import (
    test_fixed_inputs_are_embedded_and_recorded, test_fixed_prompts_are_answered_and_recorded)
'''
PROMPTS_ONLY = '''
from pytest_inferaccept.suites.test_answers import test_fixed_prompts_are_answered_and_recorded
'''
TRAFFIC = '''
from pytest_inferaccept.suites.test_answers import test_fixed_prompts_are_answered_and_recorded


def test_chat_traffic(loadgen):
    loadgen.run(concurrency=4, requests=40)
'''
INNER = {"answers": ANSWERS, "prompts": PROMPTS_ONLY, "traffic": TRAFFIC}
"""The inner test modules, by name: the two answer checks, the chat one alone, chat answers and a load."""

LOAD = "test_traffic.py::test_chat_traffic"
TEAM_PROMPTS = [
    {"id": "refund", "prompt": "How do I ask for a refund of order 1234?"},
    {"id": "greeting", "messages": [{"role": "system", "content": "You are the Acme help desk."},
                                    {"role": "user", "content": "Say hello to a new customer."}],
     "max_tokens": 8},
]


@dataclass
class Run:
    """One inner run: exit status, terminal output and results document."""

    ret: int
    output: str
    doc: dict[str, Any]
    path: Path

    @property
    def section(self) -> dict[str, Any]:
        """The results' `baseline` section."""
        section: dict[str, Any] = self.doc["baseline"]
        return section

    def evidence(self, key: str) -> Any:
        """The first value recorded under `key` by any test of the run."""
        return next(t["evidence"]["values"][key] for t in self.doc["tests"]
                    if key in t.get("evidence", {}).get("values", {}))

    def changes(self, kind: str) -> list[dict[str, Any]]:
        """The baseline section's changes of one kind (answer, embedding, figure, ...)."""
        return [c for c in self.section["changes"] if c["kind"] == kind]


class Runs:
    """The module's fake servers and every inner run, made on first use."""

    def __init__(self, where: Path, servers: dict[str, FakeServer]) -> None:
        self.where = where
        self.servers = servers
        self._made: dict[str, Run] = {}

    def get(self, name: str, pytester: pytest.Pytester,
            make: Callable[[], tuple[str, str, list[str]]]) -> Run:
        """The run called `name`; `make` gives (server, inner module, extra arguments) the first time."""
        if name not in self._made:
            server, inner, extra = make()
            self._made[name] = self.run(pytester, name, server, inner, *extra)
        return self._made[name]

    def run(self, pytester: pytest.Pytester, name: str, server: str, inner: str, *extra: str) -> Run:
        """Run one inner module against one of the fake servers, writing `name`.json."""
        module = pytester.makepyfile(**{f"test_{inner}": INNER[inner]})
        out = self.where / f"{name}.json"
        fake = self.servers[server]
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "--rootdir", str(pytester.path), module.name, "--server-url", fake.url,
            "--model", fake.config.model,
            "--embedding-model", fake.config.embedding_model, "--client-check", "warn",
            "--inferaccept-json", str(out), *extra)
        output = str(result.stdout) + str(result.stderr)
        assert out.exists(), output
        return Run(ret=int(result.ret), output=output, doc=json.loads(out.read_text(encoding="utf-8")),
                   path=out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """A correct fake, one whose answers changed as after an upgrade, and a slower one for load runs."""
    with (FakeServer() as clean, FakeServer(faults=["answers_changed"]) as changed,
          FakeServer(ttft=0.02, itl=0.001) as timed):
        servers = {"clean": clean, "changed": changed, "timed": timed}
        yield Runs(tmp_path_factory.mktemp("answers-gate"), servers)


# --- --answer-drift -------------------------------------------------------------------------------------


def _base(runs: Runs, pytester: pytest.Pytester) -> Run:
    return runs.get("base", pytester, lambda: ("clean", "answers", []))


def _against_base(runs: Runs, pytester: pytest.Pytester, name: str, server: str, *extra: str,
                  inner: str = "answers") -> Run:
    base = _base(runs, pytester)
    return runs.get(name, pytester,
                    lambda: (server, inner, ["--inferaccept-baseline", str(base.path), *extra]))


def test_the_baseline_run_records_every_answer_and_embedding(runs: Runs, pytester: pytest.Pytester) -> None:
    base = _base(runs, pytester)
    assert base.ret == 0, base.output
    answers = base.evidence("answers")
    assert [a["id"] for a in answers] == ["arithmetic", "capital", "list", "code", "translate", "summary",
                                          "unicode", "system"]
    assert all(a["text"] for a in answers)
    assert len(base.evidence("embeddings")) == 7


def test_changed_answers_under_drift_fail_are_no_go_listing_old_and_new(runs: Runs,
                                                                        pytester: pytest.Pytester) -> None:
    base = _base(runs, pytester)
    run = _against_base(runs, pytester, "fail", "changed", "--answer-drift", "fail")
    assert run.ret == 1, run.output
    assert run.doc["verdict"]["status"] == "NO-GO"
    section = run.section
    assert section["status"] == "regressed" and section["trusted"] is True
    answers = section["answers"]
    assert answers["policy"] == "fail" and answers["threshold"] == 0.9
    assert 0 < answers["identical"] < answers["compared"] == 8
    # Old and new text side by side, each the text the two runs really recorded.
    before = {a["id"]: a["text"] for a in base.evidence("answers")}
    after = {a["id"]: a["text"] for a in run.evidence("answers")}
    changed = {c["id"]: c for c in answers["changed"]}
    assert set(changed) == {pid for pid in before if before[pid] != after[pid]}
    for pid, entry in changed.items():
        assert (entry["before"], entry["after"]) == (before[pid], after[pid])
    drifted = sorted(pid for pid, c in changed.items() if c["drifted"])
    assert drifted, changed
    regressed = {c["item"]: c for c in run.changes("answer") if c["status"] == "regression"}
    assert sorted(regressed) == drifted
    assert all((regressed[p]["before"], regressed[p]["after"]) == (before[p], after[p]) for p in drifted)
    # The verdict names each drifted answer, and so does the terminal's "changed since" section.
    reasons = "\n".join(run.doc["verdict"]["reasons"])
    for pid in drifted:
        assert f"since the baseline: answer {pid!r} drifted: similarity" in reasons
        assert f"WORSE     answer {pid!r} drifted: similarity {changed[pid]['similarity']:.2f} to the " \
               "baseline's (threshold 0.9)" in run.output
    assert f"answers: {answers['identical']} of 8 identical" in run.output
    assert "drift policy fail" in run.output
    assert "VERDICT: NO-GO" in run.output
    # Every embedding moved a little (cosine about 0.97): under 'fail' each is a regression too.
    assert {c["item"] for c in run.changes("embedding") if c["status"] == "regression"} == {
        e["id"] for e in base.evidence("embeddings")}


def test_changed_answers_under_the_default_warn_are_a_warning_not_a_no_go(runs: Runs,
                                                                          pytester: pytest.Pytester) -> None:
    run = _against_base(runs, pytester, "warn", "changed")
    assert run.ret == 0, run.output
    assert run.doc["verdict"]["status"] == "GO"
    assert run.section["status"] == "no regression" and run.section["regressions"] == []
    assert run.section["answers"]["policy"] == "warn"
    drifted = [c["item"] for c in run.changes("answer") if "drifted" in c["detail"]]
    assert drifted and all(c["status"] == "changed" for c in run.changes("answer"))
    warnings = "\n".join(run.doc["verdict"]["warnings"])
    for pid in drifted:
        assert f"since the baseline: answer {pid!r} drifted: similarity" in warnings
        assert f"warning: since the baseline: answer {pid!r} drifted" in run.output
    assert not any("answer" in r for r in run.doc["verdict"]["reasons"])
    assert "VERDICT: GO" in run.output and "drift policy warn" in run.output


def test_unchanged_answers_under_drift_fail_report_no_drift(runs: Runs, pytester: pytest.Pytester) -> None:
    run = _against_base(runs, pytester, "same", "clean", "--answer-drift", "fail")
    assert run.ret == 0, run.output
    answers = run.section["answers"]
    assert (answers["compared"], answers["identical"], answers["exact_match_rate"]) == (8, 8, 1.0)
    assert answers["changed"] == [] and not any(e["drifted"] for e in answers["embeddings"])
    assert run.changes("answer") == [] and run.changes("embedding") == []
    assert not any("drift" in w for w in run.doc["verdict"]["warnings"])
    assert "answers: 8 of 8 identical (100% exact match; drift policy fail)" in run.output


def test_a_threshold_the_changed_answers_stay_above_passes_under_drift_fail(
        runs: Runs, pytester: pytest.Pytester) -> None:
    # The threshold is the least similarity (difflib's ratio) a changed answer may keep: just under
    # the least similar of the changed answers, none counts as drifted. Embeddings have their own
    # fixed minimum (cosine 0.99), so this run asks for the chat answers only.
    least = min(c["similarity"] for c in _against_base(runs, pytester, "fail", "changed", "--answer-drift",
                                                       "fail").section["answers"]["changed"])
    threshold = math.floor(least * 100) / 100
    assert threshold >= 0.05, f"the changed answers are too unlike to test a threshold ({least})"
    run = _against_base(runs, pytester, "lenient", "changed", "--answer-drift", "fail",
                        "--answer-drift-threshold", f"{threshold:g}", inner="prompts")
    assert run.ret == 0, run.output
    assert run.doc["verdict"]["status"] == "GO"
    answers = run.section["answers"]
    assert answers["threshold"] == threshold and answers["changed"]
    assert not any(c["drifted"] for c in answers["changed"])
    assert {c["status"] for c in run.changes("answer")} == {"changed"}
    assert all("drifted" not in c["detail"] for c in run.changes("answer"))
    assert run.section["policy"]["answer_threshold"] == threshold
    # The same answers at a threshold just above the least similar one: that answer drifts.
    strict = _against_base(runs, pytester, "strict", "changed", "--answer-drift", "fail",
                           "--answer-drift-threshold", f"{threshold + 0.02:g}", inner="prompts")
    assert strict.ret == 1, strict.output
    assert [c for c in strict.changes("answer") if c["status"] == "regression"]


# --- --answers-file -------------------------------------------------------------------------------------


def test_a_teams_own_prompts_are_answered_and_stored_with_their_ids(runs: Runs, pytester: pytest.Pytester,
                                                                    tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in TEAM_PROMPTS) + "\n\n", encoding="utf-8")
    run = runs.run(pytester, "team", "clean", "answers", "--answers-file", str(path))
    assert run.ret == 0, run.output
    answers = {a["id"]: a for a in run.evidence("answers")}
    assert len(answers) == 8 + 2
    assert answers["refund"]["prompt"] == "How do I ask for a refund of order 1234?"
    assert answers["greeting"]["prompt"] == "Say hello to a new customer."
    assert answers["refund"]["text"] and answers["greeting"]["text"]
    assert answers["greeting"]["finish_reason"] == "length"  # its own max_tokens (8), not the default 24
    # A prompt is embedded as well; a conversation ("messages") is not.
    embedded = [e["id"] for e in run.evidence("embeddings")]
    assert "refund" in embedded and "greeting" not in embedded


class _Counter(socketserver.ThreadingTCPServer):
    """A listener that only counts the connections made to it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), socketserver.BaseRequestHandler)
        self.connections = 0

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.connections += 1
        return False


@pytest.mark.parametrize("lines, message", [
    (['{"id": "a", "prompt": "one"}', '{"id": "b", "prompt": "two"}', '{"id": "c", "prompt": '],
     ", line 3: not JSON (Expecting value)"),
    (['{"id": "a", "prompt": "one"}', '{"id": "b", "text": "two"}'],
     ", line 2: give 'prompt' (a string) or 'messages' (role/content objects)"),
    (['{"prompt": "one"}'], ", line 1: give 'id' (a non-empty string)"),
    (['{"id": "a", "prompt": "one", "max_tokens": 0}'], ", line 1: max_tokens must be a whole number >= 1"),
    (['["a", "list"]'], ", line 1: expected an object with 'prompt' or 'messages'"),
    (['{"id": "a", "prompt": "one"}', '{"id": "a", "prompt": "two"}'], ": duplicate ids a"),
    (['{"id": "capital", "prompt": "Capital of France?"}'], ": ids capital are taken by the bundled prompts"),
], ids=["bad-json-line-3", "no-prompt", "no-id", "max-tokens", "not-an-object", "duplicate-id",
        "bundled-id"])
def test_a_malformed_answers_file_is_a_usage_error_naming_file_and_line_and_nothing_is_sent(
        pytester: pytest.Pytester, tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    listener = _Counter()
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    try:
        module = pytester.makepyfile(test_answers=ANSWERS)
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", str(module), "--server-url",
                                              f"http://127.0.0.1:{listener.server_address[1]}",
                                              "--answers-file", str(path))
    finally:
        listener.shutdown()
        listener.server_close()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: --answers-file {path}{message}"), errors
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert listener.connections == 0


def test_an_answers_file_that_cannot_be_read_is_a_usage_error(pytester: pytest.Pytester,
                                                              tmp_path: Path) -> None:
    latin = tmp_path / "latin1.jsonl"
    latin.write_bytes('{"id": "a", "prompt": "caf\u00e9"}\n'.encode("latin-1"))
    module = pytester.makepyfile(test_answers=ANSWERS)
    for path, words in ((tmp_path / "missing.jsonl", "No such file or directory"),
                        (latin, "not UTF-8 text")):
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", str(module), "--server-url",
                                              "http://127.0.0.1:9", "--answers-file", str(path))
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        assert f"ERROR: --answers-file {path}: {words}" in result.stderr.str()


# --- conditions -----------------------------------------------------------------------------------------


def _measured(runs: Runs, pytester: pytest.Pytester) -> Run:
    """A run with a load, declared on an H100 pair, with an SLO: the source of every edited baseline."""
    return runs.get("measured", pytester, lambda: ("timed", "traffic", [
        "--condition", "gpu=H100x2", "--slo", "ttft_p50=2"]))


def _load_of(doc: dict[str, Any]) -> dict[str, Any]:
    load: dict[str, Any] = next(t for t in doc["tests"] if t["nodeid"] == LOAD)["load"][0]
    return load


def _faster(doc: dict[str, Any]) -> dict[str, Any]:
    """The document of a baseline whose time to first token was a third of this run's: this run got worse."""
    old = copy.deepcopy(doc)
    for stat in _load_of(old)["summary"]["metrics"]["ttft"].values():
        if isinstance(stat, dict):
            for key in ("value", "low", "high"):
                if isinstance(stat.get(key), (int, float)):
                    stat[key] /= 3
    return old


def _gpu(doc: dict[str, Any]) -> None:
    doc["conditions"]["declared"]["gpu"] = "A100x1"


def _undeclared(doc: dict[str, Any]) -> None:
    doc["conditions"]["declared"] = {}


def _model(doc: dict[str, Any]) -> None:
    doc["server"]["model"] = "fake-chat-v1"


def _workload(doc: dict[str, Any]) -> None:
    _load_of(doc)["spec"]["workload"]["output"] = "fixed(64)"


def _concurrency(doc: dict[str, Any]) -> None:
    _load_of(doc)["spec"]["concurrency"] = 16


def _client_bound(doc: dict[str, Any]) -> None:
    _load_of(doc)["selfcheck"].update(client_bound=["cpu"], client_check="fail")


def _host(doc: dict[str, Any]) -> None:
    doc["conditions"]["client_host"] = "ci-runner-7"


def _cpus(doc: dict[str, Any]) -> None:
    doc["conditions"]["cpu_count"] = 64


def _slo_profile(doc: dict[str, Any]) -> None:
    doc["conditions"]["settings"]["load"]["slo"] = {"ttft_p95": 0.5}


def _bundled_load(doc: dict[str, Any]) -> None:
    doc["conditions"]["settings"]["load"]["concurrency"] = 32


Edit = Callable[[dict[str, Any]], None]
TTFT = f"ttft p50 of {LOAD} rose from"


def _compare(runs: Runs, pytester: pytest.Pytester, tmp_path: Path, edit: Edit | None,
             gate: GateSettings | None = None, new: dict[str, Any] | None = None
             ) -> tuple[dict[str, Any], list[str], list[str]]:
    """The measured run compared with a faster baseline, edited: (section, regressions, warnings)."""
    measured = _measured(runs, pytester)
    assert measured.ret == 0, measured.output
    old = _faster(measured.doc)
    if edit is not None:
        edit(old)
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    found = against_baseline(load_body(new or measured.doc), gate or GateSettings(baseline_path=path))
    assert found.problem is None, found.problem
    return found.section.model_dump(exclude_unset=True), found.regressions, found.warnings


def _ttft(section: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in section["changes"] if c["item"] == f"{LOAD} ttft_p50")
    return found


def test_with_equal_conditions_a_slower_first_token_is_a_regression(runs: Runs, pytester: pytest.Pytester,
                                                                    tmp_path: Path) -> None:
    section, regressions, warnings = _compare(runs, pytester, tmp_path, None)
    assert section["conditions"] == [] and section["trusted"] is True
    assert _ttft(section)["status"] == "regression"
    assert _ttft(section)["detail"].startswith(TTFT)
    assert any(r.startswith(f"since the baseline: {TTFT}") for r in regressions)
    assert not any("not comparable" in w for w in warnings)


@pytest.mark.parametrize("edit, key, because", [
    (_gpu, "declared.gpu", "declared condition gpu differs (A100x1 → H100x2)"),
    (_undeclared, "declared.gpu", "declared condition gpu differs (None → H100x2)"),
    (_model, "model", "model differs (fake-chat-v1 → fake-chat)"),
], ids=["other-gpu", "gpu-not-declared-before", "other-model"])
def test_a_baseline_of_other_hardware_or_model_is_untrusted_and_calls_nothing_a_regression(
        runs: Runs, pytester: pytest.Pytester, tmp_path: Path, edit: Edit, key: str, because: str) -> None:
    section, regressions, warnings = _compare(runs, pytester, tmp_path, edit)
    assert [(d["key"], d["effect"]) for d in section["conditions"]] == [(key, "untrusted")]
    assert section["trusted"] is False and section["untrusted_because"] == [because]
    ttft = _ttft(section)
    assert ttft["status"] == "untrusted"
    assert ttft["detail"].endswith(f", but the comparison cannot be trusted: {because}")
    assert ttft["detail"].startswith(TTFT)
    assert section["status"] == "no regression" and regressions == []
    assert f"the baseline's figures are not comparable: {because}" in warnings
    assert f"since the baseline: {ttft['detail']}" in warnings


@pytest.mark.parametrize("edit, because", [
    (_workload, "the load differed (workload {'type': 'synthetic', 'input': 'fixed(64)', 'output': "
                "'fixed(64)'"),
    (_concurrency, "the load differed (concurrency 16 → 4)"),
    (_client_bound, "the client was the bottleneck in the baseline"),
], ids=["other-workload", "other-concurrency", "client-bound-baseline"])
def test_a_load_run_asked_differently_or_client_bound_is_untrusted_for_that_run(
        runs: Runs, pytester: pytest.Pytester, tmp_path: Path, edit: Edit, because: str) -> None:
    section, regressions, _ = _compare(runs, pytester, tmp_path, edit)
    # Judged per load run, not as a condition of the whole run.
    assert section["conditions"] == [] and section["trusted"] is True
    ttft = _ttft(section)
    assert ttft["status"] == "untrusted" and because in ttft["detail"]
    assert "but the comparison cannot be trusted" in ttft["detail"]
    assert not any(TTFT in r for r in regressions)


@pytest.mark.parametrize("edit, key, label", [
    (_host, "client_host", "client host"),
    (_cpus, "cpu_count", "client CPU count"),
    (_slo_profile, "slo", "SLO profile"),
    (_bundled_load, "load", "bundled load settings"),
], ids=["client-host", "cpu-count", "slo-profile", "bundled-load-settings"])
def test_a_flagged_difference_is_listed_and_the_worsening_is_still_a_regression(
        runs: Runs, pytester: pytest.Pytester, tmp_path: Path, edit: Edit, key: str, label: str) -> None:
    section, regressions, warnings = _compare(runs, pytester, tmp_path, edit)
    assert [(d["key"], d["label"], d["effect"]) for d in section["conditions"]] == [(key, label, "flagged")]
    assert section["trusted"] is True and section["untrusted_because"] == []
    assert _ttft(section)["status"] == "regression"
    assert any(r.startswith(f"since the baseline: {TTFT}") for r in regressions)
    assert not any("not comparable" in w for w in warnings)


@pytest.mark.parametrize("other_slo", [False, True], ids=["same-slo", "other-slo"])
def test_goodput_is_untrusted_only_when_the_slo_that_defines_it_changed(
        runs: Runs, pytester: pytest.Pytester, tmp_path: Path, other_slo: bool) -> None:
    new = copy.deepcopy(_measured(runs, pytester).doc)
    _load_of(new)["summary"]["goodput"]["fraction"].update(value=0.5, low=0.4, high=0.6)

    def edit(doc: dict[str, Any]) -> None:
        if other_slo:
            _slo_profile(doc)
            _load_of(doc)["slo_limits"] = {"ttft_p50": 0.5}

    section, regressions, _ = _compare(runs, pytester, tmp_path, edit, new=new)
    goodput = next(c for c in section["changes"] if c["item"] == f"{LOAD} goodput")
    assert goodput["detail"].startswith(f"goodput of {LOAD} fell from")
    # The SLO profile itself is flagged only: the slower first token stays a regression.
    assert _ttft(section)["status"] == "regression"
    if other_slo:
        assert goodput["status"] == "untrusted"
        assert goodput["detail"].endswith(
            "but the comparison cannot be trusted: the SLO that defines goodput differs")
        assert not any("goodput" in r for r in regressions)
    else:
        assert goodput["status"] == "regression"
        assert any(r.startswith(f"since the baseline: goodput of {LOAD} fell") for r in regressions)


def test_answer_drift_under_fail_is_not_a_regression_against_other_hardware(
        runs: Runs, pytester: pytest.Pytester, tmp_path: Path) -> None:
    fail = _against_base(runs, pytester, "fail", "changed", "--answer-drift", "fail")
    old = copy.deepcopy(_base(runs, pytester).doc)
    old["conditions"]["declared"] = {"gpu": "A100x1"}
    path = tmp_path / "base-a100.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    gate = GateSettings(baseline_path=path, answer_drift="fail")
    found = against_baseline(load_body(fail.doc), gate)
    section, regressions, warnings = (found.section.model_dump(exclude_unset=True), found.regressions,
                                      found.warnings)
    drifted = [c for c in section["changes"]
               if c["kind"] in ("answer", "embedding") and "drifted" in c["detail"]]
    assert drifted and {c["status"] for c in drifted} == {"changed"}
    assert regressions == [] and section["status"] == "no regression"
    because = "declared condition gpu differs (A100x1 → None)"
    assert f"the baseline's figures are not comparable: {because}" in warnings
    assert any("answer" in w and "drifted" in w for w in warnings)


def _against(runs: Runs, pytester: pytest.Pytester, name: str, edit: Edit | None, *extra: str) -> Run:
    """A second load run of the same server, compared with the measured run made faster and edited."""
    measured = _measured(runs, pytester)
    old = _faster(measured.doc)
    if edit is not None:
        edit(old)
    path = runs.where / f"{name}-baseline.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    return runs.get(name, pytester, lambda: ("timed", "traffic", [
        "--inferaccept-baseline", str(path), "--slo", "ttft_p50=2", *extra]))


def test_a_run_on_the_same_hardware_that_got_slower_is_no_go(runs: Runs, pytester: pytest.Pytester) -> None:
    run = _against(runs, pytester, "slower", None, "--condition", "gpu=H100x2")
    assert run.ret == 1, run.output
    assert run.doc["verdict"]["status"] == "NO-GO"
    assert any(r.startswith(f"since the baseline: {TTFT}") for r in run.doc["verdict"]["reasons"])
    assert f"WORSE     {TTFT}" in run.output
    assert "condition differs" not in run.output


def test_a_run_on_other_hardware_is_flagged_and_its_slower_first_token_is_no_regression(
        runs: Runs, pytester: pytest.Pytester) -> None:
    run = _against(runs, pytester, "other-gpu", _gpu, "--condition", "gpu=H100x2")
    assert run.ret == 0, run.output
    assert run.doc["verdict"]["status"] == "GO"
    assert run.section["trusted"] is False and run.section["regressions"] == []
    assert _ttft(run.section)["status"] == "untrusted"
    assert ("  condition differs (figures not compared): declared condition gpu: A100x1 → H100x2"
            in run.output)
    assert f"untrusted {TTFT}" in run.output
    assert ("warning: the baseline's figures are not comparable: declared condition gpu differs "
            "(A100x1 → H100x2)") in run.output
    assert not any(TTFT in r for r in run.doc["verdict"]["reasons"])


def test_a_run_from_another_client_host_is_flagged_and_still_no_go(runs: Runs,
                                                                   pytester: pytest.Pytester) -> None:
    run = _against(runs, pytester, "other-host", _host, "--condition", "gpu=H100x2")
    assert run.ret == 1, run.output
    assert run.section["trusted"] is True
    assert "  condition differs (flagged): client host: ci-runner-7 → " in run.output
    assert f"WORSE     {TTFT}" in run.output
