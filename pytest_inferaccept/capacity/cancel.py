"""Cancellation hygiene: requests cancelled mid-answer must free the server.

Four phases. Before: a short steady measure at low concurrency (the TTFT baseline), then the
server's /metrics at rest: its running, waiting and KV-cache gauges and its generated-tokens
counter. The burst: `burst` requests sent at once, each asking for `max_tokens` (a server that
goes on generating for nobody shows it for a long time); the `share` that streams is closed after
its first `after_chunks` content chunks, the rest (not streamed) are closed `close_after` seconds
after sending. The watch, from the last cancel: /metrics read every `poll` seconds (1 s by
default, a scraper's pace: llama-server b11434 read every 0.5 s or 0.2 s never stopped 4
non-streamed requests whose clients had left, which stopped within 2 s when read every second)
until every judged gauge is back at its value at rest and the counter has been watched for
`grace` + `quiet` seconds, or `return_within` seconds have passed. After: one small completion
with a timeout while /health is asked too, then the steady measure again.

NO-GO when a judged gauge is not back at rest when the watch ends (the running and waiting
gauges; KV usage only where no running gauge is served, since a prompt cache may keep it up);
when the generated-tokens counter rises after the grace with nothing in flight (3 s by default:
llama-server b11434 notices a non-streamed client leave at its next 1 s poll and counts a task's
tokens when it releases it, 2-3 s after the cancel); when the small
completion hangs (worse: while /health says 200) or fails; when a request after the burst fails;
when TTFT p50 after exceeds both `ttft_ratio` × before and before + `ttft_slack`. Without /metrics
the request-side figures alone are judged, and the result says so. The server is assumed to serve
nobody else meanwhile: another client's requests would hold the gauges up.

A kind added through the scenario registry (scenario_kinds.py): this module and one line there.
Nothing here imports pytest.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_inferaccept.capacity.sampler import ROLES
from pytest_inferaccept.capacity.scenarios import CapacityResult, Judgement, conclude, ms, step_row
from pytest_inferaccept.model import (
    CancelFigures,
    CancelParams,
    CancelStep,
    CapacityFindings,
    CapacityParams,
    CapacityTelemetry,
    GaugeWatch,
    Point,
    TelemetrySeries,
)

if TYPE_CHECKING:
    import aiohttp

    from pytest_inferaccept.capacity.runner import CapacityRunner
    from pytest_inferaccept.load import Workload
    from pytest_inferaccept.run.load import LoadResult

GAUGES: tuple[str, ...] = ("running", "waiting", "kv_cache")
"""The gauge roles watched (their names per framework: capacity/sampler.py ROLES)."""
GENERATED: tuple[str, ...] = (
    "vllm:generation_tokens_total",
    "sglang:generation_tokens_total",
    "llamacpp:tokens_predicted_total",
)
"""The generated-tokens counter of each framework; the first present wins."""
KV_TOLERANCE = 0.01
"""KV usage counts as back at rest within this much of it (a ratio: one cache block of slack)."""
PROMPT = ("Write a very long story about a lighthouse keeper and the ships she watched over, chapter by "
          "chapter, with every detail of every night.")
"""The burst's prompt: an answer that goes on for as long as max_tokens allows."""


@dataclass(frozen=True)
class Reading:
    """One read of /metrics: each gauge role's (name, value), the generated-tokens counter's."""

    t: float
    """time.monotonic() when it was read."""
    gauges: dict[str, tuple[str, float]]
    generated: tuple[str, float] | None


def parse_metrics(text: str, t: float) -> Reading:
    """The watched gauges and counter in Prometheus text (summed over label sets; KV usage: the
    largest); ValueError when it is not Prometheus text."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {name for role in GAUGES for name in ROLES[role]} | set(GENERATED)
    values: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                values.setdefault(sample.name, []).append(float(sample.value))
    gauges: dict[str, tuple[str, float]] = {}
    for role in GAUGES:
        name = next((n for n in ROLES[role] if n in values), None)
        if name is not None:
            gauges[role] = (name, max(values[name]) if role == "kv_cache" else sum(values[name]))
    counter = next((n for n in GENERATED if n in values), None)
    return Reading(t=t, gauges=gauges, generated=(counter, sum(values[counter])) if counter else None)


async def scrape(session: aiohttp.ClientSession, root: str) -> tuple[Reading | None, str]:
    """GET /metrics and read it: the reading, or None and why in words."""
    import aiohttp

    try:
        async with session.get(root + "/metrics") as resp:
            if resp.status != 200:
                return None, f"/metrics answered HTTP {resp.status}"
            text = (await resp.content.read(32 * 2**20)).decode("utf-8", "replace")
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
        return None, f"/metrics did not answer ({type(exc).__name__})"
    try:
        reading = parse_metrics(text, time.monotonic())
    except ValueError as exc:
        return None, f"/metrics is not Prometheus text ({str(exc)[:120]})"
    if not reading.gauges and reading.generated is None:
        names = [n for role in GAUGES for n in ROLES[role]] + list(GENERATED)
        return None, f"/metrics has none of {', '.join(names)}"
    return reading, ""


@dataclass
class Cut:
    """One request of the burst: how it was cancelled (or why not)."""

    streamed: bool
    how: str = ""
    """mid_stream, waiting (closed before its chunks came), closed_early (not streamed), answered (it
    ended before its cancel point) or failed."""
    chunks: int = 0
    failure: str = ""
    cancelled_at: float | None = None


@dataclass
class Phase:
    """What the burst and the watch saw."""

    rest: Reading | None
    absent: str
    cuts: list[Cut]
    started: float
    readings: list[Reading] = field(default_factory=list)
    """During the burst and the watch, in order."""
    last_cancel: float | None = None


def _content(payload: bytes) -> bool:
    """Does one SSE data payload carry generated text (chat delta content, or a legacy completion's text)?"""
    try:
        event = json.loads(payload)
    except ValueError:
        return False
    choices = event.get("choices") if isinstance(event, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    delta = choices[0].get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choices[0].get("text")
    return isinstance(text, str) and text != ""


async def _stream_and_cut(session: aiohttp.ClientSession, url: str, body: bytes, after: int,
                          cut: Cut) -> None:
    """Read a streamed answer until `after` content chunks have come, then close the connection."""
    async with session.post(url, data=body) as resp:
        if resp.status != 200:
            cut.how, cut.failure = "failed", f"HTTP {resp.status}"
            return
        buf = b""
        async for data in resp.content.iter_any():
            buf = (buf + data).replace(b"\r\n", b"\n")
            while b"\n\n" in buf:
                block, buf = buf.split(b"\n\n", 1)
                for line in block.split(b"\n"):
                    payload = line[5:].strip() if line.startswith(b"data:") else b""
                    if payload == b"[DONE]":
                        cut.how = "answered"
                        return
                    if payload and _content(payload):
                        cut.chunks += 1
                if cut.chunks >= after:
                    resp.close()  # the connection goes with it: the server sees its client leave
                    cut.how, cut.cancelled_at = "mid_stream", time.monotonic()
                    return
        cut.how = "answered"


async def _ask_and_close(session: aiohttp.ClientSession, url: str, body: bytes, close_after: float,
                         cut: Cut) -> None:
    """Send a non-streamed request and close its connection `close_after` seconds later, answered or not."""
    status: list[int] = []

    async def ask() -> None:
        async with session.post(url, data=body) as resp:
            status.append(resp.status)
            await resp.read()

    task = asyncio.ensure_future(ask())
    done, _ = await asyncio.wait({task}, timeout=close_after)
    if not done:
        task.cancel()  # aiohttp closes the connection of a request cancelled mid-answer
        with contextlib.suppress(asyncio.CancelledError):
            await task
        cut.how, cut.cancelled_at = "closed_early", time.monotonic()
        return
    exc = task.exception()
    if exc is not None:
        cut.how, cut.failure = "failed", type(exc).__name__
    elif status and status[0] != 200:
        cut.how, cut.failure = "failed", f"HTTP {status[0]}"
    else:
        cut.how = "answered"


async def _one(request: Awaitable[None], cut: Cut, bound: float) -> None:
    """One request of the burst within the burst's bound; a stream still waiting then is closed anyway."""
    import aiohttp

    try:
        await asyncio.wait_for(request, bound)
    except asyncio.TimeoutError:
        cut.how, cut.cancelled_at = "waiting", time.monotonic()
    except (aiohttp.ClientError, OSError) as exc:
        cut.how, cut.failure = "failed", type(exc).__name__


@dataclass(frozen=True)
class Plan:
    """The burst and the watch as asked."""

    root: str
    model: str
    api_key: str | None
    connect_timeout: float
    burst: int
    streams: int
    after_chunks: int
    close_after: float
    bound: float
    max_tokens: int
    return_within: float
    grace: float
    quiet: float
    poll: float


async def _burst_and_watch(plan: Plan) -> Phase:
    """Read /metrics at rest, send the burst and cancel it (sampling /metrics meanwhile), then watch."""
    import aiohttp

    headers = {"Content-Type": "application/json"}
    if plan.api_key:
        headers["Authorization"] = f"Bearer {plan.api_key}"
    metrics_timeout = aiohttp.ClientTimeout(total=3.0)
    # Every burst request on a connection of its own, closed when it is cancelled.
    burst_timeout = aiohttp.ClientTimeout(total=None, sock_connect=plan.connect_timeout)
    async with aiohttp.ClientSession(headers=headers, timeout=metrics_timeout) as metrics, \
            aiohttp.ClientSession(headers=headers, timeout=burst_timeout,
                                  connector=aiohttp.TCPConnector(limit=0, force_close=True)) as session:
        rest, absent = await scrape(metrics, plan.root)
        phase = Phase(rest=rest, absent=absent, cuts=[], started=time.monotonic())
        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                reading, _ = await scrape(metrics, plan.root)
                if reading is not None:
                    phase.readings.append(reading)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), plan.poll)

        sampler = asyncio.ensure_future(sample()) if rest is not None else None
        url = plan.root + "/v1/chat/completions"
        tasks = []
        for i in range(plan.burst):
            streamed = i < plan.streams
            cut = Cut(streamed=streamed)
            phase.cuts.append(cut)
            ask = [{"role": "user", "content": f"{PROMPT} (Story {i + 1}.)"}]
            body = json.dumps({"model": plan.model, "max_tokens": plan.max_tokens, "stream": streamed,
                               "messages": ask}).encode()
            request = (_stream_and_cut(session, url, body, plan.after_chunks, cut) if streamed
                       else _ask_and_close(session, url, body, plan.close_after, cut))
            tasks.append(_one(request, cut, plan.bound))
        await asyncio.gather(*tasks)
        stop.set()
        if sampler is not None:
            await sampler
        cancelled = [c.cancelled_at for c in phase.cuts if c.cancelled_at is not None]
        phase.last_cancel = max(cancelled) if cancelled else None
        if rest is not None and phase.last_cancel is not None:
            await _watch(phase, plan, lambda: scrape(metrics, plan.root))
        return phase


async def _watch(phase: Phase, plan: Plan, read: Callable[[], Awaitable[tuple[Reading | None, str]]]) -> None:
    """Read /metrics from the last cancel until every judged gauge is back at rest and the counter has
    been watched long enough, or the bound has passed."""
    assert phase.rest is not None and phase.last_cancel is not None
    judged = judged_roles(phase.rest)
    long_enough = phase.last_cancel + plan.grace + plan.quiet
    deadline = phase.last_cancel + max(plan.return_within, plan.grace + plan.quiet)
    while True:
        reading, _ = await read()
        now = time.monotonic()
        if reading is not None:
            phase.readings.append(reading)
            if now >= long_enough and all(_back(reading, phase.rest, role) for role in judged):
                return
        if now >= deadline:
            return
        await asyncio.sleep(min(plan.poll, max(deadline - now, 0.0)))


def judged_roles(rest: Reading) -> tuple[str, ...]:
    """The gauges whose return decides: running and waiting; KV usage only without a running gauge."""
    return tuple(role for role in GAUGES if role in rest.gauges
                 and (role != "kv_cache" or "running" not in rest.gauges))


def _back(reading: Reading, rest: Reading, role: str) -> bool:
    """Does `role` read no more than at rest (KV usage: within KV_TOLERANCE)? A gauge gone counts as not."""
    if role not in reading.gauges:
        return False
    slack = KV_TOLERANCE if role == "kv_cache" else 1e-9
    return reading.gauges[role][1] <= rest.gauges[role][1] + slack


def probe(runner: CapacityRunner, root: str, timeout: float) -> tuple[str, str]:
    """One small completion within `timeout`: ("answered" | "hangs" | "failed", what was seen)."""
    import httpx

    from pytest_inferaccept.http import client_for

    body = {"model": runner.server.model, "max_tokens": 4,
            "messages": [{"role": "user", "content": "Say OK."}]}
    started = time.monotonic()
    try:
        with client_for(runner.settings, root, read_timeout=timeout) as client:
            resp = client.post("/v1/chat/completions", json=body)
    except httpx.TimeoutException:
        return "hangs", f"no answer within {timeout:g} s"
    except Exception as exc:
        return "failed", f"{type(exc).__name__}: {str(exc)[:200]}"
    if resp.status_code != 200:
        return "failed", f"HTTP {resp.status_code}"
    return "answered", f"answered in {time.monotonic() - started:.2f} s"


def health(runner: CapacityRunner, root: str) -> tuple[int | None, str]:
    """/health's status now, and in words."""
    from pytest_inferaccept.http import client_for

    try:
        with client_for(runner.settings, root, read_timeout=5.0) as client:
            resp = client.get("/health")
    except Exception as exc:
        return None, f"no answer ({type(exc).__name__})"
    return resp.status_code, f"HTTP {resp.status_code}"


def start(runner: CapacityRunner, *, burst: int = 16, share: float = 0.5, after_chunks: int = 3,
          close_after: float = 1.0, bound: float = 30.0, max_tokens: int | None = None,
          return_within: float = 10.0, grace: float = 3.0, quiet: float = 2.0, poll: float = 1.0,
          concurrency: int = 2, requests: int = 12, ttft_ratio: float = 2.0, ttft_slack: float = 0.05,
          hang_timeout: float = 10.0, workload: str | Path | Workload | None = None) -> CapacityResult:
    """Cancel a burst of requests mid-answer; NO-GO when the server is not freed, still generates,
    hangs, fails or answers slower afterwards (see the module's words for each rule)."""
    from pytest_inferaccept.capacity.runner import context_window
    from pytest_inferaccept.load.client import api_root

    if burst < 1 or not 0.0 <= share <= 1.0 or after_chunks < 1 or min(close_after, bound, poll) <= 0:
        raise ValueError("cancel: burst >= 1, 0 <= share <= 1, after_chunks >= 1, and close_after, bound "
                         "and poll above 0")
    window = runner.settings.capacity.context_window or context_window(runner.server.version_info)
    tokens = max_tokens or (max(64, min(1024, window - 256)) if window else 1024)
    params = CancelParams(burst=burst, share=share, after_chunks=after_chunks, close_after_s=close_after,
                          bound_s=bound, max_tokens=tokens, return_within_s=return_within, grace_s=grace,
                          quiet_s=quiet, poll_s=poll, concurrency=concurrency, requests=requests,
                          ttft_ratio=ttft_ratio, ttft_slack_s=ttft_slack, hang_timeout_s=hang_timeout)
    say = runner.say
    say(f"inferaccept: cancel: {requests} requests at c={concurrency} before the burst")
    before = runner.measure_step("before", concurrency=concurrency, requests=requests, warmup=1,
                                 workload=workload)
    before_row = _row(concurrency, before, "before")
    if before_row.failing:
        return conclude(kind="cancel", label=runner.label, steps=[before_row],
                        params=CapacityParams(cancel=params), headline="no burst sent: the server failed "
                        "before it", slo=before.slo, failing=before_row.failure_text)
    root = api_root(runner.server.base_url)
    plan = Plan(root=root, model=runner.server.model, api_key=runner.settings.api_key,
                connect_timeout=runner.settings.connect_timeout, burst=burst,
                streams=round(burst * share), after_chunks=after_chunks, close_after=close_after,
                bound=bound, max_tokens=tokens, return_within=return_within, grace=grace, quiet=quiet,
                poll=poll)
    say(f"inferaccept: cancel: a burst of {burst} requests ({plan.streams} streamed, cut after "
        f"{after_chunks} chunks; {burst - plan.streams} closed after {close_after:g} s)")
    from pytest_inferaccept.load.blocking import run_blocking

    phase = run_blocking(_burst_and_watch(plan))
    figures = _figures(phase, plan)
    state, seen = probe(runner, root, hang_timeout)
    figures.completion_hangs = state == "hangs"
    figures.probe = seen
    figures.health_status, figures.health = health(runner, root)
    steps = [before_row]
    if state == "answered":
        say(f"inferaccept: cancel: {requests} requests at c={concurrency} after the burst")
        after = runner.measure_step("after", concurrency=concurrency, requests=requests, warmup=0,
                                    workload=workload)
        steps.append(_row(concurrency, after, "after"))
    else:
        figures.after_not_run = f"a small completion after the burst: {seen}"
    _compare(figures, steps)
    judged, notes = _judge(figures, plan, params, steps)
    return conclude(kind="cancel", label=runner.label, steps=steps, params=CapacityParams(cancel=params),
                    headline=_headline(figures, plan), slo=before.slo, judged=judged,
                    findings=CapacityFindings(cancel=figures), telemetry=_telemetry(phase, plan), notes=notes)


def _row(concurrency: int, result: LoadResult, step: str) -> CancelStep:
    row = step_row(concurrency, result, into=CancelStep)
    row.step = step
    return row


def _figures(phase: Phase, plan: Plan) -> CancelFigures:
    """The burst's counts and what the gauges and the counter did after it."""
    cuts = phase.cuts
    failures = Counter(c.failure for c in cuts if c.how == "failed")
    last = phase.last_cancel
    figures = CancelFigures(
        gauges_served=phase.rest is not None,
        gauges_absent=f"gauges not served: {phase.absent}" if phase.absent else "",
        sent=len(cuts), streamed=sum(c.streamed for c in cuts),
        cut_mid_stream=sum(c.how == "mid_stream" for c in cuts),
        cut_waiting=sum(c.how == "waiting" for c in cuts),
        closed_early=sum(c.how == "closed_early" for c in cuts),
        answered_before_cancel=sum(c.how == "answered" for c in cuts), failed=sum(failures.values()),
        failure_kinds=dict(failures.most_common()),
        last_cancel_s=None if last is None else last - phase.started)
    rest = phase.rest
    if rest is None or last is None:
        return figures
    watch = [r for r in phase.readings if r.t >= last]
    if not watch:
        return figures  # /metrics gave nothing after the last cancel (judged as such)
    figures.watched_s = watch[-1].t - last
    judged = judged_roles(rest)
    back_at: list[float | None] = []
    gauges: list[GaugeWatch] = []
    for role, (name, before) in rest.gauges.items():
        values = [r.gauges[role][1] for r in phase.readings if role in r.gauges]
        end = watch[-1].gauges.get(role)
        gauge = GaugeWatch(role=role, metric=name, judged=role in judged, before=before,
                           peak=max([before, *values]), at_end=None if end is None else end[1],
                           returned_s=_settled(watch, rest, role, last))
        gauges.append(gauge)
        if gauge.judged:
            back_at.append(gauge.returned_s)
    figures.gauges = gauges  # assigned, not appended: the document keeps the fields that were set
    if back_at and all(t is not None for t in back_at):
        figures.returned_s = max(t for t in back_at if t is not None)
    if rest.generated is not None:
        name = rest.generated[0]
        figures.generated_metric, figures.generated_before = name, rest.generated[1]
        counted = [(r.t, r.generated[1]) for r in watch if r.generated is not None and r.generated[0] == name]
        at_grace = next((v for t, v in counted if t >= last + plan.grace), None)
        if at_grace is not None:
            figures.generated_at_grace, figures.generated_at_end = at_grace, counted[-1][1]
            figures.generated_after_grace = counted[-1][1] - at_grace
    return figures


def _settled(watch: list[Reading], rest: Reading, role: str, last: float) -> float | None:
    """Seconds from the last cancel to the first reading from which `role` stayed back at rest (None:
    not back at the watch's end)."""
    since: float | None = None
    for reading in watch:
        back = _back(reading, rest, role)
        since = (reading.t - last if since is None else since) if back else None
    return since


ROLE_WORDS = {"running": "running requests", "waiting": "waiting requests", "kv_cache": "KV-cache usage"}


def _judge(figures: CancelFigures, plan: Plan, params: CancelParams,
           steps: list[CancelStep]) -> tuple[list[Judgement], list[str]]:
    """What fails the scenario (or leaves it undecided), and the notes beside it."""
    judged: list[Judgement] = []
    notes: list[str] = []
    cancelled = figures.cut_mid_stream + figures.cut_waiting + figures.closed_early
    if not cancelled:
        judged.append(("invalid", f"no request of the burst was cancelled: {figures.answered_before_cancel} "
                                  f"answered before their cancel point, {figures.failed} failed"))
    if figures.failed:
        kinds = ", ".join(f"{k} ×{n}" for k, n in figures.failure_kinds.items())
        judged.append(("fail", f"{figures.failed} of {figures.sent} requests of the burst failed before "
                               f"their cancel point ({kinds})"))
    if figures.gauges_served and cancelled and figures.watched_s is None:
        judged.append(("fail", "/metrics gave no reading after the last cancel (it answered at rest): the "
                               "server's gauges cannot be seen coming back"))
    for gauge in figures.gauges:
        if not gauge.judged and gauge.returned_s is None:
            notes.append(f"{gauge.metric} ({ROLE_WORDS[gauge.role]}) is shown, not judged: a running gauge "
                         "is served, and a prompt cache may keep KV usage up")
        elif gauge.returned_s is None and cancelled:
            seen = "was gone" if gauge.at_end is None else f"read {gauge.at_end:g}"
            judged.append(("fail", f"{gauge.metric} ({ROLE_WORDS[gauge.role]}) {seen} "
                                   f"{figures.watched_s or 0:.1f} s after the last cancel, {gauge.before:g} "
                                   f"at rest (bound {params.return_within_s:g} s): the cancelled requests "
                                   "still hold the server"))
    rise = figures.generated_after_grace
    if rise is not None and rise > 0:
        judged.append(("fail", f"{figures.generated_metric} rose by {rise:g} tokens from {plan.grace:g} s to "
                               f"{figures.watched_s or 0:.1f} s after the last cancel, with no request in "
                               "flight: the server went on generating for clients that had left"))
    elif rise is not None and rise < 0:
        notes.append(f"{figures.generated_metric} went down during the watch (a restart?): not judged")
    elif figures.generated_metric is not None and rise is None and cancelled:
        notes.append(f"{figures.generated_metric} was not read after the grace: not judged")
    if figures.completion_hangs:
        if figures.health_status == 200:
            judged.append(("fail", f"/health answered 200 while a completion hung ({figures.probe}): a "
                                   "liveness check on /health would keep this server in service"))
        else:
            judged.append(("fail", f"a completion hung after the burst ({figures.probe}); /health: "
                                   f"{figures.health}"))
    elif figures.after_not_run:
        judged.append(("fail", f"{figures.after_not_run}: the server does not answer after the burst"))
    before = steps[0]
    after = steps[1] if len(steps) > 1 else None
    if after is not None:
        if after.failed:
            judged.append(("fail", f"{after.failed} of {after.measured} requests after the burst failed"
                                   + (f": {after.failure_text}" if after.failure_text else "")))
        if before.ttft_p50 and after.ttft_p50 is not None and figures.ttft_ratio is not None:
            slower = (after.ttft_p50 > params.ttft_ratio * before.ttft_p50
                      and after.ttft_p50 > before.ttft_p50 + params.ttft_slack_s)
            if slower and (before.client_bound or after.client_bound):
                notes.append("TTFT p50 after the burst is not judged: the client limited a measure "
                             f"({'; '.join(before.client_bound + after.client_bound)})")
            elif slower:
                judged.append(("fail", f"TTFT p50 after the burst {ms(after.ttft_p50)}, "
                                       f"{figures.ttft_ratio:.1f}× the {ms(before.ttft_p50)} before (limit "
                                       f"{params.ttft_ratio:g}×, and {ms(params.ttft_slack_s)} above it)"))
    if figures.answered_before_cancel:
        notes.append(f"{figures.answered_before_cancel} of {figures.sent} answers ended before their cancel "
                     "point (nothing to cancel there)")
    if figures.cut_waiting:
        notes.append(f"{figures.cut_waiting} streams were closed at the burst's bound ({params.bound_s:g} s) "
                     "before their first chunks came")
    return judged, notes


def _compare(figures: CancelFigures, steps: list[CancelStep]) -> None:
    """The steady measures' figures on the findings: TTFT p50 (answered) before and after, failures."""
    before = steps[0]
    figures.ttft_p50_before = before.ttft_p50
    if len(steps) > 1:
        after = steps[1]
        figures.ttft_p50_after, figures.failed_after, figures.measured_after = (after.ttft_p50, after.failed,
                                                                                after.measured)
        if before.ttft_p50 and after.ttft_p50 is not None:
            figures.ttft_ratio = after.ttft_p50 / before.ttft_p50


def _headline(figures: CancelFigures, plan: Plan) -> str:
    """'16 requests cancelled (8 streams after 3 chunks, 8 closed after 1 s): running requests back to 0 in
    0.2 s, no tokens generated after the cancels; TTFT p50 31 ms after, 30 ms before'."""
    cancelled = figures.cut_mid_stream + figures.cut_waiting + figures.closed_early
    head = (f"{cancelled} of {figures.sent} requests cancelled ({figures.cut_mid_stream} streams after "
            f"{plan.after_chunks} chunks, {figures.closed_early} closed after {plan.close_after:g} s"
            + (f", {figures.cut_waiting} still waiting" if figures.cut_waiting else "") + ")")
    parts: list[str] = []
    if not figures.gauges_served:
        parts.append(f"{figures.gauges_absent}; judged on the requests alone")
    for gauge in figures.gauges:
        if not gauge.judged:
            continue
        if gauge.returned_s is not None:
            parts.append(f"{ROLE_WORDS[gauge.role]} back to {gauge.before:g} in {gauge.returned_s:.1f} s")
        else:
            end = "gone" if gauge.at_end is None else f"{gauge.at_end:g}"
            parts.append(f"{ROLE_WORDS[gauge.role]} still at {end} ({gauge.before:g} at rest)")
    rise = figures.generated_after_grace
    if rise is not None:
        parts.append("no tokens generated after the cancels" if rise <= 0
                     else f"{rise:g} tokens generated after the cancels")
    if figures.completion_hangs or figures.after_not_run:
        parts.append(f"a completion afterwards: {figures.probe} (/health: {figures.health})")
    elif figures.ttft_p50_after is not None:
        parts.append(f"TTFT p50 {ms(figures.ttft_p50_after)} after, {ms(figures.ttft_p50_before)} before")
    if figures.failed_after:
        parts.append(f"{figures.failed_after} of {figures.measured_after} failed after")
    return head + (": " + ", ".join(parts) if parts else "")


def _telemetry(phase: Phase, plan: Plan) -> CapacityTelemetry | None:
    """The gauges and the counter as read from the burst's start, in seconds since it."""
    if phase.rest is None:
        return None
    points: dict[str, list[Point]] = {}
    sources: dict[str, str] = {}
    for reading in [phase.rest, *phase.readings]:
        t = round(reading.t - phase.started, 3)
        named = dict(reading.gauges)
        if reading.generated is not None:
            named["generated_tokens"] = reading.generated
        for role, (name, value) in named.items():
            points.setdefault(role, []).append((t, value))
            sources.setdefault(role, f"/metrics {name}")
    series = [TelemetrySeries(name=role, source=sources[role], points=values)
              for role, values in points.items()]
    absent = [f"/metrics has no {role} gauge" for role in GAUGES if role not in phase.rest.gauges]
    if phase.rest.generated is None:
        absent.append(f"/metrics has no generated-tokens counter (looked for {', '.join(GENERATED)})")
    return CapacityTelemetry(interval_s=plan.poll, samples=len(phase.readings) + 1,
                             series=series, absent=absent)
