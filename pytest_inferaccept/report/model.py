"""The typed run model: the results document (docs/results-json.md) as pydantic models.

Every model allows extra keys, so a version-1 document may grow (the load engine adds `load`
per test) without breaking a reader; the JSON Schema published beside this module is generated
from these classes (`python -m pytest_inferaccept.report.schema`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_ID = "pytest-inferaccept/results/1"

VerdictStatus = Literal["GO", "NO-GO", "INVALID"]
Outcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]
CapabilityStatus = Literal["supported", "unsupported", "broken", "not exercised"]


class _Open(BaseModel):
    """A part of the document: known keys typed, unknown keys kept."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Verdict(_Open):
    """GO, NO-GO or INVALID with the reasons that decided it."""

    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)


class RunSettings(_Open):
    """The resolved options, as the run recorded them (the API key only as "<set>")."""

    server_url: str | None = None
    server_cmd: str | None = None
    server_preset: str | None = None
    ready_timeout: float | None = None
    model: str | None = None
    embedding_model: str | None = None
    embedding_url: str | None = None
    api_key: Literal["<set>"] | None = None
    capabilities_required: list[str] = Field(default_factory=list)
    request_timeout: float | None = None
    connect_timeout: float | None = None
    load: dict[str, Any] | None = None
    """How load tests ran and were judged: concurrency, requests, the session SLO and its source."""


class Conditions(_Open):
    """What produced the numbers: client, versions, dates, settings, declared conditions."""

    plugin_version: str
    python: str
    client_host: str
    client_platform: str
    cpu_count: int | None = None
    started_at: str
    finished_at: str
    settings: RunSettings
    pytest_version: str | None = None
    load_average: list[float] | None = Field(
        default=None, description="1, 5 and 15 minute load average of the client host at the end")
    declared: dict[str, str] = Field(
        default_factory=dict, description="conditions the team declared with --condition KEY=VALUE")


class Server(_Open):
    """The server under test as the run found it."""

    base_url: str
    model: str
    embedding_url: str | None = None
    embedding_model: str | None = None
    served_models: list[str] = Field(default_factory=list)
    required_capabilities: list[str] = Field(default_factory=list)
    version_info: dict[str, Any] = Field(default_factory=dict)
    log_paths: list[str] = Field(default_factory=list)
    launched: str | None = None
    ready_seconds: float | None = None


class Probe(_Open):
    """The one minimal request that classified a capability."""

    capability: str
    status: str
    detail: str = ""


class CapabilityRow(_Open):
    """One row of the capability matrix."""

    required: bool
    status: CapabilityStatus
    probe: Probe | None = None
    tests: dict[str, int] = Field(default_factory=dict)


class Exchange(_Open):
    """One HTTP request a test made and what came back (bodies cut, secrets scrubbed)."""

    method: str
    url: str
    request_body: str = ""
    request_headers: dict[str, str] = Field(default_factory=dict)
    status: int | None = None
    response_headers: dict[str, str] = Field(default_factory=dict)
    response_body: str = ""
    elapsed_s: float | None = None
    error: str | None = None


class Evidence(_Open):
    """What one test recorded."""

    exchanges: list[Exchange] = Field(default_factory=list)
    dropped_exchanges: int = 0
    notes: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    values: dict[str, Any] = Field(default_factory=dict)
    invalid: str | None = None


class SloRow(_Open):
    """One SLO limit judged against one load result."""

    key: str
    limit: float | None = None
    measured: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    margin: float | None = Field(default=None, description="headroom as a fraction of the limit; "
                                 "negative on the wrong side")
    status: str = Field(description="pass, fail or not_enough_data")
    basis: str | None = Field(default=None, description="interval, or point_estimate when so asked")
    method: str | None = None
    needed_n: int | None = None
    min_n: int | None = None
    message: str = ""
    by_failures: bool | None = Field(default=None, description="a failing row that failed requests "
                                     "alone decide (no client limit can explain it away)")
    early_stopping: str | None = Field(default=None, description="tail percentiles: the same sample "
                                       "read by MLPerf's early-stopping rule")


class SloJudgement(_Open):
    """The SLO table of one load result."""

    status: str
    confidence: float | None = None
    point_estimate: bool | None = None
    rows: list[SloRow] = Field(default_factory=list)


class LoadResult(_Open):
    """One load run a test made: what was asked, what was measured, how it was judged."""

    spec: dict[str, Any] = Field(default_factory=dict)
    summary: dict[str, Any] = Field(default_factory=dict)
    slo: SloJudgement | None = None
    selfcheck: dict[str, Any] = Field(default_factory=dict)


CapacityStatus = Literal["pass", "fail", "invalid"]
Point = tuple[float, float]
"""(seconds, value): one point of a capacity series."""


class CapacityStep(_Open):
    """One step of a capacity scenario: a level's counts, latencies, throughput, SLO and telemetry peaks."""

    level: float = Field(description="concurrency (ladder, push), requests/s (sweep) or prompt tokens "
                                     "(push_length)")
    label: str = ""
    measured: int = 0
    failed: int = 0
    error_rate: float | None = None
    ttft_p50: float | None = None
    ttft_p95: float | None = None
    ttft_p99: float | None = None
    e2e_p50: float | None = None
    e2e_p95: float | None = None
    e2e_p99: float | None = None
    itl_p50: float | None = None
    itl_p95: float | None = None
    itl_p99: float | None = None
    throughput_tokens_per_s: float | None = None
    request_rate_per_s: float | None = None
    achieved_concurrency: float | None = None
    asked_rate: float | None = Field(default=None, description="the send rate the schedule asked for (req/s)")
    achieved_rate: float | None = Field(default=None, description="the send rate achieved (req/s)")
    achieved_fraction: float | None = Field(default=None, description="sweep: achieved_rate / asked_rate")
    slo_status: str | None = Field(default=None, description="pass, fail, not_enough_data; null without SLO")
    slo_failures: str = Field(default="", description="the SLO rows that failed, one sentence each")
    client_bound: list[str] = Field(default_factory=list,
                                    description="why the client, not the server, limited this step")
    client_warnings: list[str] = Field(default_factory=list,
                                       description="the same, kept as warnings with --client-check warn")
    error_classes: dict[str, int] = Field(default_factory=dict)
    error_statuses: dict[str, int] = Field(default_factory=dict, description="failed answers by HTTP status")
    stopped_by: str | None = None
    telemetry: dict[str, float] = Field(default_factory=dict,
                                        description="the peak of each telemetry series during the step, by "
                                                    "role (running, waiting, kv_cache, memory_bytes, ...)")
    alive_after: bool | None = Field(default=None, description="push: the server answered after the step")


class CapacityKnee(_Open):
    """Where throughput stopped growing while latency climbed (level null: not within the levels)."""

    level: float | None = None
    reason: str = ""
    efficiency: list[float | None] = Field(default_factory=list,
                                           description="scaling efficiency from each level to the next")
    method: dict[str, float] = Field(default_factory=dict)


class SoakCheck(_Open):
    """One check of a soak: latency drift, memory growth or error onset."""

    status: str = Field(description="pass, fail, not_enough_data or not_measured")
    text: str = ""
    trend: dict[str, Any] | None = Field(default=None, description="n, slope_per_s, p_value, start, span_s, "
                                                                   "change, relative_change")
    tolerance: float | None = None
    alpha: float | None = None
    source: str | None = None
    error_rate: float | None = None
    limit: float | None = None
    onset_s: float | None = None


class CapacityBoundary(_Open):
    """Where a push broke the server, and how it failed there."""

    level: float | None = Field(default=None, description="push: the concurrency of the boundary")
    length: int | None = Field(default=None, description="push_length: the prompt tokens of the boundary")
    why: str | None = None
    failed: int = 0
    statuses: dict[str, int] = Field(default_factory=dict)
    error_classes: dict[str, int] = Field(default_factory=dict)
    shed: int = Field(default=0, description="failures that were 429 or 503")
    retry_after: int = Field(default=0, description="shed answers that carried Retry-After")
    rejection_median_s: float | None = None
    alive_after: bool | None = None
    alive_detail: str = ""
    graceful: bool | None = None
    problems: list[str] = Field(default_factory=list)


class CapacityFindings(_Open):
    """What a scenario found; which keys are set depends on its kind."""

    knee: CapacityKnee | None = None
    max_slo_level: float | None = Field(default=None, description="ladder, sweep: the highest level "
                                        "meeting every SLO, counting up from the first")
    max_slo_reason: str | None = None
    stopped_early: str | None = None
    unit: str | None = None
    checks: dict[str, SoakCheck] = Field(default_factory=dict, description="soak: ttft_drift, e2e_drift, "
                                         "memory_growth, errors")
    boundary: CapacityBoundary | None = None
    context_window: int | None = None


class CapacityExplanation(_Open):
    """One explanation drawn from the figures."""

    kind: str = Field(description="queueing, saturated, kv_cache_full, errors_begin, client_bound, "
                                  "latency_drift, memory_growing, boundary")
    level: float | None = None
    text: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)


class CapacitySeries(_Open):
    """The soak's series: window medians of TTFT and end-to-end latency, memory, errors per window."""

    window_s: float | None = None
    ttft: list[Point] = Field(default_factory=list)
    e2e: list[Point] = Field(default_factory=list)
    memory_bytes: list[Point] = Field(default_factory=list)
    errors: list[Point] = Field(default_factory=list)


class TelemetrySeries(_Open):
    """One sampled telemetry series."""

    name: str
    source: str = ""
    points: list[Point] = Field(default_factory=list)


class CapacityTelemetry(_Open):
    """What the sampler read beside a scenario, and which sources were absent."""

    interval_s: float | None = None
    samples: int = 0
    series: list[TelemetrySeries] = Field(default_factory=list)
    absent: list[str] = Field(default_factory=list)


class CapacityScenario(_Open):
    """One capacity scenario a test ran (docs/capacity.md)."""

    kind: str = Field(description="ladder, sweep, soak, push or push_length")
    label: str = ""
    status: CapacityStatus
    headline: str = ""
    reasons: list[str] = Field(default_factory=list, description="why the status is fail or invalid")
    findings: CapacityFindings = Field(default_factory=CapacityFindings)
    steps: list[CapacityStep] = Field(default_factory=list)
    explanations: list[CapacityExplanation] = Field(default_factory=list)
    series: CapacitySeries = Field(default_factory=CapacitySeries)
    telemetry: CapacityTelemetry | None = None
    notes: list[str] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)


class CheckResult(_Open):
    """One acceptance test's result."""

    nodeid: str
    outcome: Outcome
    duration_s: float = 0.0
    message: str = ""
    file: str | None = None
    capabilities: list[str] = Field(default_factory=list)
    slo: dict[str, float] | None = None
    evidence: Evidence = Field(default_factory=Evidence)
    load: list[LoadResult] = Field(default_factory=list)
    capacity: list[CapacityScenario] = Field(default_factory=list, description="the capacity scenarios "
                                             "the test ran (docs/capacity.md)")
    caused_by: int | None = Field(
        default=None, description="index in `causes` of the server stop that explains this failure")


class Cause(_Open):
    """The server stopped during the run: the one cause of the failures that followed it."""

    kind: Literal["exited", "stopped answering"] = Field(
        description="exited: a server the plugin launched ended; stopped answering: a probe after a "
                    "failed connection found no answer")
    server: str = Field(description="root URL of the server that stopped, credentials stripped")
    reason: str = Field(description="the exit status, or what the liveness probe saw")
    during: str | None = Field(default=None, description="the test that was failing when it stopped")
    after: str | None = Field(default=None, description="when noticed between tests: the test before")
    last_request: str | None = None
    summary: str = Field(description="the verdict's one line for this cause, with its count")
    detail: str = ""
    consequences: list[str] = Field(default_factory=list,
                                    description="later tests that failed only because of it")
    answered_again_before: str | None = None


class Deselected(_Open):
    """Acceptance checks left out with -k, -m or --deselect: the verdict covers a subset."""

    count: int = 0
    examples: list[str] = Field(default_factory=list, description="the first few, by test id")


class BaselineChange(_Open):
    """One item that differs from the baseline run."""

    kind: str = Field(description="capability, check, figure, load_run, operator_metric, server, answer "
                      "or embedding")
    status: Literal["regression", "improvement", "changed", "untrusted"]
    item: str
    before: Any = None
    after: Any = None
    detail: str = Field(description="one sentence with the figures")


class BaselineComparison(_Open):
    """The comparison with --inferaccept-baseline: what changed since the last accepted run."""

    path: str | None = None
    error: str | None = Field(default=None, description="why the baseline could not be compared "
                              "(the run is then INVALID); null when it was")
    status: Literal["regressed", "no regression", "not compared"]
    run: dict[str, Any] = Field(default_factory=dict, description="the baseline run: started_at, verdict, "
                                "model, server_version, plugin_version, client_host")
    regressions: list[str] = Field(default_factory=list)
    improvements: list[str] = Field(default_factory=list)
    trusted: bool = Field(description="false when conditions differ so that figures cannot be compared")
    untrusted_because: list[str] = Field(default_factory=list)
    conditions: list[dict[str, Any]] = Field(default_factory=list,
                                             description="conditions that differ: key, label, before, "
                                             "after, effect (untrusted or flagged)")
    changes: list[BaselineChange] = Field(default_factory=list)
    answers: dict[str, Any] | None = Field(default=None, description="answer consistency: compared, "
                                           "identical, exact_match_rate, threshold, changed, embeddings")
    policy: dict[str, Any] = Field(default_factory=dict, description="tolerances and answer-drift policy")


class RunDocument(_Open):
    """The whole results document of one run."""

    schema_id: Literal["pytest-inferaccept/results/1"] = Field(alias="schema")
    verdict: Verdict
    conditions: Conditions
    server: Server | None = None
    problems: list[str] = Field(default_factory=list)
    capabilities: dict[str, CapabilityRow] = Field(default_factory=dict)
    causes: list[Cause] = Field(default_factory=list)
    deselected: Deselected = Field(default_factory=Deselected)
    tests: list[CheckResult] = Field(default_factory=list)
    baseline: BaselineComparison | None = Field(default=None, description="the comparison with "
                                                "--inferaccept-baseline; null without one")


def load(document: dict[str, Any]) -> RunDocument:
    """Validate a results document into the typed model (pydantic.ValidationError if it is not one)."""
    return RunDocument.model_validate(document)
