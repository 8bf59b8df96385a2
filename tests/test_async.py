"""A team's async acceptance test runs without extra setup, in both of pytest-asyncio's modes."""

from __future__ import annotations

import pytest

from pytest_inferaccept.fake import FakeServer

ASYNC_TEST = """
import pytest

{mark}
async def test_our_async_chat_and_load(async_openai_client, model, loadgen):
    answer = await async_openai_client.chat.completions.create(
        model=model, messages=[{{"role": "user", "content": "hello"}}], max_tokens=4)
    assert answer.choices[0].message.content
    result = await loadgen.arun(concurrency=2, requests=4, warmup=0)
    assert result.summary.counts.measured == 4
"""


@pytest.mark.parametrize(("mode", "mark"), [("strict", "@pytest.mark.asyncio"), ("auto", "")])
def test_an_async_acceptance_test_passes_against_the_fake_server(
        pytester: pytest.Pytester, fake_server: FakeServer, mode: str, mark: str) -> None:
    # Only the plugin and what it depends on: no conftest, no fixture of the project's own.
    pytester.makeini(f"[pytest]\nasyncio_mode = {mode}\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_async=ASYNC_TEST.format(mark=mark))
    result = pytester.runpytest_inprocess("--server-url", fake_server.url, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "VERDICT: GO" in result.stdout.str()


def test_importing_the_plugin_does_not_import_pytest_asyncio() -> None:
    import subprocess
    import sys

    code = "import sys, pytest_inferaccept.plugin; print('pytest_asyncio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
