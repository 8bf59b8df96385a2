"""Send one request with hard time limits and say what came back (or that nothing did)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from pytest_inferaccept.robustness.cases import RequestSpec

BODY_KEEP = 64 * 1024
"""Bytes of a response body kept for judging; the rest is read and dropped."""


@dataclass(frozen=True)
class Answer:
    """What a request got: status (None: none), the body's head, timing, and any transport problem."""

    status: int | None
    body: bytes
    elapsed: float
    headers_after: float | None = None
    error: str | None = None


def send(client: httpx.Client, spec: RequestSpec, *, timeout: float, connect_timeout: float = 5.0) -> Answer:
    """Send `spec`; never wait longer than `timeout` for headers, for each read, or in total."""
    limits = httpx.Timeout(timeout, connect=min(connect_timeout, timeout))
    start = time.monotonic()
    deadline = start + timeout
    status: int | None = None
    headers_after: float | None = None
    kept = bytearray()
    last_data = start
    try:
        with client.stream(spec.method, spec.path, content=spec.body, headers=spec.headers,
                           timeout=limits) as resp:
            status = resp.status_code
            headers_after = last_data = time.monotonic()
            for chunk in resp.iter_bytes():
                last_data = time.monotonic()
                if len(kept) < BODY_KEEP:
                    kept.extend(chunk[: BODY_KEEP - len(kept)])
                if last_data > deadline:
                    return Answer(status, bytes(kept), last_data - start, headers_after - start,
                                  f"the body was still arriving {timeout:g}s after sending")
    except httpx.TimeoutException as exc:
        now = time.monotonic()
        if status is None:
            error = f"no answer within {timeout:g}s ({type(exc).__name__})"
        else:
            assert headers_after is not None
            error = (f"stalled {'stream' if spec.stream else 'response'}: headers after "
                     f"{headers_after - start:.2f}s, then no data for {now - last_data:.1f}s "
                     f"({len(kept)} bytes received)")
        return Answer(status, bytes(kept), now - start, None if headers_after is None
                      else headers_after - start, error)
    except httpx.HTTPError as exc:
        now = time.monotonic()
        return Answer(status, bytes(kept), now - start, None if headers_after is None
                      else headers_after - start,
                      f"connection failed: {type(exc).__name__}: {exc}")
    end = time.monotonic()
    return Answer(status, bytes(kept), end - start, None if headers_after is None else headers_after - start)


def liveness(client: httpx.Client, model: str, *, timeout: float, connect_timeout: float = 5.0) -> str | None:
    """Ask for one token; None when the server answered 200 in time, else what went wrong."""
    import json

    spec = RequestSpec(case_id="liveness", method="POST", path="/v1/chat/completions",
                       headers={"Content-Type": "application/json"},
                       body=json.dumps({"model": model, "max_tokens": 1, "temperature": 0,
                                        "messages": [{"role": "user", "content": "Hi"}]}).encode())
    answer = send(client, spec, timeout=timeout, connect_timeout=connect_timeout)
    if answer.error:
        return f"{answer.error} ({answer.elapsed:.1f}s)"
    if answer.status != 200:
        head = answer.body[:200].decode("utf-8", "replace")
        return f"HTTP {answer.status} after {answer.elapsed:.1f}s: {head}"
    return None
