"""The async fixtures, declared through pytest-asyncio so they run in its strict mode as in auto.

Registered as a plugin when pytest configures (not imported with the plugin module), so that
importing the plugin stays cheap and pytest-asyncio is loaded only where pytest runs.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

from pytest_inferaccept.plugin.keys import ACCEPTANCE_KEY, EVIDENCE_KEY, SESSION_KEY

if TYPE_CHECKING:
    import openai

    from pytest_inferaccept.server import ServerUnderTest


@pytest_asyncio.fixture
async def async_openai_client(request: pytest.FixtureRequest,
                              inferaccept_server: ServerUnderTest) -> AsyncIterator[openai.AsyncOpenAI]:
    """The official async OpenAI SDK client configured for the server (no retries, plugin timeouts)."""
    from pytest_inferaccept.http import make_openai_client

    settings = request.config.stash[SESSION_KEY].settings
    client: openai.AsyncOpenAI = make_openai_client(settings, inferaccept_server.api_base,
                                                    asynchronous=True)
    yield client
    await client.close()


OTHER_RUNNERS = ("anyio", "trio")
"""Markers under which another plugin runs an async test (pytest-asyncio leaves those alone)."""


def pytest_runtest_setup(item: pytest.Item) -> None:
    """An async acceptance test that nothing will run is a mistake in the test, not a server finding.

    In strict mode pytest-asyncio runs only marked tests; pytest itself then fails the test telling
    the user to install an async plugin, which is installed. Say what to change instead, and make
    the test INVALID: it never asked the server anything.
    """
    function = getattr(item, "obj", None)
    if not item.stash.get(ACCEPTANCE_KEY, False) or not (
            inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)):
        return
    if pytest_asyncio.is_async_test(item) or any(item.get_closest_marker(m) for m in OTHER_RUNNERS):
        return
    why = (f"{item.name} is an async def test that nothing runs: pytest-asyncio (installed) runs only "
           "marked async tests in its default strict mode. Add @pytest.mark.asyncio to the test, or set "
           "asyncio_mode = auto in the pytest configuration. It asked the server nothing.")
    evidence = item.stash.get(EVIDENCE_KEY, None)
    if evidence is not None:
        evidence.mark_invalid(why)
    pytest.fail(why, pytrace=False)
