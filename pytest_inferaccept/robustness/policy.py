"""The status policy: how an answer to a catalogue or fuzz request is judged (pure, no I/O).

Always a failure: any 5xx, a 2xx to invalid input, a 4xx to a valid request (e.g. a value at its
inclusive bound), no answer within the timeout, a stalled stream, a dead server. What else
happens depends on the policy:

| answer                                   | strict | standard | lenient |
|------------------------------------------|--------|----------|---------|
| the case's status in the OpenAI envelope | pass   | pass     | pass    |
| another 4xx (e.g. 422 instead of 400)    | fail   | warn     | pass    |
| a JSON error body not in the envelope    | fail   | warn     | pass    |
| a 4xx whose body is not JSON             | fail   | warn     | warn    |
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pytest_inferaccept.checks.chat import error_envelope
from pytest_inferaccept.checks.sse import data_texts
from pytest_inferaccept.robustness.cases import Case
from pytest_inferaccept.robustness.config import PolicyName

Outcome = Literal["pass", "warn", "fail"]
Shape = Literal["openai", "other_json", "not_json", "empty"]
_RANK: dict[Outcome, int] = {"pass": 0, "warn": 1, "fail": 2}
TRUNCATION_RATIO = 0.5
"""usage.prompt_tokens below this share of the words sent means the prompt was cut."""


@dataclass(frozen=True)
class Judgement:
    """The verdict on one answer: pass, warn or fail, and why."""

    outcome: Outcome
    reason: str


def error_shape(body: bytes | str) -> Shape:
    """Say whether an error body is the OpenAI envelope {"error": {"message": str, ...}}."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if not text.strip():
        return "empty"
    try:
        data: Any = json.loads(text)
    except ValueError:
        return "not_json"
    # The catalogue also wants the message to say something: an empty one is not an answer.
    if error_envelope(data)[0] and data["error"]["message"]:
        return "openai"
    return "other_json"


def _expected(case: Case) -> str:
    if case.expect == "accept":
        return "expected a 2xx"
    codes = "/".join(str(s) for s in case.statuses) if len(case.statuses) <= 4 else "any"
    if case.expect == "either":
        return f"expected a 2xx, or a 4xx ({codes}) in the OpenAI error envelope"
    return f"expected a 4xx ({codes}) in the OpenAI error envelope"


def _usage_prompt_tokens(body: str) -> int | None:
    """usage.prompt_tokens from a JSON body or from the SSE events of a stream."""
    candidates = [body]
    candidates += [data.strip() for data in data_texts(body)]
    for text in reversed(candidates):
        try:
            data: Any = json.loads(text)
        except ValueError:
            continue
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            return int(usage["prompt_tokens"])
    return None


def _stream_error(body: str) -> str | None:
    for data in data_texts(body):
        if '"error"' in data:
            return data.strip()[:200]
    return None


def _excerpt(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _judge_2xx(case: Case, status: int, text: str, prompt_words: int | None) -> Judgement:
    details = []
    truncated = False
    if prompt_words:
        used = _usage_prompt_tokens(text)
        if used is not None and used < prompt_words * TRUNCATION_RATIO:
            truncated = True
            details.append(f"silent truncation: usage.prompt_tokens={used} but the prompt had "
                           f"{prompt_words} words")
        elif used is None:
            details.append("no usage.prompt_tokens to tell whether the prompt was truncated")
    in_stream = _stream_error(text)
    if in_stream:
        details.append(f"the error came inside the stream after HTTP {status}: {in_stream}")
    if case.expect == "reject" or truncated:
        head = f"answered {status} to invalid input ({case.description}); {_expected(case)}"
        return Judgement("fail", "; ".join([head, *details]) + f"; body: {_excerpt(text)}")
    return Judgement("pass", f"answered {status}" + (f" ({'; '.join(details)})" if details else ""))


def classify(case: Case, status: int | None, body: bytes | str, elapsed: float, *,
             policy: PolicyName = "standard", error: str | None = None,
             prompt_words: int | None = None) -> Judgement:
    """Judge one answer: `status` None means no answer; `error` names a transport problem
    (a timeout, a stalled stream, a dropped connection)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if error is not None or status is None:
        return Judgement("fail", f"{error or 'no answer'} ({case.description}; {elapsed:.1f}s after "
                                 f"sending); {_expected(case)}")
    if status >= 500:
        return Judgement("fail", f"answered {status}, a server error, to {case.description}; "
                                 f"{_expected(case)}; body: {_excerpt(text)}")
    if 200 <= status < 300:
        return _judge_2xx(case, status, text, prompt_words)
    if not 400 <= status < 500:
        return Judgement("fail", f"answered {status} to {case.description}; {_expected(case)}")
    if case.expect == "accept":
        return Judgement("fail", f"rejected a valid request ({case.description}) with {status}; "
                                 f"{_expected(case)}; body: {_excerpt(text)}")
    findings: list[tuple[Outcome, str]] = []
    if status not in case.statuses:
        severity: Outcome = {"strict": "fail", "standard": "warn", "lenient": "pass"}[policy]  # type: ignore[assignment]
        findings.append((severity, f"answered {status} instead of "
                                   f"{'/'.join(str(s) for s in case.statuses)}"))
    shape = error_shape(text)
    if shape != "openai":
        table: dict[str, Outcome] = {"strict": "fail", "standard": "warn",
                                     "lenient": "pass" if shape == "other_json" else "warn"}
        what = {"other_json": "a JSON error body outside the OpenAI envelope",
                "not_json": "an error body that is not JSON", "empty": "an empty error body"}[shape]
        findings.append((table[policy], f"{what}: {_excerpt(text) or '<empty>'}"))
    if not findings:
        return Judgement("pass", f"answered {status} in the OpenAI error envelope")
    worst = max((f[0] for f in findings), key=_RANK.__getitem__)
    return Judgement(worst, f"{case.description}: " + "; ".join(f[1] for f in findings)
                     + f" (policy {policy})")
