"""CLI: ``python -m pytest_inferaccept.servers install|cmd|serve|info``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ._cache import PrepareError, default_cache_dir, marker_path, step_is_done
from ._recipes import Preparer, is_prepared, prepare
from ._serve import serve, shell_command
from ._specs import PRESETS, Layout, recipe


def _log(started: float, msg: str) -> None:
    print(f"[{time.monotonic() - started:7.1f} s] {msg}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_inferaccept.servers",
        description="Install and run real inference servers for pytest-inferaccept.",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="cache root (default: $INFERACCEPT_CACHE or ~/.cache/pytest-inferaccept)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="build/install a preset (idempotent)")
    install.add_argument("name", choices=(*PRESETS, "all"))
    cmd = sub.add_parser("cmd", help="print a shell command with a {port} placeholder")
    cmd.add_argument("name", choices=PRESETS)
    cmd.add_argument("--embeddings", action="store_true", help="the embedding server instead")
    run = sub.add_parser("serve", help="prepare, then run chat on PORT and embeddings on PORT+1")
    run.add_argument("name", choices=PRESETS)
    run.add_argument("--port", type=int, default=8000)
    run.add_argument("--no-embeddings", action="store_true", help="run the chat server only")
    sub.add_parser("info", help="show cache paths and what is prepared")
    return parser


def _info(cache_dir: Path | None) -> int:
    layout = Layout((cache_dir or default_cache_dir()).expanduser().resolve())
    print(f"cache: {layout.root}")
    prep = Preparer(layout, lambda _msg: None)
    for name in PRESETS:
        rec = recipe(name, layout)
        state = "prepared" if is_prepared(name, layout.root) else "not prepared"
        print(f"\n{name} ({rec.version}): {state}")
        for step in prep.steps(name):
            done = "done" if step_is_done(layout.root, step) else "todo"
            print(f"  {done:4}  {step.name:14} {marker_path(layout.root, step.name)}")
        print(f"  chat model:       {rec.chat.served_model}")
        if rec.embeddings is not None:
            print(f"  embeddings model: {rec.embeddings.served_model}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    args = _parser().parse_args(argv)
    cache_dir: Path | None = args.cache_dir
    started = time.monotonic()

    def log(msg: str) -> None:
        _log(started, msg)

    try:
        if args.command == "install":
            names = PRESETS if args.name == "all" else (args.name,)
            for name in names:
                begun = time.monotonic()
                rec = prepare(name, cache_dir=cache_dir, log=log)
                log(f"{name} ready ({rec.version}) in {time.monotonic() - begun:.1f} s")
            return 0
        if args.command == "cmd":
            layout = Layout((cache_dir or default_cache_dir()).expanduser().resolve())
            rec = recipe(args.name, layout)
            spec = rec.embeddings if args.embeddings else rec.chat
            if spec is None:
                print(f"{args.name} has no embedding server", file=sys.stderr)
                return 2
            if not is_prepared(args.name, layout.root):
                log(f"note: {args.name} is not prepared yet; run `install {args.name}` first")
            print(shell_command(spec))
            return 0
        if args.command == "serve":
            rec = prepare(args.name, cache_dir=cache_dir, log=log)
            specs = [(rec.chat, args.port)]
            if rec.embeddings is not None and not args.no_embeddings:
                specs.append((rec.embeddings, args.port + 1))
            return serve(specs, log)
        return _info(cache_dir)
    except PrepareError as exc:
        log(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
