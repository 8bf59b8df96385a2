"""The typed run model: the results document (docs/results-json.md) as pydantic models.

The run-level parts keep keys they do not know (`_Open`), so a version-1 document may grow
without breaking a reader; the parts whose keys are all known refuse any other (`_Closed`, and
every capacity class: a misspelt key is a defect, not growth), and only this module reads a
part's leftover keys. Producers build these classes themselves (the capacity scenarios, the
evidence, the server, the causes, the baseline comparison); the JSON Schema the report publishes
is generated from them (`python -m pytest_inferaccept.report.schema`). Each part is typed as its
producer writes it; the few left open (any JSON under any key) say why in their description.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    WithJsonSchema,
    field_serializer,
    field_validator,
    model_serializer,
)
from pydantic.json_schema import SkipJsonSchema

from pytest_inferaccept.scenario_kinds import NAMES
from pytest_inferaccept.scrub import BODY_EXCERPT, Scrubber, excerpt, redact

SchemaId = Literal["pytest-inferaccept/results/1"]
"""The format version every results document carries in `schema`."""
SCHEMA_ID: Final[str] = get_args(SchemaId)[0]
"""The same, as the string the plugin writes and a baseline must carry."""

CAPACITY_KINDS: Final[tuple[str, ...]] = NAMES
"""Every kind of capacity scenario the plugin writes (scenario_kinds.py; docs/capacity.md)."""

Number = Annotated[int | float, WithJsonSchema({"type": "number"})]
"""A number kept as its producer wrote it: an integer stays one, so it prints as one (every
number of the model is one: the ledger validates each test's entry and dumps it back)."""
Masked = Literal["***"]
"""What the scrubber leaves of a string or number whose key reads like a secret's name (every
document is scrubbed as a whole before it is written). Earlier documents hold it where a flag or a
summary was (api_key_set, ttft_any_token), so a baseline written by them still loads."""

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


class LoadSettings(_Open):
    """How the bundled load tests and every `loadgen` run were asked to run and be judged."""

    concurrency: int | None = None
    requests: int | None = None
    requests_given: bool | None = Field(default=None, description="true when --load-requests was given; "
                                        "otherwise each run is sized from its SLO")
    duration: Number | None = None
    workers: int | None = None
    cluster: str | None = Field(default=None, description="the Ray cluster the workers ran on "
                                "(--load-cluster)")
    slo: dict[str, Number] | None = Field(default=None, description="the session SLO (--slo, --slo-profile): "
                                          "marker key to limit, for load tests without their own marker")
    slo_source: str | None = None
    slo_judge: str | None = Field(default=None, description="interval, or point with --slo-judge point")
    records_path: str | None = None
    client_check: str | None = Field(default=None, description="strict or warn (--client-check)")


class RunSettings(_Open):
    """The resolved options, as the run recorded them (the API key only as "<set>")."""

    server_url: str | None = None
    server_cmd: str | None = None
    server_preset: str | None = None
    ready_timeout: Number | None = None
    model: str | None = None
    embedding_model: str | None = None
    embedding_url: str | None = None
    api_key: Literal["<set>"] | None = None
    capabilities_required: list[str] = Field(default_factory=list)
    request_timeout: Number | None = None
    connect_timeout: Number | None = None
    max_response_mb: Number | None = None
    load: LoadSettings | None = Field(default=None, description="how load tests ran and were judged: "
                                      "concurrency, requests, the session SLO and its source")


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
    load_average: list[Number] | None = Field(
        default=None, description="1, 5 and 15 minute load average of the client host at the end")
    declared: dict[str, str] = Field(
        default_factory=dict, description="conditions the team declared with --condition KEY=VALUE")


class ServerUnderTest(_Open):
    """The server under test as the run found it (what the `inferaccept_server` fixture gives a test)."""

    base_url: str
    model: str
    embedding_url: str | None = None
    embedding_model: str | None = None
    served_models: list[str] = Field(default_factory=list)
    required_capabilities: list[str] = Field(default_factory=list)
    version_info: dict[str, Any] = Field(
        default_factory=dict, description="what the server's version endpoints answered, by path; left open: "
        "each server describes itself in its own shape")
    log_paths: list[str] = Field(default_factory=list)
    launched: str | None = Field(default=None, description="how the plugin started it (command or preset); "
                                 "null for an external server")
    ready_seconds: Number | None = None

    @property
    def api_base(self) -> str:
        """The OpenAI API base, <root>/v1 (infra endpoints such as /health live at the root)."""
        return f"{self.base_url}/v1"

    @property
    def log_path(self) -> Path | None:
        """The launched chat server's log file, if the plugin launched it."""
        return Path(self.log_paths[0]) if self.log_paths else None

    @property
    def required(self) -> tuple[str, ...]:
        """The capabilities the team requires."""
        return tuple(self.required_capabilities)


Server = ServerUnderTest
"""The document's name for it (`RunDocument.server`)."""


class Probe(_Open):
    """The one minimal request that classified a capability."""

    capability: str
    status: str = Field(description="supported, unsupported or broken")
    detail: str = ""
    transient: SkipJsonSchema[bool] = Field(
        default=False, exclude=True, description="the probe's request failed in transport (refused, reset): "
        "not kept for the session, and never written")


class CapabilityRow(_Open):
    """One row of the capability matrix."""

    required: bool
    status: CapabilityStatus
    probe: Probe | None = None
    tests: dict[str, int] = Field(default_factory=dict)
    models: dict[str, CapabilityStatus] | None = Field(
        default=None, description="with --all-models, when checks ran against more than one model: each "
        "model's status, judged over that model's checks only; null otherwise")


class Exchange(_Open):
    """One HTTP request a test made and what came back (bodies cut, secrets scrubbed)."""

    method: str
    url: str
    request_body: str = ""
    request_headers: dict[str, str] = Field(default_factory=dict)
    status: int | None = None
    response_headers: dict[str, str] = Field(default_factory=dict)
    response_body: str = ""
    elapsed_s: Number | None = None
    error: str | None = None


MAX_EXCHANGES: Final[int] = 12
"""How many exchanges one test keeps: the first few and the latest ones."""


class Evidence(_Open):
    """What one test recorded; secrets are scrubbed before anything is stored or cut.

    A test records into it while it runs (the `inferaccept_evidence` fixture); the plugin carries
    its dump (defaults left out) to the results document.
    """

    exchanges: list[Exchange] = Field(default_factory=list)
    dropped_exchanges: int = 0
    notes: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    values: dict[str, Any] = Field(
        default_factory=dict, description="measured values by key; left open: a test records any JSON value "
        "under any key with evidence.record(key, value)")
    invalid: str | None = None
    _scrubber: Scrubber = PrivateAttr(default_factory=Scrubber)

    def __init__(self, *, scrubber: Scrubber | None = None, secrets: Iterable[str] = (), **data: Any) -> None:
        super().__init__(**data)
        if scrubber is not None:
            self._scrubber = scrubber
        for secret in secrets:
            self._scrubber.add(secret)

    def scrub(self, text: str) -> str:
        """Remove every known secret (and secret-shaped value) from a text."""
        return self._scrubber.text(text)

    def _cut(self, text: str) -> str:
        """Scrub, then cut to an excerpt; a huge body is first trimmed with a margin wider than
        any secret, so scrubbing stays cheap and nothing straddling the cut survives."""
        margin = BODY_EXCERPT + 4096 + max((len(x) for x in self._scrubber.secrets), default=0)
        if len(text) <= margin:
            return excerpt(self.scrub(text))
        kept = self.scrub(text[:margin])[:BODY_EXCERPT]
        return f"{kept}… [{len(text) - BODY_EXCERPT} more chars]"

    def add_exchange(self, exchange: Exchange) -> None:
        """Keep an exchange (the first few and the latest ones), scrubbed, then cut to size."""
        exchange.url = self.scrub(exchange.url)
        exchange.request_body = self._cut(exchange.request_body)
        exchange.response_body = self._cut(exchange.response_body)
        if exchange.error:
            exchange.error = self.scrub(exchange.error)
        exchange.request_headers = {k: excerpt(self.scrub(v), 300)
                                    for k, v in exchange.request_headers.items()}
        exchange.response_headers = {k: excerpt(self.scrub(v), 300)
                                     for k, v in exchange.response_headers.items()}
        if len(self.exchanges) >= MAX_EXCHANGES:
            self.exchanges.pop(MAX_EXCHANGES // 2)
            self.dropped_exchanges += 1
        self.exchanges.append(exchange)

    def note(self, text: str) -> None:
        """Record an observation for the report."""
        self.notes.append(self.scrub(text))

    def warn(self, text: str) -> None:
        """Record a deviation that does not fail the check (it reaches the verdict's warnings)."""
        self.warnings.append(self.scrub(text))

    def record(self, key: str, value: Any) -> None:
        """Record a JSON-serialisable measured value under a key."""
        json.dumps(value)  # fail early on values that cannot travel on a report
        self.values[key] = self._scrubber.data(redact(value))

    def mark_invalid(self, reason: str) -> None:
        """Say that this test could not judge the server (its result makes the verdict INVALID)."""
        self.invalid = self.scrub(reason)


class SloRow(_Open):
    """One SLO limit judged against one load result."""

    key: str
    limit: Number | None = None
    measured: Number | None = None
    ci_low: Number | None = None
    ci_high: Number | None = None
    n: int | None = None
    margin: Number | None = Field(default=None, description="headroom as a fraction of the limit; "
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
    confidence: Number | None = None
    point_estimate: bool | None = None
    rows: list[SloRow] = Field(default_factory=list)


class LoadSpec(_Open):
    """What a load run was asked to do (the API key only as whether one was set)."""

    base_url: str | None = None
    model: str | None = None
    api_key_set: bool | Masked | None = None
    kind: str | None = Field(default=None, description="chat, completions or embeddings")
    mode: str | None = Field(default=None, description="closed (concurrency), open (rate) or replay")
    concurrency: int | None = None
    rate: Number | None = Field(default=None, description="requests/s asked of an open loop")
    burstiness: Number | None = None
    requests: int | None = None
    duration: Number | None = None
    warmup: int | None = None
    workload: dict[str, Any] | None = Field(
        default=None, description="the workload's own description (type and lengths); left open: a workload "
        "a team writes describes itself")
    request_timeout: Number | None = None
    connect_timeout: Number | None = None
    stall_timeout: Number | None = None
    max_response_bytes: int | None = None
    workers: int | None = None
    max_seconds: Number | None = None
    seed: int | None = None
    extra_body: dict[str, Any] | None = Field(
        default=None, description="fields merged into every request body; left open: they go to the server "
        "as given")
    loop: str | None = None
    cluster: str | None = None


class Estimate(_Open):
    """A statistic with its confidence interval; an infinite end (a failed request) is written as null."""

    value: Number | None = None
    low: Number | None = None
    high: Number | None = None
    n: int | None = None
    censored: bool = Field(default=False, description="the statistic falls on failed requests: slower than "
                           "any limit (its value is then null)")


class LatencySummary(_Open):
    """Mean, percentiles and maximum of one latency metric, in seconds."""

    unit: str | None = None
    n: int | None = None
    censored: int | None = Field(default=None, description="values that are failed requests, counted as "
                                 "slower than any limit")
    mean: Estimate | None = None
    p50: Estimate | None = None
    p75: Estimate | None = None
    p90: Estimate | None = None
    p95: Estimate | None = None
    p99: Estimate | None = None
    p999: Estimate | None = None
    max: Estimate | None = None

    def stat(self, name: str) -> Estimate | None:
        """The estimate named like the slo marker's statistic: mean, p50 ... p999 or max."""
        return {"mean": self.mean, "p50": self.p50, "p75": self.p75, "p90": self.p90, "p95": self.p95,
                "p99": self.p99, "p999": self.p999, "max": self.max}.get(name)


class TimeWindow(_Open):
    """A stretch of the load engine's clock, in seconds."""

    start: Number | None = None
    end: Number | None = None
    duration_s: Number | None = None


class RequestCounts(_Open):
    """How many requests were sent, measured, succeeded and failed."""

    sent: int | None = None
    warmup: int | None = None
    measured: int | None = None
    ok: int | None = None
    failed: int | None = None
    errors: dict[str, int] = Field(default_factory=dict,
                                   description="failed measured requests by error class")
    no_content: int | None = None
    client_errors: int | None = Field(default=None, description="requests the client itself failed: not "
                                      "measured, and they make the run INVALID")


class Goodput(_Open):
    """Measured requests that met every per-request latency limit."""

    good: int | None = None
    measured: int | None = None
    fraction: Estimate | None = None
    per_s: Number | None = None
    limits: dict[str, Number] = Field(default_factory=dict, description="the per-request limit applied to "
                                      "each metric")
    source: str | None = Field(default=None, description="where the limits came from: goodput_keys "
                               "(vLLM's goodput_*_ms) or latency_limits")


class TokenUsage(_Open):
    """Where output token counts came from, and how far the server's count and the client's agree."""

    with_usage: int | None = None
    without_usage: int | None = None
    source: str | None = Field(default=None, description="usage, content_events, mixed or none")
    note: str = ""
    mismatched: int | None = None
    mean_ratio: Number | None = None
    tpot_basis: dict[str, int] = Field(default_factory=dict, description="successful requests with a "
                                       "TPOT per count it divides by: usage, usage_streamed, content_events")
    hidden_reasoning: int | None = Field(default=None, description="successful requests whose usage "
                                         "reported reasoning tokens the stream never carried")


class Spread(_Open):
    """Point percentiles of a quantity without intervals (token counts, schedule lag)."""

    n: int | None = None
    mean: Number | None = None
    p50: Number | None = None
    p90: Number | None = None
    p99: Number | None = None
    max: Number | None = None


class ConsistencyExample(BaseModel):
    """One answer that broke a per-request consistency rule, as the findings cite it."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(description="the request's index in its run (its line in --inferaccept-records)")
    problem: Literal["double_finish", "usage_under", "usage_over"]
    finish_reasons: int
    finished_choices: int
    content_events: int
    reasoning_events: int = 0
    completion_tokens: int | None = None


class LoadConsistency(BaseModel):
    """Per-request consistency of one run's answers (MLPerf TEST06-style, on the measured traffic itself).

    Every measured streamed answer is checked for exactly one finish_reason per choice; every one
    with usage for a usage.completion_tokens that agrees with what was streamed: at least one
    token per content event, and not far more than the run's own packing of tokens into events
    explains (docs/correctness.md, "Per-request consistency under load")."""

    model_config = ConfigDict(extra="forbid")

    load: str = Field(default="", description="the load the answers were checked under: c=8, 2 req/s")
    checked: int = Field(default=0, description="measured streamed answers checked (a whole stream, HTTP "
                         "200)")
    double_finish: int = Field(default=0, description="answers with more than one finish_reason for a choice")
    no_finish: int = Field(default=0, description="answers without any finish_reason: already failed "
                           "requests (incomplete), judged by the failure rules, counted here as a figure")
    usage_checked: int = Field(default=0, description="answers with usage.completion_tokens and streamed "
                               "events")
    usage_under: int = Field(default=0, description="answers whose completion_tokens is below the content "
                             "events streamed (each event carries at least one token)")
    usage_over: int = Field(default=0, description="answers whose completion_tokens is above what the run's "
                            "packing explains: more than over_factor × tokens_per_interval × the usual "
                            "intervals the answer's stream took + over_slack")
    tokens_per_event: Number | None = Field(default=None, description="the median over answers of streamed "
                                            "tokens per streamed event (null: no usage)")
    event_interval_s: Number | None = Field(default=None, description="the usual gap between content events: "
                                            "the median of every gap (null: no timing)")
    tokens_per_interval: Number | None = Field(default=None, description="the run's packing: the median over "
                                               "answers of tokens per usual interval their stream took, at "
                                               "least 1")
    over_factor: Number = 3
    over_slack: int = 4
    examples: list[ConsistencyExample] = Field(default_factory=list, description="the first few answers "
                                               "that broke a rule")

    @property
    def violations(self) -> int:
        """Answers that broke a rule this check judges (a missing finish_reason is judged as a failure)."""
        return self.double_finish + self.usage_under + self.usage_over


class LoadSummary(_Open):
    """What the statistics say about one load run (docs/statistics.md)."""

    confidence: Number | None = None
    window: TimeWindow | None = None
    measured_window: TimeWindow | None = Field(default=None, description="first send to last end of the "
                                               "measured requests: the denominator of every rate")
    counts: RequestCounts | None = None
    error_rate: Estimate | None = None
    metrics: dict[str, LatencySummary | Masked] = Field(
        default_factory=dict, description="by metric: ttft, ttft_first_byte, ttft_any_token (masked), itl, "
        "tpot, e2e")
    metrics_successful: dict[str, LatencySummary | Masked] = Field(
        default_factory=dict, description="the same over successful requests only: descriptive, never judged")
    output_tokens: int | None = None
    throughput_tokens_per_s: Number | None = None
    request_rate_per_s: Number | None = None
    goodput: Goodput | None = None
    usage: TokenUsage | None = None
    coalesced_fraction: Number | None = None
    prompt_tokens: Spread | None = None
    output_tokens_per_request: Spread | None = None
    schedule_lag_s: Spread | None = None
    consistency: LoadConsistency | None = Field(default=None, description="per-request consistency of the "
                                                "measured answers; null: not measured")

    def latency(self, metric: str) -> LatencySummary | None:
        """One metric's figures over every measured request; None where not measured or masked."""
        found = self.metrics.get(metric)
        return found if isinstance(found, LatencySummary) else None


class Lag(_Open):
    """Percentiles of a lag, in seconds."""

    p50: Number | None = None
    p99: Number | None = None
    max: Number | None = None


class ClientLoad(_Open):
    """What the client (one worker, or all together) was asked to do and did; null: not measured."""

    worker: int | None = Field(default=None, description="the worker's index; null for the total")
    asked_concurrency: Number | None = None
    achieved_concurrency: Number | None = None
    asked_rate: Number | None = None
    achieved_rate: Number | None = None
    schedule_lag_s: Lag | None = None
    loop_lag_s: Lag | None = None
    cpu_s: Number | None = None
    wall_s: Number | None = None
    cpu_utilisation: Number | None = Field(default=None, description="cpu_s / wall_s: 1.0 is one core busy")
    node: str | None = Field(default=None, description="the Ray node the worker ran on (--load-cluster)")
    died: str | None = Field(default=None, description="why the worker died mid-run; null: it finished")


class EngineLag(_Open):
    """n, median, p99 and maximum of a lag the load engine timed, in seconds (nearest rank)."""

    n: int | None = None
    p50: Number | None = None
    p99: Number | None = None
    max: Number | None = None


class EngineCheck(_Open):
    """The load engine's own figures for one worker or, without `worker`, for all of them."""

    worker: int | None = None
    workers: int | None = None
    mode: str | None = Field(default=None, description="closed, open or replay")
    loop: str | None = None
    records: int | None = None
    measured: int | None = None
    window: list[Number] = Field(default_factory=list)
    asked_concurrency: Number | None = None
    achieved_concurrency: Number | None = None
    asked_rate: Number | None = None
    scheduled_rate: Number | None = None
    achieved_rate: Number | None = None
    schedule_lag: EngineLag | None = None
    schedule_lag_meaning: str | None = None
    loop_lag: EngineLag | None = None
    cpu_seconds: Number | None = None
    process_cpu_seconds: Number | None = None
    wall_seconds: Number | None = None
    cpu_utilisation: Number | None = None
    cpu_utilisation_per_worker_max: Number | None = None
    stopped_by: str | None = None
    t0: Number | None = None


class ClusterNode(_Open):
    """One Ray node the workers ran on."""

    hostname: str | None = None
    cpus: int | None = None
    load_avg: list[Number] | None = None
    workers: list[int] = Field(default_factory=list)


class ClusterActor(_Open):
    """One Ray actor: where it ran, its clock against the driver's, and whether it died."""

    worker: int | None = None
    node: str | None = None
    hostname: str | None = None
    pid: int | None = None
    clock_offset_s: Number | None = None
    clock_offset_error_s: Number | None = None
    clock_rtt_s: Number | None = None
    clock_offset_after_s: Number | None = None
    clock_offset_after_error_s: Number | None = None
    clock_drift_s: Number | None = None
    start_skew_s: Number | None = None
    t0_on_driver_clock_s: Number | None = None
    batches: int | None = None
    records: int | None = None
    lost: int | None = None
    died: str | None = None


class ClusterCheck(_Open):
    """The cluster part of the self-check (--load-cluster): nodes, clock offsets, deaths."""

    address: str | None = None
    ray_version: str | None = None
    started_here: bool | None = None
    actor_cpus: Number | None = None
    nodes: dict[str, ClusterNode] = Field(default_factory=dict, description="by node address")
    workers: list[ClusterActor] = Field(default_factory=list)
    clock: str | None = Field(default=None, description="how the clock offsets were measured")


class EngineSelfcheck(_Open):
    """The load engine's account of itself, as it recorded it."""

    per_worker: list[EngineCheck] = Field(default_factory=list)
    total: EngineCheck | None = None
    worker_errors: dict[str, str] = Field(default_factory=dict, description="by worker index: why it failed")
    cluster: ClusterCheck | None = None


class LoadSelfcheck(_Open):
    """Did the client deliver the load it was asked for? (the statistics' view, and the engine's own)"""

    mode: str | None = Field(default=None, description="closed or open: how the client's pace was judged")
    total: ClientLoad | None = None
    workers: list[ClientLoad] = Field(default_factory=list, description="each worker, when there were "
                                      "several or one died")
    engine: EngineSelfcheck | None = None
    client_bound: list[str] | bool = Field(default_factory=list, description="why the client, not the "
                                           "server, limited the run (empty: it kept up); true or false "
                                           "where a document recorded only whether")
    client_check: str | None = Field(default=None, description="strict or warn (--client-check)")


GradedStatus = Literal["pass", "fail", "not_enough_data", "cannot_decide"]


class StepCorrectness(BaseModel):
    """Known-answer items answered inside one load (a ladder level, the soak, a push step, the bundled
    load test) or after it, graded, and paired item by item against their alone answers
    (docs/correctness.md, "Under load")."""

    model_config = ConfigDict(extra="forbid")

    when: Literal["under_load", "after_load"] = Field(description="inside the load, or once it ended")
    sent: int = Field(default=0, description="item requests sent")
    compared: int = Field(default=0, description="items answered here and alone (both requests succeeded), "
                          "the n of every figure below")
    outside: int = Field(default=0, description="items answered before the load was in flight or after it "
                         "ended: not compared")
    failed: int = Field(default=0, description="item requests that failed (an HTTP error, a timeout): not "
                        "graded, counted with the load's failures' kind")
    in_flight_min: int | None = Field(default=None, description="the fewest load requests in flight when an "
                                      "item was sent; null after the load or when the clocks could not be "
                                      "set side by side")
    in_flight_mean: Number | None = None
    correct: int = Field(default=0, description="items answered correctly here")
    unanswered: int = Field(default=0, description="answers cut by max_tokens before a correct answer")
    alone_correct: int = Field(default=0, description="the same items answered correctly alone")
    accuracy_low: Number | None = Field(default=None, description="95% Clopper-Pearson interval of the "
                                        "accuracy here; null without items compared")
    accuracy_high: Number | None = None
    right_to_wrong: int = Field(default=0, description="b: right alone, not right here")
    wrong_to_right: int = Field(default=0, description="c: not right alone, right here")
    drop: Number | None = Field(default=None, description="(b - c) / n: the accuracy lost against alone")
    drop_low: Number | None = None
    drop_high: Number | None = None
    p_value: Number | None = Field(default=None, description="exact one-sided McNemar p of the drop")
    alpha: Number = Field(default=0.05, description="the comparison's share of the 5% allowed for a false "
                          "NO-GO (Bonferroni over the comparisons of the run)")
    tolerance: Number = Field(default=0.05, description="the accuracy drop allowed (--correctness-tolerance)")
    status: GradedStatus = Field(default="not_enough_data", description="the paired verdict of the accuracy")
    verdict: str = Field(default="", description="the paired verdict in words")
    identical: int = Field(default=0, description="answers identical to the alone answer")
    near_ties: int = Field(default=0, description="changed answers that part from alone at a near tie")
    real_changes: int = Field(default=0, description="changed answers that part from alone at a non-tie")
    changed_unclassified: int = Field(default=0, description="changed answers no logprobs could classify")
    length_outside: int = Field(default=0, description="answers whose length (characters) is beyond ±10% of "
                                "the alone answer's (greedy, same request: MLPerf TEST06's length rule)")
    length_examples: list[str] = Field(default_factory=list,
                                       description="the first of them: item, both lengths")
    logprobs: bool = Field(default=False, description="the server returned logprobs for the compared answers")
    real_change_share: Number | None = Field(default=None, description="real changes / compared; null "
                                             "without logprobs (changed vs identical only)")
    real_change_tolerance: Number = Field(default=0.10, description="--correctness-real-changes")
    real_change_examples: list[str] = Field(default_factory=list, description="the first real changes: the "
                                            "item, where its answer parts from alone, both picks")
    held: bool = Field(default=True, description="no NO-GO here: accuracy not conclusively below alone, "
                       "real changes within their tolerance")
    text: str = Field(default="", description="the comparison in one line")


class UnderLoadCorrectness(BaseModel):
    """The known-answer items of one load or capacity scenario: chosen alone, answered at each level and
    after the load, and what that says (docs/correctness.md, "Under load")."""

    model_config = ConfigDict(extra="forbid")

    items: list[str] = Field(default_factory=list, description="the ids of the items graded (each answered "
                             "correctly alone when chosen)")
    tried: int = Field(default=0, description="items answered alone to find them")
    asked: int = Field(default=0, description="items the team asked for (--correctness-under-load)")
    alone_correct: int = Field(default=0, description="right in the second alone pass, the baseline")
    self_flips: int = Field(default=0, description="items whose grade differed between the two alone passes")
    self_flip_rate: Number | None = None
    logprobs: bool = Field(default=False, description="the server returned logprobs for the alone answers")
    tolerance: Number = 0.05
    real_change_tolerance: Number = 0.10
    comparisons: int = Field(default=1, description="paired comparisons the 5% is shared among (levels "
                             "planned and the after-load pass)")
    under_load: StepCorrectness | None = Field(default=None, description="the bundled load test: the run's "
                                               "own comparison (a capacity scenario keeps one on each step)")
    after: StepCorrectness | None = Field(default=None, description="the items answered once the load ended")
    held_up_to: Number | None = Field(default=None, description="the highest level, counting up from the "
                                      "first, where the answers held; null: not even the first")
    failed_at: Number | None = Field(default=None, description="the first level where they did not")
    status: Literal["pass", "fail", "not_enough_data"] = "not_enough_data"
    reasons: list[str] = Field(default_factory=list, description="why the status is fail")
    text: str = Field(default="", description="the finding line")


class LoadResult(_Open):
    """One load run a test made: what was asked, what was measured, how it was judged."""

    label: str | None = Field(default=None, description="the run's name: the test's, #2, #3 ... for later "
                              "runs of the same test")
    spec: LoadSpec = Field(default_factory=LoadSpec)
    stopped_by: str | None = Field(default=None, description="requests, duration, max_seconds or interrupted")
    summary: LoadSummary = Field(default_factory=LoadSummary)
    slo: SloJudgement | None = None
    slo_limits: dict[str, Number] | None = Field(default=None, description="the SLO the run was judged "
                                                 "against: marker key to limit; null without one")
    selfcheck: LoadSelfcheck = Field(default_factory=LoadSelfcheck)
    server_metrics: dict[str, Any] | None = Field(
        default=None, description="the server's /metrics read before and after the run; left open: each "
        "server names its own metrics")
    correctness: UnderLoadCorrectness | None = Field(default=None, description="known-answer items graded "
                                                     "alone, inside this run and after it; null: not graded")


CapacityStatus = Literal["pass", "fail", "invalid"]
Point = tuple[Number, Number]
"""(seconds, value): one point of a capacity series."""


class _CapacityPart(_Open):
    """A part of a capacity scenario: every key its producer writes is typed, an unknown one refused."""

    model_config = ConfigDict(extra="forbid")


class StepFailures(_CapacityPart):
    """What a step's failed requests were, by kind, and whether they make the step a failing one."""

    failed: int = 0
    measured: int = 0
    kinds: dict[str, int] = Field(default_factory=dict, description="failures by kind, most first: "
                                  "'HTTP 500', 'incomplete (no content, no finish_reason)', 'timeout'")
    shed: int = Field(default=0, description="failures that were 429 or 503: load shed, never failing")
    broken: int = Field(default=0, description="every other failure")
    broken_low: Number | None = Field(default=None, description="the low end of the 95% interval of the "
                                      "broken share; null without requests")
    failing: bool = False
    failing_above: Number | None = Field(default=None, description="the share broken failures must "
                                         "conclusively exceed for the step to fail")
    text: str = Field(default="", description="the failures in words, '' when none")


class RecoveryMoments(_CapacityPart):
    """When a killed server was killed, ready again and answering, in seconds."""

    killed_at_s: Number | None = Field(default=None, description="into the load")
    ready_s: Number | None = Field(default=None, description="from the kill")
    first_good_answer_s: Number | None = Field(default=None, description="from the kill")


class RollbackCheck(_CapacityPart):
    """One smoke check on the server the rollback started."""

    name: str = Field(description="models, chat, stream or health")
    status: Literal["pass", "fail", "not_served"]
    text: str


class RollbackDrill(_CapacityPart):
    """The rollback drill: the candidate stopped, the baseline command started, the way back timed.

    Seconds count from the moment the candidate was stopped."""

    command: str = Field(description="the baseline command that was started (keys scrubbed)")
    pid_stopped: int | None = None
    pid_started: int | None = None
    ready_s: Number | None = Field(default=None, description="ready (its readiness paths answer 200)")
    warmed_s: Number | None = Field(default=None, description="the end of the first answer from which the "
                                    "answers stay at steady TTFT")
    in_service_s: Number | None = Field(default=None,
                                        description="ready, warmed and every smoke check passed")
    within_s: Number = Field(description="the bound the drill was judged against")
    start_error: str | None = Field(default=None, description="why the baseline command was not ready")
    served_models: list[str] = Field(default_factory=list)
    model: str | None = Field(default=None,
                              description="the model the warm-up and smoke checks asked for")
    warm_ttft_s: list[Number] = Field(default_factory=list,
                                      description="TTFT of each warm-up answer, in order")
    cold_ttft_s: Number | None = Field(default=None, description="the first answer's TTFT")
    steady_ttft_s: Number | None = Field(default=None,
                                         description="the median TTFT of the last half")
    warm_failures: int = 0
    checks: list[RollbackCheck] = Field(default_factory=list)
    restored: bool | None = Field(default=None, description="the candidate started again after the drill "
                                  "(null: not asked)")
    restored_s: Number | None = Field(default=None, description="from the start of the restore to ready")
    restore_error: str | None = None


class CapacityStep(_CapacityPart):
    """One step of a capacity scenario: a level's counts, latencies, throughput, SLO and telemetry peaks.

    The kinds that add figures of their own each have a step type (InterferenceStep, PrefixStep,
    TurnStep, LengthStep, LengthNotRun); a scenario's steps are read as its kind's.
    """

    level: Number = Field(description="concurrency (ladder, push), requests/s (sweep) or prompt tokens "
                                     "(push_length)")
    label: str | None = Field(default="", description="the step's label; null for a length bucket "
                                                      "that was not run")
    measured: int = 0
    failed: int = 0
    error_rate: Number | None = None
    ttft_p50: Number | None = None
    ttft_p95: Number | None = None
    ttft_p99: Number | None = None
    e2e_p50: Number | None = None
    e2e_p95: Number | None = None
    e2e_p99: Number | None = None
    itl_p50: Number | None = None
    itl_p95: Number | None = None
    itl_p99: Number | None = None
    throughput_tokens_per_s: Number | None = None
    request_rate_per_s: Number | None = None
    achieved_concurrency: Number | None = None
    asked_rate: Number | None = Field(default=None,
                                      description="the send rate the schedule asked for (req/s)")
    achieved_rate: Number | None = Field(default=None, description="the send rate achieved (req/s)")
    achieved_fraction: Number | None = Field(default=None, description="sweep: achieved_rate / asked_rate")
    slo_status: str | None = Field(default=None, description="pass, fail, not_enough_data; null without SLO")
    slo_failures: str = Field(default="", description="the SLO rows that failed, one sentence each")
    client_bound: list[str] = Field(default_factory=list,
                                    description="why the client, not the server, limited this step")
    client_warnings: list[str] = Field(default_factory=list,
                                       description="the same, kept as warnings with --client-check warn")
    error_classes: dict[str, int] = Field(default_factory=dict)
    error_statuses: dict[str, int] = Field(default_factory=dict, description="failed answers by HTTP status")
    stopped_by: str | None = None
    telemetry: dict[str, Number] = Field(default_factory=dict,
                                        description="the peak of each telemetry series during the step, by "
                                                    "role (running, waiting, kv_cache, memory_bytes, ...)")
    alive_after: bool | None = Field(default=None, description="push: the server answered after the step")
    slo_by_failures: str = Field(default="", description="the SLO rows failed requests alone decided, in "
                                 "words ('' when none did)")
    failures: StepFailures | None = None
    failing: bool = Field(default=False, description="the step failed as a whole: its failures other than "
                          "load shedding are conclusively a majority, or every request failed")
    failure_text: str = Field(default="", description="what failed, when the step is failing")
    window_s: list[Number] | None = Field(default=None, description="ladder, sweep: the step's start and "
                                          "end on the telemetry sampler's clock (s)")
    recovery: RecoveryMoments | None = Field(default=None, description="recovery: the kill and the way back")
    consistency: LoadConsistency | None = Field(default=None, description="per-request consistency of the "
                                                "step's measured answers; null: not measured")
    correctness: StepCorrectness | None = Field(default=None, description="known-answer items graded inside "
                                                "the step, paired against alone; null: not graded")


class InterferenceStep(CapacityStep):
    """An interference step: short prompts alone, or with a share of long ones mixed in."""

    step: str = Field(default="", description="alone or mixed")
    long_share: Number = 0.0
    short_measured: int = 0
    short_answered: int = 0
    short_failed: int = Field(default=0, description="short requests without a first token")
    short_failure_kinds: dict[str, int] = Field(default_factory=dict)
    short_ttft_p50: Number | None = Field(default=None, description="judged: null when it falls on a "
                                          "failed request (then _censored is true)")
    short_ttft_p50_censored: bool = False
    short_ttft_p95: Number | None = None
    short_ttft_p95_censored: bool = False
    short_ttft_p50_answered: Number | None = Field(default=None, description="over the answered ones only")
    short_ttft_p95_answered: Number | None = None
    long_sent: int = 0
    long_failed: int = 0
    long_ttft_p50: Number | None = None
    long_prompt_tokens_p50: Number | None = None


class PrefixCounters(_CapacityPart):
    """The server's prefix-cache counters over one step's measured window, never invented."""

    exposed: bool
    queries: Number | None = Field(default=None, description="prompt tokens looked up (a delta)")
    hits: Number | None = Field(default=None, description="prompt tokens found (a delta)")
    hit_rate: Number | None = None
    text: str = ""


class PrefixStep(CapacityStep):
    """A prefix-cache step: unique prompts, or prompts sharing one long prefix."""

    step: str = Field(default="", description="unique or shared")
    shared_prefix_tokens: int = 0
    prompt_tokens: int | None = Field(default=None, description="asked per prompt")
    prompt_tokens_p50: Number | None = Field(default=None, description="as the server counted them")
    succeeded: int = 0
    prefix_cache: PrefixCounters | None = None


class TurnStep(CapacityStep):
    """One turn index of the multi-turn conversations (level: the turn)."""

    turn: int
    sent: int = 0
    succeeded: int = 0
    prompt_tokens_p50: Number | None = Field(default=None, description="as the server counted them")
    prompt_tokens_asked: int | None = None


class LengthStep(CapacityStep):
    """One length bucket that was run (level: the middle of the tokens asked)."""

    direction: str = Field(default="", description="input or output")
    bucket: str = Field(default="", description="short, medium, long or very_long")
    asked_tokens: list[int] | None = Field(default=None, description="the (low, high) tokens drawn")
    not_run: str | None = None
    prompt_tokens_p50: Number | None = None
    output_tokens_p50: Number | None = None
    realised_bucket: str | None = Field(default=None, description="the bucket the counted tokens fall in")
    confirmed: bool | None = Field(default=None, description="the realised bucket is the one asked; null "
                                   "without usage")
    succeeded: int = 0


class LengthNotRun(CapacityStep):
    """A length bucket that was not run (beyond the context window, or the window unknown), and why."""

    direction: str = Field(description="input or output")
    bucket: str
    not_run: str
    succeeded: int = 0
    asked_tokens: list[int] | None = None
    prompt_tokens_p50: Number | None = None
    output_tokens_p50: Number | None = None
    realised_bucket: str | None = None
    confirmed: bool | None = None


class WholeRun(CapacityStep):
    """multi_turn: the figures of the whole conversation run, written in the order its row is built."""

    @model_serializer(mode="wrap")
    def _in_row_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Keys as earlier versions wrote this row, the latencies after the failures."""
        out: dict[str, Any] = handler(self)
        return {**{k: out[k] for k in WHOLE_RUN_ORDER if k in out}, **out}


WHOLE_RUN_ORDER: Final[tuple[str, ...]] = (
    "level", "label", "measured", "failed", "error_rate", "throughput_tokens_per_s", "request_rate_per_s",
    "achieved_concurrency", "asked_rate", "achieved_rate", "slo_status", "slo_failures", "slo_by_failures",
    "client_bound", "client_warnings", "error_classes", "error_statuses", "stopped_by", "telemetry",
    "failures", "failing", "failure_text")
"""The order of a multi_turn's `overall` keys (any other follows in the model's order)."""

class SpikeStep(CapacityStep):
    """One phase of a spike's timeline (level: the concurrency asked in it), by send time."""

    phase: str = Field(default="", description="before, during or after the spike")
    start_s: Number | None = Field(default=None, description="the phase's start, seconds into the timeline")
    end_s: Number | None = Field(default=None, description="the phase's end, seconds into the timeline")
    rejected_clean: int = Field(default=0, description="429 or 503 answers with Retry-After")
    rejected_bare: int = Field(default=0, description="429 or 503 answers without Retry-After")
    timeouts: int = Field(default=0, description="requests the client gave up on (timeout, stall)")


class CancelStep(CapacityStep):
    """A steady measure beside a cancellation burst (level: its concurrency): before the burst, or after."""

    step: str = Field(default="", description="before or after")


AnyCapacityStep = (CapacityStep | InterferenceStep | PrefixStep | TurnStep | LengthStep | LengthNotRun
                   | SpikeStep | CancelStep)
"""A step of any kind; a scenario's kind decides which (`step_type`)."""

STEP_TYPES: Final[dict[str, type[CapacityStep]]] = {
    "interference": InterferenceStep, "prefix": PrefixStep, "multi_turn": TurnStep, "length": LengthStep,
    "spike": SpikeStep, "cancel": CancelStep}
"""The kinds whose steps carry figures of their own; every other kind's are CapacityStep."""


def step_type(kind: str, step: Any) -> type[CapacityStep]:
    """The type of a step of a scenario of `kind` (a length bucket that was not run has its own)."""
    if kind == "length" and isinstance(step, dict) and step.get("not_run"):
        return LengthNotRun
    return STEP_TYPES.get(kind, CapacityStep)


class CapacityKnee(_CapacityPart):
    """Where throughput stopped growing while latency climbed (level null: not within the levels)."""

    level: Number | None = None
    reason: str = ""
    efficiency: list[Number | None] = Field(default_factory=list,
                                           description="scaling efficiency from each level to the next")
    method: dict[str, Number] = Field(default_factory=dict, description="the rule's thresholds: "
                                      "efficiency_below, latency_rise_above")
    confirmed: bool = Field(default=True, description="saturation is seen to persist: two or more levels "
                            "lie beyond the knee (absent in older documents: the knee taken as reported)")
    certainty: str = Field(default="", description="how sure the knee is, in a sentence")
    levels_beyond: int = Field(default=0, description="measured levels above the knee")


class Trend(_CapacityPart):
    """A fitted trend over a soak's window medians: the slope, its interval and significance, the change."""

    n: int | None = None
    slope_per_s: Number | None = None
    p_value: Number | None = None
    start: Number | None = Field(default=None, description="the fitted level at the start")
    span_s: Number | None = None
    change: Number | None = Field(default=None, description="the fitted change over the whole span")
    relative_change: Number | None = Field(default=None, description="change as a fraction of the start")
    slope_low: Number | None = None
    slope_high: Number | None = None
    confidence: Number | None = None
    lag1: Number | None = Field(default=None, description="lag-one autocorrelation of the detrended points")
    assumed_correlation: Number | None = None
    method: str | None = None


class Horizon(_CapacityPart):
    """How far a soak projects its drifts: a time or a number of requests."""

    seconds: Number | None = None
    requests: Number | None = None


class SoakSlope(_CapacityPart):
    """A growth rate per second with its interval, the bound it is judged on, and what it was fitted over."""

    per_s: Number
    low: Number
    high: Number
    floor: Number = Field(description="the low end of the judging (1 - alpha) interval")
    error: Number | None = Field(default=None, description="the slope's error at the planning power")
    start: Number | None = None
    end: Number | None = None
    span_s: Number | None = None
    n: int | None = None
    p_value: Number | None = None
    confidence: Number | None = None
    alpha: Number | None = None


class GrowthShape(_CapacityPart):
    """Whether growth was steady, slowed, or levelled off (a filling cache), from its thirds."""

    kind: str = Field(description="steady, slowing or levels_off")
    early: SoakSlope | None = None
    early_span_s: list[Number] | None = Field(default=None, description="(from, to) s of the early slope")
    middle_third: SoakSlope | None = None
    last_third: SoakSlope | None = None


class DriftRate(_CapacityPart):
    """The rate a drift is projected with: per second, per hour, per request (memory)."""

    slope: SoakSlope
    basis: str = Field(description="whole_soak, or last_third when the growth slowed")
    per_hour: Number | None = None
    per_hour_low: Number | None = None
    per_hour_high: Number | None = None
    per_request: Number | None = None
    per_request_low: Number | None = None
    per_request_high: Number | None = None
    per_request_basis: str | None = Field(default=None, description="finished_requests or request_rate")
    change: Number | None = Field(default=None, description="latency: the change over the span observed")
    relative_change: Number | None = None
    relative_per_hour: Number | None = Field(default=None, description="only from a span of an hour or more")


class DriftProjection(_CapacityPart):
    """Where a drift leads over the horizon, and when it would reach its limit."""

    horizon_s: Number | None = None
    level: Number | None = None
    limit: Number | None = None
    headroom: Number | None = None
    growth: Number | None = None
    growth_low: Number | None = None
    growth_high: Number | None = None
    growth_floor: Number | None = None
    time_to_limit_s: Number | None = None
    time_to_limit_low_s: Number | None = None
    time_to_limit_high_s: Number | None = None
    crosses: bool = False
    limit_words: str = ""


class SoakPlan(_CapacityPart):
    """How long a soak finds growth that would use the headroom within half the horizon (95% of the time)."""

    soak_needed_s: Number
    duration_s: Number
    short: bool


class MemoryBudget(_CapacityPart):
    """The memory a series may grow into: its size, the share growth may use, and where it came from."""

    total: Number
    share: Number
    source: str
    budget: Number


class WindowMiss(_CapacityPart):
    """One soak window against one SLO limit: its requests beyond the limit and the share's low end."""

    start_s: Number
    end_s: Number
    key: str
    limit: Number
    beyond: int
    n: int
    allowed: Number
    share_low: Number
    words: str


class SoakCheck(_CapacityPart):
    """One check of a soak (its kind's type: DriftCheck, ErrorsCheck, SloCheck or SloWindowsCheck)."""

    status: str = Field(description="pass, fail, not_enough_data or not_measured")
    text: str = ""
    trend: Trend | None = None
    tolerance: Number | None = None
    alpha: Number | None = None
    source: str | None = None
    error_rate: Number | None = None
    limit: Number | None = None
    onset_s: Number | None = None


class DriftCheck(SoakCheck):
    """A drift of a soak: latency (its median or its tail over the median) or memory, projected."""

    horizon: Horizon | None = None
    capacity: MemoryBudget | None = Field(default=None, description="memory: the budget, null when unknown")
    level: Number | None = Field(default=None, description="tail: the window quantile read (0.9 or 0.95)")
    window_s: Number | None = Field(default=None, description="tail: its window")
    basis: str | None = Field(default=None, description="tail: ratio_to_median")
    answer: str | None = Field(default=None, description="the check in a few words")
    shape: GrowthShape | None = None
    rate: DriftRate | None = None
    projection: DriftProjection | None = None
    plan: SoakPlan | None = None
    gpu: str | None = Field(default=None, description="gpu_memory_growth: the GPU's index")


class ErrorsCheck(SoakCheck):
    """The soak's error rate by its interval, against the SLO's error_rate or the soak's default."""

    limit_source: str | None = Field(default=None, description="slo or default")
    failed: int | None = None
    measured: int | None = None
    confidence: Number | None = None
    decides: bool | None = Field(default=None, description="an undecided rate stands in the verdict (a "
                                 "limit the SLO set)")
    answer: str | None = None
    ci_low: Number | None = None
    ci_high: Number | None = None
    needed_n: int | None = None


class SloCheck(SoakCheck):
    """The step's own SLO evaluation over the whole soak."""

    answer: str | None = None
    evaluation: SloJudgement | None = None
    by_failures: bool | None = Field(default=None, description="a failure failed requests alone decide")


class SloWindowsCheck(SoakCheck):
    """The SLO window by window: the windows that conclusively missed a limit."""

    answer: str | None = None
    windows: int | None = None
    window_s: Number | None = None
    pairs: int | None = Field(default=None, description="window-limit pairs judged (Bonferroni)")
    confidence_each: Number | None = None
    failing: list[WindowMiss] = Field(default_factory=list)
    worst: WindowMiss | None = None
    by_failures: bool | None = None


AnySoakCheck = DriftCheck | ErrorsCheck | SloCheck | SloWindowsCheck
"""A soak check of any kind (told apart by its keys; one with only status and text reads as a drift's)."""


class CapacityBoundary(_CapacityPart):
    """Where a push broke the server, and how it failed there."""

    level: Number | None = Field(default=None, description="push: the concurrency of the boundary")
    length: int | None = Field(default=None, description="push_length: the prompt tokens of the boundary")
    why: str | None = None
    failed: int = 0
    statuses: dict[str, int] = Field(default_factory=dict)
    error_classes: dict[str, int] = Field(default_factory=dict)
    shed: int = Field(default=0, description="failures that were 429 or 503")
    retry_after: int = Field(default=0, description="shed answers that carried Retry-After")
    rejection_median_s: Number | None = None
    alive_after: bool | None = None
    alive_detail: str = ""
    graceful: bool | None = None
    problems: list[str] = Field(default_factory=list)


class RatioInterval(_CapacityPart):
    """A ratio of two quantiles with its exact bootstrap interval (interference's p95, mixed over alone)."""

    value: Number | None = None
    low: Number | None = None
    high: Number | None = None
    p: Number | None = None
    confidence: Number | None = None
    n_numerator: int | None = None
    n_denominator: int | None = None
    censored_numerator: int | None = None
    censored_denominator: int | None = None
    method: str | None = None
    value_above_any_limit: bool | None = Field(default=None, description="the ratio falls on failed "
                                               "requests: infinite (value null)")
    low_above_any_limit: bool | None = None


class SpikeWindow(_CapacityPart):
    """One window of a spike's timeline, its requests by send time (a failure slower than any limit)."""

    start_s: Number = Field(description="seconds into the timeline")
    requests: int = 0
    failed: int = Field(default=0, description="every failure, clean rejections included")
    ttft: Number | None = Field(default=None, description="the window's TTFT at the judged statistic; null "
                                "when it falls on a failed request or the window is empty")
    e2e: Number | None = Field(default=None, description="the same for end-to-end latency")
    within: bool | None = Field(default=None, description="after the spike: every recovery limit held (null "
                                "before the spike's end)")


class SpikeFigures(_CapacityPart):
    """What a spike found: its failures, how the server took the extra load, and the way back."""

    spike_start_s: Number = Field(description="the extra load's first send, seconds into the timeline")
    spike_end_s: Number = Field(description="the extra load's last moment to send")
    end_s: Number = Field(description="the end of the after phase")
    requests_during: int = 0
    failed_during: int = Field(default=0, description="failures during the spike other than clean rejections")
    failure_share: Number | None = Field(default=None, description="failed_during over requests_during")
    failure_share_low: Number | None = Field(default=None, description="the low end of its 95% interval")
    failures_after: int = Field(default=0, description="failures after the spike other than clean rejections")
    failure_kinds: dict[str, int] = Field(default_factory=dict, description="the failures by kind, "
                                          "clean rejections apart: 'HTTP 500', 'timeout'")
    rejected_clean: int = Field(default=0, description="429 or 503 with Retry-After, during and after")
    rejected_bare: int = Field(default=0, description="429 or 503 without Retry-After (counted as failures)")
    timeouts: int = 0
    answered_rate_before: Number | None = Field(default=None, description="answers per second before")
    answered_rate_during: Number | None = Field(default=None, description="answers per second during")
    waiting_before: Number | None = Field(default=None, description="the queue gauge's peak before the spike")
    waiting_during: Number | None = Field(default=None, description="its peak during the spike")
    queue_source: str | None = Field(default=None, description="the gauge read (null: none served)")
    handling: Literal["absorbed", "rejected_cleanly", "queued", "slowed", "failed"] = Field(
        description="how the server took the spike: absorbed it within the limits, shed it with "
                    "429/503 + Retry-After, let its queue grow past the limits, slowed past them with no "
                    "queue gauge to tell why, or failed requests")
    handling_text: str = ""
    reference: Literal["slo", "pre_spike"] = Field(description="what recovery is judged against: the SLO's "
                                                   "latency limits, or the pre-spike p95 × the tolerance")
    limits: dict[str, Number] = Field(default_factory=dict, description="the recovery limits, in seconds, "
                                      "by metric and statistic (ttft_p95)")
    reference_text: str = ""
    recovery_s: Number | None = Field(default=None, description="from the spike's end to the first window "
                                      "from which every window met the limits; null: not within the after "
                                      "phase")
    recovered: bool = False
    windows: list[SpikeWindow] = Field(default_factory=list)


class GaugeWatch(_CapacityPart):
    """One /metrics gauge around a cancellation burst: at rest before it, at its peak, at the watch's end."""

    role: str = Field(description="running, waiting or kv_cache")
    metric: str = Field(description="the name read: llamacpp:requests_processing, "
                        "vllm:num_requests_running, ...")
    judged: bool = Field(default=True, description="whether its return decides the scenario (KV usage only "
                         "without a running gauge: a prompt cache may keep it up)")
    before: Number | None = Field(default=None, description="at rest, just before the burst")
    peak: Number | None = Field(default=None, description="the largest value read from the burst to the "
                                "watch's end")
    at_end: Number | None = Field(default=None, description="the last value read, when the watch ended")
    returned_s: Number | None = Field(default=None, description="seconds from the last cancel to the first "
                                      "reading back at its value at rest; null: not within the watch")


class CancelFigures(_CapacityPart):
    """What a burst of cancelled requests left on the server, and how it answered afterwards."""

    gauges_served: bool = Field(description="/metrics served a running, waiting or KV gauge or a generated-"
                                "tokens counter; false: the request-side figures alone were judged")
    gauges_absent: str = Field(default="", description="'gauges not served: ...' when they were not")
    sent: int = 0
    streamed: int = Field(default=0, description="of them streamed (the rest not)")
    cut_mid_stream: int = Field(default=0, description="streams closed after their first content chunks")
    cut_waiting: int = Field(default=0, description="streams closed at the burst's bound before those chunks "
                             "came (queued, or a slow first token)")
    closed_early: int = Field(default=0, description="non-streamed requests closed before their answer")
    answered_before_cancel: int = Field(default=0, description="answers that ended before their cancel point "
                                        "(nothing to cancel)")
    failed: int = Field(default=0, description="error answers and broken connections in the burst")
    failure_kinds: dict[str, int] = Field(default_factory=dict)
    last_cancel_s: Number | None = Field(default=None, description="from the burst's first send to its last "
                                         "cancel")
    gauges: list[GaugeWatch] = Field(default_factory=list)
    watched_s: Number | None = Field(default=None, description="how long /metrics was read after the last "
                                     "cancel")
    returned_s: Number | None = Field(default=None, description="from the last cancel until every judged "
                                      "gauge was back at rest; null: not within the bound")
    generated_metric: str | None = Field(default=None, description="the generated-tokens counter read")
    generated_before: Number | None = Field(default=None, description="at rest before the burst")
    generated_at_grace: Number | None = Field(default=None, description="at the grace's end after the last "
                                              "cancel")
    generated_at_end: Number | None = Field(default=None, description="when the watch ended")
    generated_after_grace: Number | None = Field(default=None, description="tokens counted after the grace "
                                                 "with nothing in flight: a server still generating")
    ttft_p50_before: Number | None = Field(default=None, description="over the answered requests")
    ttft_p50_after: Number | None = None
    ttft_ratio: Number | None = Field(default=None, description="after over before")
    failed_after: int | None = None
    measured_after: int | None = None
    after_not_run: str = Field(default="", description="why the measure after the burst was not run")
    completion_hangs: bool | None = Field(default=None, description="a small completion gave no answer "
                                          "within the hang timeout")
    probe: str = Field(default="", description="what that completion saw")
    health_status: int | None = Field(default=None, description="/health's status meanwhile")
    health: str = Field(default="", description="what /health answered meanwhile")


class CancelParams(_CapacityPart):
    """What a cancellation burst was asked to do."""

    burst: int
    share: Number = Field(description="the share of the burst that streams (the rest are not streamed)")
    after_chunks: int = Field(description="content chunks a stream reads before it is closed")
    close_after_s: Number = Field(description="seconds a non-streamed request waits before it is closed")
    bound_s: Number = Field(description="the most seconds the burst lasts: a stream without its chunks by "
                            "then is closed anyway")
    max_tokens: int = Field(description="asked by every request of the burst")
    return_within_s: Number = Field(description="the bound on the gauges' return, from the last cancel")
    grace_s: Number = Field(description="after the last cancel, before the counter must stand still")
    quiet_s: Number = Field(description="how long after the grace the counter is watched at least")
    poll_s: Number
    concurrency: int = Field(description="of the steady measures before and after")
    requests: int = Field(description="of each steady measure")
    ttft_ratio: Number = Field(description="TTFT p50 after may be at most this × before ...")
    ttft_slack_s: Number = Field(description="... or at most this many seconds above it")
    hang_timeout_s: Number = Field(description="a completion without an answer by then hangs")


class HeadroomEstimate(_CapacityPart):
    """headroom: how many times the recorded traffic the server holds within its SLOs (stats/headroom.py)."""

    point: Number | None = Field(default=None, description="the first limit's crossing, interpolated "
                                 "between the factors measured; null: no figure crossed a limit, or the "
                                 "first did")
    low: Number = Field(default=0.0, description="the interval's low end: the highest factor, counting up, "
                        "at which every SLO row was conclusively within (0: not even the first)")
    high: Number | None = Field(default=None, description="the interval's high end: the lowest factor at "
                                "which a row was conclusively beyond its limit; null: open above")
    key: str | None = Field(default=None, description="the SLO row whose crossing gives the point")
    below_first: bool = Field(default=False, description="the first factor's figures were already beyond "
                              "a limit")
    confidence: Number = 0.95
    text: str = ""


class CapacityFindings(_CapacityPart):
    """What a scenario found; which keys are set depends on its kind (named in each)."""

    knee: CapacityKnee | None = None
    max_slo_level: Number | None = Field(default=None, description="ladder, sweep: the highest level "
                                        "meeting every SLO, counting up from the first")
    max_slo_reason: str | None = None
    headroom: HeadroomEstimate | None = Field(default=None, description="headroom: the factor of the "
                                              "recorded traffic held within the SLOs, with its interval; "
                                              "null without SLO")
    stopped_early: str | None = None
    unit: str | None = None
    checks: dict[str, AnySoakCheck] = Field(default_factory=dict, description="soak: ttft_drift, e2e_drift, "
                                            "ttft_tail_drift, e2e_tail_drift, memory_growth, "
                                            "gpu_memory_growth, errors, slo, slo_windows")
    boundary: CapacityBoundary | None = None
    context_window: int | None = None
    soak_needed_s: Number | None = Field(default=None, description="soak: how long a soak finds a drift "
                                         "that uses its headroom within half the horizon")
    soak_needed_for: str | None = Field(default=None, description="soak: the check that needs it")
    soak_needed_text: str | None = Field(default=None, description="soak: said when it ran shorter")
    short_ttft_p50_alone: Number | None = Field(default=None, description="interference")
    short_ttft_p95_alone: Number | None = Field(default=None, description="interference")
    short_ttft_p50_mixed: Number | None = Field(default=None, description="interference")
    short_ttft_p95_mixed: Number | None = Field(default=None, description="interference")
    short_failed_alone: int | None = Field(default=None, description="interference")
    short_failed_mixed: int | None = Field(default=None, description="interference")
    short_ttft_p95_mixed_censored: bool | None = Field(default=None, description="interference")
    short_ttft_p95_alone_censored: bool | None = Field(default=None, description="interference")
    ttft_p50_unique: Number | None = Field(default=None, description="prefix")
    ttft_p50_shared: Number | None = Field(default=None, description="prefix")
    ttft_p95_unique: Number | None = Field(default=None, description="prefix")
    ttft_p95_shared: Number | None = Field(default=None, description="prefix")
    ratio_p50: Number | None = Field(default=None, description="interference (mixed / alone), prefix "
                                     "(shared / unique)")
    ratio_p95: Number | None = Field(default=None, description="interference, prefix")
    ratio_p95_above_any_limit: bool | None = Field(default=None, description="interference")
    ratio_p95_low: Number | None = Field(default=None, description="interference")
    ratio_p95_high: Number | None = Field(default=None, description="interference")
    ratio_p95_interval: RatioInterval | None = Field(default=None, description="interference")
    hit_rate_unique: Number | None = Field(default=None, description="prefix")
    hit_rate_shared: Number | None = Field(default=None, description="prefix")
    counters: str | None = Field(default=None, description="prefix: exposed or not exposed")
    ttft_p50_by_turn: dict[int, Number | None] | None = Field(default=None, description="multi_turn")
    growth_p50: Number | None = Field(default=None, description="multi_turn: last turn's TTFT p50 / first's")
    ttft_s_per_1k_prompt_tokens: Number | None = Field(default=None, description="multi_turn")
    prefix_cache: PrefixCounters | None = Field(default=None, description="multi_turn")
    overall: WholeRun | None = Field(default=None, description="multi_turn: the whole run's figures")
    ttft_p50_by_input: dict[str, Number | None] | None = Field(default=None, description="length")
    ttft_p95_by_input: dict[str, Number | None] | None = Field(default=None, description="length")
    e2e_p95_by_output: dict[str, Number | None] | None = Field(default=None, description="length")
    itl_p50_by_output: dict[str, Number | None] | None = Field(default=None, description="length")
    not_run: dict[str, str] | None = Field(default=None, description="length: why each bucket was not run")
    killed_at_s: Number | None = Field(default=None, description="recovery: seconds into the load")
    ready_s: Number | None = Field(default=None, description="recovery: from the kill")
    first_good_answer_s: Number | None = Field(default=None, description="recovery: from the kill")
    requests_measured: int | None = Field(default=None, description="recovery")
    requests_failed: int | None = Field(default=None, description="recovery")
    error_classes: dict[str, int] | None = Field(default=None, description="recovery")
    error_statuses: dict[str, int] | None = Field(default=None, description="recovery")
    clean_errors: bool | None = Field(default=None, description="recovery: no request hung")
    hung: int | None = Field(default=None, description="recovery")
    longest_failed_s: Number | None = Field(default=None, description="recovery")
    requests_ok_after_restart: int | None = Field(default=None, description="recovery")
    pid_killed: int | None = Field(default=None, description="recovery")
    pid_restarted: int | None = Field(default=None, description="recovery")
    restart_error: str | None = Field(default=None, description="recovery")
    liveness_polls: int | None = Field(default=None, description="recovery")
    last_seen: str | None = Field(default=None, description="recovery: the last liveness answer")
    lost_in_flight: int | None = Field(default=None, description="recovery")
    in_flight_error_classes: dict[str, int] | None = Field(default=None, description="recovery")
    client_attempts_refused: int | None = Field(default=None, description="recovery: the closed loop's "
                                                "own failed attempts while the server was down")
    first_load_answer_s: Number | None = Field(default=None, description="recovery")
    request_rate_per_s: Number | None = Field(default=None, description="recovery: the traffic the level "
                                              "served")
    request_rate_basis: str | None = Field(default=None, description="recovery")
    request_rate_answers: int | None = Field(default=None, description="recovery")
    request_rate_window_s: Number | None = Field(default=None, description="recovery")
    outage_s: Number | None = Field(default=None, description="recovery: the kill to the first good answer")
    outage_ended: bool | None = Field(default=None, description="recovery")
    requests_lost_during_outage: Number | None = Field(default=None, description="recovery")
    requests_lost: int | None = Field(default=None, description="recovery, documents of the first capacity "
                                      "release only: the closed loop's failed requests (no longer written: "
                                      "see requests_lost_during_outage)")
    spike: SpikeFigures | None = Field(default=None, description="spike: failures, shedding, queue, "
                                       "recovery")
    rollback: RollbackDrill | None = Field(default=None, description="rollback: the drill's moments, warm-up "
                                           "and smoke checks")
    cancel: CancelFigures | None = Field(default=None, description="cancel: the gauges and counter around a "
                                         "cancellation burst, and the answers after it")
    correctness: UnderLoadCorrectness | None = Field(default=None, description="ladder, soak, push: the "
                                                     "known-answer items graded alone, at each level and "
                                                     "after the load")


class ExplanationEvidence(_CapacityPart):
    """The figures behind one explanation; which keys are set depends on its kind."""

    error_classes: dict[str, int] | None = Field(default=None, description="errors_begin, boundary")
    statuses: dict[str, int] | None = Field(default=None, description="errors_begin, boundary: failed "
                                            "answers by HTTP status")
    reasons: list[str] | None = Field(default=None, description="client_bound")
    waiting_peak: dict[str, Number | None] | None = Field(default=None, description="queueing: the waiting "
                                                          "gauge's peak by level")
    throughput: dict[str, Number | None] | None = Field(default=None, description="queueing, saturated: "
                                                        "throughput by level")
    kv_cache_peak: dict[str, Number] | None = Field(default=None, description="kv_cache_full: by level")
    check: str | None = Field(default=None, description="latency_drift, memory_growing, errors_begin of a "
                              "soak: the check that failed")
    ratio_p50: Number | None = Field(default=None, description="interference, prefix_cache")
    ratio_p95: Number | None = Field(default=None, description="interference, prefix_cache")
    threshold: Number | None = Field(default=None, description="interference")
    hit_rate_shared: Number | None = Field(default=None, description="prefix_cache")
    level: Number | None = Field(default=None, description="boundary (push): the concurrency")
    length: int | None = Field(default=None, description="boundary (push_length): the prompt tokens")
    why: str | None = Field(default=None, description="boundary")
    failed: int | None = Field(default=None, description="boundary")
    shed: int | None = Field(default=None, description="boundary: failures that were 429 or 503")
    retry_after: int | None = Field(default=None, description="boundary: shed answers with Retry-After")
    rejection_median_s: Number | None = Field(default=None, description="boundary")
    alive_after: bool | None = Field(default=None, description="boundary")
    alive_detail: str | None = Field(default=None, description="boundary")
    graceful: bool | None = Field(default=None, description="boundary")
    problems: list[str] | None = Field(default=None, description="boundary")


class CapacityExplanation(_CapacityPart):
    """One explanation drawn from the figures."""

    kind: str = Field(description="queueing, saturated, kv_cache_full, errors_begin, client_bound, "
                                  "latency_drift, memory_growing, boundary, interference or prefix_cache")
    level: Number | None = None
    text: str = ""
    evidence: ExplanationEvidence = Field(default_factory=ExplanationEvidence)


class CapacitySeries(_CapacityPart):
    """A scenario's series over time: the soak's window medians, memory and errors; recovery's answers."""

    window_s: Number | None = None
    ttft: list[Point] = Field(default_factory=list)
    e2e: list[Point] = Field(default_factory=list)
    memory_bytes: list[Point] = Field(default_factory=list)
    errors: list[Point] = Field(default_factory=list)
    ttft_tail: list[Point] = Field(default_factory=list, description="soak: each window's TTFT tail over "
                                   "its median")
    e2e_tail: list[Point] = Field(default_factory=list, description="soak: the same for end-to-end latency")
    ok: list[Point] = Field(default_factory=list, description="recovery: answers per window, by send time")
    failed: list[Point] = Field(default_factory=list, description="recovery: failures per window")


class TelemetrySeries(_CapacityPart):
    """One sampled telemetry series."""

    name: str
    source: str = ""
    points: list[Point] = Field(default_factory=list)


class CapacityTelemetry(_CapacityPart):
    """What the sampler read beside a scenario, and which sources were absent."""

    interval_s: Number | None = None
    samples: int = 0
    series: list[TelemetrySeries] = Field(default_factory=list)
    absent: list[str] = Field(default_factory=list)


class CapacityParams(_CapacityPart):
    """What a scenario was asked to do; which keys are set depends on its kind (named in each)."""

    levels: list[Number] | None = Field(default=None, description="ladder, push: the concurrency levels")
    rates: list[Number] | None = Field(default=None, description="sweep: the request rates (req/s)")
    lengths: list[int] | None = Field(default=None, description="push_length: the prompt lengths (tokens)")
    requests_per_level: int | None = Field(default=None, description="ladder, push")
    requests_per_step: int | None = Field(default=None, description="sweep, prefix")
    requests_per_length: int | None = Field(default=None, description="push_length")
    requests_per_bucket: int | None = Field(default=None, description="length")
    requests_alone: int | None = Field(default=None, description="interference")
    max_seconds_per_level: Number | None = Field(default=None, description="ladder, push")
    max_seconds_per_step: Number | None = Field(default=None, description="sweep, interference, prefix")
    max_seconds_per_bucket: Number | None = Field(default=None, description="length")
    max_seconds: Number | None = Field(default=None, description="multi_turn")
    settle_rounds: int | None = Field(default=None, description="ladder")
    breaker_error_rate: Number | None = Field(default=None, description="ladder, sweep, push")
    breaker_latency_s: Number | None = Field(default=None, description="ladder, sweep, push")
    min_level: Number | None = Field(default=None, description="ladder; headroom: the factor of the recorded "
                                     "traffic it must hold (need)")
    min_rate: Number | None = Field(default=None, description="sweep")
    basis_caveat: str | None = Field(default=None, description="sweep, soak: the doubt of an unconfirmed "
                                     "knee the levels came from")
    concurrency: int | None = Field(default=None, description="soak, recovery, length, interference, "
                                    "prefix, multi_turn; spike: the base")
    duration_s: Number | None = Field(default=None, description="soak, recovery")
    basis: str | None = Field(default=None, description="soak, spike: where its concurrency came from")
    window_s: Number | None = Field(default=None, description="soak, spike")
    drift_tolerance: Number | None = Field(default=None, description="soak")
    memory_tolerance: Number | None = Field(default=None, description="soak")
    alpha: Number | None = Field(default=None, description="soak")
    horizon: Horizon | None = Field(default=None, description="soak")
    horizon_s: Number | None = Field(default=None, description="soak")
    horizon_words: str | None = Field(default=None, description="soak")
    request_rate_per_s: Number | None = Field(default=None, description="soak: the traffic it projects")
    memory_limit: Number | None = Field(default=None, description="soak: bytes, when declared")
    budget_share: Number | None = Field(default=None, description="soak")
    kill_after_s: Number | None = Field(default=None, description="recovery")
    request_timeout_s: Number | None = Field(default=None, description="recovery")
    answer_within_s: Number | None = Field(default=None, description="recovery")
    poll_s: Number | None = Field(default=None, description="recovery")
    hang_grace_s: Number | None = Field(default=None, description="recovery")
    factor: Number | None = Field(default=None, description="spike: the concurrency during it over the base")
    before_s: Number | None = Field(default=None, description="spike: seconds at the base before it")
    hold_s: Number | None = Field(default=None, description="spike: seconds it is held")
    after_s: Number | None = Field(default=None, description="spike: seconds at the base after it")
    recover_within_s: Number | None = Field(default=None, description="spike: the bound on the way back")
    max_failure_share: Number | None = Field(default=None, description="spike: failures allowed during it "
                                             "(clean rejections apart)")
    tolerance: Number | None = Field(default=None, description="spike without SLO latency limits: recovered "
                                     "within the pre-spike p95 × this")
    within_s: Number | None = Field(default=None,
                                    description="rollback: the bound on the way back to service")
    warm_requests: int | None = Field(default=None, description="rollback: answers sent to see TTFT settle")
    cancel: CancelParams | None = Field(default=None, description="cancel")
    context_window: int | None = Field(default=None, description="push_length, length, multi_turn")
    input_buckets: list[str] | None = Field(default=None, description="length")
    output_buckets: list[str] | None = Field(default=None, description="length")
    input_tokens_for_output_buckets: int | None = Field(default=None, description="length")
    output_tokens_for_input_buckets: int | None = Field(default=None, description="length")
    seed: int | None = Field(default=None, description="length, interference, prefix, multi_turn")
    short_tokens: int | None = Field(default=None, description="interference")
    long_tokens: int | None = Field(default=None, description="interference")
    long_share: Number | None = Field(default=None, description="interference")
    output_tokens: int | None = Field(default=None, description="interference, prefix")
    threshold: Number | None = Field(default=None, description="interference")
    max_ratio: Number | None = Field(default=None, description="interference")
    prefix_tokens: int | None = Field(default=None, description="prefix")
    suffix_tokens: int | None = Field(default=None, description="prefix")
    conversations: int | None = Field(default=None, description="multi_turn")
    turns: int | None = Field(default=None, description="multi_turn")
    turns_asked: int | None = Field(default=None, description="multi_turn")
    user_tokens: int | None = Field(default=None, description="multi_turn")
    answer_tokens: int | None = Field(default=None, description="multi_turn")


class CapacityScenario(_CapacityPart):
    """One capacity scenario a test ran (docs/capacity.md), as its module builds it."""

    kind: str = Field(description="one of " + ", ".join(CAPACITY_KINDS))
    label: str = ""
    status: CapacityStatus
    headline: str = ""
    reasons: list[str] = Field(default_factory=list, description="why the status is fail or invalid")
    findings: CapacityFindings = Field(default_factory=CapacityFindings)
    steps: list[AnyCapacityStep] = Field(default_factory=list, description="one per level; the kinds with "
                                         "figures of their own have a step type each")
    explanations: list[CapacityExplanation] = Field(default_factory=list)
    series: CapacitySeries = Field(default_factory=CapacitySeries)
    telemetry: CapacityTelemetry | None = None
    notes: list[str] = Field(default_factory=list)
    params: CapacityParams = Field(default_factory=CapacityParams)
    slo: dict[str, Number] | None = Field(default=None, description="the SLO the scenario was judged with: "
                                          "marker key to limit; null without one (absent in older documents)")

    @field_validator("steps", mode="before")
    @classmethod
    def _steps_of_kind(cls, steps: Any, info: ValidationInfo) -> Any:
        """Each step read as its scenario's kind writes it (its step type), whatever keys it shares."""
        kind = info.data.get("kind")
        if not isinstance(steps, list) or not isinstance(kind, str):
            return steps
        return [step_type(kind, step).model_validate(step) if isinstance(step, dict) else step
                for step in steps]


class _Closed(BaseModel):
    """A part of the document whose keys are all known: an unknown key is a defect, not growth."""

    model_config = ConfigDict(extra="forbid")


class TopLogprob(_Closed):
    """One alternative at a generated position."""

    piece: str = Field(description="the token's text (named so: a key ending in 'token' is scrubbed)")
    logprob: Number


class TokenLogprob(_Closed):
    """One generated token with its logprob and its top alternatives (the OpenAI chat shape's token,
    logprob and top_logprobs, bytes left out)."""

    piece: str = Field(description="the token's text (named so: a key ending in 'token' is scrubbed)")
    logprob: Number
    top: list[TopLogprob] = Field(default_factory=list)


class CorrectnessSelfDrift(_Closed):
    """One item's second pass against its first, over the kept logprobs."""

    mean_abs_delta: Number = Field(description="mean |Δ logprob| of the chosen tokens before the answers "
                                   "part")
    real_change: bool = Field(description="the two passes part at a non-tie")


class CorrectnessAnswer(_Closed):
    """One known-answer item as this run answered it (the first of its two passes)."""

    id: str
    grade: Literal["correct", "wrong", "unanswered"]
    grade_again: Literal["correct", "wrong", "unanswered"] = Field(
        description="the grade of the second pass of the same item (noise: a self-flip where they differ)")
    text: str | None = Field(description="the answer's content, cut to a few hundred characters; null when "
                             "the request failed")
    finish_reason: str | None = None
    read: str | None = Field(default=None, description="what the grader read from the answer")
    reason: str = ""
    error: str | None = Field(default=None, description="why the request failed")
    logprobs: list[TokenLogprob] | None = Field(default=None, description="the first answer tokens' top-5 "
                                                "logprobs; null when the server returned none")
    self_drift: CorrectnessSelfDrift | None = Field(
        default=None, description="how far the second pass's greedy answer sits from the first's (the "
        "server's own drift); null without logprobs on either pass")


class CorrectnessAccuracy(_Closed):
    """Correct answers of n items with the exact (Clopper–Pearson) interval."""

    correct: int
    n: int
    unanswered: int
    low: Number
    high: Number
    confidence: Number


class CorrectnessFloor(_Closed):
    """The team's accuracy floor (--correctness-min), judged on the interval."""

    floor: Number
    status: Literal["pass", "fail", "not_enough_data"]
    message: str


class Correctness(_Closed):
    """The known-answer set answered twice, graded, and judged (docs/correctness.md)."""

    set: str = Field(description="the bundled set, or the team's file (--correctness-set)")
    accuracy: CorrectnessAccuracy
    by_tag: dict[str, CorrectnessAccuracy] = Field(default_factory=dict, description="by key=value tag")
    self_flips: int = Field(description="items whose grade differed between the two passes")
    self_flip_rate: Number
    tolerance: Number = Field(description="the paired gate's tolerance, a fraction (--correctness-tolerance)")
    drift_tolerance: Number | None = Field(
        default=None, description="the drift tier's tolerance in nats of mean |Δ logprob| beyond the "
        "self-drift (--correctness-drift-tolerance); null: drift not judged")
    floor: CorrectnessFloor | None = None
    logprobs: bool = Field(description="whether the server returned logprobs")
    answers: list[CorrectnessAnswer] = Field(default_factory=list)


class CheckResult(_Open):
    """One acceptance test's result."""

    nodeid: str
    outcome: Outcome
    duration_s: Number = 0.0
    message: str = ""
    file: str | None = None
    capabilities: list[str] = Field(default_factory=list)
    slo: dict[str, Number] | None = None
    evidence: Evidence = Field(default_factory=Evidence)
    load: list[LoadResult] = Field(default_factory=list)
    capacity: list[CapacityScenario] = Field(default_factory=list, description="the capacity scenarios "
                                             "the test ran (docs/capacity.md)")
    caused_by: int | None = Field(
        default=None, description="index in `causes` of the server stop that explains this failure")
    model: str | None = Field(default=None, description="the model the check ran against when it ran once "
                              "per model (--all-models); absent otherwise")
    correctness: Correctness | None = Field(default=None, description="the known-answer set's answers and "
                                            "accuracy (the correctness suite only)")


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
    summary: str = Field(default="", description="the verdict's one line for this cause, with its count")
    detail: str = Field(default="", description="the full story: a launched server's exit with the end of "
                        "its log")
    consequences: list[str] = Field(default_factory=list,
                                    description="later tests that failed only because of it")
    answered_again_before: str | None = None
    main: SkipJsonSchema[bool] = Field(default=True, exclude=True, description="the server under test "
                                       "itself, not a second (embeddings) server; never written")
    next_probe: SkipJsonSchema[float] = Field(default=0.0, exclude=True, description="the monotonic time "
                                              "before which the server is not probed again; never written")

    @field_serializer("summary")
    def _summary(self, summary: str) -> str:
        """A cause of this run writes its sentence as it stands at the end; a read one keeps its own."""
        return summary or self.sentence()

    @property
    def who(self) -> str:
        """'the server', 'the launched server' or 'the server at URL'."""
        if self.kind == "exited":
            return "the launched server"
        return "the server" if self.main else f"the server at {self.server}"

    def headline(self) -> str:
        """What happened, without the count: 'the server stopped answering during test X (...)'."""
        what = f"exited ({self.reason})" if self.kind == "exited" else "stopped answering"
        when = (f"during test {self.during}" if self.during else
                f"after test {self.after}" if self.after else "before the first test")
        request = f" (last request: {self.last_request})" if self.last_request else ""
        return f"{self.who} {what} {when}{request}"

    def sentence(self) -> str:
        """The verdict's one line for this cause and every failure it explains."""
        n = len(self.consequences)
        count = ("no later check failed because of it" if n == 0 else
                 "the 1 later failure is a consequence" if n == 1 else
                 f"the {n} later failures are consequences")
        again = (f"; it answered again before test {self.answered_again_before}"
                 if self.answered_again_before else "")
        return f"{self.headline()}; {count}{again}"

    def first_message(self) -> str:
        """The message of the test that was failing when the server stopped."""
        if self.kind == "exited":
            return self.detail
        request = f" (last request: {self.last_request})" if self.last_request else ""
        return f"{self.who} stopped answering during this test{request}; a probe found: {self.reason}"

    def consequence_message(self) -> str:
        """Why a later test failed without running."""
        if self.kind == "exited":
            first = self.detail.splitlines()[0] if self.detail else self.reason
            return f"server under test is gone ({first})"
        return (f"not run: {self.who} stopped answering "
                f"{f'during test {self.during}' if self.during else 'earlier'} and still does not "
                f"answer ({self.reason})")

    def due_for_probe(self) -> bool:
        """True when the server may be probed again (a probe that timed out is not repeated at once)."""
        return time.monotonic() >= self.next_probe


class Deselected(_Open):
    """Acceptance checks left out with -k, -m or --deselect: the verdict covers a subset."""

    count: int = 0
    examples: list[str] = Field(default_factory=list, description="the first few, by test id")


class BaselineChange(_Open):
    """One item that differs from the baseline run."""

    kind: str = Field(description="capability, check, figure, load_run, operator_metric, server, answer, "
                      "embedding or correctness")
    status: Literal["regression", "improvement", "changed", "untrusted"]
    item: str
    before: Any = None
    after: Any = None
    detail: str = Field(description="one sentence with the figures")


class BaselineRun(_Open):
    """The few facts that identify the baseline run."""

    path: str | None = None
    started_at: str | None = None
    verdict: str | None = None
    plugin_version: str | None = None
    client_host: str | None = None
    model: str | None = None
    server_version: str | None = None


class ConditionDifference(_Open):
    """A condition with different values in the two runs."""

    key: str = ""
    label: str = ""
    before: Any = None
    after: Any = None
    effect: str | None = Field(default=None, description="untrusted (the figures cannot be compared) or "
                               "flagged")


class AnswerChange(_Open):
    """A fixed prompt whose answer differs from the baseline's."""

    id: str = ""
    before: str = ""
    after: str = ""
    similarity: Number | None = None
    drifted: bool = Field(default=False, description="below the similarity threshold")


class EmbeddingDrift(_Open):
    """The cosine between a fixed input's embedding and the baseline's."""

    id: str = ""
    cosine: Number | None = Field(default=None, description="null: vectors of different length")
    drifted: bool = False


class AnswerConsistency(_Open):
    """The fixed prompts' answers and embeddings, compared with the baseline's by prompt id."""

    compared: int | None = None
    identical: int | None = None
    exact_match_rate: Number | None = None
    threshold: Number | None = None
    changed: list[AnswerChange] = Field(default_factory=list)
    embeddings: list[EmbeddingDrift] = Field(default_factory=list)
    policy: str | None = Field(default=None, description="warn or fail (--answer-drift)")


class CorrectnessChange(_Closed):
    """An item whose answer differs from the baseline's, with both texts and how they part."""

    id: str
    before_grade: str
    after_grade: str
    before: str | None
    after: str | None
    kind: Literal["near_tie", "real_change", "not_classifiable"]
    reason: str


class CorrectnessDrift(_Closed):
    """Logprob drift of the greedy answers against the baseline's (the sensitive tier)."""

    prompts: int
    diverged_real: int
    diverged_tie: int
    unclassified: int
    matched_tokens: int
    mean_abs_delta: Number | None
    max_abs_delta: Number | None
    text: str
    status: Literal["found", "not_found", "not_measured"] = Field(
        default="not_measured", description="the drift tier's verdict against the run's own self-drift")
    message: str = ""
    self_mean_abs_delta: Number | None = Field(default=None, description="the second pass's mean |Δ| against "
                                               "the first (the server's own drift)")
    self_diverged_real: int | None = None
    farther: int | None = Field(default=None, description="prompts farther from the baseline than from the "
                                "server's own second pass")
    nearer: int | None = None
    p_value: Number | None = Field(default=None, description="the one-sided exact sign test's")
    mean_excess: Number | None = Field(default=None, description="mean |Δ| beyond the self-drift, nats")
    real_excess: int | None = None
    tolerance: Number | None = None


class CorrectnessComparison(_Closed):
    """The paired gate: each item against its own baseline answer (docs/correctness.md)."""

    status: Literal["pass", "fail", "not_enough_data", "cannot_decide", "not_compared"]
    message: str
    b: int | None = Field(default=None, description="items right in the baseline, wrong now")
    c: int | None = Field(default=None, description="items wrong in the baseline, right now")
    n: int | None = None
    drop: Number | None = None
    low: Number | None = None
    high: Number | None = None
    p_value: Number | None = None
    tolerance: Number | None = None
    self_flip_rate: Number | None = None
    needed_n: int | None = None
    accuracy_before: Number | None = None
    accuracy_after: Number | None = None
    changed: list[CorrectnessChange] = Field(default_factory=list, description="real changes first")
    drift: CorrectnessDrift | None = None


class GatePolicy(_Open):
    """The tolerances and the answer-drift policy the comparison used."""

    tolerances: dict[str, Number] = Field(default_factory=dict, description="by figure: relative, or "
                                          "absolute points for error_rate and goodput")
    answer_drift: str | None = None
    answer_threshold: Number | None = None
    answers_file: str | None = None


class BaselineComparison(_Open):
    """The comparison with --inferaccept-baseline: what changed since the last accepted run."""

    path: str | None = None
    error: str | None = Field(default=None, description="why the baseline could not be compared "
                              "(the run is then INVALID); null when it was")
    run: BaselineRun = Field(default_factory=BaselineRun, description="the baseline run (absent when it "
                             "could not be compared)")
    status: Literal["regressed", "no regression", "not compared"]
    regressions: list[str] = Field(default_factory=list)
    improvements: list[str] = Field(default_factory=list)
    trusted: bool = Field(description="false when conditions differ so that figures cannot be compared")
    untrusted_because: list[str] = Field(default_factory=list)
    conditions: list[ConditionDifference] = Field(default_factory=list,
                                                  description="conditions that differ")
    changes: list[BaselineChange] = Field(default_factory=list)
    answers: AnswerConsistency | None = None
    correctness: CorrectnessComparison | None = Field(default=None, description="the known-answer set "
                                                      "against the baseline's, item by item")
    policy: GatePolicy = Field(default_factory=GatePolicy)


class RunBody(_Open):
    """A run's document before its decision: what the baseline comparison and the verdict read."""

    schema_id: SchemaId = Field(alias="schema")
    conditions: Conditions
    server: Server | None = None
    problems: list[str] = Field(default_factory=list)
    other_failures: list[str] = Field(
        default_factory=list, description="tests outside the acceptance verdict that failed or errored, and "
        "files that could not be collected: they fail the run (its exit status) without changing the verdict")
    exit_status: int | None = Field(
        default=None, description="the process exit status: the verdict's (0 GO, 1 NO-GO, 6 INVALID), raised "
        "to pytest's own when that is higher; null only in a body not yet decided")
    capabilities: dict[str, CapabilityRow] = Field(default_factory=dict)
    causes: list[Cause] = Field(default_factory=list)
    deselected: Deselected = Field(default_factory=Deselected)
    tests: list[CheckResult] = Field(default_factory=list)


class RunDocument(RunBody):
    """The whole results document of one run: the body with its verdict and baseline comparison."""

    verdict: Verdict
    baseline: BaselineComparison | None = Field(default=None, description="the comparison with "
                                                "--inferaccept-baseline; null without one")


def load_body(document: dict[str, Any]) -> RunBody:
    """Validate a document's body (a run not yet decided) into the model."""
    return RunBody.model_validate(document)


def load(document: dict[str, Any]) -> RunDocument:
    """Validate a results document into the typed model (pydantic.ValidationError if it is not one)."""
    return RunDocument.model_validate(document)
