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
