"""The page as data: everything the template prints, derived once from the typed run model."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from pytest_inferaccept.capabilities import CAPABILITIES
from pytest_inferaccept.expectations import check_id
from pytest_inferaccept.model import AnswerConsistency, CheckResult, GatePolicy, RunDocument
from pytest_inferaccept.report import words
from pytest_inferaccept.report.capacity_view import ScenarioView, capacity_views
from pytest_inferaccept.report.correctness_view import CorrectnessView, correctness_view
from pytest_inferaccept.report.evidence_view import EvidenceView, evidence_view
from pytest_inferaccept.report.load_table import load_note, load_tables
from pytest_inferaccept.report.units import (
    fmt_limit,
    fmt_margin,
    fmt_number,
    fmt_value,
    spec_label,
    status_class,
    status_words,
)
from pytest_inferaccept.scrub import strip_userinfo

JUDGED_BAD = ("failed", "error", "xpassed")
MAX_REASONS = 12
BASELINE_REASON = "since the baseline: "
"""How the verdict words each regression found by the comparison with the baseline."""
BASELINE_UNUSABLE = "the baseline could not be compared"
CHANGE_KINDS = {"capability": "capability", "check": "check", "figure": "figure", "load_run": "load run",
                "operator_metric": "/metrics", "server": "server", "answer": "answer",
                "embedding": "embedding"}
GOOD_NEWS_ORDER = {"capability": 0, "check": 1, "figure": 2}
UNTRUSTED_NOTE = " (so figures and answer drift are shown, not judged)"


@dataclass(frozen=True)
class Link:
    """A sentence and the anchor of its evidence."""

    text: str
    href: str
    count: str = ""
    """For a distinct finding in the verdict box: how many checks it stands for ('12 cases')."""


@dataclass(frozen=True)
class CheckView:
    """One acceptance check as a row, with its evidence when it is a finding."""

    anchor: str
    nodeid: str
    suite: str
    name: str
    outcome: str
    message: str
    headline: str
    capabilities: str
    duration: str
    slo: str
    evidence: EvidenceView
    finding: bool
    cause_href: str = ""
    """For a check that failed only because the server had stopped: the anchor of that cause."""


@dataclass(frozen=True)
class CauseView:
    """The server stopped during the run: one finding, with the failures it explains under it."""

    anchor: str
    summary: str
    detail: str
    during: Link | None
    consequences: tuple[Link, ...]


@dataclass(frozen=True)
class SuiteView:
    """The checks of one test file."""

    name: str
    checks: tuple[CheckView, ...]
    counts: str


@dataclass(frozen=True)
class CapabilityView:
    """One row of the capability matrix."""

    name: str
    meaning: str
    required: str
    status: str
    probe: str
    tests: str
    href: str
    models: tuple[Link, ...] = ()
    """With --all-models: each model's status (in `Page.models` order), linked to its first bad check."""


@dataclass(frozen=True)
class ModelChecksView:
    """One model's core checks (--all-models): how many ran to which outcome."""

    counts: str
    status: str
    """passed or failed: the pill the cell wears."""
    href: str


@dataclass(frozen=True)
class SloRowView:
    """One judged SLO limit."""

    check: str
    href: str
    load: str
    key: str
    limit: str
    measured: str
    ci: str
    n: str
    margin: str
    status: str
    status_class: str
    message: str


@dataclass(frozen=True)
class LoadTableView:
    """One of a test's load tables: its caption, headings and a row per run."""

    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class LoadView:
    """A test's load runs: what the server did, then how the figures were made (two tables that fit)."""

    check: str
    href: str
    tables: tuple[LoadTableView, ...]
    workload: str = ""
    """The workload every run sent, named once above the tables; empty when the runs differ."""
    note: str = ""
    """A sentence under the tables (why two TTFT figures), or empty."""


@dataclass(frozen=True)
class ChangeView:
    """One item that differs from the baseline run: its sentence (with the figures) and where to look."""

    kind: str
    status: str
    text: str
    anchor: str = ""
    href: str = ""
    """The evidence of this run's check, when the change is a check that now fails."""


@dataclass(frozen=True)
class AnswerChangeView:
    """One fixed prompt whose answer differs from the baseline's, both texts side by side."""

    id: str
    prompt: str
    before: str
    after: str
    similarity: str
    drifted: bool


@dataclass(frozen=True)
class BaselineView:
    """The "Changed since the baseline" section: what got worse, what got better, what is only flagged."""

    path: str
    date: str
    verdict: str
    about: tuple[tuple[str, str], ...]
    error: str
    headline: str
    untrusted: tuple[str, ...]
    regressions: tuple[ChangeView, ...]
    improvements: tuple[ChangeView, ...]
    flagged: tuple[ChangeView, ...]
    metrics: tuple[ChangeView, ...]
    answers_summary: str
    answers: tuple[AnswerChangeView, ...]
    embeddings: tuple[tuple[str, str, bool], ...]
    policy: str


@dataclass(frozen=True)
class Page:
    """Everything the HTML template prints."""

    title: str
    status: str
    status_class: str
    counts: str
    subtitle: str
    declared: tuple[tuple[str, str], ...]
    reasons: tuple[Link, ...]
    answer: tuple[str, ...]
    fails: tuple[str, ...]
    more_reasons: int
    limitations: tuple[str, ...]
    warnings: tuple[str, ...]
    problems: tuple[str, ...]
    capabilities: tuple[CapabilityView, ...]
    suites: tuple[SuiteView, ...]
    findings: tuple[CheckView, ...]
    causes: tuple[CauseView, ...]
    slo_rows: tuple[SloRowView, ...]
    loads: tuple[LoadView, ...]
    conditions: tuple[tuple[str, str], ...]
    version_info: str
    schema: str
    plugin_version: str
    charts: list[tuple[str, str]] = field(default_factory=list)
    baseline: BaselineView | None = None
    """The comparison with --inferaccept-baseline; None without one (no section is drawn)."""
    capacity: tuple[ScenarioView, ...] = ()
    """The capacity scenarios (ladder, sweep, soak, push); empty without one (no section is drawn)."""
    failed_checks: tuple[Link, ...] = ()
    """A NO-GO's failed checks one by one (test id and message), behind the box's distinct findings."""
    models: tuple[str, ...] = ()
    """With --all-models: the models the capability table has a column for; empty otherwise."""
    model_checks: tuple[ModelChecksView, ...] = ()
    """Each model's core checks, in `models` order (the table's first row)."""
    correctness: CorrectnessView | None = None
    """The known-answer set (the correctness suite); None when it did not run (no section is drawn)."""


def anchor(nodeid: str) -> str:
    """A stable, unique, HTML-safe id for a test's evidence."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", words.short_name(nodeid)).strip("-")[:60]
    return f"check-{slug}-{hashlib.sha1(nodeid.encode()).hexdigest()[:8]}"


def _suite(test: CheckResult) -> str:
    if test.file:
        return test.file
    return test.nodeid.split("::", 1)[0].rsplit("/", 1)[-1] or "tests"


def _is_finding(test: CheckResult) -> bool:
    return test.outcome in JUDGED_BAD or bool(test.evidence.invalid) or bool(test.evidence.warnings)


def _check_view(doc: RunDocument, test: CheckResult) -> CheckView:
    settings = doc.conditions.settings
    evidence = evidence_view(test.evidence, authenticated=settings.api_key == "<set>",
                             max_time=settings.request_timeout)
    slo = ", ".join(f"{k} {fmt_limit(k, v)}" for k, v in (test.slo or {}).items())
    aftermath = words.explained(doc, test)
    return CheckView(
        anchor=anchor(test.nodeid), nodeid=test.nodeid, suite=_suite(test),
        name=words.short_name(test.nodeid), outcome=test.outcome, message=test.message,
        headline=words.first_line(test.message), capabilities=", ".join(test.capabilities),
        duration=f"{test.duration_s:.2f} s", slo=slo, evidence=evidence,
        finding=_is_finding(test) and not aftermath,
        cause_href=f"#cause-{test.caused_by + 1}" if aftermath and test.caused_by is not None else "")


def _causes(doc: RunDocument, checks: dict[str, CheckView]) -> tuple[CauseView, ...]:
    views: list[CauseView] = []
    for number, cause in enumerate(doc.causes, start=1):
        first = checks.get(cause.during or "")
        during = Link(text=first.name, href=f"#{first.anchor}") if first is not None else None
        later = tuple(Link(text=f"{checks[n].name}: {checks[n].outcome}", href=f"#{checks[n].anchor}")
                      if n in checks else Link(text=words.short_name(n), href="")
                      for n in cause.consequences)
        views.append(CauseView(anchor=f"cause-{number}", summary=cause.summary, detail=cause.detail,
                               during=during, consequences=later))
    return tuple(views)


def _reasons(doc: RunDocument, checks: dict[str, CheckView],
             since: BaselineView | None = None) -> tuple[Link, ...]:
    links: list[Link] = []
    causes = {cause.summary: f"#cause-{number}" for number, cause in enumerate(doc.causes, start=1)}
    regressions = {f"{BASELINE_REASON}{c.text}": f"#{c.anchor}" for c in (since.regressions if since else ())}
    for reason in doc.verdict.reasons:
        href = "#checks" if doc.verdict.status == "GO" else "#problems"
        text = words.first_line(reason, 400 if reason in causes else 240)
        if reason in causes:
            links.append(Link(text=text, href=causes[reason]))
            continue
        if reason.startswith(f"{BASELINE_REASON}known-answer set:"):
            links.append(Link(text=words.first_line(reason, 400), href="#correctness"))
            continue
        if since is not None and reason.startswith((BASELINE_REASON, BASELINE_UNUSABLE)):
            links.append(Link(text=words.first_line(reason, 400), href=regressions.get(reason, "#baseline")))
            continue
        for nodeid, view in checks.items():
            if reason.startswith((f"{nodeid} ", f"{nodeid}:")) and view.finding:
                href = f"#{view.anchor}"
                text = words.first_line(view.name + reason[len(nodeid):])
                break
        links.append(Link(text=text, href=href))
    return tuple(links)


def _finding_link(finding: words.Finding, checks: dict[str, CheckView]) -> Link:
    """A distinct finding as a line of the verdict box, linked to its cause or its first failed check."""
    if finding.cause is not None:
        href = f"#cause-{finding.cause + 1}"
    else:
        first = checks.get(finding.nodeids[0])
        href = f"#{first.anchor}" if first is not None and first.finding else "#findings"
    text = f"{finding.title}: {finding.seen}" if finding.seen else finding.title
    return Link(text=text, href=href, count=finding.count_words())


def _box(doc: RunDocument, checks: dict[str, CheckView],
         links: tuple[Link, ...]) -> tuple[tuple[Link, ...], tuple[Link, ...]]:
    """The verdict box's lines (words.verdict_box, as the terminal says them) and, for a NO-GO, the
    failed checks its findings stand for, one by one."""
    box = words.verdict_box(doc)
    lines = tuple(links[line] if isinstance(line, int) else _finding_link(line, checks) for line in box.lines)
    return lines, tuple(links[index] for index in box.failed)


def _models(doc: RunDocument) -> tuple[str, ...]:
    """The models of the per-model columns (--all-models), as the capability matrix orders them."""
    return next((tuple(row.models) for row in doc.capabilities.values() if row.models), ())


def _model_checks(doc: RunDocument, checks: dict[str, CheckView]) -> tuple[ModelChecksView, ...]:
    cells: list[ModelChecksView] = []
    for model in _models(doc):
        tally: dict[str, int] = {}
        bad = ""
        for test in doc.tests:
            if test.model != model:
                continue
            tally[test.outcome] = tally.get(test.outcome, 0) + 1
            if not bad and test.outcome in JUDGED_BAD and test.nodeid in checks:
                bad = f"#{checks[test.nodeid].anchor}"
        cells.append(ModelChecksView(
            counts=", ".join(f"{n} {outcome}" for outcome, n in sorted(tally.items())) or "none ran",
            status="failed" if bad else ("passed" if tally.get("passed") else "not-exercised"), href=bad))
    return tuple(cells)


def _model_statuses(doc: RunDocument, name: str, statuses: dict[str, str] | None,
                    checks: dict[str, CheckView]) -> tuple[Link, ...]:
    """One capability's status per model, each linked to that model's first bad check of it."""
    if not statuses:
        return ()
    links: list[Link] = []
    for model in _models(doc):
        bad = next((checks[t.nodeid] for t in doc.tests if t.model == model and name in t.capabilities
                    and t.nodeid in checks and checks[t.nodeid].outcome in JUDGED_BAD
                    and not checks[t.nodeid].cause_href), None)
        links.append(Link(text=statuses.get(model, "not exercised"), href=f"#{bad.anchor}" if bad else ""))
    return tuple(links)


def _capabilities(doc: RunDocument, checks: dict[str, CheckView]) -> tuple[CapabilityView, ...]:
    rows: list[CapabilityView] = []
    for name, row in doc.capabilities.items():
        broken = [v for v in checks.values() if name in v.capabilities.split(", ")
                  and v.outcome in JUDGED_BAD and not v.cause_href]
        rows.append(CapabilityView(
            name=name, meaning=CAPABILITIES.get(name, ""),
            required="required" if row.required else "probed", status=row.status,
            probe=row.probe.detail if row.probe else ("not probed: required checks must pass"
                                                      if row.required else ""),
            tests=", ".join(f"{count} {outcome}" for outcome, count in sorted(row.tests.items())),
            href=f"#{broken[0].anchor}" if broken else "",
            models=_model_statuses(doc, name, dict(row.models) if row.models else None, checks)))
    return tuple(rows)


def _suites(checks: list[CheckView]) -> tuple[SuiteView, ...]:
    grouped: dict[str, list[CheckView]] = {}
    for check in checks:
        grouped.setdefault(check.suite, []).append(check)
    suites: list[SuiteView] = []
    for name, rows in grouped.items():
        tally: dict[str, int] = {}
        for row in rows:
            tally[row.outcome] = tally.get(row.outcome, 0) + 1
        counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(tally.items()))
        suites.append(SuiteView(name=name, checks=tuple(rows), counts=counts))
    return tuple(suites)


def _load_table(test: CheckResult) -> LoadView:
    found = load_tables(test.load)
    tables = [LoadTableView(caption="what the server did", columns=found.results[0], rows=found.results[1])]
    if len(found.conditions[0]) > 1:  # a column besides the load itself
        tables.append(LoadTableView(caption="how the figures were made: the workload's lengths and the "
                                    "client's account of itself", columns=found.conditions[0],
                                    rows=found.conditions[1]))
    return LoadView(check=words.short_name(test.nodeid), href=f"#{anchor(test.nodeid)}",
                    tables=tuple(tables), workload=found.workload, note=load_note(test.load))


def _load(doc: RunDocument) -> tuple[tuple[SloRowView, ...], tuple[LoadView, ...]]:
    rows: list[SloRowView] = []
    loads: list[LoadView] = []
    for test in doc.tests:
        if test.load:
            loads.append(_load_table(test))
        for run in test.load:
            label = spec_label(run.spec, workload=False)  # the load tables below name the workload
            name, href = words.short_name(test.nodeid), f"#{anchor(test.nodeid)}"
            for row in run.slo.rows if run.slo else []:
                ci = (f"{fmt_value(row.key, row.ci_low)} – {fmt_value(row.key, row.ci_high)}"
                      if row.ci_low is not None and row.ci_high is not None else "—")
                needed = f" (about {row.needed_n} needed)" if row.needed_n else ""
                rows.append(SloRowView(
                    check=name, href=href, load=label, key=row.key, limit=fmt_limit(row.key, row.limit),
                    measured=("∞ (failed requests)" if row.measured is None and row.by_failures
                              else fmt_value(row.key, row.measured)), ci=ci,
                    n=f"{row.n}{needed}" if row.n is not None else "—",
                    margin=fmt_margin(row.margin),
                    status=status_words(row.status) + (" (point estimate)" if row.basis == "point_estimate"
                                                       else ""),
                    status_class=status_class(row.status),
                    message=row.message + (f" · {row.early_stopping}" if row.early_stopping else "")))
    return tuple(rows), tuple(loads)


def _duration(start: str, end: str) -> str:
    try:
        seconds = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return ""
    return f" ({seconds / 60:.1f} min)" if seconds >= 120 else f" ({seconds:.0f} s)"


def _version_summary(info: dict[str, object]) -> str:
    parts: list[str] = []
    for path, body in info.items():
        version = body.get("version") if isinstance(body, dict) else None
        parts.append(f"{path}: {version}" if version else f"{path} answered")
    return "; ".join(parts) if parts else "not reported by the server"


def _conditions(doc: RunDocument) -> tuple[tuple[str, str], ...]:
    c, s, server = doc.conditions, doc.conditions.settings, doc.server
    slo_profile = words.slo_by_test(doc)
    rows: list[tuple[str, str]] = [
        ("server URL", strip_userinfo(server.base_url if server else (s.server_url or "none given"))),
        ("model", server.model if server else (s.model or "unknown")),
    ]
    if server is not None:
        rows += [
            ("served models", ", ".join(server.served_models) or "none listed"),
            ("server version", _version_summary(server.version_info)),
            ("how launched", (server.launched or "external server (--server-url)")
             + (f", ready after {server.ready_seconds:.1f} s" if server.ready_seconds else "")),
        ]
        if server.embedding_model or server.embedding_url != server.base_url:
            rows.append(("embeddings", f"{server.embedding_model or 'no model'} at "
                                       f"{strip_userinfo(server.embedding_url or server.base_url)}"))
        if server.log_paths:
            rows.append(("server log", ", ".join(server.log_paths)))
    rows += [
        ("capabilities required", ", ".join(s.capabilities_required) or "none"),
        ("SLO profile", "; ".join(slo_profile) or "no SLO declared"),
        ("API key", "set (never written)" if s.api_key else "none"),
        ("timeouts", f"request {fmt_number(s.request_timeout)} s, connect {fmt_number(s.connect_timeout)} s"),
        ("plugin", f"pytest-inferaccept {c.plugin_version}"),
        ("pytest", c.pytest_version or "unknown"),
        ("Python", c.python),
        ("client host", f"{c.client_host} ({c.client_platform})"),
        ("client CPUs", f"{c.cpu_count or 'unknown'}"
         + (f", load average {' / '.join(f'{x:g}' for x in c.load_average)} at the end"
            if c.load_average else "")),
        ("started", c.started_at),
        ("finished", c.finished_at + _duration(c.started_at, c.finished_at)),
    ]
    return tuple(rows)


def _shown(value: object, limit: int = 160) -> str:
    """A condition's or a metadata value as text: strings as they are, anything else as JSON."""
    if value is None:
        return "not set"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _prompts(doc: RunDocument) -> dict[str, str]:
    """The fixed prompts this run asked, by id (the answer-consistency module records them)."""
    out: dict[str, str] = {}
    for test in doc.tests:
        recorded = test.evidence.values.get("answers")
        for entry in recorded if isinstance(recorded, list) else []:
            if isinstance(entry, dict) and "id" in entry and isinstance(entry.get("prompt"), str):
                out.setdefault(str(entry["id"]), entry["prompt"])
    return out


def _answers(doc: RunDocument, section: AnswerConsistency) -> tuple[str, tuple[AnswerChangeView, ...],
                                                                    tuple[tuple[str, str, bool], ...]]:
    compared, identical = section.compared, section.identical
    rate, threshold = section.exact_match_rate, section.threshold
    summary = ""
    if compared:
        summary = (f"{identical} of {compared} answers identical to the baseline's"
                   + (f" ({rate * 100:.0f}% exact match)" if rate is not None else "")
                   + (f"; a changed answer drifts below similarity {threshold:g}" if threshold is not None
                      else "")
                   + f"; drift policy: {section.policy or 'warn'}.")
    prompts = _prompts(doc)
    rows = tuple(AnswerChangeView(
        id=c.id, prompt=prompts.get(c.id, ""), before=c.before, after=c.after, drifted=c.drifted,
        similarity=f"{c.similarity:.2f}" if c.similarity is not None else "—")
        for c in section.changed)
    cosines = tuple((e.id, f"{e.cosine:.4f}" if e.cosine is not None else "vectors of different length",
                     e.drifted) for e in section.embeddings)
    return summary, rows, cosines


def _policy(policy: GatePolicy) -> str:
    """The tolerances and the answer-drift policy the comparison used, as one line."""
    parts: list[str] = []
    if policy.tolerances:
        parts.append("tolerances: " + ", ".join(
            f"{key} {value * 100:g}{' points' if key in ('error_rate', 'goodput') else '%'}"
            for key, value in policy.tolerances.items()))
    if policy.answer_drift:
        parts.append(f"answer drift: {policy.answer_drift}")
    if policy.answer_threshold is not None:
        parts.append(f"answer similarity threshold {policy.answer_threshold:g}")
    return "; ".join(parts)


def _baseline(doc: RunDocument, checks: dict[str, CheckView]) -> BaselineView | None:
    section = doc.baseline
    if section is None:
        return None
    run = section.run
    about = tuple((label, _shown(value)) for label, value in (
        ("model", run.model), ("server version", run.server_version), ("plugin", run.plugin_version),
        ("client host", run.client_host)) if value is not None)
    evidence = {check_id(nodeid): f"#{view.anchor}" for nodeid, view in checks.items() if view.finding}
    changes = [ChangeView(kind=CHANGE_KINDS.get(c.kind, c.kind), status=c.status, text=c.detail,
                          href=evidence.get(c.item, "") if c.kind == "check" else "")
               for c in section.changes]
    regressions = tuple(ChangeView(kind=c.kind, status=c.status, text=c.text, href=c.href,
                                   anchor=f"baseline-regression-{number}")
                        for number, c in enumerate((c for c in changes if c.status == "regression"), start=1))
    good = sorted((c for c in changes if c.status == "improvement"),
                  key=lambda c: GOOD_NEWS_ORDER.get(c.kind, len(GOOD_NEWS_ORDER)))
    flagged = [ChangeView(kind="condition", status=d.effect or "flagged",
                          text=f"{d.label or d.key}: {_shown(d.before)} → "
                               f"{_shown(d.after)}" + (UNTRUSTED_NOTE if d.effect == "untrusted" else ""))
               for d in section.conditions]
    flagged += [c for c in changes if c.status == "untrusted"]
    flagged += [c for c in changes
                if c.status == "changed" and c.kind not in ("/metrics", "answer", "embedding")]
    answers_summary, answers, cosines = _answers(doc, section.answers or AnswerConsistency())
    policy = _policy(section.policy)
    if section.error:
        headline = ("The baseline could not be used, so this run cannot say whether anything got worse "
                    "(the verdict is INVALID until the comparison can be made).")
    else:
        headline = words.baseline_sentence(doc) or ""
    return BaselineView(
        path=section.path or "not given", date=words.run_date(run.started_at),
        verdict=run.verdict or "unknown", about=about, error=section.error or "",
        headline=headline, untrusted=tuple(section.untrusted_because), regressions=regressions,
        improvements=tuple(good), flagged=tuple(flagged),
        metrics=tuple(c for c in changes if c.kind == "/metrics"),
        answers_summary=answers_summary, answers=answers, embeddings=cosines, policy=policy)


def build_page(doc: RunDocument) -> Page:
    """Derive the page from the run model."""
    checks = {t.nodeid: _check_view(doc, t) for t in doc.tests}
    since = _baseline(doc, checks)
    slo_rows, loads = _load(doc)
    box, failed_checks = _box(doc, checks, _reasons(doc, checks, since))
    counts = ", ".join(f"{n} {k}" for k, n in sorted(doc.verdict.counts.items()))
    server = doc.server
    host = strip_userinfo(server.base_url if server else (doc.conditions.settings.server_url or ""))
    model = server.model if server else (doc.conditions.settings.model or "")
    return Page(
        title=f"{doc.verdict.status}: {model or 'no model'} at {host or 'no server'}",
        status=doc.verdict.status,
        status_class={"GO": "go", "NO-GO": "nogo"}.get(doc.verdict.status, "invalid"),
        counts=counts or "no check ran",
        subtitle=f"{model or 'no model'} at {host or 'no server'} · {doc.conditions.finished_at}",
        declared=tuple(doc.conditions.declared.items()),
        reasons=box[:MAX_REASONS],
        answer=tuple(words.answer(doc)),
        fails=tuple(words.failures(doc)),
        more_reasons=max(0, len(box) - MAX_REASONS),
        limitations=tuple(words.limitations(doc)),
        warnings=tuple(doc.verdict.warnings),
        problems=tuple(doc.problems),
        capabilities=_capabilities(doc, checks),
        suites=_suites(list(checks.values())),
        findings=tuple(v for v in checks.values() if v.finding),
        causes=_causes(doc, checks),
        slo_rows=slo_rows,
        loads=loads,
        conditions=_conditions(doc),
        version_info=json.dumps(server.version_info, indent=2, ensure_ascii=False, default=str)
        if server and server.version_info else "",
        schema=doc.schema_id,
        plugin_version=doc.conditions.plugin_version,
        baseline=since,
        capacity=capacity_views(doc, lambda test: f"#{anchor(test.nodeid)}"),
        failed_checks=failed_checks,
        models=_models(doc),
        model_checks=_model_checks(doc, checks),
        correctness=correctness_view(doc),
    )
