"""Run a recipe's servers in the foreground and render them as shell commands."""

from __future__ import annotations

import shlex
import signal
import time
from types import FrameType

from pytest_inferaccept.launcher import LaunchError, ServerProcess

from ._cache import Log
from ._specs import HOST, PORT, ProcessSpec


def shell_command(spec: ProcessSpec) -> str:
    """A one-line shell command for ``spec``; ``{port}`` stays bare for later substitution."""

    def quote(arg: str) -> str:
        return PORT.join(shlex.quote(part) if part else "" for part in arg.split(PORT))

    env = [f"{key}={shlex.quote(value)}" for key, value in sorted(spec.env.items())]
    prefix = ["env", *env] if env else []
    return " ".join([*prefix, *(quote(arg) for arg in spec.argv)])


class _Stop(Exception):
    """Raised from the signal handler to leave the wait loop."""


def serve(specs: list[tuple[ProcessSpec, int]], log: Log) -> int:
    """Start every (spec, port), wait until ready, block until a signal or a child exits."""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    procs: list[ServerProcess] = []
    try:
        for spec, port in specs:
            argv = spec.argv_for(port)
            log(f"starting on {HOST}:{port}: {shlex.join(argv)}")
            # Own process group (ServerProcess): vLLM forks engine workers that must stop with it.
            proc = ServerProcess(argv, log_path=None, env=spec.env)
            procs.append(proc)
            waited = proc.wait_ready(f"http://{HOST}:{port}", timeout=spec.ready_timeout,
                                     paths=(spec.ready_path,))
            log(f"ready in {waited:.1f} s: http://{HOST}:{port}/v1 model {spec.served_model!r}")
        log("serving; Ctrl-C or SIGTERM stops all servers")
        while all(p.returncode is None for p in procs):
            time.sleep(0.5)
        dead = [p for p in procs if p.returncode is not None]
        log(f"pid {dead[0].pid} exited with {dead[0].returncode}; stopping the rest")
        return 1
    except _Stop as stop:
        log(f"received {stop}")
        return 0
    except LaunchError as exc:
        log(f"error: {exc}")
        return 1
    finally:
        for proc in reversed(procs):
            if proc.returncode is None:
                log(f"stopping pid {proc.pid}")
            proc.stop(grace=20.0)
        for sig, handler in old.items():
            signal.signal(sig, handler)
