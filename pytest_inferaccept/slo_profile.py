"""The team's SLO for load tests without a marker: `--slo KEY=VALUE` entries and `--slo-profile FILE`.

A profile is a JSON (or, on Python 3.11+, TOML) file with the same keys as the `slo` marker,
either at the top level or under `slo`, with an optional `name` and `description`:

    {"name": "chat-interactive", "slo": {"ttft_p95": 0.5, "tpot_p95": 0.05, "error_rate": 0.01}}

It is validated with pydantic: an unknown key or a value that is not a number stops the run with
the file name, the key and what is allowed. `--slo` entries override the profile's values.

`--slo-profile` also takes the name of a profile the plugin knows (NAMED_PROFILES): the latency
limits MLPerf Inference sets for its datacenter LLM benchmarks, e.g. `mlperf-llama3.1-8b-server`
(TTFT p99 ≤ 2 s, TPOT p99 ≤ 100 ms). A known name wins over a file of that name. A profile named
after MLPerf is judged as MLPerf judges: its tail percentiles by MLPerf's early-stopping rule
(one-sided 99%, `EarlyStoppingSlo`), and runs are sized to at least its minimum (459 requests
for a p99). Its TTFT is `ttft_any`: to the first generated token of any kind (content,
reasoning or a tool call), as MLPerf times the first token.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pytest_inferaccept.markers import MarkerError, SloSpec, allowed_slo_keys, parse_slo


class SloProfileError(ValueError):
    """A bad --slo entry or --slo-profile file; the message says where and what is allowed."""


@dataclass(frozen=True, kw_only=True)
class EarlyStoppingSlo(SloSpec):
    """SLO limits whose tail percentiles (p90 and up, ITL aside) MLPerf's early-stopping rule judges.

    An MLPerf-named profile gives this: a profile named after MLPerf is judged as MLPerf judges,
    one-sided at 99%, and sized to at least MLPerf's minimum (459 requests for a p99).
    """

    profile: str = ""
    """The profile's name, e.g. mlperf-llama3.1-8b-server."""


def judged_by_early_stopping(slo: SloSpec) -> bool:
    """True when the SLO's tail percentiles are judged by MLPerf's early-stopping rule."""
    return isinstance(slo, EarlyStoppingSlo)


@dataclass(frozen=True, kw_only=True)
class NamedProfile:
    """A profile the plugin knows by name: its limits and where they were published."""

    name: str
    description: str
    limits: dict[str, float]
    early_stopping: bool = False
    """Judge its tail percentiles by MLPerf's early-stopping rule (every MLPerf-named profile)."""


def _mlperf(model: str, label: str, scenario: str, ttft_ms: int, tpot_ms: int, version: str) -> NamedProfile:
    # MLPerf judges both at the 99th percentile of the server scenario (mlperf.conf:
    # *.Server.target_latency_percentile = 99); its TPOT is per request, as ours is. Its first
    # token is the first generated token of any kind (a reasoning model's first thought counts),
    # which is our ttft_any.
    return NamedProfile(
        name=f"mlperf-{model}-{scenario}",
        description=f"MLPerf Inference {version} rules: datacenter {label}, {scenario} latency limits, "
                    f"judged by MLPerf's early stopping (one-sided 99%)",
        limits={"ttft_any_p99": ttft_ms / 1000, "tpot_p99": tpot_ms / 1000}, early_stopping=True)


# From the "Server latency constraint" column of MLPerf Inference's rules (inference_rules.adoc)
# and loadgen's mlperf.conf, which agree. GPT-OSS-120B's interactive limits are left out: the
# v6.0 rules and the reference's language/gpt-oss-120b/mlperf_gptoss.conf disagree on its TPOT
# (20 ms against 15 ms).
NAMED_PROFILES: dict[str, NamedProfile] = {p.name: p for p in (
    _mlperf("llama3.1-8b", "Llama 3.1 8B", "server", 2000, 100, "v5.1"),
    _mlperf("llama3.1-8b", "Llama 3.1 8B", "interactive", 500, 30, "v5.1"),
    _mlperf("llama2-70b", "Llama 2 70B", "server", 2000, 200, "v5.1"),
    _mlperf("llama2-70b", "Llama 2 70B", "interactive", 450, 40, "v5.1"),
    _mlperf("llama3.1-405b", "Llama 3.1 405B", "server", 6000, 175, "v5.1"),
    _mlperf("llama3.1-405b", "Llama 3.1 405B", "interactive", 4500, 80, "v5.1"),
    _mlperf("mixtral-8x7b", "Mixtral 8x7B", "server", 2000, 200, "v5.1"),
    _mlperf("deepseek-r1", "DeepSeek-R1", "server", 2000, 80, "v5.1"),
    _mlperf("deepseek-r1", "DeepSeek-R1", "interactive", 1500, 15, "v6.0"),
    _mlperf("gpt-oss-120b", "GPT-OSS-120B", "server", 3000, 80, "v6.0"),
)}
"""Profiles --slo-profile takes by name, in the order they are listed."""


SloRow = tuple[str, "float | int"]
"""One limit as given: its key and its number (`--slo ttft_p95=0.5` gives ("ttft_p95", 0.5))."""


def parse_value(value: str) -> tuple[SloRow, ...]:
    """Parse one --slo value (or ini line), KEY=VALUE or several split by commas or lines, into its rows."""
    rows: list[SloRow] = []
    for entry in (e.strip() for line in value.splitlines() for e in line.split(",")):
        if not entry:
            continue
        key, sep, raw = entry.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SloProfileError(f"--slo {entry!r} is not KEY=VALUE (e.g. --slo ttft_p95=0.5)")
        try:
            number: float | int = int(raw) if key == "min_samples" else float(raw)
        except ValueError:
            raise SloProfileError(f"--slo {key}: {raw.strip()!r} is not a number") from None
        rows.append((key, number))
    return tuple(rows)


def parse_values(values: Sequence[str]) -> tuple[SloRow, ...]:
    """Parse each --slo value once, in the order given, keeping every row (a later key wins when merged)."""
    return tuple(row for value in values for row in parse_value(value))


def load_profile(path: Path) -> tuple[str, dict[str, float | int]]:
    """Read and validate a profile file: (its name, its limits)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SloProfileError(f"--slo-profile {path}: cannot read it: {exc.strerror or exc}") from None
    try:
        data = _parse(path, text)
    except ValueError as exc:
        raise SloProfileError(f"--slo-profile {path}: not valid {_kind(path)}: {exc}") from None
    return _validate(path, data)


def _kind(path: Path) -> str:
    return "TOML" if path.suffix.lower() == ".toml" else "JSON"


def _parse(path: Path, text: str) -> Any:
    if _kind(path) == "TOML":
        import importlib

        try:
            tomllib = importlib.import_module("tomllib")
        except ModuleNotFoundError:  # Python 3.10
            raise ValueError("TOML profiles need Python 3.11 or newer; use JSON") from None
        return tomllib.loads(text)
    return json.loads(text)


def _validate(path: Path, data: Any) -> tuple[str, dict[str, float | int]]:
    from pydantic import BaseModel, ConfigDict, ValidationError, create_model

    limits_model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        "SloLimits", __config__=ConfigDict(extra="forbid", strict=False),
        **{key: (int | None if key == "min_samples" else float | None, None) for key in allowed_slo_keys()})

    class Profile(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str | None = None
        description: str | None = None
        slo: limits_model  # type: ignore[valid-type]

    if isinstance(data, dict) and "slo" not in data:
        meta = {k: data[k] for k in ("name", "description") if k in data}
        data = {**meta, "slo": {k: v for k, v in data.items() if k not in meta}}
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise SloProfileError(_explain(path, exc)) from None
    given: Any = profile.slo
    limits = {k: v for k, v in given.model_dump().items() if v is not None}
    return profile.name or path.stem, limits


def _explain(path: Path, exc: Any) -> str:
    unknown = [".".join(str(p) for p in e["loc"][1:]) or str(e["loc"][0])
               for e in exc.errors() if e["type"] == "extra_forbidden"]
    if unknown:
        return (f"--slo-profile {path}: unknown key(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(allowed_slo_keys())}")
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the file"
    return f"--slo-profile {path}: {where}: {first['msg']}"


def resolve(entries: str | Sequence[str] | None, profile: str | None) -> tuple[SloSpec | None, str | None]:
    """The session's SLO and where it came from (a profile name and/or "--slo"), or (None, None).

    `entries` are the --slo values as given (a text: one of them), each parsed once, after the
    profile so that a bad profile is named first.
    """
    limits: dict[str, float | int] = {}
    sources: list[str] = []
    named = None
    if profile:
        named = NAMED_PROFILES.get(profile.strip().lower())
        if named is not None:
            limits = dict(named.limits)
            sources.append(f"profile {named.name} ({named.description})")
        else:
            name, limits = load_profile(_profile_path(profile))
            sources.append(f"profile {name} ({profile})")
    values = (entries,) if isinstance(entries, str) else (entries or ())
    given = dict(parse_values(values))
    if given:
        limits.update(given)
        sources.append("--slo " + ",".join(f"{k}={v}" for k, v in given.items()))
    if not limits:
        return None, None
    try:
        spec = parse_slo((), limits)
    except MarkerError as exc:
        raise SloProfileError(str(exc).replace("slo got", "--slo/--slo-profile got", 1)) from None
    if named is not None and named.early_stopping:
        spec = _early_stopping(spec, named.name)
    return spec, "; ".join(sources)


def _early_stopping(spec: SloSpec, profile: str) -> SloSpec:
    """The same limits, marked to be judged by MLPerf's early-stopping rule."""
    return EarlyStoppingSlo(**{f.name: getattr(spec, f.name) for f in fields(SloSpec)}, profile=profile)


def _profile_path(value: str) -> Path:
    """The profile file --slo-profile names; a missing one that looks like a name lists the names."""
    path = Path(value)
    looks_like_file = path.suffix.lower() in (".json", ".toml") or "/" in value or "\\" in value
    if not looks_like_file and not path.exists():
        raise SloProfileError(f"--slo-profile {value!r} is neither a file nor a known profile; "
                              f"known profiles: {', '.join(NAMED_PROFILES)}")
    return path
