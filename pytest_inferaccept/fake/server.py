"""Run the fake server in-process (a background thread) or as a subprocess."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from types import TracebackType
from typing import Any

from pytest_inferaccept.fake.config import FakeConfig
from pytest_inferaccept.fake.faults import validate_faults


class FakeServer:
    """A fake OpenAI-compatible server on a free loopback port, run in a background thread."""

    def __init__(self, config: FakeConfig | None = None, **changes: Any) -> None:
        config = config or FakeConfig()
        if "faults" in changes:
            changes["faults"] = validate_faults(changes["faults"])
        self._initial = dataclasses.replace(config, **changes)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._app: Any = None
        self.port = 0

    @property
    def url(self) -> str:
        """Base URL of the running server (no /v1)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def config(self) -> FakeConfig:
        """The configuration in force now."""
        if self._app is None:
            return self._initial
        from pytest_inferaccept.fake.app import STATE_KEY

        return self._app[STATE_KEY].config  # type: ignore[no-any-return]

    def reconfigure(self, **changes: Any) -> None:
        """Change timing or faults of the running server (takes effect on the next request)."""
        from pytest_inferaccept.fake.app import STATE_KEY

        if "faults" in changes:
            changes["faults"] = validate_faults(changes["faults"])
        state = self._app[STATE_KEY]
        state.config = dataclasses.replace(state.config, **changes)

    def start(self) -> FakeServer:
        """Start serving; return once the port is bound."""
        self._thread = threading.Thread(target=self._run, name="inferaccept-fake", daemon=True)
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError("fake server did not start within 15 s")
        return self

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        from aiohttp import web

        from pytest_inferaccept.fake.app import make_app

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._app = make_app(self._initial)
        runner = web.AppRunner(self._app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.port or 0)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1])
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
