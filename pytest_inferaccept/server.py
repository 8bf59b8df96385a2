"""The server under test: where it is, what it serves, and what it says about itself.

`ServerUnderTest` is the run model's `Server` (model.py): the server a test is given is the one
the results document describes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.scrub import excerpt, redact

if TYPE_CHECKING:
    import httpx

    from pytest_inferaccept.model import ServerUnderTest

__all__ = ["VERSION_PATHS", "ServerUnavailable", "ServerUnderTest", "list_models", "version_info"]


def __getattr__(name: str) -> Any:
    """`ServerUnderTest` is the run model's class, imported when first asked for (pydantic is not loaded
    before)."""
    if name == "ServerUnderTest":
        from pytest_inferaccept.model import ServerUnderTest

        return ServerUnderTest
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

VERSION_PATHS: tuple[str, ...] = ("/version", "/props", "/info", "/get_server_info",
                                  "/api/version")
"""Where servers describe themselves: vLLM, llama.cpp, TGI, SGLang, Ollama."""


class ServerUnavailable(RuntimeError):
    """The server under test cannot be used at all; the run cannot judge it."""


def list_models(client: httpx.Client, base_url: str) -> tuple[str, ...] | None:
    """Model ids from GET /v1/models, or None when the endpoint is missing (404/405)."""
    import httpx

    try:
        resp = client.get(f"{base_url}/v1/models")
    except httpx.ConnectError as exc:
        raise ServerUnavailable(f"server unreachable at {base_url}: {_reason(exc)}") from None
    except httpx.TimeoutException as exc:
        raise ServerUnavailable(
            f"server at {base_url} did not answer GET /v1/models in time ({type(exc).__name__})"
        ) from None
    except httpx.HTTPError as exc:
        raise ServerUnavailable(f"server at {base_url} failed: {_reason(exc)}") from None
    if resp.status_code in (401, 403):
        raise ServerUnavailable(
            f"server at {base_url} refused GET /v1/models with {resp.status_code}: "
            "give the right --api-key (or $INFERACCEPT_API_KEY)"
        )
    if resp.status_code in (404, 405):
        return None
    try:
        data = resp.json()["data"]
        return tuple(str(m["id"]) for m in data)
    except (ValueError, KeyError, TypeError):
        raise ServerUnavailable(
            f"GET {base_url}/v1/models answered {resp.status_code} with a body that is not a "
            f"model list: {excerpt(resp.text, 300)}"
        ) from None


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused (nothing listening)"
    return text


def version_info(client: httpx.Client, base_url: str) -> dict[str, Any]:
    """What the server says about itself at the endpoints servers commonly offer."""
    import httpx

    info: dict[str, Any] = {}
    for path in VERSION_PATHS:
        try:
            resp = client.get(base_url + path, timeout=5.0)
        except httpx.HTTPError:
            continue
        if resp.status_code != 200:
            continue
        try:
            value: Any = redact(resp.json())
            text = json.dumps(value)
            info[path] = value if len(text) <= 4000 else excerpt(text, 4000)
        except ValueError:
            info[path] = excerpt(resp.text, 500)
    return info
