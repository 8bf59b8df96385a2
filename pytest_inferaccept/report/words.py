"""The page's sentences drawn from the data: the plain-words answer and the run's limitations.

Every sentence here is built from what the results document holds; where the run measured
nothing (no load, no version), the sentence says so instead of guessing.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from pytest_inferaccept.capabilities import CAPABILITIES
from pytest_inferaccept.markers import SloInForce, slo_in_force
from pytest_inferaccept.model import (
    CapacityScenario,
    CapacityStep,
    CheckResult,
    LoadResult,
    LoadSelfcheck,
    RunDocument,
    SloRow,
)
from pytest_inferaccept.report.capacity_kinds import Sentences, kind_of, level_words
from pytest_inferaccept.report.units import cut_short, fmt_limit, fmt_value, spec_label, status_class

MAX_LISTED = 5
_PERCENTILE_KEY = re.compile(r"^(ttft|e2e|itl|tpot)_(p\d+|mean|max)$")
_METRIC_WORDS = {"ttft": "TTFT", "e2e": "end-to-end", "itl": "ITL", "tpot": "TPOT"}
_KEY_WORDS = {"error_rate": "error rate", "throughput_min": "throughput", "request_rate_min": "request rate",
              "goodput_min": "goodput"}
_KNEE_WORDS = {
    "queueing": "requests queue: the server's waiting gauge grows while throughput stays flat",
    "saturated": "throughput stays flat while latency climbs",
}
NO_LOAD = ("No load test ran, so this run says nothing about latency, throughput or how many "
           "concurrent users the server can serve within an SLO.")


def first_line(text: str, limit: int = 240) -> str:
    """The first line of a message, cut to `limit` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def short_name(nodeid: str) -> str:
    """The test's name without its file: 'test_x[stream]'."""
    return nodeid.rsplit("::", 1)[-1]


def _series(items: list[str]) -> str:
    if len(items) <= MAX_LISTED:
        return ", ".join(items)
    return f"{', '.join(items[:MAX_LISTED])} and {len(items) - MAX_LISTED} more"


def _load_runs(doc: RunDocument) -> list[tuple[CheckResult, LoadResult]]:
    return [(test, run) for test in doc.tests for run in test.load]


def _row_phrase(row: SloRow) -> str:
    if row.message:
        return row.message.splitlines()[0]  # the statistics' own sentence, as the terminal shows it
    measured = fmt_value(row.key, row.measured)
    ci = ""
    if row.ci_low is not None and row.ci_high is not None:
        ci = f", 95% CI {fmt_value(row.key, row.ci_low)}–{fmt_value(row.key, row.ci_high)}"
    n = f", n={row.n}" if row.n is not None else ""
    return f"{row.key} {measured}{ci}{n} against {fmt_limit(row.key, row.limit)}"


def _load_sentence(test: CheckResult, run: LoadResult) -> str:
    """The run's answer against its SLO; where it measured fewer requests than asked, how many and why."""
    said = _judged_sentence(test, run)
    short = cut_short(run)
    return f"{said} {short}" if short else said


def _judged_sentence(test: CheckResult, run: LoadResult) -> str:
    where = f"at {spec_label(run.spec)} ({short_name(test.nodeid)})"
    if run.slo is None or not run.slo.rows:
        return f"Measured {where} without SLO limits: see the load table."
    rows = run.slo.rows
    verdict = status_class(run.slo.status)
    if verdict == "pass":
        limits = ", ".join(f"{r.key} {fmt_limit(r.key, r.limit)}" for r in rows)
        return f"Meets the SLOs {where}: {limits}."
    failed = [r for r in rows if status_class(r.status) == "fail"]
    if failed:
        return f"Misses the SLOs {where}: " + "; ".join(_row_phrase(r) for r in failed) + "."
    unsure = [r for r in rows if status_class(r.status) == "nodata"]
    if unsure:
        return (f"Cannot tell whether the server meets {', '.join(r.key for r in unsure)} {where}: "
                "too few requests were measured.")
    return f"SLO status {run.slo.status} {where}."


def _ladder_sentence(test: CheckResult) -> str | None:
    """One sentence for a test that ran several concurrency levels: how far it stays within the SLOs."""
    levels = sorted((run.spec.concurrency, run) for run in test.load
                    if run.spec.concurrency is not None and run.slo is not None)
    if len(levels) < 2 or len(levels) != len(test.load):
        return None
    name = short_name(test.nodeid)
    passing = [c for c, run in levels if run.slo and status_class(run.slo.status) == "pass"]
    first = levels[0][1]
    limits = ", ".join(f"{r.key} {fmt_limit(r.key, r.limit)}" for r in (first.slo.rows if first.slo else []))
    if not passing:
        return f"Misses the SLOs ({limits}) at every concurrency measured in {name}, from {levels[0][0]} up."
    best = max(passing)
    above = [(c, run) for c, run in levels if c > best]
    sentence = f"Serves concurrency up to {best} within the SLOs ({limits}) in {name}"
    if not above:
        return sentence + f"; no higher level was measured (highest: {levels[-1][0]})."
    level, run = above[0]
    misses = [r for r in (run.slo.rows if run.slo else []) if status_class(r.status) != "pass"]
    what = "; ".join(_row_phrase(r) for r in misses) or (run.slo.status if run.slo else "")
    return sentence + f"; at concurrency {level}: {what}."


def _capability_sentences(doc: RunDocument) -> list[str]:
    out: list[str] = []
    by_status: dict[str, list[str]] = {}
    for name, row in doc.capabilities.items():
        by_status.setdefault(row.status, []).append(name)
    if by_status.get("supported"):
        out.append(f"Supports: {_series(by_status['supported'])}.")
    if by_status.get("unsupported"):
        out.append(f"Does not offer: {_series(by_status['unsupported'])}.")
    if by_status.get("not exercised"):
        out.append(f"Required but not checked by any test: {_series(by_status['not exercised'])}.")
    return out


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One distinct finding: a server that stopped, or the failed checks of one capability or one check."""

    key: str
    """What its checks share, the same in every run: a capability, or a check's name without its case
    ('test_x' for 'test_x[stream]'); 'cause-N' (from 1) for a server that stopped."""
    title: str
    """The finding in a few words: the capability and what it means, the check's name, or the cause's line."""
    seen: str
    """What the first of its failed checks saw (its message's first line); empty for a cause."""
    line: str
    """The finding as one line of the plain-words answer (see `failures`)."""
    nodeids: tuple[str, ...]
    """The checks it stands for: those that failed, or for a cause the one running when the server
    stopped and those that failed after it."""
    unit: str = "check"
    """What one of `nodeids` is called: 'case' for the cases of one parametrized check."""
    cause: int | None = None
    """For a server that stopped: its index in the document's causes."""

    def count_words(self) -> str:
        """How many checks it stands for, in words: '12 cases', '1 check'."""
        count = len(self.nodeids)
        return f"{count} {self.unit}{'' if count == 1 else 's'}"


def finding_key(test: CheckResult) -> str:
    """The finding a failed check belongs to: its first (most specific) capability, else its check's name.

    A check's first capability is its most specific one (a streamed tool test lists tools before
    stream); without one, the cases of one parametrized check share its name.
    """
    return test.capabilities[0] if test.capabilities else short_name(test.nodeid).split("[", 1)[0]


def findings(doc: RunDocument) -> list[Finding]:
    """The run's distinct findings, causes first: what the page's first box and the answer list.

    Several checks failing on one capability are one finding; so are the cases of one
    parametrized check without a capability. A check tied to a cause (the one running when the
    server stopped, or a later one) is told by the cause's finding.
    """
    grouped: dict[str, list[CheckResult]] = {}
    for test in doc.tests:
        # A check flagged invalid could not judge the server: undecided, not a finding.
        if test.outcome in ("failed", "error") and test.caused_by is None and not test.evidence.invalid:
            grouped.setdefault(finding_key(test), []).append(test)
    # Causes before symptoms: a server that stopped is one finding, whatever failed after it.
    out = [Finding(key=f"cause-{number}", title=first_line(cause.summary, 400), seen="",
                   line=first_line(cause.summary, 400), cause=number - 1,
                   nodeids=tuple(dict.fromkeys(n for n in (cause.during, *cause.consequences) if n)))
           for number, cause in enumerate(doc.causes, start=1)]
    for what, tests in grouped.items():
        first = tests[0]
        seen = first_line(first.message, 140) or first.outcome
        ids = tuple(test.nodeid for test in tests)
        if what in CAPABILITIES:
            title = f"{what} ({CAPABILITIES[what]})"
            more = f" ({len(tests)} checks)" if len(tests) > 1 else ""
            out.append(Finding(key=what, title=title, seen=seen, line=f"{title}: {seen}{more}", nodeids=ids))
            continue
        unit = "case" if any("[" in short_name(n) for n in ids) else "check"
        if len(tests) > 1:
            cases = [_case(test) for test in tests]
            line = f"{what}: fails for {len(tests)} cases ({_series(cases)}); the first: {seen}"
            out.append(Finding(key=what, title=what, seen=seen, line=line, nodeids=ids, unit=unit))
        else:
            title = short_name(first.nodeid)
            out.append(Finding(key=what, title=title, seen=seen, line=f"{title}: {seen}", nodeids=ids,
                               unit=unit))
    return out


def reason_check(reason: str, nodeids: Iterable[str]) -> str | None:
    """The check a verdict reason is about ('<nodeid> failed: ...'), or None for any other reason."""
    return next((n for n in nodeids if reason.startswith((f"{n} ", f"{n}:"))), None)


@dataclass(frozen=True)
class VerdictBox:
    """The verdict's lines as every reader shows them: a NO-GO's failed checks grouped into findings."""

    lines: tuple[int | Finding, ...]
    """Each line: a verdict reason kept as it is (its index in `verdict.reasons`), or a finding."""
    failed: tuple[int, ...] = ()
    """The reasons (indices) that name a failed check one of the findings stands for."""


def verdict_box(doc: RunDocument) -> VerdictBox:
    """The verdict's lines: a NO-GO says its distinct findings (see `findings`) where the verdict lists
    a cause or a failed check; its other reasons (a finding of the session itself, a regression since
    the baseline) keep their place around them. Any other verdict keeps its reasons as they are.
    """
    reasons = doc.verdict.reasons
    if doc.verdict.status != "NO-GO":
        return VerdictBox(lines=tuple(range(len(reasons))))
    found = findings(doc)
    grouped = {nodeid for f in found if f.cause is None for nodeid in f.nodeids}
    causes = {cause.summary for cause in doc.causes}
    nodeids = [test.nodeid for test in doc.tests]
    lines: list[int | Finding] = []
    failed: list[int] = []
    told = False
    for index, reason in enumerate(reasons):
        nodeid = reason_check(reason, nodeids)
        if reason not in causes and (nodeid is None or nodeid not in grouped):
            lines.append(index)
            continue
        if nodeid is not None:
            failed.append(index)
        if not told:
            lines += found
            told = True
    if not told:
        lines += found
    return VerdictBox(lines=tuple(lines), failed=tuple(failed))


def failures(doc: RunDocument) -> list[str]:
    """One line per distinct finding (see `findings`): the capability or check, and what was seen first."""
    return [finding.line for finding in findings(doc)]


def _case(test: CheckResult) -> str:
    """The parameters of a parametrized check ('model_missing'), or its name."""
    name = short_name(test.nodeid)
    return name.split("[", 1)[1].rstrip("]") if "[" in name else name


def explained(doc: RunDocument, test: CheckResult) -> bool:
    """True when the test failed because the server had stopped (one of a cause's consequences)."""
    index = test.caused_by
    return (index is not None and 0 <= index < len(doc.causes)
            and test.nodeid in doc.causes[index].consequences)


def answer(doc: RunDocument) -> list[str]:
    """The answer in plain words, a few sentences that can be pasted into a decision."""
    status = doc.verdict.status
    out: list[str] = []
    counts = doc.verdict.counts
    judged = sum(counts.get(k, 0) for k in ("passed", "failed", "error", "xpassed"))
    if status == "INVALID":
        reason = first_line(doc.verdict.reasons[0]) if doc.verdict.reasons else "no reason recorded"
        out.append(f"This run cannot decide: {reason}. Nothing on this page is a finding about the "
                   "server until that is fixed and the run repeated.")
    elif status == "NO-GO":
        bad = [t for t in doc.tests if t.outcome in ("failed", "error") and not t.evidence.invalid]
        found = failures(doc)
        after = sum(explained(doc, t) for t in bad)
        aftermath = (f" ({after} of them only because the server had stopped answering)"
                     if after else "")
        if bad:
            out.append(f"Not ready: {len(bad)} of {judged} checks that ran to a result failed{aftermath}, "
                       f"{len(found)} distinct finding{'s' if len(found) != 1 else ''} (listed below).")
        else:
            why = ("what changed since the baseline (below)" if any(
                r.startswith("since the baseline: ") for r in doc.verdict.reasons) else "the reasons above")
            out.append(f"Not ready: each of the {judged} checks that ran to a result passed, but the run is "
                       f"a NO-GO for {why}.")
        undecided = [t for t in doc.tests if t.evidence.invalid]
        if undecided:
            out.append(f"{len(undecided)} more check{'s' if len(undecided) != 1 else ''} could not judge the "
                       f"server and decided nothing (first: {short_name(undecided[0].nodeid)}: "
                       f"{first_line(undecided[0].evidence.invalid or '', 200)}).")
    else:
        out.append(f"Passed every acceptance check that ran ({judged} checks).")
    since = baseline_sentence(doc)
    if since:
        out.append(since)
    if status != "INVALID":
        out.extend(_capability_sentences(doc))
    runs = _load_runs(doc)
    for test in doc.tests:
        ladder = _ladder_sentence(test)
        out.extend([ladder] if ladder else [_load_sentence(test, run) for run in test.load])
    out.extend(capacity_sentences(doc))
    if not runs and not capacity_scenarios(doc):
        out.append(NO_LOAD)
    return out


def _skipped_for_capabilities(tests: Iterable[CheckResult]) -> Counter[str]:
    gated: Counter[str] = Counter()
    for test in tests:
        if test.outcome != "skipped":
            continue
        head, _, rest = test.message.partition(":")
        if _gated(test):
            gated[f"{rest.strip().split(':')[0] or 'unknown'} ({head})"] += 1
    return gated


def run_date(started_at: object) -> str:
    """When a run started, to the minute ('2025-03-01 14:05 UTC'), or 'unknown date'."""
    if not isinstance(started_at, str) or not started_at:
        return "unknown date"
    try:
        when = datetime.fromisoformat(started_at)
    except ValueError:
        return started_at
    return f"{when:%Y-%m-%d %H:%M} {when.tzname() or ''}".rstrip()


def baseline_sentence(doc: RunDocument) -> str | None:
    """One sentence on the comparison with the baseline run (None without --inferaccept-baseline)."""
    section = doc.baseline
    if section is None:
        return None
    if section.error:
        which = f"The baseline {section.path}" if section.path else "The baseline"
        return (f"{which} could not be used ({first_line(section.error)}), so this run cannot say whether "
                "anything got worse since the last accepted run.")
    head = f"Compared with the run of {run_date(section.run.started_at)}"
    regressions = section.regressions
    if regressions:
        shown = "; ".join(first_line(r, 200) for r in regressions[:MAX_LISTED])
        more = f"; and {len(regressions) - MAX_LISTED} more" if len(regressions) > MAX_LISTED else ""
        plural = "s" if len(regressions) != 1 else ""
        return f"{head}: {len(regressions)} regression{plural}: {shown}{more}."
    sentence = f"{head}: nothing got worse beyond the tolerances"
    if section.improvements:
        count = len(section.improvements)
        sentence += f"; {count} improvement{'s' if count != 1 else ''}"
    if not section.trusted and section.untrusted_because:
        sentence += (", but the figures could not be compared: "
                     + "; ".join(first_line(r, 160) for r in section.untrusted_because[:MAX_LISTED]))
    return sentence + "."


def limitations(doc: RunDocument) -> list[str]:
    """What this run could not show, written from the data (empty only for a complete run)."""
    out: list[str] = []
    runs = _load_runs(doc)
    if not runs and not capacity_scenarios(doc):
        out.append(NO_LOAD)
    out.extend(_capacity_limitations(doc))
    cut: dict[str, list[tuple[str, str]]] = {}
    for test, run in runs:
        where = f"{short_name(test.nodeid)} at {spec_label(run.spec)}"
        for row in run.slo.rows if run.slo else []:
            if status_class(row.status) == "nodata":
                needed = f", about {row.needed_n} needed" if row.needed_n else ""
                out.append(f"Sample too small for {row.key} in {where}: n={row.n}{needed}.")
        short = cut_short(run)
        if short:
            cut.setdefault(short_name(test.nodeid), []).append((spec_label(run.spec), short))
        reasons = _bottleneck(run.selfcheck)
        if reasons and run.selfcheck.client_check == "warn":
            out.append(f"The client lagged in {where} (judged anyway, as --client-check warn asks): "
                       f"{'; '.join(reasons)}.")
        elif reasons:
            said = "; ".join(reasons)
            # The self-check's sentences end by saying whom the figures describe; an older one may not.
            tail = ("" if "the client, not the server" in said
                    else " Those numbers describe the client, not the server.")
            out.append(f"Client-bound in {where}: {said}.{tail}")
        usage = run.summary.usage
        if usage is not None and usage.without_usage:
            note = usage.note or "output tokens were counted from the streamed content events instead"
            out.append(f"The server sent no usage for {usage.without_usage} requests in {where}: {note}")
        if run.slo and (run.slo.point_estimate or any(r.basis == "point_estimate" for r in run.slo.rows)):
            out.append(f"The SLOs in {where} were judged on the point estimate, not on its confidence "
                       "interval (as asked): a pass there is weaker evidence.")
    for name, shorts in cut.items():
        label, short = shorts[0]
        which = (f"at {label}" if len(shorts) == 1 else f"{len(shorts)} load runs measured fewer requests "
                 f"than they asked for; the first, at {label}")
        out.append(f"In {name} {which}: {short[:1].lower()}{short[1:]} The figures describe those requests "
                   "only.")
    gated = _skipped_for_capabilities(doc.tests)
    if gated:
        listed = [f"{name}: {count}" for name, count in sorted(gated.items())]
        out.append(f"{sum(gated.values())} checks were skipped because the server lacks a capability "
                   f"they need ({_series(listed)}).")
    other = [t for t in doc.tests if t.outcome == "skipped" and not _gated(t)]
    if other:
        out.append(f"{len(other)} checks were skipped for other reasons (first: "
                   f"{first_line(other[0].message, 120) or 'no reason given'}).")
    deselected = doc.deselected
    if deselected.count:
        named = [short_name(n) for n in deselected.examples[:MAX_LISTED]]
        more = f" and {deselected.count - len(named)} more" if deselected.count > len(named) else ""
        out.append(f"{deselected.count} acceptance checks were deselected (-k, -m or --deselect) and did "
                   f"not run, so the verdict covers a subset (deselected: {', '.join(named)}{more}).")
    for cause in doc.causes:
        if cause.consequences:
            out.append(f"{len(cause.consequences)} checks were not judged: they failed only because the "
                       f"server at {cause.server} had stopped ({cause.kind}); rerun them once it stays up.")
    xfailed = [t for t in doc.tests if t.outcome == "xfailed"]
    if xfailed:
        out.append(f"{len(xfailed)} checks are marked as expected to fail (xfail) and are not judged.")
    load = doc.conditions.load_average
    cpus = doc.conditions.cpu_count
    if load and cpus and load[0] > cpus:
        out.append(f"The client host was busy at the end of the run (load {load[0]:g} on {cpus} CPUs): "
                   "timings taken on it may be inflated.")
    if doc.server is not None and not doc.server.version_info:
        out.append("The server did not say which version it runs (no /version, /props, /info, "
                   "/get_server_info or /api/version answered): record it with --condition version=...")
    return out


def _bottleneck(selfcheck: LoadSelfcheck) -> list[str]:
    """Why the client, not the server, limited a load run: the self-check's own sentences.

    The load test writes them to `selfcheck.client_bound` (stats.bottleneck_reasons over the
    engine's account); a document that kept only whether it was client-bound says so.
    """
    bound = selfcheck.client_bound
    if isinstance(bound, list):
        return [str(reason) for reason in bound if str(reason).strip()]
    return ["the results document records that the client limited the run, but not why"] if bound else []


def _gated(test: CheckResult) -> bool:
    return test.message.partition(":")[0] in ("unsupported", "broken")


# -- capacity scenarios (docs/capacity.md) --


def capacity_scenarios(doc: RunDocument) -> list[tuple[CheckResult, CapacityScenario]]:
    """Every capacity scenario of the run with the test that ran it, in document order."""
    return [(test, scenario) for test in doc.tests for scenario in test.capacity]


def slo_in_force_for(doc: RunDocument, test: CheckResult) -> SloInForce[dict[str, float]]:
    """The SLO that judged a test's load, by the judge's own rule (markers.slo_in_force)."""
    load = doc.conditions.settings.load
    session = load.slo if load is not None else None
    return slo_in_force(None if test.slo is None else dict(test.slo),
                        None if session is None else {str(k): float(v) for k, v in session.items()})


def slo_of(doc: RunDocument, test: CheckResult) -> dict[str, float]:
    """The SLO a test's load was judged against: its marker's, else the session's --slo (empty: none)."""
    return slo_in_force_for(doc, test).slo or {}


def slo_by_test(doc: RunDocument) -> list[str]:
    """Which SLO judged which test: a marker's per test, the session's for the load tests without one.

    'test_chat: ttft_p95 ≤ 800 ms, error_rate ≤ 5 % (its @slo marker)'; a load test without either
    is named as measured, not judged. Tests sharing the same SLO and source are one line.
    """
    load = doc.conditions.settings.load
    session = (load.slo if load is not None else None) or {}
    source = (load.slo_source if load is not None else None) or "--slo"
    lines: dict[str, list[str]] = {}
    for test in doc.tests:
        name = short_name(test.nodeid)
        judged = slo_in_force_for(doc, test)
        if judged.from_marker:
            limits = ", ".join(f"{k} {fmt_limit(k, v)}" for k, v in (judged.slo or {}).items())
            said = f"{limits} (its @slo marker)" if limits else "no limit (its @slo marker gives none)"
        elif not (test.load or test.capacity):
            continue
        elif judged.slo:
            said = ", ".join(f"{k} {fmt_limit(k, v)}" for k, v in judged.slo.items()) + f" (from {source})"
        else:
            said = "none given (measured, not judged)"
        lines.setdefault(said, []).append(name)
    out = [f"{_series(names)}: {said}" for said, names in lines.items()]
    if session and not any(f"(from {source})" in said for said in lines):
        out.append(", ".join(f"{k} {fmt_limit(k, v)}" for k, v in session.items())
                   + f" (from {source}, for load tests without a marker; none ran)")
    return out


def key_words(key: str) -> str:
    """An SLO key as words: 'ttft_p95' reads 'TTFT p95', 'error_rate' reads 'error rate'."""
    match = _PERCENTILE_KEY.match(key)
    if match:
        return f"{_METRIC_WORDS[match.group(1)]} {match.group(2)}"
    return _KEY_WORDS.get(key, key)


def slo_words(slo: Mapping[str, float]) -> str:
    """The limits as words: 'TTFT p95 ≤ 300 ms, error rate ≤ 5 %'."""
    return ", ".join(f"{key_words(k)} {fmt_limit(k, v)}" for k, v in slo.items())


def statuses_words(statuses: Mapping[str, int]) -> str:
    """Failed answers by status: 'HTTP 503 ×28, HTTP 500 ×2'."""
    return ", ".join(f"HTTP {status} ×{count}" for status, count in sorted(statuses.items()))


def step_figure(step: CapacityStep, key: str) -> float | None:
    """The step's value of an SLO key (a latency percentile, the error rate, throughput), if it has one."""
    if key == "throughput_min":
        return step.throughput_tokens_per_s
    if key == "request_rate_min":
        return step.request_rate_per_s
    if key == "error_rate" or _PERCENTILE_KEY.match(key):
        value = getattr(step, key, None)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return None


def _capitalised(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] if text else text


def _sentence(text: str) -> str:
    text = _capitalised(text)
    return text if not text or text.endswith((".", "!", "?")) else text + "."


def _climb_sentences(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> list[str]:
    """The ladder's (or sweep's) answer: how far it stays within the SLOs, and what happens past the knee."""
    kind, found, steps = scenario.kind, scenario.findings, scenario.steps
    unit = kind_of(kind).unit
    if not steps:
        return [_sentence(scenario.headline or f"the {kind} measured no level")]
    if scenario.status == "invalid" and scenario.reasons:
        return [f"The {kind} could not judge the server: {first_line(scenario.reasons[0])}."]
    slo = slo_of(doc, test)
    best = found.max_slo_level
    knee = found.knee.level if found.knee is not None else None
    if not slo:
        head = f"No SLO was given, so the {kind} judges no level"
    elif found.headroom is not None:
        said = found.headroom.text
        head = f"{said[:1].upper()}{said[1:]} within your SLOs ({slo_words(slo)})"
    elif best is not None:
        head = f"{unit.serves} {unit.amount(best)} within your SLOs ({slo_words(slo)})"
    elif steps[0].slo_status == "fail":
        head = f"Misses your SLOs ({slo_words(slo)}) even at {unit.amount(steps[0].level)}"
    else:
        head = (f"Cannot tell how many {unit.users} the server serves within your SLOs ({slo_words(slo)}): "
                f"{first_line(found.max_slo_reason or 'no level could be judged', 200)}")
    if knee is not None:
        at_knee = next((e for e in scenario.explanations if e.level == knee and e.kind in _KNEE_WORDS), None)
        why = _KNEE_WORDS[at_knee.kind] if at_knee else "throughput stops growing while latency climbs"
        tail = f"beyond {unit.bare.format(knee)}, {why}"
    else:
        tail = (f"throughput kept growing up to {unit.amount(steps[-1].level)} (no knee within the "
                f"{unit.steps} measured)")
    out = [f"{head}; {tail}."]
    above = next((s for s in steps if best is not None and s.level > best), None) if slo else None
    if above is not None:
        failed = (f"{above.failed} of {above.measured} failed: {statuses_words(above.error_statuses)}"
                  if above.failed and above.error_statuses else "")
        figures = []
        for key in slo:
            value = step_figure(above, key)
            if value is not None:
                extra = f" ({failed})" if key == "error_rate" and failed else ""
                figures.append(f"{key_words(key)} {fmt_value(key, value)}{extra}")
        if failed and "error_rate" not in slo:
            figures.append(failed)
        if figures:
            out.append(f"At {unit.amount(above.level)}: {', '.join(figures)}.")
    out += [_sentence(e.text) for e in scenario.explanations if e.kind == "kv_cache_full" and e.text]
    return out


def _soak_sentences(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> list[str]:
    """How the soak went: each check in a few words, the failing ones with their figures."""
    duration, concurrency = scenario.params.duration_s, scenario.params.concurrency
    head = "Over the soak"
    if duration is not None and concurrency is not None:
        head = f"Over a {duration:g} s soak at {kind_of(scenario.kind).unit.amount(concurrency)}"
    calm = {"ttft_drift": "TTFT stable", "e2e_drift": "end-to-end latency stable",
            "ttft_tail_drift": "TTFT tail stable", "e2e_tail_drift": "end-to-end tail stable",
            "memory_growth": "memory stable", "gpu_memory_growth": "GPU memory stable",
            "errors": "no request failed", "slo": "the SLO met over the whole soak",
            "slo_windows": "no window beyond the SLO"}
    what = {"ttft_drift": "TTFT drift", "e2e_drift": "end-to-end drift", "memory_growth": "memory growth",
            "ttft_tail_drift": "TTFT tail drift", "e2e_tail_drift": "end-to-end tail drift",
            "gpu_memory_growth": "GPU memory growth", "errors": "errors",
            "slo": "the SLO over the whole soak", "slo_windows": "the SLO per window"}
    parts: list[str] = []
    bad = False
    for name, check in scenario.findings.checks.items():
        # The soak's own short answer where it gave one: the rate, the projection to the horizon,
        # the time to the limit ("at this rate the server reaches ... after about 9 h").
        answer = check.answer
        if check.status == "pass":
            calm_words = answer if isinstance(answer, str) and answer else calm.get(name, f"{name} passed")
            if name == "errors" and check.error_rate:
                calm_words = f"errors within the limit ({fmt_value('error_rate', check.error_rate)})"
            parts.append(calm_words)
        elif check.status == "not_measured":
            parts.append(f"{what.get(name, name)} not measured")
        elif check.status == "not_enough_data":
            # the check's own words where it gave them (an error rate not yet shown within its
            # limit is not "too few windows")
            parts.append(f"{what.get(name, name)}: {answer}" if isinstance(answer, str) and answer
                         else f"{what.get(name, name)} not judged (too few windows)")
        else:
            bad = True
            if isinstance(answer, str) and answer:
                parts.append(f"{what.get(name, name)}: {answer}")
            else:
                parts.append(first_line(check.text or f"{what.get(name, name)}: {check.status}", 200))
    if not parts:
        return [_sentence(scenario.headline or "the soak judged nothing")]
    plan = scenario.findings.soak_needed_text
    if isinstance(plan, str) and plan:  # the soak was shorter than one that could find a leak in time
        parts.append(plan)
    return [f"{head}: {('; ' if bad or any(p.count(' ') > 6 for p in parts) else ', ').join(parts)}."]


def _push_sentences(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> list[str]:
    """Where pushing broke the server and whether it shed load gracefully."""
    unit = kind_of(scenario.kind).unit
    boundary = scenario.findings.boundary
    if boundary is None or boundary.level is None:
        top = scenario.steps[-1].level if scenario.steps else None
        reach = f" up to {unit.amount(top)}" if top is not None else ""
        return [f"Pushed{reach}, the server did not break: the boundary is above what was pushed."]
    at = unit.amount(boundary.level)
    if boundary.graceful and boundary.failed:
        median = (f", median rejection {fmt_value('ttft_p50', boundary.rejection_median_s)}"
                  if boundary.rejection_median_s is not None else "")
        return [f"Pushed past capacity, it sheds load gracefully at {at}: {boundary.shed} rejected with "
                f"{', '.join(f'HTTP {s}' for s in sorted(boundary.statuses))} ({boundary.retry_after} with "
                f"Retry-After){median}, "
                "and it answers afterwards."]
    if boundary.graceful:
        why = boundary.why or "latency past the breaker"
        return [f"Pushed past capacity, it queues rather than rejecting at {at} ({why}), and it answers "
                "afterwards."]
    problems = "; ".join(boundary.problems) or "errors other than 429 or 503"
    return [f"Pushed past capacity, it falls over at {at} instead of shedding load: {problems}."]


def _refusal_sentences(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> list[str]:
    """Where long prompts were refused, and how: the headline, then the reasons it does not say."""
    return [_sentence(scenario.headline or "the prompt-length push measured nothing"),
            *[_sentence(r) for r in scenario.reasons if r.strip() != scenario.headline.strip()]]


def _headline_sentences(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> list[str]:
    """Any other scenario: its kind, its check and its headline."""
    said = scenario.headline or scenario.status
    return [_sentence(f"{kind_of(scenario.kind).title} ({short_name(test.nodeid)}): {said}")]


CAPACITY_SENTENCES: dict[Sentences, Callable[[RunDocument, CheckResult, CapacityScenario], list[str]]] = {
    "climb": _climb_sentences, "soak": _soak_sentences, "push": _push_sentences,
    "refusal": _refusal_sentences, "headline": _headline_sentences,
}
"""How the answer tells each reading of report/capacity_kinds.py."""


def capacity_sentences(doc: RunDocument) -> list[str]:
    """The capacity scenarios in plain words: the ladder's answer first, then the sweep, soak and pushes."""
    ranked = sorted(capacity_scenarios(doc), key=lambda pair: kind_of(pair[1].kind).order)
    return [sentence for test, scenario in ranked
            for sentence in CAPACITY_SENTENCES[kind_of(scenario.kind).sentences](doc, test, scenario)]


def _capacity_limitations(doc: RunDocument) -> list[str]:
    """What the capacity scenarios could not show: client-bound steps, levels that could not be judged."""
    out: list[str] = []
    load = doc.conditions.settings.load
    judged = [short_name(t.nodeid) for t, scenario in capacity_scenarios(doc)
              if any(step.slo_status for step in scenario.steps)]
    if load is not None and load.slo_judge == "point" and judged:
        out.append(f"The SLOs in {_series(sorted(set(judged)))} were judged on the point estimate, not on "
                   "its confidence interval (--slo-judge point): a level that passes there is weaker "
                   "evidence.")
    for test, scenario in capacity_scenarios(doc):
        name = short_name(test.nodeid)
        if scenario.status == "invalid":
            why = "; ".join(first_line(r, 200) for r in scenario.reasons) or "no reason recorded"
            out.append(f"The {scenario.kind} in {name} could not judge the server: {why}.")
        for step in scenario.steps:
            if step.client_bound:
                out.append(f"Client-bound in {name} at {level_words(scenario.kind, step.level)}: "
                           f"{'; '.join(step.client_bound)}. Those numbers describe the client, not the "
                           "server.")
        lagged = [s for s in scenario.steps if s.client_warnings]
        if lagged:
            levels = ", ".join(level_words(scenario.kind, s.level) for s in lagged)
            out.append(f"The client lagged in {name} at {levels} (judged anyway, as --client-check warn "
                       f"asks): {first_line(lagged[0].client_warnings[0], 200)}")
        reason = scenario.findings.max_slo_reason or ""
        if "could not be judged: not enough data" in reason:
            out.append(f"In {name}, {reason}: raise --capacity-step-requests or judge on the point estimate "
                       "(--slo-judge point).")
    return out
