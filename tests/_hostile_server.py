"""A small server whose every text carries markup, and which echoes the API key back."""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import Any

from aiohttp import web

MODEL = "m\"><script>alert('model')</script>"
CONTENT = "<script>alert('content')</script><img src=x onerror=alert('img')>"


class HostileServer:
    """An OpenAI-shaped server on a free loopback port that answers markup everywhere."""

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    @property
    def url(self) -> str:
        """Base URL (no /v1)."""
        return f"http://127.0.0.1:{self.port}"

    def _headers(self, request: web.Request) -> dict[str, str]:
        return {"Server": "<script>alert('server')</script>",
                "X-Request-Id": "<img src=x onerror=alert('header')>",
                "WWW-Authenticate": f"echo {request.headers.get('Authorization', '')}"}

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]},
                                 headers=self._headers(request))

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "<script>alert('version')</script>", "api_key": self.api_key})

    async def _chat(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        if not body.get("messages"):
            message = (f"<img src=x onerror=alert('error')> messages is empty; you sent "
                       f"{request.headers.get('Authorization', '')}")
            return web.json_response({"error": {"message": message, "type": "invalid_request_error"}},
                                     status=400, headers=self._headers(request))
        return web.json_response({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": CONTENT}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 4, "total_tokens": 5}},
            headers=self._headers(request))

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/version", self._version)
        app.router.add_post("/v1/chat/completions", self._chat)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        assert site._server is not None
        self.port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> HostileServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("hostile server did not start")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
