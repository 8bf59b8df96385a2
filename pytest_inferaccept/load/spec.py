"""LoadSpec: everything one load run needs, checked when it is made, and split among workers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_inferaccept.load.client import ClientLimits
from pytest_inferaccept.load.records import RequestKind
from pytest_inferaccept.load.schedules import Mode, Plan
from pytest_inferaccept.load.workloads import TraceWorkload, Workload, default_workload

_SLACK = 5.0
"""Seconds added to the derived hard bound, so a run that ends on its own never reaches it."""


def _split(total: int, parts: int, i: int) -> int:
    return total // parts + (1 if i < total % parts else 0)


@dataclass(frozen=True, kw_only=True)
class LoadSpec:
    """Everything a load run needs; invalid values raise ValueError when the spec is made."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    kind: RequestKind = "chat"
    concurrency: int | None = None
    """Closed loop: requests in flight at all times."""
    rate: float | None = None
    """Open loop: requests per second (Poisson, or gamma with `burstiness`)."""
    replay: bool = False
    """Send a trace's entries at their recorded `arrival` offsets (instead of concurrency or rate)."""
    burstiness: float = 1.0
    """Gamma shape of the open-loop gaps: 1.0 is Poisson, below 1 burstier, above 1 smoother."""
    requests: int | None = None
    duration: float | None = None
    warmup: int = 2
    workload: Workload | None = None
    request_timeout: float = 60.0
    connect_timeout: float = 5.0
    stall_timeout: float | None = None
    """Seconds without a byte before a request is a stall; None: the request timeout."""
    max_response_bytes: int = 16 * 2**20
    workers: int = 1
    max_seconds: float | None = None
    seed: int = 0
    extra_body: Mapping[str, Any] | None = None
    """Merged into every request body (e.g. {"ignore_eos": true} for exact output lengths)."""
    loop: Literal["auto", "asyncio", "uvloop"] = "auto"
    scrape_metrics: bool = True
    metrics_timeout: float = 3.0
    cluster: str | None = None
    """Run the workers as Ray actors on this cluster (ray://HOST:PORT, HOST:PORT, auto, local)."""

    def __post_init__(self) -> None:
        problems = self._problems()
        if problems:
            raise ValueError("invalid load spec: " + "; ".join(problems))

    def _problems(self) -> list[str]:
        out: list[str] = []
        if not isinstance(self.base_url, str) or not self.base_url.startswith(("http://", "https://")):
            out.append(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not isinstance(self.model, str) or not self.model:
            out.append("model must be a non-empty string")
        if self.kind not in ("chat", "completions", "embeddings"):
            out.append(f"kind must be chat, completions or embeddings, got {self.kind!r}")
        chosen = [n for n, v in (("concurrency", self.concurrency), ("rate", self.rate),
                                 ("replay", self.replay or None)) if v is not None]
        if len(chosen) != 1:
            out.append("give exactly one of concurrency (closed loop), rate (open loop) or replay=True"
                       + (f"; got {', '.join(chosen)}" if chosen else ""))
        if self.concurrency is not None and not _pos_int(self.concurrency):
            out.append(f"concurrency must be an integer >= 1, got {self.concurrency!r}")
        if self.rate is not None and not _pos_num(self.rate):
            out.append(f"rate must be a number > 0 (requests/s), got {self.rate!r}")
        if not _pos_num(self.burstiness):
            out.append(f"burstiness must be a number > 0 (1.0 = Poisson), got {self.burstiness!r}")
        if self.requests is not None and not _pos_int(self.requests):
            out.append(f"requests must be an integer >= 1, got {self.requests!r}")
        if self.duration is not None and not _pos_num(self.duration):
            out.append(f"duration must be a number of seconds > 0, got {self.duration!r}")
        if self.requests is None and self.duration is None and not self.replay:
            out.append("give requests, duration or both: every run needs a bound")
        if not isinstance(self.warmup, int) or isinstance(self.warmup, bool) or self.warmup < 0:
            out.append(f"warmup must be an integer >= 0, got {self.warmup!r}")
        for name in ("request_timeout", "connect_timeout", "stall_timeout", "metrics_timeout"):
            unset = name == "stall_timeout" and self.stall_timeout is None  # None: the request timeout
            if not unset and not _pos_num(getattr(self, name)):
                out.append(f"{name} must be a number of seconds > 0, got {getattr(self, name)!r}")
        if not _pos_int(self.max_response_bytes):
            out.append(f"max_response_bytes must be an integer >= 1, got {self.max_response_bytes!r}")
        if not _pos_int(self.workers):
            out.append(f"workers must be an integer >= 1, got {self.workers!r}")
        elif _pos_int(self.concurrency) and self.workers > (self.concurrency or 0):
            out.append(f"workers ({self.workers}) cannot exceed concurrency ({self.concurrency})")
        if self.max_seconds is not None and not _pos_num(self.max_seconds):
            out.append(f"max_seconds must be a number of seconds > 0, got {self.max_seconds!r}")
        if self.workload is not None and not isinstance(self.workload, Workload):
            out.append(f"workload must have item() and describe(), got {type(self.workload).__name__}")
        if self.replay and not (isinstance(self.workload, TraceWorkload) and self.workload.has_arrivals):
            out.append("replay needs a trace workload whose every entry has an arrival offset")
        if self.loop not in ("auto", "asyncio", "uvloop"):
            out.append(f"loop must be auto, asyncio or uvloop, got {self.loop!r}")
        elif self.loop == "uvloop" and not _has_uvloop():
            out.append("loop='uvloop' but uvloop is not installed")
        if not isinstance(self.seed, int):
            out.append(f"seed must be an integer, got {self.seed!r}")
        if self.cluster is not None and (not isinstance(self.cluster, str) or not self.cluster.strip()):
            out.append(f"cluster must be a Ray address, 'auto' or 'local', got {self.cluster!r}")
        return out

    @property
    def mode(self) -> Mode:
        """closed, open or replay."""
        return "closed" if self.concurrency is not None else ("open" if self.rate is not None else "replay")

    @property
    def effective_workload(self) -> Workload:
        """The workload, or the default synthetic chat workload."""
        return self.workload if self.workload is not None else default_workload()

    def _replay_positions(self) -> list[int]:
        trace = self.workload
        assert isinstance(trace, TraceWorkload)
        order = sorted(range(len(trace.entries)), key=lambda i: (trace.entries[i].arrival or 0.0, i))
        return order[: self.requests] if self.requests is not None else order

    def hard_seconds(self) -> float:
        """The hard bound: max_seconds, or a bound derived from the schedule and the request timeout."""
        if self.max_seconds is not None:
            return self.max_seconds
        per_worker_c = max(1, (self.concurrency or 1) // self.workers)
        warm = math.ceil(math.ceil(self.warmup / self.workers) / per_worker_c) * self.request_timeout
        bounds: list[float] = []
        if self.duration is not None:
            bounds.append(self.duration + self.request_timeout)
        if self.mode == "replay":
            trace = self.workload
            assert isinstance(trace, TraceWorkload)
            last = max((trace.entries[i].arrival or 0.0) for i in self._replay_positions())
            bounds.append(last + self.request_timeout)
        elif self.requests is not None:
            if self.mode == "closed":
                bounds.append(math.ceil(self.requests / (self.concurrency or 1)) * self.request_timeout)
            else:
                # Poisson: allow four times the expected span, plus the last request's timeout.
                bounds.append(4 * self.requests / (self.rate or 1.0) + 10 + self.request_timeout)
        return warm + min(bounds) + _SLACK

    def plans(self) -> list[Plan]:
        """Each worker's share: concurrency, rate, requests and warm-up divided among workers."""
        n = self.workers
        hard = self.hard_seconds()
        limits = ClientLimits(request_timeout=self.request_timeout, connect_timeout=self.connect_timeout,
                              stall_timeout=self.stall_timeout, max_response_bytes=self.max_response_bytes)
        positions = self._replay_positions() if self.mode == "replay" else None
        out = []
        for w in range(n):
            out.append(Plan(
                worker=w, workers=n, base_url=self.base_url, model=self.model, api_key=self.api_key,
                kind=self.kind, mode=self.mode,
                concurrency=_split(self.concurrency, n, w) if self.concurrency else 1,
                rate=(self.rate or 0.0) / n, burstiness=self.burstiness,
                requests=(_split(self.requests, n, w) if self.requests is not None and positions is None
                          else None),
                duration=self.duration, warmup=_split(self.warmup, n, w), warmup_offset=self.warmup,
                max_seconds=hard, workload=self.effective_workload,
                positions=tuple(positions[w::n]) if positions is not None else None,
                limits=limits, extra_body=self.extra_body, seed=self.seed, loop=self.loop))
        return out

    def describe(self) -> dict[str, Any]:
        """JSON-ready description (the API key is never included, only whether one was set)."""
        return {
            "base_url": self.base_url, "model": self.model, "api_key_set": bool(self.api_key),
            "kind": self.kind, "mode": self.mode, "concurrency": self.concurrency, "rate": self.rate,
            "burstiness": self.burstiness, "requests": self.requests, "duration": self.duration,
            "warmup": self.warmup, "workload": self.effective_workload.describe(),
            "request_timeout": self.request_timeout, "connect_timeout": self.connect_timeout,
            "stall_timeout": self.stall_timeout, "max_response_bytes": self.max_response_bytes,
            "workers": self.workers, "max_seconds": self.hard_seconds(), "seed": self.seed,
            "extra_body": dict(self.extra_body) if self.extra_body else None, "loop": self.loop,
            "cluster": self.cluster,
        }


def _pos_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _pos_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _has_uvloop() -> bool:
    import importlib.util

    return importlib.util.find_spec("uvloop") is not None
