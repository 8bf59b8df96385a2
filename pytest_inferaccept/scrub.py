"""One scrubber for every text and document that leaves the plugin: keys, passwords, tokens.

The session owns one `Scrubber`, fed with the API key and any password found in a server URL.
Text is scrubbed before it is cut, so a secret that straddles an excerpt's end cannot survive
as a prefix. Besides the known secrets, a few shapes are always scrubbed: a bearer token, the
password in a URL's userinfo, the value after a key-like command-line flag or environment
assignment, and values under secret-looking keys in JSON data.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

MASK = "***"
PREFIX_MIN = 8
"""A server that echoes part of a wrong key shows its start: runs of the key's first
PREFIX_MIN characters or more are scrubbed too (shorter secrets are scrubbed whole only)."""

_SECRET_WORDS = ("apikey", "secret", "password", "passwd", "passphrase", "authorization",
                 "credential", "privatekey", "accesskey", "bearer", "cookie")
_BEARER = re.compile(r"(\b(?:Bearer|Basic)\s+)([^\s\"',;]+)", re.IGNORECASE)
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@\"']*):([^@\s/\"']+)@")
_FLAG = re.compile(
    r"((?:^|[\s\"'])--?[A-Za-z0-9_-]*(?:api[_-]?keys?|token|secret|password|passwd)(?:=|\s+))"
    r"(?!-)([^\s\"']+)", re.IGNORECASE)
_ASSIGN = re.compile(
    r"(\b[A-Za-z0-9_]*(?:API_?KEYS?|TOKEN|SECRET|PASSWORD|PASSWD)=)([^\s\"']+)", re.IGNORECASE)


def secret_key_name(name: object) -> bool:
    """True for a key name that holds a secret in the usual spellings.

    `api_key`, `apiKeys`, `openaiApiKey`, `secret_key`, `hf_token`, `Authorization` are
    secrets; `prompt_tokens`, `max_tokens` and `tokenizer` are not.
    """
    flat = re.sub(r"[^a-z0-9]", "", str(name).lower())
    if any(word in flat for word in _SECRET_WORDS):
        return True
    return flat.endswith(("token", "sessionkey", "authkey"))


def _may_hold_a_secret(value: Any) -> bool:
    """A value a secret-named key may hide: a non-empty string or a number. A flag (`api_key_set`)
    says nothing secret, and a mapping or list under such a name (a latency summary named
    `ttft_any_token`) is scrubbed key by key instead of lost whole."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, str):
        return value not in ("", "<set>")
    return isinstance(value, (int, float))


def url_password(url: str) -> str | None:
    """The password in a URL's userinfo, or None."""
    try:
        return urlsplit(url).password or None
    except ValueError:
        return None


def strip_userinfo(url: str) -> str:
    """The URL without user name and password (for display: "server URL, credentials stripped")."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=host).geturl()


class Scrubber:
    """Removes known secrets and secret-shaped values from text and JSON data."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: list[str] = []
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        """Remember one more secret (empty values are ignored)."""
        if secret and secret not in self._secrets:
            self._secrets.append(secret)
            self._secrets.sort(key=len, reverse=True)  # longest first: one never hides another

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secrets known so far."""
        return tuple(self._secrets)

    def text(self, text: str) -> str:
        """Scrub one text: known secrets (and long prefixes of them), then secret shapes."""
        if not text:
            return text
        for secret in self._secrets:
            text = text.replace(secret, MASK)
            if len(secret) > PREFIX_MIN:
                text = _scrub_prefixes(text, secret)
        text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
        text = _USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
        text = _FLAG.sub(lambda m: m.group(1) + MASK, text)
        return _ASSIGN.sub(lambda m: m.group(1) + MASK, text)

    def data(self, value: Any) -> Any:
        """Scrub nested JSON data: values under secret-looking keys are masked, strings scrubbed."""
        if isinstance(value, dict):
            return {k: (MASK if secret_key_name(k) and _may_hold_a_secret(v) else self.data(v))
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def __bool__(self) -> bool:
        return True


def _scrub_prefixes(text: str, secret: str) -> str:
    """Mask every run of text that repeats the secret's first PREFIX_MIN characters or more."""
    head = secret[:PREFIX_MIN]
    out: list[str] = []
    pos = 0
    while True:
        found = text.find(head, pos)
        if found < 0:
            break
        end = found + PREFIX_MIN
        while end - found < len(secret) and end < len(text) and text[end] == secret[end - found]:
            end += 1
        out.append(text[pos:found])
        out.append(MASK)
        pos = end
    out.append(text[pos:])
    return "".join(out)


BODY_EXCERPT = 2000
"""How many characters of a body the evidence keeps."""


def excerpt(data: str | bytes | None, limit: int = BODY_EXCERPT) -> str:
    """Return at most `limit` characters of a body, marking the cut."""
    if data is None:
        return ""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more chars]"


def redact(value: Any) -> Any:
    """Replace values under secret-looking keys in nested JSON data."""
    if isinstance(value, dict):
        return {k: (MASK if secret_key_name(k) and v else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
