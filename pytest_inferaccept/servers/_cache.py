"""Cache directory, cross-process lock, resumable steps and subprocess running."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

Log = Callable[[str], None]

CACHE_ENV = "INFERACCEPT_CACHE"


def default_cache_dir() -> Path:
    """Return the cache root: $INFERACCEPT_CACHE, else ~/.cache/pytest-inferaccept."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser().resolve()
    return Path.home() / ".cache" / "pytest-inferaccept"


class PrepareError(RuntimeError):
    """A preparation step failed; the message names the step and its log file."""


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Return the hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path: Path, *, size: int, sha256: str) -> None:
    """Raise PrepareError unless ``path`` has exactly the expected size and sha256."""
    if not path.is_file():
        raise PrepareError(f"{path} is missing")
    actual_size = path.stat().st_size
    if actual_size != size:
        raise PrepareError(f"{path}: size {actual_size} != expected {size}")
    actual = sha256_file(path)
    if actual != sha256:
        raise PrepareError(f"{path}: sha256 {actual} != expected {sha256}")


@contextlib.contextmanager
def cache_lock(cache_dir: Path, log: Log) -> Iterator[None]:
    """Hold an exclusive fcntl lock on the cache so concurrent prepares do not collide."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / ".lock").open("a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another prepare holding {cache_dir / '.lock'} ...")
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def remove_path(path: Path) -> None:
    """Delete a file, link or directory tree if it exists."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


@dataclass(frozen=True)
class Step:
    """One idempotent preparation step.

    ``key`` fingerprints the inputs: a marker written with another key means the step is
    redone.  ``outputs`` are removed before a (re)run so a half-done step never survives.
    ``check`` re-validates a completed step cheaply (e.g. a checksum) before it is trusted.
    """

    name: str
    key: str
    outputs: tuple[Path, ...]
    run: Callable[[], None]
    check: Callable[[], bool] | None = None


def marker_path(cache_dir: Path, name: str) -> Path:
    """Where the completion marker of step ``name`` lives."""
    return cache_dir / "steps" / f"{name}.done"


def step_is_done(cache_dir: Path, step: Step) -> bool:
    """True when the step's marker matches its key, its outputs exist and its check passes."""
    marker = marker_path(cache_dir, step.name)
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("key") != step.key:
        return False
    if not all(out.exists() for out in step.outputs):
        return False
    return step.check is None or step.check()


def run_step(cache_dir: Path, step: Step, log: Log) -> bool:
    """Run ``step`` unless already done; return True when it ran."""
    if step_is_done(cache_dir, step):
        log(f"[{step.name}] up to date")
        return False
    marker = marker_path(cache_dir, step.name)
    marker.unlink(missing_ok=True)
    for out in step.outputs:
        remove_path(out)
    log(f"[{step.name}] running ...")
    started = time.monotonic()
    step.run()
    missing = [str(out) for out in step.outputs if not out.exists()]
    if missing:
        raise PrepareError(f"[{step.name}] finished but did not produce {missing}")
    seconds = time.monotonic() - started
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": step.key, "seconds": round(seconds, 1), "at": time.time()}))
    os.replace(tmp, marker)
    log(f"[{step.name}] done in {seconds:.1f} s")
    return True


@dataclass
class Runner:
    """Run subprocesses with output captured to a per-step log and a heartbeat to ``log``."""

    log_dir: Path
    log: Log
    heartbeat: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)

    def __call__(
        self,
        argv: Sequence[str],
        *,
        step: str,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Run ``argv`` to completion; raise PrepareError with the log tail on failure."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_file = self.log_dir / f"{step}.log"
        full_env = {**os.environ, **self.env, **(env or {})}
        started = time.monotonic()
        with log_file.open("a") as out:
            out.write(f"\n$ {' '.join(argv)}\n")
            out.flush()
            proc = subprocess.Popen(list(argv), cwd=cwd, env=full_env, stdout=out, stderr=subprocess.STDOUT)
            next_beat = started + self.heartbeat
            while proc.poll() is None:
                time.sleep(0.5)
                now = time.monotonic()
                if now >= next_beat:
                    self.log(f"[{step}] still working ({now - started:.0f} s; log {log_file})")
                    next_beat = now + self.heartbeat
        if proc.returncode != 0:
            tail = log_file.read_text(errors="replace").splitlines()[-25:]
            raise PrepareError(
                f"[{step}] {argv[0]} exited {proc.returncode}; log {log_file}:\n" + "\n".join(tail)
            )
