"""Telemetry while load runs: the server's /metrics gauges, its process memory, GPUs, once a second.

A background thread samples until stopped. Each source that is absent is named in `absent`
(no /metrics, no memory gauge, no nvidia-smi), never filled in. Gauges are read by role, so one
report speaks of "waiting requests" whichever framework's name carries it.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROLES: dict[str, tuple[str, ...]] = {
    "running": (
        "vllm:num_requests_running",
        "sglang:num_running_reqs",
        "tgi_batch_current_size",
        "llamacpp:requests_processing",
    ),
    "waiting": (
        "vllm:num_requests_waiting",
        "sglang:num_queue_reqs",
        "tgi_queue_size",
        "llamacpp:requests_deferred",
    ),
    "kv_cache": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    ),
    "memory_bytes": ("process_resident_memory_bytes",),
}
"""What each role is called by each framework; the first name present wins."""

GPU_QUERY = (
    "nvidia-smi",
    "--query-gpu=index,utilization.gpu,memory.used,memory.total",
    "--format=csv,noheader,nounits",
)


@dataclass
class Series:
    """One sampled series: (seconds since the sampler started, value)."""

    name: str
    source: str
    points: list[tuple[float, float]] = field(default_factory=list)

    def peak(self, since: float = 0.0, until: float = float("inf")) -> float | None:
        """The largest value sampled in [since, until]."""
        values = [v for t, v in self.points if since <= t <= until]
        return max(values) if values else None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping (times and values rounded for the results file)."""
        return {
            "name": self.name,
            "source": self.source,
            "points": [[round(t, 3), round(v, 6)] for t, v in self.points],
        }


def rss_of(pid: int) -> float | None:
    """Resident memory of a local process and its children in bytes (Linux /proc), None if unreadable."""
    total = 0.0
    found = False
    for p in [pid, *_children(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += float(line.split()[1]) * 1024
                    found = True
        except OSError:
            continue
    return total if found else None


UNLIMITED = 2**60
"""A cgroup limit at or above this means none (cgroup v1 writes 2^63 rounded to a page)."""


def cgroup_memory_limit(pid: int) -> float | None:
    """The tightest memory limit of the process's cgroups (v2 memory.max, v1 limit_in_bytes), or None.

    A limit applies to everything below its cgroup, so every ancestor up to the root counts.
    """
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    found: list[float] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            base, name = Path("/sys/fs/cgroup"), "memory.max"
        elif "memory" in parts[1].split(","):
            base, name = Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"
        else:
            continue
        here = Path(parts[2].strip() or "/")
        for folder in [here, *here.parents]:
            try:
                raw = (base / str(folder).lstrip("/") / name).read_text().strip()
            except OSError:
                continue
            if raw.isdigit() and int(raw) < UNLIMITED:
                found.append(float(raw))
    return min(found) if found else None


def host_memory() -> dict[str, float]:
    """MemTotal and MemAvailable of this host from /proc/meminfo, in bytes (empty when unreadable)."""
    out: dict[str, float] = {}
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable") and rest.split():
            out[key] = float(rest.split()[0]) * 1024
    return out


def memory_capacity(pid: int) -> tuple[float, str] | None:
    """The memory a launched process may use, and where that figure came from: its cgroup, else the host.

    Only for a process on this host (the plugin launched it): for a server elsewhere, this
    machine's memory says nothing.
    """
    limit = cgroup_memory_limit(pid)
    if limit is not None:
        return limit, "cgroup memory limit"
    total = host_memory().get("MemTotal")
    return (total, "host RAM: MemTotal") if total else None


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    kids = [int(x) for x in text.split()]
    return kids + [g for k in kids for g in _children(k)]


class Sampler:
    """Samples telemetry every `interval` seconds in a thread: `with Sampler(...) as s: ...`."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None = None,
        interval: float = 1.0,
        pid: int | None = None,
        gpu_command: str | None = None,
        scrape: Callable[[str], dict[str, Any] | None] | None = None,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.interval = interval
        self.pid = pid
        self.gpu_command = (
            gpu_command
            if gpu_command is not None
            else (" ".join(GPU_QUERY) if shutil.which("nvidia-smi") else None)
        )
        self._scrape = scrape or self._scrape_metrics
        self.series: dict[str, Series] = {}
        self.samples = 0
        self.metrics_seen = False
        self.gpu_seen = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.t0 = time.monotonic()

    def _scrape_metrics(self, base_url: str) -> dict[str, Any] | None:
        from pytest_inferaccept.load.telemetry import scrape_blocking

        return scrape_blocking(base_url, timeout=min(3.0, max(self.interval, 0.5)), api_key=self.api_key)

    def now(self) -> float:
        """Seconds since the sampler started (the time axis of every series)."""
        return time.monotonic() - self.t0

    def __enter__(self) -> Sampler:
        self.t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="inferaccept-telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def _add(self, name: str, source: str, t: float, value: float) -> None:
        self.series.setdefault(name, Series(name=name, source=source)).points.append((t, value))

    def sample_once(self) -> None:
        """Take one sample of every source now."""
        t = self.now()
        self.samples += 1
        snap = self._scrape(self.base_url)
        if snap is not None:
            self.metrics_seen = True
            gauges = snap.get("gauges", {})
            for role, names in ROLES.items():
                for name in names:
                    if name in gauges and gauges[name] is not None:
                        self._add(role, f"/metrics {name}", t, float(gauges[name]))
                        break
        if self.pid is not None:
            rss = rss_of(self.pid)
            if rss is not None:
                self._add("launched_rss_bytes", f"/proc/{self.pid} VmRSS (with children)", t, rss)
        if self.gpu_command:
            self._sample_gpu(t)

    def _sample_gpu(self, t: float) -> None:
        command = self.gpu_command or ""
        try:
            out = subprocess.run(  # the team's own --gpu-telemetry command, or nvidia-smi
                command.split(), capture_output=True, text=True, timeout=5, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            return
        for line in out.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 4:
                continue
            try:
                index, util, used, total = parts[0], float(parts[1]), float(parts[2]), float(parts[3])
            except ValueError:
                continue
            self.gpu_seen = True
            source = f"gpu {index} ({command.split()[0]})"
            self._add(f"gpu{index}_utilisation", source, t, util / 100)
            self._add(f"gpu{index}_memory_bytes", source, t, used * 2**20)
            self._add(f"gpu{index}_memory_total_bytes", source, t, total * 2**20)

    def absent(self) -> list[str]:
        """Sources that gave nothing, each in words (never an invented value)."""
        out = []
        if not self.metrics_seen:
            out.append("/metrics: not served or not Prometheus text; no server gauges")
        else:
            out += [
                f"/metrics has no {role} gauge (looked for {', '.join(names)})"
                for role, names in ROLES.items()
                if role not in self.series
            ]
        if self.gpu_command is None:
            out.append("GPU: nvidia-smi is not on PATH and no --gpu-telemetry command was given")
        elif not self.gpu_seen:
            out.append(f"GPU: {self.gpu_command.split()[0]} gave no readable line")
        if self.pid is None:
            out.append("launched process memory: the server was not started by the plugin "
                       "(or its pid is unknown)")
        return out

    def peaks(self, since: float = 0.0, until: float = float("inf")) -> dict[str, float]:
        """The peak of each series within a stretch of time."""
        out = {}
        for name, s in self.series.items():
            peak = s.peak(since, until)
            if peak is not None:
                out[name] = peak
        return out

    def to_json(self) -> dict[str, Any]:
        """Every series, the sampling interval and what was absent."""
        return {
            "interval_s": self.interval,
            "samples": self.samples,
            "series": [s.to_json() for s in self.series.values()],
            "absent": self.absent(),
        }
