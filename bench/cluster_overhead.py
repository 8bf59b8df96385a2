"""What does running the load workers as Ray actors cost, against local workers?

Starts the project's fake server with no wait for the first word and 1 ms between words
(`--ttft 0 --itl 0.001`, max_tokens 32: short, dense streams), then runs the same closed-loop
load with four clients:

- 1 local worker (the engine's event loop in this process),
- `--load-workers 2` (two local worker processes),
- 1 Ray actor and 2 Ray actors (`--load-cluster`, on a single-node Ray started here),

and prints requests/s and content chunks/s over the measured window, TTFT and end-to-end latency,
and the client's CPU per request: the workers' own (the engine's self-check: process CPU of the
measured phase) and that of every client process (this one, the worker processes, and Ray's
GCS, raylet and actor processes; /proc/PID/stat sampled twice a second). The last lines give
the overhead Ray adds per request: the difference in mean end-to-end latency and in CPU per
request between 1 actor and 1 local worker, and Ray's own CPU while idle.

On a machine with 2+ cores the server is pinned to core 0 and every client process (Ray's
included: they inherit this process's affinity) to core 1. Traffic goes to 127.0.0.1 only; the
server is stopped by its PID, Ray by `ray.shutdown()`.

Run:  python bench/cluster_overhead.py [--duration S] [--concurrency 8,64]   (needs `pip install ray`)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

SERVER_CORE, CLIENT_CORE = 0, 1


def pin(pid: int, core: int) -> bool:
    """Pin a process (0: this one) to one core on a machine with 2+ cores; True when pinned."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        return False
    os.sched_setaffinity(pid, {core})
    return True


def tree(pid: int) -> list[int]:
    """`pid` and its live descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in os.scandir(f"/proc/{p}/task"):
                with contextlib.suppress(OSError):
                    todo.extend(int(c) for c in Path(task.path, "children").read_text().split())
    return out


class CpuSampler(threading.Thread):
    """CPU seconds of a set of processes (those that ended since included, up to their last sample).

    Reads /proc/PID/stat (user + system time) twice a second: per process, not per thread, so the
    sampling itself costs well under 1% of the client core it shares with the clients.
    """

    def __init__(self, pids: Callable[[], list[int]], every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pids, self.every = pids, every
        self.seen: dict[int, float] = {}
        self.points: list[tuple[float, float]] = []
        """(perf_counter, total CPU seconds): the clock the load engine stamps its records with."""
        self.done = threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")

    def sample(self) -> float:
        """Read every live process's CPU time; return the total over every process seen so far."""
        for pid in self.pids():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                self.seen[pid] = (int(fields[11]) + int(fields[12])) / self.tick
        total = sum(self.seen.values())
        self.points.append((time.perf_counter(), total))
        return total

    def at(self, when: float) -> float:
        """Total CPU seconds at perf_counter time `when`, interpolated between samples."""
        before = max((p for p in self.points if p[0] <= when), default=self.points[0])
        after = min((p for p in self.points if p[0] >= when), default=self.points[-1])
        if after[0] <= before[0]:
            return before[1]
        return before[1] + (after[1] - before[1]) * (when - before[0]) / (after[0] - before[0])

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.sample()

    def stop(self) -> float:
        """Stop sampling and return the total."""
        self.done.set()
        self.join()
        return self.sample()


def start_server(port: int) -> subprocess.Popen[bytes]:
    """The fake server on `port`, pinned to the server core; waits until /health answers."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest_inferaccept.fake", "--port", str(port),
                             "--ttft", "0", "--itl", "0.001"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    pin(proc.pid, SERVER_CORE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), \
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as resp:
            if resp.status == 200:
                return proc
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the fake server did not start")


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(url: str, server_pid: int, *, concurrency: int, duration: float, workers: int,
            cluster: str | None) -> dict[str, Any]:
    """One closed-loop run; its throughput, latencies and the client's CPU per request."""
    from pytest_inferaccept.load import LoadSpec, run_load

    spec = LoadSpec(base_url=url, model="fake-chat", concurrency=concurrency, duration=duration,
                    warmup=concurrency, workers=workers, cluster=cluster, scrape_metrics=False)
    sampler = CpuSampler(lambda: [p for p in tree(os.getpid()) if p != server_pid])
    baseline = sampler.sample()
    sampler.start()
    began = time.perf_counter()
    run = run_load(spec)
    wall = time.perf_counter() - began
    client_cpu = sampler.stop() - baseline
    # The measured window on this machine's clock (every worker's t0 is a perf_counter reading).
    per_worker = run.selfcheck["per_worker"]
    w_start = min(w["t0"] + w["window"][0] for w in per_worker)
    w_end = max(w["t0"] + w["window"][1] for w in per_worker)
    window_cpu = sampler.at(w_end) - sampler.at(w_start)
    measured = [r for r in run.records if not r.warmup]
    ok = [r for r in measured if r.ok]
    lo, hi = run.window
    span = hi - lo
    loop_cpu = sum(w["cpu_seconds"] for w in run.selfcheck["per_worker"])
    workers_cpu = sum(w["process_cpu_seconds"] for w in run.selfcheck["per_worker"])
    e2e = [r.e2e for r in ok]
    return {
        "client": (f"{workers} Ray actor{'s' if workers > 1 else ''}" if cluster else
                   "1 local worker" if workers == 1 else f"--load-workers {workers}"),
        "c": concurrency, "n": len(measured), "errors": len(measured) - len(ok),
        "req/s": len(measured) / span, "content chunks/s": sum(r.content_events for r in measured) / span,
        "ttft p50 ms": 1000 * statistics.median(r.ttft for r in ok if r.ttft is not None),
        "e2e mean ms": 1000 * statistics.fmean(e2e), "e2e p50 ms": 1000 * statistics.median(e2e),
        "loop CPU µs/req": 1e6 * loop_cpu / len(measured),
        "worker CPU µs/req": 1e6 * workers_cpu / len(measured),
        "all client CPU µs/req": 1e6 * client_cpu / len(measured),
        "window client CPU µs/req": 1e6 * window_cpu / len(measured),
        "CPU s outside window": client_cpu - window_cpu,
        "worker busy max": max(w["cpu_utilisation"] or 0.0 for w in run.selfcheck["per_worker"]),
        "loop lag p99 ms": 1000 * max(w["loop_lag"]["p99"] or 0.0 for w in run.selfcheck["per_worker"]),
        "run wall s": wall, "measured s": span,
    }


COLUMNS = ("client", "c", "n", "errors", "req/s", "req/s range", "content chunks/s", "ttft p50 ms",
           "e2e mean ms", "e2e p50 ms", "loop CPU µs/req", "worker CPU µs/req", "window client CPU µs/req",
           "all client CPU µs/req", "worker busy max", "loop lag p99 ms", "run wall s")


def median_row(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over repeated runs of one row, and the range of requests/s."""
    out = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, (int, float)) and key != "c":
            out[key] = statistics.median(r[key] for r in runs)
    rates = [r["req/s"] for r in runs]
    out["req/s range"] = f"{min(rates):,.0f}–{max(rates):,.0f}" if len(runs) > 1 else "-"
    return out


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
    return str(value)


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    """A Markdown table of the rows."""
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "|".join("---" for _ in COLUMNS) + "|")
    for row in rows:
        print("| " + " | ".join(_cell(row[c]) for c in COLUMNS) + " |")


def idle_ray_cpu(seconds: float) -> float:
    """Share of a core Ray's own processes use with no actors (raylet, GCS, their agents)."""
    sampler = CpuSampler(lambda: tree(os.getpid())[1:])
    before = sampler.sample()
    time.sleep(seconds)
    return (sampler.sample() - before) / seconds


def main(argv: Sequence[str] | None = None) -> int:
    """Run every row and print the table and the overhead lines."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--duration", type=float, default=6.0, help="measured seconds per row (default 6)")
    p.add_argument("--concurrency", default="8,64", help="comma-separated levels (default 8,64)")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs per row, interleaved; the table shows each figure's median (default 1)")
    args = p.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    try:
        import ray
    except ImportError:
        print("this bench needs Ray: pip install 'pytest-inferaccept[ray]'", file=sys.stderr)
        return 2
    pinned = pin(0, CLIENT_CORE)  # before Ray starts: its processes inherit the client core
    port = free_port()
    server = start_server(port)
    url = f"http://127.0.0.1:{port}"
    rows: list[dict[str, Any]] = []
    try:
        started = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - started
        idle = idle_ray_cpu(3.0)
        configs = ((1, None), (2, None), (1, "auto"), (2, "auto"))
        runs: dict[tuple[int, int, str | None], list[dict[str, Any]]] = {}
        for c in levels:
            for i in range(args.repeat):  # interleaved, so a busy spell on the machine hits every row
                for workers, cluster in configs:
                    print(f"... c={c}, {workers} worker(s), {'Ray' if cluster else 'local'}, run {i + 1}",
                          file=sys.stderr)
                    runs.setdefault((c, workers, cluster), []).append(measure(
                        url, server.pid, concurrency=c, duration=args.duration, workers=workers,
                        cluster=cluster))
        rows = [median_row(r) for r in runs.values()]
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        server.terminate()
        server.wait(10)
    where = "pinned to core 0, clients to core 1" if pinned else "unpinned"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()}; Python "
          f"{platform.python_version()}, Ray {ray.__version__}; fake server (--ttft 0 --itl 0.001, "
          f"max_tokens 32) on the same machine, {where}; "
          f"closed loop, {args.duration:g} s per row, median of {args.repeat} run(s); load average at the "
          "end "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"Ray start (ray.init, single node): {ray_start:.1f} s; Ray idle: {idle:.1%} of a core\n")
    print_table(rows)
    print()
    for c in levels:
        local = next(r for r in rows if r["c"] == c and r["client"] == "1 local worker")
        actor = next(r for r in rows if r["c"] == c and r["client"] == "1 Ray actor")

        def more(key: str, local: dict[str, Any] = local, actor: dict[str, Any] = actor) -> float:
            return float(actor[key] - local[key])

        print(f"c={c}: Ray (1 actor vs 1 local worker) adds, per request, {more('e2e mean ms'):+.2f} ms mean "
              f"e2e, {more('loop CPU µs/req'):+.0f} µs event-loop CPU, {more('worker CPU µs/req'):+.0f} µs "
              f"worker-process CPU, {more('window client CPU µs/req'):+.0f} µs CPU of all client processes "
              f"in the measured window; per run, {more('run wall s'):+.1f} s of wall time and "
              f"{actor['CPU s outside window']:.1f} CPU s outside the window (1 local worker: "
              f"{local['CPU s outside window']:.1f}: actor start and imports, clock sync, warm-up, teardown)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
