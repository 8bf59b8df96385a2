"""How exactly, and at what CPU cost, does the load engine measure a streaming server?

Starts the project's fake server (known timing: the first word after 50 ms, then one word every
10 ms) with its timing log on, so the server writes down, per streamed answer, when it received
the request and when it wrote every chunk, on CLOCK_MONOTONIC. On one machine the client's
`time.perf_counter()` reads the same clock, so every client figure is set against the server's
own account of the same request (matched by response id):

- TTFT error: the client's TTFT minus the server's (received -> first content chunk written),
  median and p99, for all requests and "warm" (without the first request of each connection and
  without the first second: the start-up connection burst); split into the way in (client sent
  -> server received, median) and the delivery (server wrote the first content chunk -> client
  stamped it, median and p99: the part that is the client's own lag);
- per-gap ITL error p99: |client gap - server gap| for every pair of successive content chunks;
- achieved vs asked concurrency (steady stretch, as the engine's self-check judges it);
- client CPU per streamed chunk (every SSE data event but [DONE]), the share of a core the client
  and the server used, and how long each, once runnable, waited for a CPU on average ("sched
  delay": other work on the same core, from /proc/PID/task/*/schedstat);
- that the empty role-only chunk is never counted (content events = content chunks written),
  and the share of content chunks that arrived coalesced in one read;
- the highest chunk rate one worker sustains (many short streams, 1 ms apart), with 1 and 2
  workers, asyncio and uvloop (when uvloop is importable);
- the same rows for GuideLLM, installed from PyPI in a separate venv, on the same server.

The server is pinned to core 0, the clients to core 1 (on a machine with 2+ cores). Traffic goes
to 127.0.0.1 only; every process the bench starts is stopped by its PID (or its own session).

Run:  python bench/loadgen_accuracy.py [--quick] [--duration S] [--peer-venv /tmp/peer-venv]
The peer:  python -m venv /tmp/peer-venv && /tmp/peer-venv/bin/pip install guidellm
uvloop rows:  pip install uvloop (or put it on PYTHONPATH for the run).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime as dt
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Loop = Literal["asyncio", "uvloop"]
SERVER_CORE = 0
CLIENT_CORE = 1
TTFT = 0.050
ITL = 0.010
FAST_ITL = 0.001
FAST_CONCURRENCY = 128
MAX_TOKENS = 32
LADDER = (1, 16, 64, 256)
BURST_SECONDS = 1.0
"""Requests sent in the first second of a run belong to the start-up burst (excluded when warm)."""


# -- processes --------------------------------------------------------------------------------


def pin(pid: int, core: int) -> bool:
    """Pin a process (0: this one) to one core, when the machine has 2+ cores; True when pinned."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) <= max(SERVER_CORE, CLIENT_CORE):
        return False
    os.sched_setaffinity(pid, {core})
    return True


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (cheap: no scan of all of /proc)."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                out.extend(int(c) for c in Path(task.path, "children").read_text().split())
    return out


def tree(pid: int) -> list[int]:
    """`pid` and all its live descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children(p))
    return out


Use = tuple[float, float, float]
"""(seconds on a CPU, seconds runnable but waiting for one, times it was scheduled)."""


def usage(pids: Iterable[int]) -> dict[str, Use]:
    """Per live thread of these processes, from /proc/PID/task/TID/schedstat."""
    out: dict[str, Use] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in os.scandir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError):
                    on_cpu, waiting, slices = Path(task.path, "schedstat").read_text().split()
                    out[f"{pid}/{task.name}"] = (int(on_cpu) / 1e9, int(waiting) / 1e9, float(slices))
    return out


class Sampler(threading.Thread):
    """Samples the CPU use of a set of processes, at start and stop.

    With `every`, also every that many seconds from a thread, for processes that end before the
    stop (engine workers) or windows inside the sampled stretch (a peer's benchmarks). Kept cheap:
    it runs beside the client it measures.
    """

    def __init__(self, pids: Callable[[], list[int]], every: float | None = None) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.every = every
        self.points: list[tuple[float, Use, float]] = []
        """(wall time, summed use, 1-minute load average)."""
        self.done = threading.Event()
        self._seen: dict[str, Use] = {}
        """Last reading of every thread seen, so one that ended still counts what it used."""
        self._sample()

    def _sample(self) -> None:
        self._seen.update(usage(self.pids()))
        total = tuple(sum(v[k] for v in self._seen.values()) for k in range(3))
        self.points.append((time.time(), (total[0], total[1], total[2]), os.getloadavg()[0]))

    def begin(self) -> Sampler:
        """Start the sampling thread, if sampling on the way is asked for."""
        if self.every is not None:
            self.start()
        return self

    def run(self) -> None:
        while not self.done.wait(self.every):
            self._sample()

    def stop(self) -> Sampler:
        """Stop sampling, with one last sample."""
        self.done.set()
        if self.is_alive():
            self.join()
        self._sample()
        return self

    def at(self, when: float) -> Use:
        """The summed use at wall time `when`, interpolated between samples."""
        times = [p[0] for p in self.points]
        i = bisect.bisect_left(times, when)
        if i <= 0 or i >= len(times):
            return self.points[min(max(i, 0), len(times) - 1)][1]
        (ta, a, _), (tb, b, _) = self.points[i - 1], self.points[i]
        f = (when - ta) / (tb - ta) if tb > ta else 0.0
        return (a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f, a[2] + (b[2] - a[2]) * f)

    def load_at(self, when: float) -> float:
        """The 1-minute load average sampled closest to wall time `when`."""
        return min(self.points, key=lambda p: abs(p[0] - when))[2]

    def between(self, start: float, end: float) -> Use:
        """The use between two wall times."""
        a, b = self.at(start), self.at(end)
        return (b[0] - a[0], b[1] - a[1], b[2] - a[2])


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


@dataclass
class FakeServer:
    """The fake server as a subprocess of its own session, pinned to the server core."""

    ttft: float
    itl: float
    log: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeServer:
        """Start it and wait until /health answers."""
        self.port = free_port()
        cmd = [sys.executable, "-m", "pytest_inferaccept.fake", "--port", str(self.port),
               "--ttft", str(self.ttft), "--itl", str(self.itl), "--timing-log", str(self.log)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        pin(self.proc.pid, SERVER_CORE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.proc.poll() is None:
            if _healthy(self.url):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("the fake server did not start")

    def sampler(self, every: float | None = None) -> Sampler:
        """A started Sampler of the server's CPU."""
        assert self.proc is not None
        pid = self.proc.pid
        return Sampler(lambda: [pid], every).begin()

    def stop(self) -> None:
        """SIGTERM (it flushes its timing log), then SIGKILL if it lingers."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


# -- what one run measured --------------------------------------------------------------------


@dataclass
class Sample:
    """One request as a client saw it, on CLOCK_MONOTONIC (seconds)."""

    rid: str | None
    send: float
    end: float
    first: float | None
    """When the client stamped the first content token (its TTFT = first - send)."""
    ok: bool
    cut: bool = False
    """Cancelled in flight when the run's time was up (a peer's way of ending a timed run)."""
    content: list[float] | None = None
    """Every content event (None: the client keeps no per-token times)."""
    coalesced: int | None = None


@dataclass
class Cost:
    """CPU of the client and of the server over one run's wall time, and how long they waited for it."""

    wall_s: float
    cpu_s: float
    delay: float
    """Mean seconds a client thread, once runnable, waited for a CPU (other work on its core)."""
    server_cpu_s: float
    server_delay: float


def sched_delay(use: Use) -> float:
    """Mean wait for a CPU per time a thread was scheduled."""
    _, wait, slices = use
    return wait / slices if slices > 0 else 0.0


@dataclass
class Measured:
    """A run's samples and what it cost, before they are set against the server's log."""

    client: str
    loop: str
    workers: int
    asked: int
    samples: list[Sample]
    cost: Cost
    load1: float = field(default_factory=lambda: os.getloadavg()[0])


def wall_to_mono() -> float:
    """time.time() - time.perf_counter(), read as tightly as possible (for peers' wall stamps)."""
    best, offset = math.inf, 0.0
    for _ in range(50):
        a = time.perf_counter()
        w = time.time()
        b = time.perf_counter()
        if b - a < best:
            best, offset = b - a, w - (a + b) / 2
    return offset


# -- the engine -------------------------------------------------------------------------------


def run_engine(server: FakeServer, *, concurrency: int, duration: float, loop: Loop, workers: int,
               label: str = "engine") -> Measured:
    """One closed-loop engine run (no warm-up, so the start-up burst is in the data)."""
    from pytest_inferaccept.load import Fixed, LoadSpec, SyntheticWorkload, run_load

    spec = LoadSpec(base_url=server.url, model="fake-chat", concurrency=concurrency, duration=duration,
                    warmup=0, workers=workers, loop=loop, scrape_metrics=False, request_timeout=30.0,
                    workload=SyntheticWorkload(input=Fixed(16), output=Fixed(MAX_TOKENS)))
    me, server_pid = os.getpid(), server.proc.pid if server.proc else -1

    def engine_pids() -> list[int]:
        return [me, *(c for c in children(me) if c != server_pid)]

    # One worker runs in this process: no sampling thread beside it (it would hold the GIL).
    client = Sampler(engine_pids, every=0.2 if workers > 1 else None).begin()
    srv = server.sampler()
    run = run_load(spec)
    client.stop()
    srv.stop()
    per_worker = run.selfcheck["per_worker"]
    t0 = {w["worker"]: w["t0"] for w in per_worker}
    samples = [Sample(rid=r.response_id, send=t0[r.worker] + r.send, end=t0[r.worker] + r.end,
                      first=None if r.first_content is None else t0[r.worker] + r.first_content,
                      ok=r.ok, content=[t0[r.worker] + t for t in r.content_times], coalesced=r.coalesced)
               for r in run.records if not r.warmup]
    # The measured phase on the wall clock: the engine's own CPU figure covers exactly that.
    offset = wall_to_mono()
    start = offset + min(t0[w["worker"]] + (w["window"][0]) for w in per_worker)
    end = offset + max(t0[w["worker"]] + (w["window"][1]) for w in per_worker)
    cost = Cost(wall_s=end - start, cpu_s=sum(w["process_cpu_seconds"] for w in per_worker),
                delay=sched_delay(client.between(start, end)), server_cpu_s=srv.between(start, end)[0],
                server_delay=sched_delay(srv.between(start, end)))
    return Measured(client=label, loop=per_worker[0]["loop"], workers=workers, asked=concurrency,
                    samples=samples, cost=cost)


# -- the peer (GuideLLM) ----------------------------------------------------------------------


def guidellm_scenario(url: str, data: Path, out: Path, ladder: Sequence[int],
                      duration: float) -> dict[str, Any]:
    """A GuideLLM scenario: closed loop (its `concurrent` profile) at each level for `duration` s."""
    return {"spec": {"backend": {"kind": "openai_http", "target": url},
                     "profile": {"kind": "concurrent", "streams": ladder[0]},
                     "constraints": [{"kind": "max_duration", "seconds": duration}],
                     "data": [{"kind": "json_file", "path": str(data)}],
                     "outputs": [{"kind": "json", "path": str(out)}]},
            "benchmarks": [{"profile.streams": c} for c in ladder]}


def write_prompts(path: Path, n: int) -> None:
    """Short prompts with an output length, so GuideLLM needs no tokenizer from a hub."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"prompt": f"Write a short note about request {i}.",
                                 "output_tokens_count": MAX_TOKENS}) + "\n")


def run_guidellm(exe: Path, server: FakeServer, *, ladder: Sequence[int], duration: float,
                 tmp: Path) -> tuple[list[Measured], str]:
    """GuideLLM at each concurrency in one invocation; ([], reason) when it could not run."""
    data, out, scen, log = tmp / "prompts.jsonl", tmp / "guidellm.json", tmp / "scenario.json", tmp / "g.log"
    write_prompts(data, int(1500 * duration) + 1000)
    scen.write_text(json.dumps(guidellm_scenario(server.url, data, out, ladder, duration)))
    limit = 120 + len(ladder) * (duration + 60)
    srv = server.sampler(every=0.2)
    with log.open("wb") as fh:
        proc = subprocess.Popen([str(exe), "run", "-c", str(scen), "--disable-console"],
                                cwd=tmp, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        client = Sampler(lambda: tree(proc.pid), every=0.2).begin()
        try:
            rc: int | None = proc.wait(limit)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            client.stop()
            srv.stop()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # its worker processes too, if any linger
            proc.wait()
    if rc != 0 or not out.exists():
        tail = log.read_text(errors="replace")[-600:]
        return [], f"GuideLLM did not finish (exit {rc}): {tail}"
    offset = wall_to_mono()
    report = json.loads(out.read_text())
    label = f"GuideLLM {_version_of(exe)}"
    return [guidellm_row(b, offset, (client, srv), c, label)
            for b, c in zip(report["benchmarks"], ladder, strict=True)], ""


def guidellm_row(bench: dict[str, Any], offset: float, samplers: tuple[Sampler, Sampler], asked: int,
                 label: str) -> Measured:
    """One GuideLLM benchmark (one concurrency level) as samples on CLOCK_MONOTONIC."""
    samples = []
    for status in ("successful", "errored", "incomplete"):
        for req in bench["requests"][status]:
            t = req["info"]["timings"]
            start = t.get("request_start")
            if start is None:
                continue
            end = t.get("request_end") or t.get("resolve_end") or start
            first = t.get("first_output_token_iteration")
            samples.append(Sample(rid=req.get("response_id"), send=start - offset, end=end - offset,
                                  first=None if first is None else first - offset,
                                  ok=status == "successful", cut=status == "incomplete"))
    start, end = bench["start_time"], bench["end_time"]
    client, srv = samplers
    cost = Cost(wall_s=end - start, cpu_s=client.between(start, end)[0],
                delay=sched_delay(client.between(start, end)), server_cpu_s=srv.between(start, end)[0],
                server_delay=sched_delay(srv.between(start, end)))
    return Measured(client=label, loop="-", workers=bench["config"]["strategy"]["worker_count"],
                    asked=asked, samples=samples, cost=cost, load1=client.load_at(end))


def _version_of(exe: Path) -> str:
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60).stdout
    return out.strip().rsplit(" ", 1)[-1] or "?"


# -- set against the server's log ---------------------------------------------------------------


def read_truth(path: Path) -> dict[str, dict[str, Any]]:
    """The fake's timing log: response id -> its timestamps."""
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            out[entry["id"]] = entry
    return out


def pct(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no data)."""
    if not values:
        return None
    data = sorted(values)
    return data[min(len(data) - 1, max(0, math.ceil(q * len(data)) - 1))]


def steady(samples: Sequence[Sample], asked: int) -> float | None:
    """Achieved concurrency over the steady stretch, by the engine's own definition."""
    from pytest_inferaccept.stats import steady_concurrency

    return steady_concurrency([(s.send, s.end) for s in samples], asked)


def warm(samples: Sequence[Sample], asked: int) -> list[Sample]:
    """Without the first request of each connection (the first `asked` sends) and the first second."""
    ordered = sorted(samples, key=lambda s: s.send)
    if not ordered:
        return []
    cut = ordered[0].send + BURST_SECONDS
    return [s for s in ordered[asked:] if s.send >= cut]


Truth = dict[str, dict[str, Any]]


def matched(samples: Iterable[Sample], truth: Truth) -> list[tuple[Sample, dict[str, Any]]]:
    """Successful requests with a first token, each with the server's account of it."""
    out = []
    for s in samples:
        t = truth.get(s.rid or "")
        if s.ok and s.first is not None and t is not None and t["content"]:
            out.append((s, t))
    return out


def ttft_errors(pairs: Iterable[tuple[Sample, dict[str, Any]]]) -> list[float]:
    """Client TTFT - server TTFT (received -> first content chunk written), seconds."""
    return [(s.first or 0.0) - s.send - (t["content"][0] - t["received"]) for s, t in pairs]


def gap_errors(pairs: Iterable[tuple[Sample, dict[str, Any]]]) -> tuple[list[float], int]:
    """|client gap - server gap| per content gap, and how many requests disagreed on the count."""
    errors: list[float] = []
    mismatched = 0
    for s, t in pairs:
        if s.content is None:
            continue
        server = t["content"]
        if len(server) != len(s.content):
            mismatched += 1
            continue
        errors.extend(abs((c1 - c0) - (s1 - s0))
                      for c0, c1, s0, s1 in zip(s.content, s.content[1:], server, server[1:], strict=False))
    return errors, mismatched


def analyse(m: Measured, truth: Truth) -> dict[str, str]:
    """The table cells of one run."""
    ok = [s for s in m.samples if s.ok]
    cut = sum(1 for s in m.samples if s.cut)
    pairs = matched(m.samples, truth)
    errs = ttft_errors(pairs)
    warm_errs = ttft_errors(matched(warm(m.samples, m.asked), truth))
    way_in = [t["received"] - s.send for s, t in pairs]
    delivery = [(s.first or 0.0) - t["content"][0] for s, t in pairs]
    gaps, mismatched = gap_errors(pairs)
    chunks = sum(t["chunks"] for _, t in pairs)
    span = (max(s.end for s in ok) - min(s.send for s in ok)) if ok else 0.0
    content = sum(len(s.content or ()) for s in ok)
    coalesced = sum(s.coalesced or 0 for s in ok)
    tokens = bool(m.samples) and m.samples[0].content is not None
    got = steady(m.samples, m.asked)
    c = m.cost
    return {
        "client": m.client, "loop": m.loop, "w": str(m.workers), "c": str(m.asked),
        "c got": "-" if got is None else f"{got:.1f}",
        "n (err, cut)": f"{len(m.samples) - cut} ({len(m.samples) - len(ok) - cut}, {cut})",
        "TTFT err p50": _ms(pct(errs, 0.5)), "p99": _ms(pct(errs, 0.99)),
        "warm p50": _ms(pct(warm_errs, 0.5)), "warm p99": _ms(pct(warm_errs, 0.99)),
        "way in p50": _ms(pct(way_in, 0.5)),
        "delivery p50": _ms(pct(delivery, 0.5)), "delivery p99": _ms(pct(delivery, 0.99)),
        "ITL err p99": _ms(pct(gaps, 0.99)) if tokens else "n/a",
        "coalesced": f"{100 * coalesced / content:.1f}%" if tokens and content else "n/a",
        "role chunk": ("ok" if mismatched == 0 else f"{mismatched} off") if tokens else "n/a",
        "chunks/s": f"{chunks / span:,.0f}" if span > 0 else "-",
        "µs CPU/chunk": f"{1e6 * c.cpu_s / chunks:.0f}" if chunks else "-",
        "client CPU": _share(c.cpu_s, c.wall_s), "sched delay µs": f"{1e6 * c.delay:.0f}",
        "server CPU": _share(c.server_cpu_s, c.wall_s), "srv sched delay µs": f"{1e6 * c.server_delay:.0f}",
        "load1": f"{m.load1:.2f}",
    }


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:+.2f}"


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "-"


def print_table(rows: Sequence[dict[str, str]]) -> None:
    """One Markdown table, ready for docs/performance.md."""
    headers = list(rows[0])
    widths = [max(len(h), *(len(r[h]) for r in rows)) for h in headers]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(r[h].ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")


# -- the run ------------------------------------------------------------------------------------


def environment(uv: bool, peer: Path | None, pinned: bool) -> list[str]:
    """The conditions the numbers were measured under."""
    load = os.getloadavg()
    return [
        f"date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {platform.machine()}, "
        f"{os.cpu_count()} cores, {platform.system()} {platform.release()}",
        f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"Python {platform.python_version()}; aiohttp {importlib.metadata.version('aiohttp')}; uvloop "
        + (importlib.metadata.version("uvloop") if uv else "not installed")
        + f"; peer: {peer if peer else 'none'}",
        f"fake server: TTFT {TTFT * 1e3:g} ms, ITL {ITL * 1e3:g} ms, max_tokens {MAX_TOKENS}; "
        + (f"server on core {SERVER_CORE}, clients on core {CLIENT_CORE}" if pinned
           else "NOT pinned (fewer than 2 cores)") + f"; nice {os.nice(0)}"
        + ("; SCHED_FIFO" if os.sched_getscheduler(0) == os.SCHED_FIFO else ""),
    ]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="3 s rows, fewer of them (under a minute; 2-3 minutes with the peer)")
    p.add_argument("--duration", type=float, default=None, help="seconds per row (default 6, quick 3)")
    p.add_argument("--peer-venv", type=Path, default=Path("/tmp/peer-venv"),
                   help="a venv with guidellm installed (its rows are skipped when it has none)")
    p.add_argument("--no-peer", action="store_true", help="skip the peer rows")
    p.add_argument("--nice", type=int, default=0,
                   help="run the bench, its server and its peer at this nice value (below 0: root only)")
    p.add_argument("--realtime", action="store_true",
                   help="run the engine and the server under SCHED_FIFO (root only; no peer rows), to see "
                        "the engine's accuracy when other work on a shared machine cannot delay it")
    return p.parse_args(argv)


def accuracy_rows(server: FakeServer, duration: float, loops: Sequence[Loop], quick: bool) -> list[Measured]:
    """The engine on the ladder, per event loop, and with two workers."""
    out = []
    for loop in loops:
        for c in LADDER:
            out.append(run_engine(server, concurrency=c, duration=duration, loop=loop, workers=1))
            _progress(f"engine {loop} c={c}")
    for c in (64,) if quick else (64, 256):
        out.append(run_engine(server, concurrency=c, duration=duration, loop="asyncio", workers=2))
        _progress(f"engine 2 workers c={c}")
    return out


def chunk_rate_rows(tmp: Path, duration: float, loops: Sequence[Loop]) -> tuple[list[Measured], Truth]:
    """Many short streams 1 ms apart: the most chunks a client gets through, 1 and 2 workers."""
    log = tmp / "fast.jsonl"
    server = FakeServer(ttft=0.0, itl=FAST_ITL, log=log).start()
    out = []
    try:
        for loop, workers in [*((lp, 1) for lp in loops), ("asyncio", 2)]:
            out.append(run_engine(server, concurrency=FAST_CONCURRENCY, duration=duration, loop=loop,
                                  workers=workers, label="engine, max rate"))
            _progress(f"max rate {loop} w={workers}")
    finally:
        server.stop()
    return out, read_truth(log)


def _progress(what: str) -> None:
    print(f"  {what} done (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run every row and print the table."""
    args = parse_args(argv)
    duration = args.duration or (3.0 if args.quick else 6.0)
    pinned = pin(0, CLIENT_CORE)  # inherited by worker processes and the peer; the server moves to its own
    if args.nice:
        os.nice(args.nice)
    if args.realtime:
        # Inherited by the server and worker processes; the kernel still keeps 5% for everyone else.
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        args.no_peer = True
    uv = importlib.util.find_spec("uvloop") is not None
    loops: tuple[Loop, ...] = ("asyncio", "uvloop") if uv else ("asyncio",)
    exe = args.peer_venv / "bin" / "guidellm"
    peer = exe if exe.exists() and not args.no_peer else None
    started = time.monotonic()
    lines = environment(uv, peer, pinned)
    note = "GuideLLM: skipped (--no-peer or --realtime)" if args.no_peer else f"GuideLLM: not found at {exe}"
    with tempfile.TemporaryDirectory(prefix="inferaccept-bench-") as name:
        tmp = Path(name)
        server = FakeServer(ttft=TTFT, itl=ITL, log=tmp / "timing.jsonl").start()
        try:
            measured = accuracy_rows(server, duration, loops, args.quick)
            if peer is not None:
                rows, note = run_guidellm(peer, server, ladder=(16, 64) if args.quick else LADDER,
                                          duration=duration, tmp=tmp)
                measured += rows
                _progress("GuideLLM")
        finally:
            server.stop()
        truth = read_truth(tmp / "timing.jsonl")
        fast, fast_truth = chunk_rate_rows(tmp, duration, loops)
    table = [analyse(m, truth) for m in measured] + [analyse(m, fast_truth) for m in fast]
    load = os.getloadavg()
    print("\n".join(lines) + "\n")
    print_table(table)
    print()
    if note:
        print(note)
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"the bench took {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
