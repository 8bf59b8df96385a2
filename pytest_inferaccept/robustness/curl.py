"""Render a request as a ready-to-paste curl command (the API key stays in $INFERACCEPT_API_KEY)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

API_KEY_VAR = "INFERACCEPT_API_KEY"
INLINE_LIMIT = 2000
"""Bodies up to this size that are printable UTF-8 are pasted inline; others are generated."""
_RUN = re.compile(rb"(.{1,16}?)\1{31,}", re.DOTALL)
_SKIP_HEADERS = {"authorization", "content-length", "host", "accept-encoding", "connection",
                 "user-agent", "accept"}


def _printable(body: bytes) -> bool:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(ch.isprintable() or ch in " " for ch in text)


def body_expression(body: bytes) -> str:
    """A Python expression producing `body`, with long repetitions folded (b'x' * 100000)."""
    parts: list[str] = []
    pos = 0
    for match in _RUN.finditer(body):
        if match.start() > pos:
            parts.append(repr(body[pos:match.start()]))
        unit = match.group(1)
        parts.append(f"{unit!r} * {len(match.group(0)) // len(unit)}")
        pos = match.end()
    if pos < len(body) or not parts:
        parts.append(repr(body[pos:]))
    return " + ".join(parts)


def render_curl(base_url: str, method: str, path: str, headers: Mapping[str, str], body: bytes,
                *, authenticated: bool = False, max_time: float | None = None) -> str:
    """A curl command that sends exactly this request; never includes the API key itself."""
    url = base_url.rstrip("/") + path
    words = ["curl", "-sS", "-i", "-X", method]
    if max_time:
        words += ["--max-time", f"{max_time:g}"]
    words.append(shlex.quote(url))
    command = " ".join(words)
    if authenticated:
        command += f' -H "Authorization: Bearer ${API_KEY_VAR}"'
    for name, value in headers.items():
        if name.lower() not in _SKIP_HEADERS:
            command += " -H " + shlex.quote(f"{name}: {value}")
    if not body and method in ("GET", "HEAD"):
        return command
    if len(body) <= INLINE_LIMIT and _printable(body):
        return command + " --data-binary " + shlex.quote(body.decode("utf-8"))
    code = f"import sys; sys.stdout.buffer.write({body_expression(body)})"
    return command + " --data-binary @<(python3 -c " + shlex.quote(code) + ")"
