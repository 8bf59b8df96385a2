"""The async fixtures, declared through pytest-asyncio so they run in its strict mode as in auto.

Registered as a plugin when pytest configures (not imported with the plugin module), so that
importing the plugin stays cheap and pytest-asyncio is loaded only where pytest runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

from pytest_inferaccept.plugin.keys import SESSION_KEY
from pytest_inferaccept.server import ServerUnderTest

if TYPE_CHECKING:
    import openai


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
