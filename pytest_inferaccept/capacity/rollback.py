"""The rollback drill: stop the candidate, start the baseline's command, time the way back to service.

An upgrade is only as safe as the way back from it. With a server the plugin launched, the
drill kills the candidate's process group, starts the baseline's command (--rollback-cmd) on
the same port, and times three moments from the kill: **ready** (the launch's readiness paths
answer 200), **warmed** (the end of the first answer from which the answers stay at steady TTFT:
sequential one-at-a-time streamed answers, steady meaning within 1.5× the median TTFT of the last
half, or 20 ms of it; a lone slow answer later is noise, two in a row are not) and **in
service** (warmed, and the smoke checks pass: /v1/models
lists a model, a chat completion answers with text and a finish_reason, a stream ends with
[DONE] after content, /health answers 200 where it is served). The drill fails when the baseline
is not ready, a smoke check fails, or service took longer than the bound (--rollback-within,
600 s by default). Afterwards the candidate's own command is started again (timed, not judged),
so the tests after it meet the server under test.

Warm-up is seen from outside: a server whose first answers are slow because it compiles or
loads lazily shows it in the TTFT of its first answers; one that pre-warms before it says it
is ready shows a flat series. With a few warm-up answers the "warmed" moment is known to one
answer's resolution.

A kind added through the scenario registry (scenario_kinds.py): this module and one line there.
Nothing here imports pytest.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capacity.scenarios import Judgement, conclude, ms
from pytest_inferaccept.model import CapacityFindings, CapacityParams, RollbackCheck, RollbackDrill

if TYPE_CHECKING:
    import httpx

    from pytest_inferaccept.capacity.runner import CapacityRunner
    from pytest_inferaccept.capacity.scenarios import CapacityResult

WARM_REQUESTS = 8
"""Sequential answers sent once the baseline is ready, to see its TTFT settle."""
STEADY_FACTOR = 1.5
STEADY_SLACK_S = 0.02
"""An answer is at steady TTFT when within STEADY_FACTOR × the steady median, or this many seconds of it."""
PROMPT = "Count from one to five."


def start(runner: CapacityRunner, *, command: str | Sequence[str] | None = None, within: float | None = None,
          warm_requests: int = WARM_REQUESTS, restore: bool = True) -> CapacityResult:
    """Run the drill with `command` (default --rollback-cmd) against the bound `within` (default
    --rollback-within); `restore` starts the candidate again afterwards."""
    from pytest_inferaccept.run.testload import NotApplicable

    if not runner.can_relaunch:
        raise NotApplicable("the rollback drill needs a server the plugin launched (--server-cmd or "
                            "--server-preset)")
    cap = runner.settings.capacity
    given = command if command is not None else cap.rollback_cmd
    if not given:
        raise NotApplicable("the rollback drill needs the baseline's command: --rollback-cmd CMD")
    baseline = given if isinstance(given, str) else tuple(given)
    bound = float(within if within is not None else cap.rollback_within)
    if warm_requests < 2:
        raise ValueError(f"warm_requests must be at least 2, got {warm_requests}")
    from pytest_inferaccept.scrub import Scrubber

    words = baseline if isinstance(baseline, str) else " ".join(baseline)
    shown = Scrubber([runner.settings.api_key]).text(words)
    runner.say(f"inferaccept: rollback drill: stopping the server under test and starting {shown}")
    moments = runner.relaunch(baseline, why="rollback drill", drill=True)
    drill = RollbackDrill(command=shown, pid_stopped=moments.get("pid_killed"),
                          pid_started=moments.get("pid"), within_s=bound)
    killed_at = moments.get("killed_at")
    if moments.get("ready_at") is not None and killed_at is not None:
        drill.ready_s = moments["ready_at"] - killed_at
        _warm_and_check(runner, drill, killed_at, warm_requests)
    else:
        drill.start_error = moments.get("error") or "the baseline command was not ready"
    if restore:
        _restore(runner, drill, moments.get("argv_killed"))
    headline, judged = _verdict(drill)
    notes = []
    if drill.restored is False:
        notes.append(f"the server under test did not start again after the drill: {drill.restore_error}; "
                     "the tests after this one meet no server")
    return conclude(kind="rollback", label=runner.label, steps=[], headline=headline, slo=runner.slo,
                    judged=judged, findings=CapacityFindings(rollback=drill), notes=notes,
                    params=CapacityParams(within_s=bound, warm_requests=warm_requests))


def _warm_and_check(runner: CapacityRunner, drill: RollbackDrill, killed_at: float, count: int) -> None:
    from pytest_inferaccept.http import client_for

    base = runner.server.base_url
    with client_for(runner.settings, base) as client:
        drill.served_models, models_check = _models(client)
        model, served = runner.server.model, drill.served_models
        drill.model = model if model in served or not served else served[0]
        ends: list[float] = []
        ttfts: list[float] = []
        for _ in range(count):
            ttft, _text, _why = _streamed(client, drill.model)
            if ttft is not None:
                ttfts.append(round(ttft, 6))
                ends.append(time.monotonic() - killed_at)
        # Assigned, not appended: the results keep the fields that were set.
        drill.warm_ttft_s, drill.warm_failures = ttfts, count - len(ttfts)
        if drill.warm_ttft_s:
            drill.cold_ttft_s = drill.warm_ttft_s[0]
            steady, first_steady = settled(drill.warm_ttft_s)
            drill.steady_ttft_s = round(steady, 6)
            drill.warmed_s = round(ends[first_steady], 3)
        drill.checks = [models_check, _chat(client, drill.model), _stream(client, drill.model),
                        _health(client)]
        if drill.warmed_s is not None and all(c.status != "fail" for c in drill.checks):
            drill.in_service_s = round(time.monotonic() - killed_at, 3)


def settled(ttfts: Sequence[float]) -> tuple[float, int]:
    """(the steady TTFT, the index of the first answer from which the answers stay at it).

    Steady is the median of the last half; an answer is at it within STEADY_FACTOR × or
    STEADY_SLACK_S seconds of it. From the first steady answer on, a lone slow answer is noise
    (one was seen at 0.84 s among 50-100 ms answers on a busy machine); two slow ones in a row
    mean it was not warm yet. A series that never settles says "warmed" at its last steady
    answer: the drill then knows only that it took at least that long."""
    steady = statistics.median(ttfts[len(ttfts) // 2:])
    limit = max(steady * STEADY_FACTOR, steady + STEADY_SLACK_S)
    slow = [t > limit for t in ttfts]
    runs = [j for j in range(len(slow) - 1) if slow[j] and slow[j + 1]]
    after = runs[-1] + 2 if runs else 0
    first = next((i for i in range(after, len(ttfts)) if not slow[i]), len(ttfts) - 1)
    return steady, first


def _models(client: httpx.Client) -> tuple[list[str], RollbackCheck]:
    try:
        resp = client.get("/v1/models")
    except Exception as exc:
        return [], RollbackCheck(name="models", status="fail", text=f"GET /v1/models: {type(exc).__name__}")
    if resp.status_code != 200:
        return [], RollbackCheck(name="models", status="fail",
                                 text=f"GET /v1/models: HTTP {resp.status_code}")
    try:
        data = resp.json().get("data") or []
        names = [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]
    except (ValueError, AttributeError):
        return [], RollbackCheck(name="models", status="fail", text="GET /v1/models: not a model list")
    if not names:
        return [], RollbackCheck(name="models", status="fail", text="GET /v1/models lists no model")
    return names, RollbackCheck(name="models", status="pass", text=f"lists {', '.join(names[:3])}")


def _body(model: str | None, stream: bool) -> dict[str, Any]:
    return {"model": model, "max_tokens": 16, "temperature": 0, "stream": stream,
            "messages": [{"role": "user", "content": PROMPT}]}


def _chat(client: httpx.Client, model: str | None) -> RollbackCheck:
    try:
        resp = client.post("/v1/chat/completions", json=_body(model, False))
        if resp.status_code != 200:
            return RollbackCheck(name="chat", status="fail", text=f"HTTP {resp.status_code}")
        choice = (resp.json().get("choices") or [{}])[0]
    except Exception as exc:
        return RollbackCheck(name="chat", status="fail", text=f"{type(exc).__name__}: {str(exc)[:120]}")
    content = (choice.get("message") or {}).get("content")
    finish = choice.get("finish_reason")
    if not isinstance(content, str) or not content.strip() or finish not in ("stop", "length"):
        return RollbackCheck(name="chat", status="fail",
                             text=f"content {json.dumps(content)[:80]}, finish_reason {json.dumps(finish)}")
    return RollbackCheck(name="chat", status="pass",
                         text=f"{len(content)} characters, finish_reason {finish}")


def _streamed(client: httpx.Client, model: str | None) -> tuple[float | None, str, str]:
    """(TTFT in seconds or None, the text, what went wrong or 'done')."""
    sent = time.monotonic()
    first: float | None = None
    parts: list[str] = []
    done = False
    try:
        with client.stream("POST", "/v1/chat/completions", json=_body(model, True)) as resp:
            if resp.status_code != 200:
                return None, "", f"HTTP {resp.status_code}"
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                event = json.loads(data)
                for choice in event.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if isinstance(text, str) and text:
                        if first is None:
                            first = time.monotonic() - sent
                        parts.append(text)
    except Exception as exc:
        return None, "".join(parts), f"{type(exc).__name__}: {str(exc)[:120]}"
    if first is None:
        return None, "", "no content in the stream"
    return first, "".join(parts), "done" if done else "the stream ended without [DONE]"


def _stream(client: httpx.Client, model: str | None) -> RollbackCheck:
    ttft, text, why = _streamed(client, model)
    if ttft is None or why != "done":
        return RollbackCheck(name="stream", status="fail", text=why)
    return RollbackCheck(name="stream", status="pass",
                         text=f"{len(text)} characters, then [DONE]; TTFT {ms(ttft)}")


def _health(client: httpx.Client) -> RollbackCheck:
    try:
        resp = client.get("/health")
    except Exception as exc:
        return RollbackCheck(name="health", status="fail", text=f"GET /health: {type(exc).__name__}")
    if resp.status_code == 404:
        return RollbackCheck(name="health", status="not_served", text="GET /health: 404 (not served)")
    if resp.status_code != 200:
        return RollbackCheck(name="health", status="fail", text=f"GET /health: HTTP {resp.status_code}")
    return RollbackCheck(name="health", status="pass", text="GET /health: 200")


def _restore(runner: CapacityRunner, drill: RollbackDrill, candidate: Any) -> None:
    """Start the server under test again (its own command), timed from the start of the restore."""
    if candidate is None:
        return
    runner.say("inferaccept: rollback drill: starting the server under test again")
    again = runner.relaunch(candidate, why="the rollback drill's restore")
    if again.get("ready_at") is None:
        drill.restored, drill.restore_error = False, again.get("error") or "not ready"
        return
    drill.restored = True
    drill.restored_s = round(again["ready_at"] - again["killed_at"], 3)


def _verdict(drill: RollbackDrill) -> tuple[str, list[Judgement]]:
    """The headline, and what fails the drill."""
    bound = f"the {drill.within_s:g} s bound"
    if drill.ready_s is None:
        why = f"the baseline command was not ready: {drill.start_error}"
        return f"rollback failed: {why}", [("fail", why)]
    failed = [c for c in drill.checks if c.status == "fail"]
    warm = ("warm-up not seen (no answer came)" if drill.warmed_s is None
            else f"warmed after {drill.warmed_s:.1f} s (TTFT {ms(drill.cold_ttft_s)} first, "
                 f"{ms(drill.steady_ttft_s)} steady)")
    passed = ", ".join(c.name for c in drill.checks if c.status == "pass")
    judged: list[Judgement] = []
    if drill.warmed_s is None:
        judged.append(("fail", f"the baseline answered none of its {drill.warm_failures} warm-up requests"))
    if failed:
        judged.append(("fail", "smoke checks failed on the baseline: "
                               + "; ".join(f"{c.name}: {c.text}" for c in failed)))
    if drill.in_service_s is not None and drill.in_service_s > drill.within_s:
        judged.append(("fail", f"back in service after {drill.in_service_s:.1f} s, beyond {bound}"))
    service = ("not back in service" if drill.in_service_s is None
               else f"in service after {drill.in_service_s:.1f} s (smoke checks passed: {passed})")
    within = "" if judged else f", within {bound}"
    restored = ("" if drill.restored is None else
                f"; the server under test started again in {drill.restored_s:.1f} s" if drill.restored
                else "; the server under test did not start again")
    headline = f"rolled back: ready after {drill.ready_s:.1f} s, {warm}, {service}{within}{restored}"
    return headline, judged
