"""Run a recipe's servers in the foreground and render them as shell commands."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from types import FrameType

from ._cache import Log, wait_ready
from ._specs import HOST, PORT, ProcessSpec


def shell_command(spec: ProcessSpec) -> str:
    """A one-line shell command for ``spec``; ``{port}`` stays bare for later substitution."""

    def quote(arg: str) -> str:
        return PORT.join(shlex.quote(part) if part else "" for part in arg.split(PORT))

    env = [f"{key}={shlex.quote(value)}" for key, value in sorted(spec.env.items())]
    prefix = ["env", *env] if env else []
    return " ".join([*prefix, *(quote(arg) for arg in spec.argv)])


def _stop(proc: subprocess.Popen[bytes], log: Log, grace: float = 20.0) -> None:
    """SIGTERM the child's process group, then SIGKILL it after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    log(f"stopping pid {proc.pid}")
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def _alive(proc: subprocess.Popen[bytes]) -> Callable[[], bool]:
    return lambda: proc.poll() is None


class _Stop(Exception):
    """Raised from the signal handler to leave the wait loop."""


def serve(specs: list[tuple[ProcessSpec, int]], log: Log) -> int:
    """Start every (spec, port), wait until ready, block until a signal or a child exits."""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for spec, port in specs:
            argv = spec.argv_for(port)
            log(f"starting on {HOST}:{port}: {shlex.join(argv)}")
            # Own session/process group: vLLM forks engine workers that must stop with it.
            proc = subprocess.Popen(argv, env={**os.environ, **spec.env}, start_new_session=True)
            procs.append(proc)
            url = f"http://{HOST}:{port}{spec.ready_path}"
            waited = wait_ready(url, spec.ready_timeout, _alive(proc))
            log(f"ready in {waited:.1f} s: http://{HOST}:{port}/v1 model {spec.served_model!r}")
        log("serving; Ctrl-C or SIGTERM stops all servers")
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        dead = [p for p in procs if p.poll() is not None]
        log(f"pid {dead[0].pid} exited with {dead[0].returncode}; stopping the rest")
        return 1
    except _Stop as stop:
        log(f"received {stop}")
        return 0
    except (RuntimeError, TimeoutError) as exc:
        log(f"error: {exc}")
        return 1
    finally:
        for proc in reversed(procs):
            _stop(proc, log)
        for sig, handler in old.items():
            signal.signal(sig, handler)
