"""The server under test: where it is, what it serves, and what it says about itself."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.evidence import excerpt, redact

if TYPE_CHECKING:
    import httpx

VERSION_PATHS: tuple[str, ...] = ("/version", "/props", "/info", "/get_server_info",
                                  "/api/version")
"""Where servers describe themselves: vLLM, llama.cpp, TGI, SGLang, Ollama."""


class ServerUnavailable(RuntimeError):
    """The server under test cannot be used at all; the run cannot judge it."""


@dataclass(frozen=True, kw_only=True)
class ServerUnderTest:
    """The server the acceptance run judges."""

    base_url: str
    """Root URL (infra endpoints such as /health live here; the API under /v1)."""
    model: str
    embedding_url: str
    embedding_model: str | None
    served_models: tuple[str, ...]
    required: tuple[str, ...]
    version_info: dict[str, Any] = field(default_factory=dict)
    log_paths: tuple[Path, ...] = ()
    launched: str | None = None
    """How the plugin started it (command or preset), or None for an external server."""
    ready_seconds: float | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerUnderTest:
        """The server from its `to_json` form (what an xdist controller hands its workers)."""
        return cls(base_url=data["base_url"], model=data["model"], embedding_url=data["embedding_url"],
                   embedding_model=data["embedding_model"], served_models=tuple(data["served_models"]),
                   required=tuple(data["required_capabilities"]), version_info=dict(data["version_info"]),
                   log_paths=tuple(Path(p) for p in data["log_paths"]), launched=data["launched"],
                   ready_seconds=data["ready_seconds"])

    @property
    def api_base(self) -> str:
        """The OpenAI API base, <root>/v1."""
        return f"{self.base_url}/v1"

    @property
    def log_path(self) -> Path | None:
        """The launched chat server's log file, if the plugin launched it."""
        return self.log_paths[0] if self.log_paths else None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready description for the results file."""
        return {
            "base_url": self.base_url, "model": self.model, "embedding_url": self.embedding_url,
            "embedding_model": self.embedding_model, "served_models": list(self.served_models),
            "required_capabilities": list(self.required), "version_info": self.version_info,
            "log_paths": [str(p) for p in self.log_paths], "launched": self.launched,
            "ready_seconds": self.ready_seconds,
        }


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
