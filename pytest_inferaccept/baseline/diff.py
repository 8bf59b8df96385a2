"""The comparison of a run with its baseline: capabilities, checks, figures, metrics, metadata, answers."""

from __future__ import annotations

from typing import Any

from pytest_inferaccept.baseline import extras
from pytest_inferaccept.baseline.change import change
from pytest_inferaccept.baseline.conditions import differences
from pytest_inferaccept.baseline.correctness import compare_correctness
from pytest_inferaccept.baseline.figures import LoadFigures, load_runs, unit_of
from pytest_inferaccept.baseline.rules import judge, relative
from pytest_inferaccept.expectations import check_id
from pytest_inferaccept.gate_settings import GateSettings
from pytest_inferaccept.model import (
    BaselineChange,
    BaselineComparison,
    BaselineRun,
    GatePolicy,
    RunBody,
    RunDocument,
)

GOOD = ("passed", "xfailed")
BAD = ("failed", "error")


def regressions(section: BaselineComparison) -> list[BaselineChange]:
    """The changes that make the run NO-GO."""
    return [c for c in section.changes if c.status == "regression"]


def verdict_reasons(section: BaselineComparison) -> list[str]:
    """One line per regression for the verdict; a failing check is already a reason of its own."""
    return [f"since the baseline: {c.detail}" for c in regressions(section) if c.kind != "check"]


def warnings(section: BaselineComparison) -> list[str]:
    """What the verdict should warn about: untrusted figures, drift under 'warn', differing conditions."""
    changes = section.changes
    out = [f"since the baseline: {c.detail}" for c in changes if c.status == "untrusted"]
    out += [f"since the baseline: {c.detail}" for c in changes
            if c.kind in ("answer", "embedding") and c.status == "changed" and "drifted" in c.detail]
    # A metric renamed or deprecated: still served, but a dashboard on the old name must move.
    out += [f"since the baseline: {c.detail}" for c in changes
            if c.kind == "operator_metric" and c.status == "changed"]
    # The paired gate undecided (not enough data, noise too high) or not compared: say so.
    if section.correctness is not None and section.correctness.status not in ("pass", "fail"):
        out.append(f"since the baseline: {section.correctness.message}")
    if section.untrusted_because:
        out.append("the baseline's figures are not comparable: " + "; ".join(section.untrusted_because))
    return out


def describe_run(doc: RunDocument, path: str | None) -> BaselineRun:
    """The few facts that identify the baseline run."""
    server = doc.server
    return BaselineRun(path=path, started_at=doc.conditions.started_at, verdict=doc.verdict.status,
                       plugin_version=doc.conditions.plugin_version, client_host=doc.conditions.client_host,
                       model=server.model if server else None,
                       server_version=extras.server_version(server.version_info) if server else None)


def compare(old: RunDocument, new: RunBody, gate: GateSettings,
            path: str | None = None) -> BaselineComparison:
    """Compare a run (new) with its baseline (old): the results' `baseline` section."""
    conditions = differences(old, new)
    untrusted = [f"{d.label} differs ({d.before} → {d.after})" for d in conditions if d.effect == "untrusted"]
    changes = [*_capabilities(old, new), *_checks(old, new), *_figures(old, new, gate, untrusted),
               *extras.operator_metrics(old, new), *extras.server_metadata(old, new)]
    answer_changes, answers = extras.answers(old, new, gate, trusted=not untrusted)
    correctness_changes, correctness = compare_correctness(old, new)
    changes += [*answer_changes, *correctness_changes]
    worse = [c.detail for c in changes if c.status == "regression"]
    # Every key given, so that the document writes each of them (`unusable` gives fewer).
    return BaselineComparison(
        path=path, error=None, run=describe_run(old, path), status="regressed" if worse else "no regression",
        regressions=worse, improvements=[c.detail for c in changes if c.status == "improvement"],
        trusted=not untrusted, untrusted_because=untrusted, conditions=conditions, changes=changes,
        answers=answers, correctness=correctness, policy=GatePolicy.model_validate(gate.describe()))


def _capabilities(old: RunBody, new: RunBody) -> list[BaselineChange]:
    out = []
    for name, before in old.capabilities.items():
        after = new.capabilities.get(name)
        if after is None or after.status == "not exercised" or before.status == "not exercised":
            continue
        if before.status == after.status:
            continue
        detail = after.probe.detail if after.probe else ""
        why = f" ({detail[:160]})" if detail else ""
        if before.status == "supported":
            out.append(change(kind="capability", status="regression", item=name, before=before.status,
                              after=after.status, detail=f"capability {name} lost: {before.status} → "
                              f"{after.status}{why}"))
        elif after.status == "supported":
            out.append(change(kind="capability", status="improvement", item=name, before=before.status,
                              after=after.status, detail=f"capability {name} now {after.status} "
                              f"(was {before.status})"))
        else:
            out.append(change(kind="capability", status="changed", item=name, before=before.status,
                              after=after.status, detail=f"capability {name}: {before.status} → "
                              f"{after.status}{why}"))
    return out


def _checks(old: RunBody, new: RunBody) -> list[BaselineChange]:
    before = {check_id(t.nodeid): t for t in old.tests}
    out = []
    for test in new.tests:
        cid = check_id(test.nodeid)
        prev = before.get(cid)
        if prev is None or prev.outcome == test.outcome:
            continue
        message = (test.message or "").splitlines()[0][:200] if test.message else ""
        if prev.outcome in GOOD and test.outcome in BAD:
            out.append(change(kind="check", status="regression", item=cid, before=prev.outcome,
                              after=test.outcome, detail=f"{cid} passed before and {test.outcome} now"
                              + (f": {message}" if message else "")))
        elif prev.outcome in BAD and test.outcome in GOOD:
            out.append(change(kind="check", status="improvement", item=cid, before=prev.outcome,
                              after=test.outcome, detail=f"{cid} {prev.outcome} before and passes now"))
        else:
            out.append(change(kind="check", status="changed", item=cid, before=prev.outcome,
                              after=test.outcome, detail=f"{cid}: {prev.outcome} → {test.outcome}"
                              + (f" ({message})" if message else "")))
    return out


def _figures(old: RunBody, new: RunBody, gate: GateSettings, untrusted: list[str]) -> list[BaselineChange]:
    before = load_runs(old)
    after = load_runs(new)
    out = []
    for where, prev in before.items():
        now = after.get(where)
        if now is None:
            out.append(change(kind="load_run", status="changed", item=where,
                              detail=f"{where}: measured in the baseline, not in this run"))
            continue
        doubts = list(untrusted) + _doubts(prev, now)
        for key, old_fig in prev.figures.items():
            new_fig = now.figures.get(key)
            if new_fig is None:
                continue
            tol = gate.tolerance(key)
            if key == "goodput" and prev.slo_limits != now.slo_limits:
                doubts_here = [*doubts, "the SLO that defines goodput differs"]
            else:
                doubts_here = doubts
            moved = _figure_change(where, key, old_fig, new_fig, tol, doubts_here)
            if moved is not None:
                out.append(moved)
    return out


IDENTITY = frozenset({"base_url", "model", "api_key_set", "request_timeout", "connect_timeout",
                      "max_response_bytes", "max_seconds", "stall_timeout"})
"""Load spec keys that say where and how defensively, not what load: they may differ between runs."""


def _doubts(prev: LoadFigures, now: LoadFigures) -> list[str]:
    doubts = []
    keys = sorted(k for k in {*prev.spec, *now.spec} - IDENTITY if prev.spec.get(k) != now.spec.get(k))
    if keys:
        doubts.append("the load differed (" + ", ".join(
            f"{k} {prev.spec.get(k)!r} → {now.spec.get(k)!r}" for k in keys[:4]) + ")")
    if prev.client_bound or now.client_bound:
        which = "the baseline" if prev.client_bound else "this run"
        doubts.append(f"the client was the bottleneck in {which}")
    return doubts


def _figure_change(where: str, key: str, old: Any, new: Any, tol: float,
                   doubts: list[str]) -> BaselineChange | None:
    outcome = judge(key, old, new, tol)
    if outcome in ("same", "no_interval"):
        return None
    unit = unit_of(key)
    name = key.replace("_", " ")
    moved = "rose" if new.value > old.value else "fell"
    by = relative(old.value, new.value)
    kind_of_tol = f"{tol * 100:g} points" if unit == "%" else f"{tol * 100:g}%"
    sentence = (f"{name} of {where} {moved} from {old.show(unit)} to {new.show(unit)}"
                + (f" ({by}; tolerance {kind_of_tol})" if by else f" (tolerance {kind_of_tol})"))
    if doubts:
        return change(kind="figure", status="untrusted", item=f"{where} {key}", before=old.value,
                      after=new.value, detail=f"{sentence}, but the comparison cannot be trusted: "
                      + "; ".join(doubts))
    return change(kind="figure", status="regression" if outcome == "regression" else "improvement",
                  item=f"{where} {key}", before=old.value, after=new.value,
                  detail=sentence)
