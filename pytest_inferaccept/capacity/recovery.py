"""Failure recovery: kill the launched server in the middle of a load, restart it, and time the way back.

The load runs in the caller's thread through `measure` (one bounded closed-loop step); a timer
thread calls `restart` `kill_after` seconds into it (the session kills the server's process
group and starts the same command again), then polls `alive` every 0.2 s until the first good
answer. The findings: when the kill came, how long until the server was ready again and until
it answered, how many requests users would have lost, how they failed, and whether any client
hung past its timeout instead of getting an error. Nothing here imports pytest.

Requests lost are counted at the traffic the level represents: the successful requests per
second it served before the kill, times the outage (kill to the first good answer), plus the
requests in flight at the kill. The closed loop's own failed attempts during the outage are
not that figure: a refused connection fails in a millisecond and the loop sends again at once,
so their number says how fast the client can fail (thousands a second), not what users lose.
They are kept, named `client_attempts_refused`.
"""

from __future__ import annotations

import gc
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_inferaccept.capacity.scenarios import (
    Alive,
    CapacityResult,
    Judgement,
    Measure,
    Say,
    conclude,
    quiet,
    step_row,
)
from pytest_inferaccept.model import CapacityFindings, CapacityParams, CapacitySeries, Point, RecoveryMoments

if TYPE_CHECKING:
    from pytest_inferaccept.run.load import LoadResult

Restart = Callable[[], dict[str, Any]]
"""Kill the server and start it again; returns monotonic times (see AcceptanceSession.restart_chat_server)."""

POLL_S = 0.2
"""Pause between liveness requests once the restarted server is ready."""
HANG_GRACE_S = 2.0
"""A failed request that took longer than the request timeout plus this hung instead of failing cleanly."""


def recovery(
    measure: Measure,
    alive: Alive,
    restart: Restart,
    *,
    concurrency: int,
    duration: float,
    kill_after: float,
    request_timeout: float,
    label: str,
    answer_within: float = 30.0,
    workload: Any = None,
    say: Say = quiet,
) -> CapacityResult:
    """Kill and restart the server `kill_after` seconds into a `duration`-second load at `concurrency`.

    Fails when the server is not ready again, gives no good answer within `answer_within`
    seconds of being ready, or a client hung past `request_timeout`; invalid when the kill never
    happened (the load ended first, or the server could not be killed).
    """
    if not 0 < kill_after < duration:
        raise ValueError(f"kill_after ({kill_after:g} s) must fall inside the load (0 < kill_after < "
                         f"duration = {duration:g} s)")
    box: dict[str, Any] = {}

    def kill_and_restart() -> None:
        try:
            box["restart"] = restart()
        except Exception as exc:  # the kill itself failed: reported, never raised in this thread
            box["restart_failed"] = f"{type(exc).__name__}: {exc}"
            return
        # Without an answer, the outage lasted at least until the restart or the probing gave up.
        box["down_until"] = time.monotonic()
        if box["restart"].get("ready_at") is None:
            return
        deadline = time.monotonic() + answer_within
        polls = 0
        while True:
            try:
                ok, seen = alive()
            except Exception as exc:  # a probe that raises is a probe that was not answered
                ok, seen = False, f"{type(exc).__name__}: {exc}"
            polls += 1
            box["polls"], box["last_seen"] = polls, seen
            if ok:
                box["answer_at"] = time.monotonic()
                return
            box["down_until"] = time.monotonic()
            if time.monotonic() >= deadline:
                return
            time.sleep(POLL_S)

    # The engine imports its HTTP client when its first load starts (half a second on a small
    # machine): imported before the timer starts, the kill lands `kill_after` s into the load itself.
    import pytest_inferaccept.load.schedules  # noqa: F401

    # Likewise the engine's full garbage collection as its measured phase starts: over a large test
    # process on a busy machine it held the interpreter for up to 2.3 s, so the load had not begun
    # and the timer thread could not run; the kill landed late, before any answer. Collected and
    # frozen here first, the engine's own collection only walks what is new (milliseconds).
    gc.collect()
    gc.freeze()
    say(f"inferaccept: recovery: a {duration:g} s load at c={concurrency}; the server is killed "
        f"{kill_after:g} s into it and started again")
    timer = threading.Timer(kill_after, kill_and_restart)
    timer.name = "inferaccept-recovery"
    timer.daemon = True
    started = time.monotonic()
    timer.start()
    try:
        result = measure("recovery", concurrency=concurrency, duration=duration, warmup=0,
                         workload=workload)
    finally:
        gc.unfreeze()  # the engine unfreezes when its measured phase ends; not when it failed before
        timer.cancel()  # the load ended before the kill (or raised): no kill
        timer.join()  # a restart under way finishes (it is bounded by the ready timeout)
    return _judge(result, box, started=started, concurrency=concurrency, duration=duration,
                  kill_after=kill_after, request_timeout=request_timeout, answer_within=answer_within,
                  label=label)


def _worker_t0(result: LoadResult, fallback: float) -> dict[int, float]:
    """Each worker's t0 on the monotonic clock (record times are seconds since it)."""
    engine = result.run.selfcheck.get("engine", result.run.selfcheck)
    out: dict[int, float] = {}
    for entry in engine.get("per_worker") or []:
        if isinstance(entry.get("t0"), (int, float)) and entry["t0"] > 0:
            out[int(entry.get("worker") or 0)] = float(entry["t0"])
    return out or {0: fallback}


def _judge(result: LoadResult, box: dict[str, Any], *, started: float, concurrency: int,
           duration: float, kill_after: float, request_timeout: float, answer_within: float,
           label: str) -> CapacityResult:
    t0s = _worker_t0(result, started)
    load_t0 = min(t0s.values())

    def at(worker: int, t: float) -> float:
        return t0s.get(worker, load_t0) + t

    measured = [r for r in result.records if not r.warmup]
    failed = [r for r in measured if not r.ok]
    hung = [r for r in failed if r.e2e > request_timeout + HANG_GRACE_S]
    classes = Counter(r.error for r in failed if r.error)
    statuses = Counter(r.status for r in failed if r.status is not None)
    info: dict[str, Any] = box.get("restart") or {}
    killed_at: float | None = info.get("killed_at")
    ready_at: float | None = info.get("ready_at")
    answer_at: float | None = box.get("answer_at")
    row = step_row(concurrency, result)
    findings = CapacityFindings(
        killed_at_s=None if killed_at is None else killed_at - load_t0,
        ready_s=info.get("ready_s"),
        first_good_answer_s=None if answer_at is None or killed_at is None else answer_at - killed_at,
        requests_measured=len(measured),
        requests_failed=len(failed),
        error_classes=dict(classes),
        error_statuses={str(k): v for k, v in sorted(statuses.items())},
        clean_errors=not hung,
        hung=len(hung),
        longest_failed_s=max((r.e2e for r in failed), default=None),
        requests_ok_after_restart=None,
        pid_killed=info.get("pid_killed"),
        pid_restarted=info.get("pid"),
        restart_error=info.get("error") or box.get("restart_failed"),
        liveness_polls=box.get("polls", 0),
        last_seen=box.get("last_seen"),
    )
    if killed_at is not None:
        # Requests in flight when the server died, and the client's attempts while it was down or back.
        in_flight = [r for r in failed if at(r.worker, r.send) < killed_at]
        after_kill = [r for r in measured if at(r.worker, r.send) >= killed_at]
        back = [r for r in after_kill if r.ok]
        findings.lost_in_flight = len(in_flight)
        findings.in_flight_error_classes = dict(Counter(r.error for r in in_flight if r.error))
        findings.client_attempts_refused = len(failed) - len(in_flight)
        findings.requests_ok_after_restart = len(back)
        findings.first_load_answer_s = min((at(r.worker, r.end) - killed_at for r in back), default=None)
        _traffic_lost(findings, measured, at, load_t0=load_t0, killed_at=killed_at, answer_at=answer_at,
                      down_until=box.get("down_until"))
    row.recovery = RecoveryMoments(killed_at_s=findings.killed_at_s, ready_s=findings.ready_s,
                                   first_good_answer_s=findings.first_good_answer_s)
    headline, judged = _verdict(findings, box, result, ready=ready_at is not None,
                                answered=answer_at is not None, kill_after=kill_after,
                                answer_within=answer_within, request_timeout=request_timeout,
                                classes=classes, hung=len(hung))
    return conclude(
        kind="recovery",
        label=label,
        steps=[row],
        params=CapacityParams(concurrency=concurrency, duration_s=duration, kill_after_s=kill_after,
                              request_timeout_s=request_timeout, answer_within_s=answer_within, poll_s=POLL_S,
                              hang_grace_s=HANG_GRACE_S),
        headline=headline,
        slo=result.slo,
        judged=judged,
        findings=findings,
        series=_timeline(measured, at, load_t0),
    )


def _verdict(findings: CapacityFindings, box: dict[str, Any], result: LoadResult, *, ready: bool,
             answered: bool, kill_after: float, answer_within: float, request_timeout: float,
             classes: Counter[str], hung: int) -> tuple[str, list[Judgement]]:
    """The headline, and what fails the recovery (or makes it say nothing: no kill)."""
    if findings.killed_at_s is None:
        why = (f"the server could not be killed: {box['restart_failed']}" if "restart_failed" in box
               else f"the load ended before the kill at {kill_after:g} s ({result.run.stopped_by})")
        return f"no recovery measured: {why}", [("invalid", why)]
    lost = _lost_text(findings, classes, hung, request_timeout)
    when = f"killed {findings.killed_at_s:.1f} s into the load"
    judged: list[Judgement] = []
    if not ready:
        error = findings.restart_error or "not ready again"
        judged.append(("fail", error))
        headline = f"{when}: {error}; {lost}"
    elif not answered:
        why = (f"ready again {findings.ready_s:.1f} s after the kill, but no good answer within "
               f"{answer_within:g} s (last seen: {findings.last_seen})")
        judged.append(("fail", why))
        headline = f"{when}: {why}; {lost}"
    else:
        headline = (f"{when}: ready again {findings.ready_s:.1f} s after the kill, first good answer "
                    f"after {findings.first_good_answer_s:.1f} s; {lost}")
    if hung:
        judged.append(("fail", f"{hung} request(s) hung past the request timeout ({request_timeout:g} s + "
                               f"{HANG_GRACE_S:g} s): the longest took {findings.longest_failed_s:.1f} s"))
    return headline, judged


def _traffic_lost(findings: CapacityFindings, measured: list[Any], at: Callable[[int, float], float], *,
                  load_t0: float, killed_at: float, answer_at: float | None,
                  down_until: float | None) -> None:
    """The level's served rate, the outage, and the requests that traffic would have lost in it, set on
    the findings.

    The rate is the level's answers per second before the kill, from the load's start (the
    first answers' own time counts, so with few answers it errs low); when none came back
    before the kill (answers longer than `kill_after`), the answers per second
    after the first good answer stand in, named as such. The outage runs from the kill to the
    first good answer; without one, to the moment the restart or the probing gave up, and the
    figure is a lower bound. Neither depends on how many attempts the client made meanwhile.
    """
    ok = [(at(r.worker, r.send), at(r.worker, r.end)) for r in measured if r.ok]
    before = [end for _, end in ok if end <= killed_at]
    rate: float | None = None
    basis: str | None = None
    answers, window = 0, None
    if before and killed_at > load_t0:
        answers, window, basis = len(before), killed_at - load_t0, "before the kill"
    elif answer_at is not None:
        # Answers sent after the server answered again, over the span from then to the last of them.
        after = [end for send, end in ok if send >= answer_at]
        if after and max(after) > answer_at:
            answers, window, basis = len(after), max(after) - answer_at, "after the restart"
    if window:
        rate = answers / window
    ended = answer_at is not None
    end = answer_at if ended else down_until
    outage = None if end is None else end - killed_at
    findings.request_rate_per_s, findings.request_rate_basis = rate, basis
    findings.request_rate_answers, findings.request_rate_window_s = answers, window
    findings.outage_s, findings.outage_ended = outage, ended
    findings.requests_lost_during_outage = None if rate is None or outage is None else rate * outage


def _about(n: float) -> str:
    """'99', '3.4': whole requests from ten on, one decimal below (an estimate, not a count)."""
    return f"{n:.0f}" if n >= 9.5 else f"{n:.1f}"


def _lost_text(findings: CapacityFindings, classes: Counter[str], hung: int, request_timeout: float) -> str:
    """'at the 12.4 requests/s this level served, about 99 requests would have been lost during the
    outage, plus 4 in flight at the kill (stream_error ×4); every failure was a clean error (connect,
    stream_error)'."""
    lost, rate = findings.requests_lost_during_outage, findings.request_rate_per_s
    in_flight = findings.lost_in_flight or 0
    flight_classes = Counter(findings.in_flight_error_classes or {})
    flight_kinds = ", ".join(f"{c} ×{k}" for c, k in flight_classes.most_common())
    plus = (f", plus {in_flight} in flight at the kill" + (f" ({flight_kinds})" if flight_kinds else "")
            if in_flight else " (none was in flight at the kill)")
    if lost is None or rate is None:
        text = ("the traffic this level served is unknown (no answer came back outside the outage), so "
                f"the requests lost during the outage are not estimated; {in_flight} in flight at the kill"
                + (f" ({flight_kinds})" if flight_kinds else ""))
    else:
        served = ("this level served" if findings.request_rate_basis == "before the kill"
                  else "this level served after the restart")
        how = "would have been lost during the outage"
        if not findings.outage_ended:
            how = (f"would have been lost during the outage, which was still going "
                   f"{findings.outage_s:.1f} s after the kill")
        amount = ("about " if findings.outage_ended else "at least ") + _about(lost)
        text = f"at the {rate:.1f} requests/s {served}, {amount} requests {how}{plus}"
    if not classes:
        return text
    if not hung:
        # Which way the client's attempts failed, without their number (the client's spin speed).
        return f"{text}; every failure was a clean error ({', '.join(sorted(classes))})"
    return f"{text}; {hung} request(s) hung past the request timeout ({request_timeout:g} s)"


def _timeline(measured: list[Any], at: Callable[[int, float], float], load_t0: float,
              width: float = 0.5) -> CapacitySeries:
    """Answers and failures per `width` seconds of the load, by send time (the report's chart)."""
    ok: Counter[int] = Counter()
    bad: Counter[int] = Counter()
    for r in measured:
        slot = int((at(r.worker, r.send) - load_t0) // width)
        (ok if r.ok else bad)[slot] += 1
    slots = sorted(set(ok) | set(bad))
    answered: list[Point] = [(round((k + 0.5) * width, 3), ok[k]) for k in slots]
    failed: list[Point] = [(round((k + 0.5) * width, 3), bad[k]) for k in slots]
    return CapacitySeries(window_s=width, ok=answered, failed=failed)
