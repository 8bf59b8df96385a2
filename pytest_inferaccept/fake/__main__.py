"""Command line: python -m pytest_inferaccept.fake --port 8000 [--fault NAME ...]."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from pytest_inferaccept.fake.config import METRICS_NAMES, OVERLOAD_STATUSES, REASONING_FIELDS, FakeConfig
from pytest_inferaccept.fake.faults import FAULTS, validate_faults


def main(argv: list[str] | None = None) -> int:
    """Serve the fake server in the foreground until SIGTERM or Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m pytest_inferaccept.fake",
                                     description="Fake OpenAI-compatible server for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default=None, help="the chat model (default fake-chat)")
    parser.add_argument("--served-models", default=None, metavar="A,B,C",
                        help="the chat models /v1/models lists and the fake answers; the first is the "
                             "model (default: --model alone)")
    parser.add_argument("--unservable-model", default=None, metavar="NAME",
                        help="a listed chat model whose requests get 404 model_not_found (a gateway "
                             "listing a model whose backend is missing)")
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
    capacity = parser.add_argument_group(
        "capacity knobs", "a server whose behaviour under load is known (all off by default)")
    capacity.add_argument("--batch-slowdown", type=float, default=0.0, metavar="F",
                          help="multiply each token's delay and --ttft by 1 + F * (running - 1), "
                               "running = generations in progress at that moment")
    capacity.add_argument("--latency-creep", type=float, default=0.0, metavar="S",
                          help="add S seconds of TTFT per minute of server uptime (soak drift)")
    capacity.add_argument("--memory-growth", type=int, default=0, metavar="BYTES",
                          help="a leak: process_resident_memory_bytes grows by BYTES per finished "
                               "completion request, for ever (from 200 MiB; 0: flat)")
    capacity.add_argument("--cache-fill", type=int, default=0, metavar="BYTES",
                          help="a bounded cache: process_resident_memory_bytes grows by BYTES in all, in "
                               "equal steps over the first --cache-fill-requests finished requests, then "
                               "levels off (not a leak)")
    capacity.add_argument("--cache-fill-requests", type=int, default=0, metavar="N",
                          help="finished completion requests that fill the --cache-fill cache")
    capacity.add_argument("--max-queue", type=int, default=None, metavar="N",
                          help="with --slots: a request arriving while running + waiting >= slots + N "
                               "is overloaded (answered with --overload-status)")
    capacity.add_argument("--overload-status", type=int, default=503, choices=OVERLOAD_STATUSES,
                          metavar="CODE",
                          help="answer to an overloaded request: 429 or 503 (with Retry-After: 1) or "
                               "500 (no Retry-After); default 503")
    capacity.add_argument("--overload-hang", action="store_true",
                          help="an overloaded request is never answered (the client gives up)")
    capacity.add_argument("--spike-unbounded-queue", action="store_true",
                          help="with --slots: never refuse a request for load (--max-queue ignored): a "
                               "spike's requests all queue")
    capacity.add_argument("--slow-recovery", type=float, default=0.0, metavar="SECONDS",
                          help="with --slots: for SECONDS once no request has waited for a slot for 0.5 s, "
                               "TTFT and token delays are 4 times longer (slow to recover from a spike)")
    capacity.add_argument("--cancel-keeps-generating", action="store_true",
                          help="a fault: after a client disconnects, its answer goes on generating unseen "
                               "up to max_tokens, holding its slot (the generated-tokens counter rises)")
    capacity.add_argument("--cancel-leaks-slot", action="store_true",
                          help="a fault: a request whose client disconnected keeps its slot for ever "
                               "(running +1 each; with --slots, capacity shrinks)")
    capacity.add_argument("--cancel-deadlock", action="store_true",
                          help="a fault: after the first disconnect mid-stream, every later completion "
                               "hangs while /health and /v1/models answer 200")
    capacity.add_argument("--kv-cache-tokens", type=int, default=0, metavar="N",
                          help="vllm:kv_cache_usage_perc = prompt + generated tokens of the generating "
                               "requests / N, capped at 1.0 (0: off, the gauge stays 0)")
    capacity.add_argument("--prefill-per-token", type=float, default=0.0, metavar="S",
                          help="add S seconds of TTFT per prompt token")
    capacity.add_argument("--prefix-cache", action="store_true",
                          help="a chat prompt whose first 200 characters were seen before skips 80%% "
                               "of its prefill time; exposes vllm:prefix_cache_{queries,hits}_total")
    parser.add_argument("--metrics-names", choices=METRICS_NAMES, default="new",
                        help="the names of the metrics vLLM renamed: new (vllm:kv_cache_usage_perc, ...; "
                             "vLLM 0.12 on), old (vllm:gpu_cache_usage_perc, ...; before 0.10) or both "
                             "(the deprecation window); default new")
    verdict = parser.add_argument_group(
        "verdict knobs", "a known share of requests slow, failed or thinking first (all off by default); "
                         "a share is spread evenly over chat and completions requests")
    verdict.add_argument("--slow-fraction", type=float, default=0.0, metavar="F",
                         help="this share of requests waits --slow-ttft more before its first token")
    verdict.add_argument("--slow-ttft", type=float, default=0.0, metavar="S",
                         help="seconds a slow request (--slow-fraction) adds to its first-token delay")
    verdict.add_argument("--error-fraction", type=float, default=0.0, metavar="F",
                         help="this share of requests is answered at once with --error-status")
    verdict.add_argument("--error-status", type=int, default=500, metavar="CODE",
                         help="the status of a failed request (--error-fraction), with an OpenAI error "
                              "envelope; default 500")
    verdict.add_argument("--reasoning-tokens", type=int, default=0, metavar="N",
                         help="chat answers first stream N reasoning tokens (delta.reasoning_content), "
                              "counted in usage.completion_tokens and within max_tokens")
    verdict.add_argument("--reasoning-field", default="reasoning_content", choices=REASONING_FIELDS,
                         help="the field reasoning text travels in: reasoning_content (default), "
                              "reasoning (vLLM's newer name) or both")
    wrong = parser.add_argument_group(
        "correctness knobs", "known answers (sums, products, \"repeat exactly\") that go wrong with the load")
    wrong.add_argument("--wrong-above-inflight", type=int, default=None, metavar="N",
                       help="known answers are wrong while more than N chat requests are in the server")
    wrong.add_argument("--stays-wrong-after-overload", type=int, default=None, metavar="N",
                       help="once more than N chat requests were in the server at once, every later known "
                            "answer is wrong, alone too")
    consistent = parser.add_argument_group(
        "consistency knobs", "streamed answers that contradict themselves with the load (off by default)")
    consistent.add_argument("--double-finish-under-load", type=int, default=None, metavar="N",
                            help="while more than N chat requests are in the server, streams send their "
                                 "finish_reason chunk twice")
    consistent.add_argument("--usage-miscount-under-load", type=int, default=None, metavar="N",
                            help="while more than N chat requests are in the server, streamed usage reports "
                                 "a quarter of the completion tokens streamed")
    args = parser.parse_args(argv)
    served = tuple(m.strip() for m in (args.served_models or "").split(",") if m.strip())
    if args.served_models is not None and not served:
        parser.error("--served-models needs at least one model name")
    if served and args.model is not None and args.model != served[0]:
        parser.error(f"--model {args.model} is not the first of --served-models ({served[0]})")
    model = served[0] if served else (args.model or "fake-chat")
    try:
        faults = validate_faults(args.fault)
        config = FakeConfig(model=model, served_models=served, unservable_model=args.unservable_model,
                            embedding_model=args.embedding_model, ttft=args.ttft,
                            itl=args.itl, slots=args.slots, api_key=args.api_key, faults=faults,
                            exit_after=args.exit_after, timing_log=args.timing_log,
                            batch_slowdown=args.batch_slowdown, latency_creep=args.latency_creep,
                            memory_growth=args.memory_growth, cache_fill=args.cache_fill,
                            cache_fill_requests=args.cache_fill_requests, max_queue=args.max_queue,
                            overload_status=args.overload_status, overload_hang=args.overload_hang,
                            spike_unbounded_queue=args.spike_unbounded_queue,
                            slow_recovery=args.slow_recovery,
                            cancel_keeps_generating=args.cancel_keeps_generating,
                            cancel_leaks_slot=args.cancel_leaks_slot, cancel_deadlock=args.cancel_deadlock,
                            kv_cache_tokens=args.kv_cache_tokens,
                            prefill_per_token=args.prefill_per_token, prefix_cache=args.prefix_cache,
                            slow_fraction=args.slow_fraction, slow_ttft=args.slow_ttft,
                            error_fraction=args.error_fraction, error_status=args.error_status,
                            reasoning_tokens=args.reasoning_tokens, metrics_names=args.metrics_names,
                            reasoning_field=args.reasoning_field,
                            double_finish_under_load=args.double_finish_under_load,
                            usage_miscount_under_load=args.usage_miscount_under_load,
                            wrong_above_inflight=args.wrong_above_inflight,
                            stays_wrong_after_overload=args.stays_wrong_after_overload)
    except ValueError as exc:
        parser.error(str(exc))
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
