"""The objects a run holds while tests run are the run model's own: what they hold is what the
document writes, what crosses between xdist processes comes back whole, and importing the plugin
still loads no pydantic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_inferaccept.capabilities import ProbeResult
from pytest_inferaccept.evidence import Evidence, Exchange
from pytest_inferaccept.model import Cause, Probe, RunBody, ServerUnderTest
from pytest_inferaccept.plugin.xdist import _cause_data
from pytest_inferaccept.scrub import Scrubber
from pytest_inferaccept.server import ServerUnderTest as GivenServer


def test_importing_the_plugin_loads_neither_pydantic_nor_the_run_model() -> None:
    # pytest imports the plugin (an entry point) in every run of the environment, acceptance or not
    code = ("import sys, pytest_inferaccept.plugin; "
            "print([m for m in ('pydantic', 'pytest_inferaccept.model') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_run_of_plain_tests_loads_neither_pydantic_nor_the_run_model(pytester: pytest.Pytester) -> None:
    # the hooks run for every test of the environment; only an acceptance test may pay for the model
    pytester.makepyfile(test_plain="""
        import sys

        def test_plain():
            assert [m for m in ("pydantic", "pytest_inferaccept.model") if m in sys.modules] == []
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()


def test_the_hook_path_names_are_the_models_classes() -> None:
    assert (Evidence.__module__, Exchange.__module__, GivenServer, ProbeResult) == (
        "pytest_inferaccept.model", "pytest_inferaccept.model", ServerUnderTest, Probe)


def test_a_cause_from_a_worker_keeps_its_server_and_is_summarised_where_the_run_ends() -> None:
    cause = Cause(kind="stopped answering", server="http://embed:9", reason="GET /health: ConnectError",
                  main=False, during="t.py::test_a", next_probe=1e12)
    crossed = Cause.model_validate(json.loads(json.dumps(_cause_data(cause))))
    crossed.consequences.append("t.py::test_b")  # a later failure the controller attributes to it
    written = crossed.model_dump(mode="json")
    assert "main" not in written and "next_probe" not in written
    assert written["summary"] == ("the server at http://embed:9 stopped answering during test t.py::test_a; "
                                  "the 1 later failure is a consequence")
    assert crossed.due_for_probe(), "a monotonic time from another process must not hold the probe back"


def test_a_read_cause_keeps_the_summary_its_document_wrote() -> None:
    read = Cause.model_validate({"kind": "exited", "server": "http://h:1", "reason": "exit code 3",
                                 "summary": "as written then"})
    assert read.model_dump(mode="json")["summary"] == "as written then"


def test_a_probe_that_failed_in_transport_says_so_to_the_session_but_not_to_the_document() -> None:
    probe = Probe(capability="tools", status="broken", detail="request failed: ConnectError", transient=True)
    assert probe.transient
    assert probe.model_dump(mode="json") == {"capability": "tools", "status": "broken",
                                             "detail": "request failed: ConnectError"}
    assert "transient" not in json.dumps(Probe.model_json_schema())


def test_the_server_a_test_is_given_is_the_server_the_document_describes(tmp_path: Path) -> None:
    log = tmp_path / "server-chat.log"
    server = ServerUnderTest(base_url="http://127.0.0.1:8000", model="m", embedding_url="http://127.0.0.1:8000",
                             served_models=["m"], required_capabilities=["chat", "tools"],
                             log_paths=[str(log)], launched="preset fake", ready_seconds=1.5)
    assert (server.api_base, server.log_path, server.required) == (
        "http://127.0.0.1:8000/v1", log, ("chat", "tools"))
    written = server.model_dump(mode="json")
    assert list(written) == ["base_url", "model", "embedding_url", "embedding_model", "served_models",
                             "required_capabilities", "version_info", "log_paths", "launched",
                             "ready_seconds"]
    body = {"schema": "pytest-inferaccept/results/1", "server": written,
            "conditions": {"plugin_version": "0", "python": "3", "client_host": "h", "client_platform": "p",
                           "started_at": "s", "finished_at": "f", "settings": {}}}
    assert RunBody.model_validate(body).server == server


def test_evidence_writes_only_what_the_test_recorded_with_its_secrets_scrubbed() -> None:
    evidence = Evidence(scrubber=Scrubber(["sk-very-secret-key"]))
    assert evidence.model_dump(mode="json", exclude_defaults=True) == {}
    evidence.add_exchange(Exchange(method="POST", url="http://h/v1/chat/completions",
                                   request_body='{"api_key": "sk-very-secret-key"}', status=200))
    evidence.note("used sk-very-secret-key")
    written = evidence.model_dump(mode="json", exclude_defaults=True)
    assert written == {"exchanges": [{"method": "POST", "url": "http://h/v1/chat/completions",
                                      "request_body": '{"api_key": "***"}', "status": 200}],
                       "notes": ["used ***"]}
