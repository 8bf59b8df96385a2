"""The Capacity section as data: one view per scenario, each kind with its facts and its step table.

Every value here is text for the template to print (escaped there); the charts of the same
scenarios are drawn by `charts.capacity_charts`, keyed by the scenario's anchor. Each kind's title,
units and facts come from its entry in `capacity_kinds`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_inferaccept.model import (
    CancelStep,
    CapacityBoundary,
    CapacityScenario,
    CapacityStep,
    CheckResult,
    DriftCheck,
    InterferenceStep,
    LengthNotRun,
    LengthStep,
    PrefixStep,
    RunDocument,
    TurnStep,
)
from pytest_inferaccept.report import words
from pytest_inferaccept.report.capacity_kinds import Facts, Unit, kind_of
from pytest_inferaccept.report.units import fmt_number, fmt_value, status_class, status_words

CHECK_NAMES = {"ttft_drift": "TTFT drift", "e2e_drift": "end-to-end latency drift",
               "memory_growth": "memory growth", "gpu_memory_growth": "GPU memory growth",
               "ttft_tail_drift": "TTFT tail drift (p95 / median)",
               "e2e_tail_drift": "end-to-end tail drift (p95 / median)",
               "errors": "error onset", "slo": "SLO over the whole soak", "slo_windows": "SLO per window"}
EXPLANATION_WORDS = {"queueing": "queueing", "saturated": "saturated", "kv_cache_full": "KV cache full",
                     "errors_begin": "errors begin", "client_bound": "client-bound",
                     "latency_drift": "latency drift", "memory_growing": "memory growing",
                     "boundary": "boundary", "interference": "interference", "prefix_cache": "prefix cache"}
MEMORY_ROLES = ("memory_bytes", "launched_rss_bytes")
"""Telemetry roles holding the server's resident memory, the first present wins."""
NO_VALUE = "—"


@dataclass(frozen=True)
class Cell:
    """One table cell: its value and, under it in small print, a detail."""

    text: str
    detail: str = ""


@dataclass(frozen=True)
class LevelRow:
    """One level of a scenario: its figures, its SLO status and its marks (knee, highest within the SLOs)."""

    level: str
    marks: tuple[tuple[str, str], ...]
    """(css class, words) of each mark: ("knee", "knee"), ("best", "highest within the SLOs")."""
    cells: tuple[Cell, ...]
    slo: str
    slo_class: str
    css: str


@dataclass(frozen=True)
class LevelTable:
    """A scenario's steps: one row per level, the columns a reader compares across levels."""

    level_title: str
    columns: tuple[str, ...]
    rows: tuple[LevelRow, ...]
    has_slo: bool
    footnotes: tuple[str, ...]


@dataclass(frozen=True)
class CheckLine:
    """One soak check: its name, its status and what was seen."""

    name: str
    status: str
    status_class: str
    text: str


@dataclass(frozen=True)
class ExplanationView:
    """One explanation drawn from the figures."""

    kind: str
    level: str
    text: str


@dataclass(frozen=True)
class ScenarioView:
    """One capacity scenario as the page draws it."""

    anchor: str
    kind: str
    title: str
    check: str
    href: str
    status: str
    status_class: str
    headline: str
    reasons: tuple[str, ...]
    facts: tuple[tuple[str, str], ...]
    """Label and value pairs: the knee, the highest level within the SLOs, the boundary, the settings."""
    verdict: str = ""
    """push and push_length: how it failed at the boundary (graceful, queues, falls over, clean refusal)."""
    verdict_class: str = ""
    problems: tuple[str, ...] = ()
    checks: tuple[CheckLine, ...] = ()
    table: LevelTable | None = None
    windows: tuple[tuple[str, ...], ...] = ()
    """soak: (time, TTFT median, e2e median, errors) per window."""
    explanations: tuple[ExplanationView, ...] = ()
    notes: tuple[str, ...] = ()
    telemetry: str = ""


@dataclass(frozen=True)
class Parts:
    """What a kind's facts add to its section beside the headline, the reasons and the step table."""

    facts: tuple[tuple[str, str], ...] = ()
    verdict: str = ""
    verdict_class: str = ""
    problems: tuple[str, ...] = ()
    checks: tuple[CheckLine, ...] = ()
    windows: tuple[tuple[str, ...], ...] = ()


def scenario_anchor(number: int) -> str:
    """The HTML id of the page's `number`-th capacity scenario (from 1)."""
    return f"capacity-{number}"


def numbered(doc: RunDocument) -> list[tuple[str, CheckResult, CapacityScenario]]:
    """Each scenario with its anchor and its test, in document order."""
    return [(scenario_anchor(n), test, scenario)
            for n, (test, scenario) in enumerate(words.capacity_scenarios(doc), start=1)]


def _latency(value: float | None) -> str:
    return fmt_value("ttft_p95", value) if value is not None else NO_VALUE


def _rate(value: float | None) -> str:
    return fmt_number(value) if value is not None else NO_VALUE


def fmt_bytes(value: float | None) -> str:
    """Bytes as MiB or GiB: '200 MiB', '14.2 GiB'."""
    if value is None:
        return NO_VALUE
    if value >= 2**30:
        return f"{value / 2**30:.3g} GiB"
    return f"{value / 2**20:.4g} MiB"


def _peak_memory(step: CapacityStep) -> float | None:
    return next((step.telemetry[r] for r in MEMORY_ROLES if r in step.telemetry), None)


def _gpu_memory(step: CapacityStep) -> float | None:
    used = [v for k, v in step.telemetry.items() if k.startswith("gpu") and k.endswith("_memory_bytes")
            and not k.endswith("_total_bytes")]
    return sum(used) if used else None


def _gpu_util(step: CapacityStep) -> float | None:
    util = [v for k, v in step.telemetry.items() if k.startswith("gpu") and k.endswith("_utilisation")]
    return max(util) if util else None


Column = tuple[str, Callable[[CapacityStep], Cell | None]]
"""A heading and how a step fills it (None: the step has no value; a column no step has is left out)."""


def _failed(step: CapacityStep) -> Cell:
    return Cell(str(step.failed), words.statuses_words(step.error_statuses))


def _maybe(value: float | None, fmt: Callable[[float | None], str]) -> Cell | None:
    return None if value is None else Cell(fmt(value))


def _achieved_concurrency(step: CapacityStep) -> Cell | None:
    got = step.achieved_concurrency
    return None if got is None else Cell(f"{got:.3g} of {step.level:g}")


def _achieved_rate(step: CapacityStep) -> Cell | None:
    got, asked = step.achieved_rate, step.asked_rate
    if got is None:
        return None
    if asked:
        fraction = step.achieved_fraction if step.achieved_fraction is not None else got / asked
        return Cell(f"{got:.3g} of {asked:.3g}", f"{fraction:.0%}")
    return Cell(f"{got:.3g}")


def _alive(step: CapacityStep) -> Cell | None:
    if step.alive_after is None:
        return None
    return Cell("yes" if step.alive_after else "NO")


def _answers(step: CapacityStep) -> Cell | None:
    """The known-answer items under load: right of compared (alone), how the answers changed."""
    graded = step.correctness
    if graded is None:
        return None
    if not graded.compared:
        return Cell("not compared", f"{graded.sent} sent, {graded.outside} outside")
    # Short: the cell must not widen the step table past the page (the step's line says it all).
    changed = [f"{graded.identical} as alone"]
    if graded.logprobs:
        changed += [f"{n} {what}" for n, what in ((graded.near_ties, "near tie"),
                                                  (graded.real_changes, "real change")) if n]
    else:
        changed.append("no logprobs")
    mark = "" if graded.held else " NO-GO"
    return Cell(f"{graded.correct}/{graded.compared} right{mark}", ", ".join(changed))


def _columns(unit: Unit) -> list[Column]:
    columns: list[Column] = [
        ("requests", lambda s: Cell(str(s.measured))),
        ("failed", _failed),
        ("TTFT p50", lambda s: _maybe(s.ttft_p50, _latency)),
        ("TTFT p95", lambda s: _maybe(s.ttft_p95, _latency)),
        ("e2e p95", lambda s: _maybe(s.e2e_p95, _latency)),
        ("tokens/s", lambda s: _maybe(s.throughput_tokens_per_s, _rate)),
        ("req/s", lambda s: _maybe(s.request_rate_per_s, _rate)),
    ]
    if unit.achieved == "rate":
        columns.append(("send rate: achieved of asked (req/s)", _achieved_rate))
    elif unit.achieved == "concurrency":
        columns.append(("achieved concurrency", _achieved_concurrency))
    columns += [
        ("peak waiting", lambda s: _maybe(s.telemetry.get("waiting"), fmt_number)),
        ("peak KV cache", lambda s: _maybe(s.telemetry.get("kv_cache"),
                                           lambda v: fmt_value("error_rate", v))),
        ("peak memory", lambda s: _maybe(_peak_memory(s), fmt_bytes)),
        ("peak GPU memory", lambda s: _maybe(_gpu_memory(s), fmt_bytes)),
        ("peak GPU busy", lambda s: _maybe(_gpu_util(s), lambda v: fmt_value("error_rate", v))),
        ("answers after", _alive),
        ("graded answers", _answers),
    ]
    return columns


@dataclass(frozen=True)
class StepTable:
    """How a kind's step table reads: what names each row, its own columns, the shared ones it leaves out."""

    label: Callable[[CapacityStep, Unit], str]
    columns: tuple[Column, ...] = ()
    """Columns of the kind's own, before the shared ones."""
    without: frozenset[str] = frozenset()
    """Shared columns that say nothing for the kind."""


def _level_label(step: CapacityStep, unit: Unit) -> str:
    return unit.level(step.level)


def _interference_label(step: CapacityStep, unit: Unit) -> str:
    if not isinstance(step, InterferenceStep):
        return unit.level(step.level)
    mix = f" ({step.long_share:.0%} long)" if step.long_share else ""
    return f"{step.step or 'step'}{mix}, {unit.level(step.level)}"


def _prefix_label(step: CapacityStep, unit: Unit) -> str:
    name = step.step if isinstance(step, PrefixStep) and step.step else "step"
    return f"{name}, {unit.level(step.level)}"


def _bucket_label(step: CapacityStep, unit: Unit) -> str:
    if isinstance(step, (LengthStep, LengthNotRun)):
        return f"{step.direction} {step.bucket}".strip()
    return unit.level(step.level)


def _short(value: float | None, censored: bool) -> Cell | None:
    """A short prompt's TTFT, or what a figure that falls on failed requests means."""
    if censored:
        return Cell("above any limit", "falls on failed requests")
    return _maybe(value, _latency)


def _short_answered(step: CapacityStep) -> Cell | None:
    if not isinstance(step, InterferenceStep):
        return None
    kinds = ", ".join(f"{k} ×{n}" for k, n in step.short_failure_kinds.items())
    return Cell(f"{step.short_answered} of {step.short_measured}", kinds)


def _long(step: CapacityStep) -> Cell | None:
    if not isinstance(step, InterferenceStep) or not step.long_sent:
        return None
    tokens = f"{step.long_prompt_tokens_p50:.0f} prompt tokens (p50)" if step.long_prompt_tokens_p50 else ""
    return Cell(f"{step.long_sent - step.long_failed} of {step.long_sent}", tokens)


def _interference_columns() -> tuple[Column, ...]:
    return (
        ("short prompts answered", _short_answered),
        ("short TTFT p50", lambda s: _short(s.short_ttft_p50, s.short_ttft_p50_censored)
         if isinstance(s, InterferenceStep) else None),
        ("short TTFT p95", lambda s: _short(s.short_ttft_p95, s.short_ttft_p95_censored)
         if isinstance(s, InterferenceStep) else None),
        ("long prompts answered", _long),
        ("long TTFT p50", lambda s: _maybe(s.long_ttft_p50, _latency) if isinstance(s, InterferenceStep)
         else None),
    )


def _prompt_tokens(step: CapacityStep) -> Cell | None:
    if isinstance(step, PrefixStep):
        counted = f"{step.prompt_tokens_p50:.0f} counted (p50)" if step.prompt_tokens_p50 is not None else ""
        return None if step.prompt_tokens is None else Cell(f"{step.prompt_tokens}", counted)
    if isinstance(step, TurnStep):
        if step.prompt_tokens_p50 is not None:
            return Cell(f"{step.prompt_tokens_p50:.0f}", "counted (p50)")
        return None if step.prompt_tokens_asked is None else Cell(f"{step.prompt_tokens_asked}", "asked")
    return None


def _hit_rate(step: CapacityStep) -> Cell | None:
    if not isinstance(step, PrefixStep) or step.prefix_cache is None:
        return None
    cache = step.prefix_cache
    rate = fmt_value("error_rate", cache.hit_rate) if cache.hit_rate is not None else "not known"
    return Cell(rate, cache.text)


def _prefix_columns() -> tuple[Column, ...]:
    return (
        ("shared prefix (tokens)", lambda s: Cell(str(s.shared_prefix_tokens)) if isinstance(s, PrefixStep)
         else None),
        ("prompt tokens", _prompt_tokens),
        ("answered", lambda s: Cell(str(s.succeeded)) if isinstance(s, PrefixStep) else None),
        ("prefix-cache hit rate", _hit_rate),
    )


def _turn_columns() -> tuple[Column, ...]:
    return (
        ("sent", lambda s: Cell(str(s.sent)) if isinstance(s, TurnStep) else None),
        ("answered", lambda s: Cell(str(s.succeeded)) if isinstance(s, TurnStep) else None),
        ("prompt tokens", _prompt_tokens),
        ("e2e p50", lambda s: _maybe(s.e2e_p50, _latency)),
    )


def _asked(step: CapacityStep) -> Cell | None:
    if isinstance(step, LengthNotRun):
        return Cell("not run", step.not_run)
    if not isinstance(step, LengthStep) or not step.asked_tokens:
        return None
    return Cell("–".join(str(n) for n in step.asked_tokens))


def _counted(step: CapacityStep) -> Cell | None:
    if not isinstance(step, LengthStep):
        return None
    counted = step.prompt_tokens_p50 if step.direction == "input" else step.output_tokens_p50
    if counted is None:
        return Cell(NO_VALUE, "no usage reported")
    realised = step.realised_bucket or ""
    said = realised if step.confirmed is not False else f"{realised}, not the one asked"
    return Cell(f"{counted:.0f}", said)


def _length_columns() -> tuple[Column, ...]:
    return (
        ("tokens asked", _asked),
        ("tokens counted (p50)", _counted),
        ("answered", lambda s: Cell(str(s.succeeded)) if isinstance(s, LengthStep) else None),
        ("itl p50", lambda s: _maybe(s.itl_p50, _latency)),
    )


def _cancel_label(step: CapacityStep, unit: Unit) -> str:
    name = step.step if isinstance(step, CancelStep) and step.step else "step"
    return f"{name} the burst, {unit.level(step.level)}"


TABLES: dict[Facts, StepTable] = {
    "cancel": StepTable(label=_cancel_label),
    "interference": StepTable(label=_interference_label, columns=_interference_columns()),
    "prefix": StepTable(label=_prefix_label, columns=_prefix_columns()),
    "turns": StepTable(label=_level_label, columns=_turn_columns(), without=frozenset({"requests"})),
    "lengths": StepTable(label=_bucket_label, columns=_length_columns()),
}
"""The kinds whose steps table reads otherwise than by level with the shared columns alone."""
SHARED = StepTable(label=_level_label)


def level_table(scenario: CapacityScenario) -> LevelTable | None:
    """The scenario's steps as a table with the knee and the highest SLO-compliant level marked."""
    steps = scenario.steps
    if not steps:
        return None
    kind = kind_of(scenario.kind)
    table = TABLES.get(kind.facts, SHARED) if kind.facts is not None else SHARED
    knee = scenario.findings.knee.level if scenario.findings.knee is not None else None
    best = scenario.findings.max_slo_level
    shared = [(title, get) for title, get in _columns(kind.unit) if title not in table.without]
    columns = [(title, get) for title, get in (*table.columns, *shared)
               if any(get(s) is not None for s in steps)]
    has_slo = kind.slo_column and any(s.slo_status for s in steps)
    rows: list[LevelRow] = []
    notes: list[str] = []
    for step in steps:
        level = table.label(step, kind.unit)
        marks: list[tuple[str, str]] = []
        if knee is not None and step.level == knee:
            marks.append(("knee", "knee"))
        if best is not None and step.level == best:
            marks.append(("best", "highest within the SLOs"))
        if step.client_bound:
            marks.append(("client", "client-bound"))
            notes.append(f"{level}: client-bound: {'; '.join(step.client_bound)}")
        for warning in step.client_warnings:
            notes.append(f"{level}: client warning (judged anyway): {warning}")
        if step.slo_failures and has_slo:
            notes.append(f"{level}: SLO missed: {step.slo_failures}")
        cells = tuple(get(step) or Cell(NO_VALUE) for _, get in columns)
        rows.append(LevelRow(level=level, marks=tuple(marks), cells=cells,
                             slo=status_words(step.slo_status) if step.slo_status else "",
                             slo_class=status_class(step.slo_status),
                             css=" ".join(css for css, _ in marks)))
    return LevelTable(level_title=kind.unit.heading, columns=tuple(t for t, _ in columns), rows=tuple(rows),
                      has_slo=has_slo, footnotes=tuple(notes))


def _climb_parts(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Parts:
    """The SLO, the highest level within it, the knee, where the climb stopped, what each level ran."""
    found, unit, params = scenario.findings, kind_of(scenario.kind).unit, scenario.params
    slo = words.slo_of(doc, test)
    facts = [("SLO", words.slo_words(slo) if slo else "none given: no level is judged")]
    if found.headroom is not None:
        facts.append(("headroom", f"{found.headroom.text}: from the last factor conclusively within every "
                      "limit to the first conclusively beyond one"
                      + (f"; the point is where {found.headroom.key} crosses its limit, interpolated"
                         if found.headroom.point is not None and found.headroom.key else "")))
    if found.max_slo_level is not None:
        facts.append(("highest within the SLOs", unit.level(found.max_slo_level)
                      + (f" ({found.max_slo_reason})" if found.max_slo_reason else "")))
    elif slo:
        facts.append(("highest within the SLOs", f"none ({found.max_slo_reason or 'no level passed'})"))
    knee = found.knee
    if knee is not None and knee.level is not None:
        why = f": {knee.reason}" if knee.reason else ""
        facts.append(("knee", unit.level(knee.level) + why))
    elif knee is not None:
        facts.append(("knee", knee.reason or "not reached"))
    if found.stopped_early:
        facts.append(("stopped early", found.stopped_early))
    per = [f"{n} requests" for n in (params.requests_per_level, params.requests_per_step) if n]
    per += [f"at most {s:g} s" for s in (params.max_seconds_per_level, params.max_seconds_per_step)
            if s is not None]
    if per:
        facts.append(("each level", ", ".join(per)))
    return Parts(facts=tuple(facts))


def _soak_parts(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Parts:
    """The soak's settings and projections, each check's line and the latency per window."""
    params = scenario.params
    facts: list[tuple[str, str]] = []
    if params.concurrency is not None:
        basis = f" ({params.basis})" if params.basis else ""
        facts.append(("concurrency", f"{params.concurrency}{basis}"))
    if params.duration_s is not None:
        window = params.window_s
        facts.append(("duration", f"{params.duration_s:g} s"
                      + (f", judged on medians per {window:g} s window" if window is not None else "")))
    # Where the soak's drifts lead: the horizon and the memory budget (the soak that could tell
    # is in the notes).
    if params.horizon_words is not None:
        facts.append(("projected over", params.horizon_words))
    memory = scenario.findings.checks.get("memory_growth")
    projection = memory.projection if isinstance(memory, DriftCheck) else None
    if projection is not None and projection.limit_words:
        facts.append(("memory limit", projection.limit_words))
    checks = tuple(CheckLine(name=CHECK_NAMES.get(name, name), status=status_words(check.status),
                             status_class=status_class(check.status)
                             if check.status != "not_measured" else "nodata", text=check.text)
                   for name, check in scenario.findings.checks.items())
    series = scenario.series
    ttft = {t: v for t, v in series.ttft}
    e2e = {t: v for t, v in series.e2e}
    errors = {t: v for t, v in series.errors}
    windows = tuple((f"{t:g} s", _latency(ttft.get(t)), _latency(e2e.get(t)), f"{errors.get(t, 0):g}")
                    for t in sorted({*ttft, *e2e, *errors}))
    return Parts(facts=tuple(facts), checks=checks, windows=windows)


def _push_parts(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Parts:
    """Where a push broke the server and how: shed load gracefully, queued, or fell over."""
    boundary = scenario.findings.boundary
    if boundary is None:
        return _no_boundary(scenario)
    facts = _boundary_facts(scenario, boundary.level, boundary)
    if boundary.shed:
        facts.append(("rejected with 429 / 503", f"{boundary.shed}, {boundary.retry_after} with Retry-After"))
    if boundary.rejection_median_s is not None:
        facts.append(("median rejection time", _latency(boundary.rejection_median_s)))
    verdict, css = (("sheds load gracefully", "pass") if boundary.graceful and boundary.failed
                    else ("queues (no errors)", "nodata") if boundary.graceful else ("falls over", "fail"))
    return _with_answers_after(facts, boundary, verdict, css)


def _refusal_parts(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Parts:
    """Where long prompts were refused and whether cleanly, beside the context window."""
    boundary = scenario.findings.boundary
    if boundary is None:
        return _no_boundary(scenario)
    window = scenario.findings.context_window
    facts = _boundary_facts(scenario, boundary.length, boundary)
    facts.append(("context window", f"{window} tokens" if window else "not reported"))
    verdict, css = ("clean refusal", "pass") if boundary.graceful else ("breaks", "fail")
    return _with_answers_after(facts, boundary, verdict, css)


def _boundary_facts(scenario: CapacityScenario, at: float | None,
                    boundary: CapacityBoundary) -> list[tuple[str, str]]:
    """The boundary's level, why it is there and the answers that failed there."""
    facts = [("boundary", kind_of(scenario.kind).unit.level(at) if at is not None else "unknown")]
    if boundary.why:
        facts.append(("why there", boundary.why))
    statuses = words.statuses_words(boundary.statuses)
    facts.append(("failed answers", f"{boundary.failed}" + (f" ({statuses})" if statuses else "")))
    return facts


def _with_answers_after(facts: list[tuple[str, str]], boundary: CapacityBoundary, verdict: str,
                        css: str) -> Parts:
    """The boundary's facts with whether the server answered afterwards, its verdict and problems."""
    if boundary.alive_after is not None:
        facts.append(("answers afterwards", ("yes" if boundary.alive_after else "NO")
                      + (f" ({boundary.alive_detail})" if boundary.alive_detail else "")))
    return Parts(facts=tuple(facts), verdict=verdict, verdict_class=css,
                 problems=tuple(boundary.problems) if not boundary.graceful else ())


def _no_boundary(scenario: CapacityScenario) -> Parts:
    """A push that did not break the server: up to where it pushed."""
    top = scenario.steps[-1].level if scenario.steps else None
    where = f" up to {kind_of(scenario.kind).unit.level(top)}" if top is not None else ""
    return Parts(facts=(("boundary", f"none found{where}"),), verdict="did not break", verdict_class="pass")


def _seconds(value: float | None, after: str) -> str:
    return f"{value:.1f} s {after}" if value is not None else "not reached"


def _recovery_parts(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Parts:
    """When the server was killed, when it was back, what the outage cost, and how the clients failed."""
    found, params = scenario.findings, scenario.params
    facts: list[tuple[str, str]] = []
    if params.concurrency is not None and params.duration_s is not None:
        kill = f"; killed {params.kill_after_s:g} s into it" if params.kill_after_s is not None else ""
        facts.append(("load", f"{params.duration_s:g} s at c={params.concurrency}{kill}"))
    if found.killed_at_s is None:
        facts.append(("kill", found.restart_error or "not done: the load ended first"))
        return Parts(facts=tuple(facts))
    facts += [("killed", _seconds(found.killed_at_s, "into the load")),
              ("ready again", _seconds(found.ready_s, "after the kill")),
              ("first good answer", _seconds(found.first_good_answer_s, "after the kill"))]
    if found.outage_s is not None:
        facts.append(("outage", f"{found.outage_s:.1f} s" + ("" if found.outage_ended else " (still going)")))
    if found.requests_lost_during_outage is not None and found.request_rate_per_s is not None:
        facts.append(("requests lost", f"about {found.requests_lost_during_outage:.1f} at the "
                      f"{found.request_rate_per_s:.3g} requests/s this level served "
                      f"({found.request_rate_basis})"))
    if found.lost_in_flight is not None:
        kinds = ", ".join(f"{k} ×{n}" for k, n in (found.in_flight_error_classes or {}).items())
        facts.append(("in flight at the kill", f"{found.lost_in_flight}" + (f" ({kinds})" if kinds else "")))
    if found.requests_failed is not None and found.requests_measured is not None:
        how = "clean errors" if found.clean_errors else f"{found.hung} hung past the request timeout"
        facts.append(("failed requests", f"{found.requests_failed} of {found.requests_measured} ({how})"))
    if found.restart_error:
        facts.append(("restart", found.restart_error))
    return Parts(facts=tuple(facts))


def _by_bucket(values: dict[str, float | None] | None) -> str:
    """'short 29.4 ms, medium 351 ms'."""
    return ", ".join(f"{name} {_latency(v)}" for name, v in (values or {}).items())


def _lengths_parts(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Parts:
    """Latency per input and per output length bucket, beside the context window and what was not run."""
    found = scenario.findings
    window = found.context_window if found.context_window is not None else scenario.params.context_window
    facts = [("context window", f"{window} tokens" if window else "not known (--context-window)")]
    for label, values in (("TTFT p50 by input length", found.ttft_p50_by_input),
                          ("TTFT p95 by input length", found.ttft_p95_by_input),
                          ("e2e p95 by output length", found.e2e_p95_by_output),
                          ("ITL p50 by output length", found.itl_p50_by_output)):
        if values:
            facts.append((label, _by_bucket(values)))
    facts += [(f"{bucket}", why) for bucket, why in (found.not_run or {}).items()]
    return Parts(facts=tuple(facts))


def _ratio(value: float | None) -> str:
    return f"×{value:.2f}" if value is not None else NO_VALUE


def _interference_parts(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Parts:
    """Short prompts' TTFT alone and with long ones mixed in, and their p95 ratio with its interval."""
    found, params = scenario.findings, scenario.params
    facts: list[tuple[str, str]] = []
    if params.long_share is not None and params.long_tokens is not None:
        facts.append(("mix", f"{params.long_share:.0%} long prompts of {params.long_tokens} tokens among "
                      f"short ones of {params.short_tokens} at c={params.concurrency}"))

    def seen(value: float | None, censored: bool | None) -> str:
        return "above any limit (it falls on failed requests)" if censored else _latency(value)

    alone = seen(found.short_ttft_p95_alone, found.short_ttft_p95_alone_censored)
    mixed = seen(found.short_ttft_p95_mixed, found.short_ttft_p95_mixed_censored)
    facts.append(("short TTFT p95", f"{alone} alone, {mixed} mixed"))
    facts.append(("short TTFT p50", f"{_latency(found.short_ttft_p50_alone)} alone, "
                  f"{_latency(found.short_ttft_p50_mixed)} mixed"))
    ratio = "×∞ (falls on failed requests)" if found.ratio_p95_above_any_limit else _ratio(found.ratio_p95)
    interval = found.ratio_p95_interval
    if interval is not None and interval.low is not None:
        high = f"×{interval.high:.2f}" if interval.high is not None else "no upper end"
        ratio += f" ({interval.confidence or 0.95:.0%} interval ×{interval.low:.2f} to {high})"
    facts.append(("p95 ratio, mixed / alone", ratio))
    facts.append(("p50 ratio, mixed / alone", _ratio(found.ratio_p50)))
    if params.threshold is not None:
        limit = f"; the test allows ×{params.max_ratio:g}" if params.max_ratio is not None else ""
        facts.append(("counts as interference above", f"×{params.threshold:g}{limit}"))
    failed = [f"{n} {when}" for n, when in ((found.short_failed_alone, "alone"),
                                             (found.short_failed_mixed, "mixed")) if n]
    if failed:
        facts.append(("short requests without a first token", ", ".join(failed)))
    return Parts(facts=tuple(facts))


def _prefix_parts(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Parts:
    """TTFT with one shared prefix against unique prompts of the same length, beside the cache's counters."""
    found, params = scenario.findings, scenario.params
    facts: list[tuple[str, str]] = []
    if params.prefix_tokens is not None:
        facts.append(("prompts", f"a shared {params.prefix_tokens}-token prefix and {params.suffix_tokens} "
                      "tokens of their own, against unique prompts of the same length, "
                      f"at c={params.concurrency}"))
    facts += [("TTFT p50", f"{_latency(found.ttft_p50_shared)} shared, {_latency(found.ttft_p50_unique)} "
                           f"unique ({_ratio(found.ratio_p50)})"),
              ("TTFT p95", f"{_latency(found.ttft_p95_shared)} shared, {_latency(found.ttft_p95_unique)} "
                           f"unique ({_ratio(found.ratio_p95)})")]
    if found.hit_rate_shared is not None or found.hit_rate_unique is not None:
        facts.append(("prefix-cache hit rate", f"{fmt_value('error_rate', found.hit_rate_shared)} shared, "
                      f"{fmt_value('error_rate', found.hit_rate_unique)} unique"))
    elif found.counters:
        facts.append(("prefix-cache counters", found.counters))
    return Parts(facts=tuple(facts))


def _turns_parts(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Parts:
    """TTFT per turn as the history grows, its growth per 1000 prompt tokens, and the prefix cache."""
    found, params = scenario.findings, scenario.params
    facts: list[tuple[str, str]] = []
    if params.conversations is not None and params.turns is not None:
        capped = (f" (of {params.turns_asked} asked: the history must fit the context window)"
                  if params.turns_asked is not None and params.turns_asked != params.turns else "")
        facts.append(("conversations", f"{params.conversations} of {params.turns} turns{capped} at "
                      f"c={params.concurrency}"))
    if found.ttft_p50_by_turn:
        facts.append(("TTFT p50 by turn", ", ".join(f"{turn}: {_latency(v)}"
                                                   for turn, v in found.ttft_p50_by_turn.items())))
    if found.growth_p50 is not None:
        facts.append(("last turn against the first", _ratio(found.growth_p50)))
    if found.ttft_s_per_1k_prompt_tokens is not None:
        facts.append(("TTFT per 1000 prompt tokens", f"{found.ttft_s_per_1k_prompt_tokens * 1000:+.3g} ms"))
    if found.prefix_cache is not None:
        facts.append(("prefix cache", found.prefix_cache.text))
    return Parts(facts=tuple(facts))


def _cancel_parts(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Parts:
    """The burst, each gauge from rest to the watch's end, the counter, and the answers after it."""
    found, asked = scenario.findings.cancel, scenario.params.cancel
    if found is None or asked is None:
        return Parts()
    kept = found.sent - found.streamed
    facts = [("burst", f"{found.sent} requests of {asked.max_tokens} tokens: {found.streamed} streamed, cut "
                       f"after {asked.after_chunks} content chunks; {kept} not, closed after "
                       f"{asked.close_after_s:g} s"),
             ("cancelled", f"{found.cut_mid_stream} mid-stream, {found.closed_early} closed early, "
                           f"{found.cut_waiting} still waiting; {found.answered_before_cancel} answered "
                           f"first, {found.failed} failed")]
    if not found.gauges_served:
        facts.append(("gauges", found.gauges_absent or "not served"))
    for gauge in found.gauges:
        back = (f"back in {gauge.returned_s:.1f} s" if gauge.returned_s is not None
                else f"not back within {asked.return_within_s:g} s")
        facts.append((gauge.metric, f"{fmt_number(gauge.before)} at rest, peak {fmt_number(gauge.peak)}, "
                                    f"{fmt_number(gauge.at_end)} at the end: {back}"
                                    + ("" if gauge.judged else " (shown, not judged)")))
    if found.generated_metric is not None and found.generated_after_grace is not None:
        facts.append((found.generated_metric, f"+{fmt_number(found.generated_after_grace)} tokens from "
                                              f"{asked.grace_s:g} s after the last cancel to the end"))
    facts.append(("a completion afterwards", f"{found.probe}; /health {found.health}"))
    if found.ttft_ratio is not None:
        facts.append(("TTFT p50", f"{_latency(found.ttft_p50_after)} after, "
                                  f"{_latency(found.ttft_p50_before)} before (×{found.ttft_ratio:.2f}; "
                                  f"limit ×{asked.ttft_ratio:g})"))
    return Parts(facts=tuple(facts))


PARTS: dict[Facts, Callable[[RunDocument, CheckResult, CapacityScenario], Parts]] = {
    "climb": _climb_parts, "soak": _soak_parts, "push": _push_parts, "refusal": _refusal_parts,
    "recovery": _recovery_parts, "lengths": _lengths_parts, "interference": _interference_parts,
    "prefix": _prefix_parts, "turns": _turns_parts, "cancel": _cancel_parts,
}
"""How the section lists each reading of report/capacity_kinds.py beside the step table."""


def _answers_fact(scenario: CapacityScenario) -> tuple[tuple[str, str], ...]:
    """The known-answer items' finding beside the knee: where the answers held, and after the load."""
    graded = scenario.findings.correctness
    return () if graded is None else (("answers under load", graded.text),)


def _telemetry(scenario: CapacityScenario) -> str:
    t = scenario.telemetry
    if t is None or not t.series:
        return ""
    every = f" every {t.interval_s:g} s" if t.interval_s else ""
    sources = ", ".join(f"{s.name} ({s.source})" if s.source else s.name for s in t.series)
    return f"Telemetry sampled{every} ({t.samples} samples): {sources}."


def scenario_view(doc: RunDocument, anchor: str, test: CheckResult, scenario: CapacityScenario,
                  href: str) -> ScenarioView:
    """One scenario for the page."""
    kind = kind_of(scenario.kind)
    parts = PARTS[kind.facts](doc, test, scenario) if kind.facts is not None else Parts()
    explanations = tuple(
        ExplanationView(kind=EXPLANATION_WORDS.get(e.kind, e.kind),
                        level=kind.unit.level(e.level) if e.level is not None else "", text=e.text)
        for e in scenario.explanations)
    return ScenarioView(
        anchor=anchor, kind=scenario.kind, title=kind.title, check=words.short_name(test.nodeid),
        href=href, status=scenario.status, status_class=status_class(scenario.status),
        headline=scenario.headline, reasons=tuple(scenario.reasons),
        facts=parts.facts + _answers_fact(scenario),
        verdict=parts.verdict, verdict_class=parts.verdict_class, problems=parts.problems,
        checks=parts.checks, table=level_table(scenario), windows=parts.windows, explanations=explanations,
        notes=tuple(scenario.notes), telemetry=_telemetry(scenario))


def capacity_views(doc: RunDocument, href_of: Callable[[CheckResult], str]) -> tuple[ScenarioView, ...]:
    """Every capacity scenario of the run, as the Capacity section draws them."""
    return tuple(scenario_view(doc, anchor, test, scenario, href_of(test))
                 for anchor, test, scenario in numbered(doc))
