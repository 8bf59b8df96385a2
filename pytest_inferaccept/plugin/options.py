"""Command-line options and their ini twins, in one group."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_inferaccept.capabilities import CAPABILITIES, DEFAULT_REQUIRED
from pytest_inferaccept.settings import (
    API_KEY_ENV,
    PRESETS,
    Settings,
    SettingsError,
    resolve,
    split_condition_list,
)


@dataclass(frozen=True)
class _Option:
    key: str
    flag: str
    metavar: str
    help: str


OPTIONS: tuple[_Option, ...] = (
    _Option("server_url", "--server-url", "URL",
            "base URL of the OpenAI-compatible server under test (with or without /v1)"),
    _Option("server_cmd", "--server-cmd", "CMD",
            "launch this shell command as the server under test; '{port}' in it is replaced "
            "by a free loopback port"),
    _Option("server_preset", "--server-preset", "NAME",
            f"install (first time) and launch a local server: {', '.join(PRESETS)}"),
    _Option("ready_timeout", "--server-ready-timeout", "SECONDS",
            "how long a launched server may take to become ready (default 180)"),
    _Option("server_log", "--server-log", "PATH",
            "where a launched server's stdout/stderr go (default: a file in the temp dir)"),
    _Option("model", "--model", "NAME", "chat model to test (default: first of /v1/models)"),
    _Option("embedding_model", "--embedding-model", "NAME",
            "embedding model (default: first model of the embedding endpoint)"),
    _Option("embedding_url", "--embedding-url", "URL",
            "base URL serving /v1/embeddings when not the server URL"),
    _Option("api_key", "--api-key", "KEY",
            f"API key sent as a bearer token (or ${API_KEY_ENV}); never printed"),
    _Option("capabilities", "--capabilities", "LIST",
            "comma-separated capabilities the team requires (default: "
            f"{','.join(DEFAULT_REQUIRED)}); allowed: {', '.join(CAPABILITIES)}"),
    _Option("request_timeout", "--request-timeout", "SECONDS",
            "the longest one request may take, from sending to the end of the answer or "
            "stream (default 60)"),
    _Option("max_response_mb", "--max-response-mb", "MB",
            "the largest answer (or streamed data) read from one request, in MB (default 16)"),
    _Option("connect_timeout", "--connect-timeout", "SECONDS",
            "connect timeout for one request (default 5)"),
    _Option("stall_timeout", "--stall-timeout", "SECONDS",
            "the longest a load request's stream may go without a byte once its headers are in before "
            "it counts as stalled (default: the request timeout)"),
    _Option("json_path", "--inferaccept-json", "PATH", "write machine-readable results here"),
    _Option("status_policy", "--status-policy", "NAME",
            "how answers to bad input are judged: strict, standard (default), lenient"),
    _Option("fuzz_examples", "--fuzz-examples", "N", "most generated requests in the fuzz test (50)"),
    _Option("fuzz_budget", "--fuzz-budget", "SECONDS", "seconds of fuzz exploration at most (40)"),
    _Option("fuzz_seed", "--fuzz-seed", "N",
            "seed of the fuzz generator, to replay a finding (default: random, 0 under CI)"),
    _Option("robustness_budget", "--robustness-budget", "SECONDS",
            "seconds the robustness catalogue may take (900); later cases are not judged"),
    _Option("liveness_timeout", "--liveness-timeout", "SECONDS",
            "timeout of the 1-token completion after each bad request (30)"),
    _Option("long_prompt_words", "--long-prompt-words", "N",
            "words in the over-long prompt; must exceed the context window (200000)"),
    _Option("html_path", "--inferaccept-html", "PATH",
            "write the go/no-go report here: one self-contained HTML page"),
    _Option("load_concurrency", "--load-concurrency", "N",
            "requests in flight in the bundled load test (default 4)"),
    _Option("load_requests", "--load-requests", "N",
            "measured requests in the bundled load test (default 100; it also stops at --load-duration)"),
    _Option("load_duration", "--load-duration", "SECONDS",
            "longest the bundled load test may measure (default 120)"),
    _Option("load_workers", "--load-workers", "N",
            "client processes a load run is spread over (default 1); with --load-cluster, Ray actors"),
    _Option("load_cluster", "--load-cluster", "ADDRESS",
            "run the load workers as Ray actors: ray://HOST:10001, HOST:PORT, auto ($RAY_ADDRESS or "
            "a running local cluster) or local (an in-process Ray); needs pytest-inferaccept[ray]"),
    _Option("slo_profile", "--slo-profile", "FILE|NAME",
            "the team's SLO for load tests without their own slo marker: a JSON (or TOML) file, or "
            "a known profile such as mlperf-llama3.1-8b-server (MLPerf's LLM latency limits; a "
            "wrong name lists them)"),
    _Option("slo_judge", "--slo-judge", "HOW",
            "interval (default: an SLO passes only when the confidence interval is within it) or "
            "point (judge on the point estimate; the results say so)"),
    _Option("client_check", "--client-check", "HOW",
            "strict (default: a load run the client limited is INVALID) or warn (judge it anyway, "
            "with a warning; for a client you know is busy)"),
    _Option("records_path", "--inferaccept-records", "PATH",
            "write every load request's record here, one JSON object a line"),
    _Option("baseline_path", "--inferaccept-baseline", "PATH",
            "compare this run with a previous results file (the upgrade gate): a regression is NO-GO"),
    _Option("answers_file", "--answers-file", "PATH",
            "more fixed prompts for the answer-consistency check, JSONL: {\"id\", \"prompt\"} a line"),
    _Option("answer_drift", "--answer-drift", "HOW",
            "what an answer that drifted from the baseline's means: warn (default) or fail"),
    _Option("answer_drift_threshold", "--answer-drift-threshold", "RATIO",
            "the least similarity (0-1) a changed answer may have to the baseline's (default 0.9)"),
    _Option("correctness_set", "--correctness-set", "FILE",
            "the known-answer set of the correctness suite: a team's JSONL file (default: the bundled "
            "200 items; docs/correctness.md)"),
    _Option("correctness_min", "--correctness-min", "FRACTION",
            "the least accuracy on the known-answer set the team accepts, 0-1 (e.g. 0.8), judged on its "
            "interval (default: reported, not judged)"),
    _Option("correctness_tolerance", "--correctness-tolerance", "POINTS",
            "how many accuracy points the known-answer set may lose against the baseline (default 5)"),
    _Option("correctness_drift_tolerance", "--correctness-drift-tolerance", "NATS",
            "the logprob drift the known-answer set may show against the baseline beyond the server's own "
            "(mean |delta logprob|, default 0.02), or off"),
    _Option("correctness_under_load", "--correctness-under-load", "N",
            "known-answer items graded inside the bundled load test, every ladder level, the soak and the "
            "push: answered alone, under load and after it (default 12; 0: off)"),
    _Option("correctness_real_changes", "--correctness-real-changes", "PERCENT",
            "the share of a level's items whose answer under load may change at a non-tie (a real change, "
            "told apart by logprobs) before the level is a NO-GO (default 10)"),
    _Option("reasoning_field", "--reasoning-field", "NAME",
            "the field your client reads reasoning text from: reasoning, reasoning_content or any "
            "(default any); a server that sends it only under the other name is a finding"),
)
CAPACITY_OPTIONS: tuple[_Option, ...] = (
    _Option("ladder", "--ladder", "LIST",
            "concurrency levels of the capacity ladder (default 1,2,4,8,16,32)"),
    _Option("step_requests", "--capacity-step-requests", "N",
            "measured requests per ladder level or sweep step (default 80)"),
    _Option("step_duration", "--capacity-step-duration", "SECONDS",
            "the most one ladder level, sweep step or push step may take (default 30)"),
    _Option("settle", "--ladder-settle", "N",
            "warm-up rounds per ladder level, excluded from its figures (default 1)"),
    _Option("capacity_min", "--capacity-min", "N",
            "the least concurrency that must meet the SLOs for a GO (default: any level is a result)"),
    _Option("breaker_error_rate", "--breaker-error-rate", "FRACTION",
            "stop climbing once this share of a step's requests fail (default 0.10)"),
    _Option("breaker_latency", "--breaker-latency", "SECONDS",
            "stop climbing once a step's latency p95 exceeds this (default 30)"),
    _Option("sweep_rates", "--sweep-rates", "LIST",
            "request rates (req/s) of the open-loop sweep (default: around the ladder's knee, "
            "else 1,2,4,8)"),
    _Option("soak_duration", "--soak-duration", "SECONDS",
            "run the soak for this long (default 0: no soak)"),
    _Option("soak_fraction", "--soak-fraction", "FRACTION",
            "soak concurrency as a share of the ladder's knee (default 0.75)"),
    _Option("soak_concurrency", "--soak-concurrency", "N",
            "soak at this concurrency instead of a share of the knee"),
    _Option("soak_horizon", "--soak-horizon", "DURATION|COUNT",
            "how far the soak projects its drifts: a duration of traffic at the soak's rate (24h, 90m, "
            "3600s, 2d) or a request count (2000000req); default 24h"),
    _Option("memory_limit", "--memory-limit", "SIZE",
            "the memory the server has (24GiB, 512MiB, 16GB); the soak fails when growth would reach "
            "0.9 of it within the horizon (default: a launched server's cgroup limit or host RAM)"),
    _Option("drift_tolerance", "--drift-tolerance", "FRACTION",
            "without an SLO on it, a latency's projected growth within the soak horizon beyond this "
            "share of its start is a finding (default 1.0: it would double)"),
    _Option("memory_tolerance", "--memory-tolerance", "FRACTION",
            "without a known memory budget, projected growth within the soak horizon beyond this share "
            "of the memory at the start is a finding (default 1.0: it would double)"),
    _Option("push_max", "--push-max", "N",
            "the highest concurrency the push to failure tries (default 256)"),
    _Option("context_window", "--context-window", "TOKENS",
            "the model's context window, for the prompt-length push (default: what /v1/models says)"),
    _Option("gpu_telemetry", "--gpu-telemetry", "CMD",
            "command printing 'index, utilisation percent, memory used MiB, memory total MiB' per GPU "
            "(default: nvidia-smi when on PATH)"),
    _Option("rollback_cmd", "--rollback-cmd", "CMD",
            "the baseline's command for the rollback drill (a launched server is stopped and this "
            "started on its port; '{port}' is replaced), then the server under test is started again"),
    _Option("rollback_within", "--rollback-within", "SECONDS",
            "how long the rollback drill's way back to service (ready, warmed, smoke checks) may take "
            "(default 600)"),
)
ALL_MODELS_HELP = ("run the core conformance checks once for each chat model GET /v1/models lists (a "
                   "gateway may list models it cannot serve); the capability matrix gets a column per model")
CAPACITY_HELP = ("run the bundled capacity scenarios (ladder, sweep, push, soak with --soak-duration); "
                 "they take minutes")
SLO_HELP = ("an SLO limit for load tests without their own slo marker, KEY=VALUE (repeatable: "
            "--slo ttft_p95=0.5 --slo error_rate=0.01); keys as in the slo marker")
CONDITION_HELP = ("a condition of this run to record with every result, KEY=VALUE (repeatable: "
                  "--condition gpu=H100x2 --condition tp=2); the ini twin takes lines or a comma list")


TOLERANCE_HELP = ("how far a figure may move before the baseline comparison calls it a regression, "
                  "KEY=FRACTION (repeatable: --regression-tolerance ttft_p95=0.2); defaults 0.1 on "
                  "latencies and throughput")


def add_options(parser: pytest.Parser) -> None:
    """Register every option with an ini twin named inferaccept_<key>."""
    group = parser.getgroup("inferaccept", "inference server acceptance (pytest-inferaccept)")
    for opt in OPTIONS + CAPACITY_OPTIONS:
        group.addoption(opt.flag, dest=f"inferaccept_{opt.key}", metavar=opt.metavar,
                        default=None, help=opt.help)
        parser.addini(f"inferaccept_{opt.key}", f"{opt.help} (ini twin of {opt.flag})",
                      type="string", default=None)
    group.addoption("--capacity", dest="inferaccept_capacity", action="store_true", default=None,
                    help=CAPACITY_HELP)
    parser.addini("inferaccept_capacity", f"{CAPACITY_HELP} (ini twin of --capacity)", type="bool",
                  default=False)
    group.addoption("--all-models", dest="inferaccept_all_models", action="store_true", default=None,
                    help=ALL_MODELS_HELP)
    parser.addini("inferaccept_all_models", f"{ALL_MODELS_HELP} (ini twin of --all-models)", type="bool",
                  default=False)
    # Repeatable, so it cannot share the loop's single-string shape.
    group.addoption("--condition", dest="inferaccept_condition", metavar="KEY=VALUE",
                    action="append", default=None, help=CONDITION_HELP)
    parser.addini("inferaccept_condition", f"{CONDITION_HELP} (ini twin of --condition)",
                  type="linelist", default=[])
    group.addoption("--slo", dest="inferaccept_slo", metavar="KEY=VALUE", action="append",
                    default=None, help=SLO_HELP)
    parser.addini("inferaccept_slo", f"{SLO_HELP} (ini twin of --slo)", type="linelist", default=[])
    group.addoption("--regression-tolerance", dest="inferaccept_regression_tolerance",
                    metavar="KEY=FRACTION",
                    action="append", default=None, help=TOLERANCE_HELP)
    parser.addini("inferaccept_regression_tolerance",
                  f"{TOLERANCE_HELP} (ini twin of --regression-tolerance)", type="linelist", default=[])


ASYNCIO_LOOP_SCOPE = "asyncio_default_fixture_loop_scope"


def default_asyncio_loop_scope(config: pytest.Config, parser: pytest.Parser) -> None:
    """Give pytest-asyncio's fixture loop scope a default, "function", so it stops warning it is unset.

    pytest-asyncio warns at the top of every run whose configuration leaves the option unset;
    the plugin brings pytest-asyncio, so that warning would greet every team that never chose.
    Registering the option again with a default changes only the value of an unset option: an
    ini file's value or `-o` still wins. Called once every plugin has registered its options.
    """
    if not config.pluginmanager.hasplugin("asyncio"):  # absent, or disabled with -p no:asyncio
        return
    parser.addini(ASYNCIO_LOOP_SCOPE, "default scope of the asyncio event loop used to execute "
                  "async fixtures (pytest-inferaccept's default: function)", type="string",
                  default="function")


def capacity_implied_by(config: pytest.Config) -> tuple[str, ...]:
    """The capacity options given on the command line without --capacity: they switch it on.

    Only the command line counts: an ini twin (inferaccept_ladder = ...) is standing
    configuration for the runs that ask for --capacity, not a request to run the scenarios.
    """
    if config.getoption("inferaccept_capacity") or config.getini("inferaccept_capacity"):
        return ()
    return tuple(opt.flag for opt in CAPACITY_OPTIONS
                 if config.getoption(f"inferaccept_{opt.key}") is not None)


def settings_from_config(config: pytest.Config) -> Settings:
    """Resolve the settings once; a bad value becomes a UsageError."""

    def lookup(key: str) -> str | None:
        if key == "condition":
            return _conditions(config)
        if key == "capacity" and capacity_implied_by(config):
            return "true"
        if key == "slo":
            return None  # its values travel as given, one by one: resolve(slo_values=...)
        if key == "regression_tolerance":
            entries = [*config.getini("inferaccept_regression_tolerance"),
                       *(config.getoption("inferaccept_regression_tolerance") or [])]
            return "\n".join(entries) if entries else None
        value = config.getoption(f"inferaccept_{key}")
        if value is None:
            ini = config.getini(f"inferaccept_{key}")
            value = ini if ini else None
        return None if value is None else str(value)

    # Each --slo value as given, never joined: the ini's lines first, the command line's after (they win).
    slo_values = (*config.getini("inferaccept_slo"), *(config.getoption("inferaccept_slo") or ()))
    try:
        return resolve(lookup, slo_values=slo_values)
    except SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None


def _conditions(config: pytest.Config) -> str | None:
    """Declared conditions, one KEY=VALUE a line: the ini's first, the command line's after (they win)."""
    lines = [part for line in config.getini("inferaccept_condition") for part in split_condition_list(line)]
    lines += config.getoption("inferaccept_condition") or []
    return "\n".join(lines) if lines else None
