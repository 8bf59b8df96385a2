"""Command line: python -m pytest_inferaccept.fake --port 8000 [--fault NAME ...]."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from pytest_inferaccept.fake.config import FakeConfig
from pytest_inferaccept.fake.faults import FAULTS, validate_faults


def main(argv: list[str] | None = None) -> int:
    """Serve the fake server in the foreground until SIGTERM or Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m pytest_inferaccept.fake",
                                     description="Fake OpenAI-compatible server for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default="fake-chat")
    parser.add_argument("--embedding-model", default="fake-embed")
    parser.add_argument("--ttft", type=float, default=0.0, help="seconds to the first token")
    parser.add_argument("--itl", type=float, default=0.0, help="seconds between tokens")
    parser.add_argument("--slots", type=int, default=None, help="concurrent generations")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--exit-after", type=int, default=None,
                        help="exit with status 3 after this many completion requests")
    parser.add_argument("--startup-delay", type=float, default=0.0,
                        help="seconds to wait before listening")
    parser.add_argument("--timing-log", default=None, metavar="PATH",
                        help="append the server's own timestamps of each streamed chat answer (JSONL)")
    parser.add_argument("--fault", action="append", default=[],
                        help="inject a fault: " + ", ".join(FAULTS))
    args = parser.parse_args(argv)
    try:
        faults = validate_faults(args.fault)
    except ValueError as exc:
        parser.error(str(exc))
    config = FakeConfig(model=args.model, embedding_model=args.embedding_model, ttft=args.ttft,
                        itl=args.itl, slots=args.slots, api_key=args.api_key, faults=faults,
                        exit_after=args.exit_after, timing_log=args.timing_log)
    asyncio.run(_serve(config, args.host, args.port, args.startup_delay))
    return 0


async def _serve(config: FakeConfig, host: str, port: int, delay: float) -> None:
    from aiohttp import web

    from pytest_inferaccept.fake.app import make_app

    if delay:
        await asyncio.sleep(delay)
    runner = web.AppRunner(make_app(config), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    print(f"fake server listening on http://{host}:{port} faults={sorted(config.faults)}",
          flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    sys.exit(main())
