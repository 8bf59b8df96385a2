"""A server that ignores the team's API key: a warning, and a NO-GO when auth is required."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from pytest_inferaccept.capabilities import ProbeResult
from pytest_inferaccept.fake import FakeServer
from pytest_inferaccept.keycheck import UNENFORCED, key_findings

OWN_TEST = """
def test_our_chat(openai_client, model):
    answer = openai_client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    assert answer.choices
"""


@pytest.fixture(scope="module")
def careless_server() -> Iterator[FakeServer]:
    """A fake server configured with a key that it does not check."""
    with FakeServer(api_key="sk-team", faults=["auth_not_enforced"]) as server:
        yield server


def _run(pytester: pytest.Pytester, url: str, *args: str) -> tuple[pytest.RunResult, dict[str, object]]:
    pytester.makepyfile(test_own=OWN_TEST)
    out = pytester.path / "results.json"
    result = pytester.runpytest_inprocess("--server-url", url, "--api-key", "sk-team", "--inferaccept-json",
                                          str(out), "-p", "no:cacheprovider", *args)
    return result, json.loads(out.read_text())


def test_a_key_the_server_does_not_check_gives_a_warning(pytester: pytest.Pytester,
                                                         careless_server: FakeServer) -> None:
    result, doc = _run(pytester, careless_server.url)
    verdict = doc["verdict"]
    assert verdict["status"] == "GO"  # type: ignore[index]
    assert any(w.startswith(UNENFORCED) for w in verdict["warnings"])  # type: ignore[index]
    assert f"warning: {UNENFORCED}" in result.stdout.str()
    assert "sk-team" not in result.stdout.str()


def test_a_key_the_server_does_not_check_is_a_no_go_when_auth_is_required(
        pytester: pytest.Pytester, careless_server: FakeServer) -> None:
    result, doc = _run(pytester, careless_server.url, "--capabilities", "chat,auth")
    assert result.ret == 1
    assert doc["verdict"]["status"] == "NO-GO"  # type: ignore[index]
    assert doc["verdict"]["reasons"][0].startswith(f"{UNENFORCED}, and auth is required")  # type: ignore[index]


def test_a_server_that_checks_the_key_gets_no_warning(pytester: pytest.Pytester) -> None:
    with FakeServer(api_key="sk-team") as server:
        _, doc = _run(pytester, server.url, "--capabilities", "chat,auth")
    assert doc["verdict"]["status"] == "GO"  # type: ignore[index]
    assert doc["verdict"]["warnings"] == []  # type: ignore[index]


def test_no_key_given_means_nothing_to_warn_about() -> None:
    probe = ProbeResult(capability="auth", status="unsupported", detail="no key → 200 (key not enforced)")
    assert key_findings(None, probe, required=False) == ([], [])
    warned, failed = key_findings("k", probe, required=False)
    assert warned and not failed
