"""The terminal summary: server, capability matrix, verdict and its reasons."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_inferaccept.model import RunDocument
    from pytest_inferaccept.run.finish import FinishedRun

MAX_REASONS = 15
MAX_NAMED = 5
Line = tuple[str, dict[str, bool]]


def lines(finished: FinishedRun) -> list[Line]:
    """The summary as (text, markup) lines, read from the finished run in the model."""
    out: list[Line] = []
    run, verdict = finished.run, finished.verdict
    server = run.server if run is not None else None
    if server is not None:
        out.append((f"server: {server.base_url}  model: {server.model}"
                    + (f"  launched: {server.launched}" if server.launched else ""), {}))
        if server.log_paths:
            out.append((f"server log: {', '.join(server.log_paths)}", {}))
    matrix = run.capabilities if run is not None else {}
    if matrix:
        out.append(("capabilities:", {}))
        for name, row in matrix.items():
            req = "required" if row.required else "probed"
            detail = row.probe.detail if row.probe else ""
            out.append((f"  {name:<22} {row.status:<14} {req:<9} {detail[:90]}", {}))
        out += per_model_lines(run) if run is not None else []
    if run is not None and run.baseline is not None:
        from pytest_inferaccept.compare.render import section_lines

        out += [(text, {tint: True} if tint else {}) for text, tint in section_lines(run.baseline)]
    out += correctness_lines(run)
    if run is not None:
        from pytest_inferaccept.report.words import slo_by_test

        # Per test, as the markers gave it: the header's "none given for the run" is the session's.
        out += [(f"SLO: {line}", {}) for line in slo_by_test(run)[:MAX_NAMED]]
    colour = {"GO": {"green": True}, "NO-GO": {"red": True}, "INVALID": {"yellow": True}}
    counts = ", ".join(f"{v} {k}" for k, v in sorted(verdict.counts.items()))
    out.append((f"VERDICT: {verdict.status}" + (f"  ({counts})" if counts else ""),
                {"bold": True, **colour[verdict.status]}))
    told, grouped = reason_lines(run, verdict.reasons)
    for text in told[:MAX_REASONS]:
        out.append((f"  - {text}", {}))
    if len(told) > MAX_REASONS:
        out.append((f"  … and {len(told) - MAX_REASONS} more", {}))
    if grouped:
        plural = "s" if grouped != 1 else ""
        out.append((f"  ({grouped} failed check{plural} in all, grouped above by what they found; pytest's "
                    "short test summary and the report list each one)", {}))
    deselected = run.deselected if run is not None else None
    if deselected is not None and deselected.count:
        names = ", ".join(n.rsplit("::", 1)[-1] for n in deselected.examples[:MAX_NAMED])
        rest = deselected.count - min(MAX_NAMED, len(deselected.examples))
        more = f" and {rest} more" if rest > 0 else ""
        out.append((f"  a subset: {deselected.count} acceptance checks were deselected "
                    f"(-k, -m or --deselect) and did not run: {names}{more}", {"yellow": True}))
    # The same warning from several checks is one line with its count.
    seen = Counter(verdict.warnings)
    for warning, times in list(seen.items())[:MAX_REASONS]:
        count = f" ({times} checks)" if times > 1 else ""
        out.append((f"  warning: {warning[:200]}{count}", {"yellow": True}))
    if len(seen) > MAX_REASONS:
        out.append((f"  … and {len(seen) - MAX_REASONS} more warnings", {"yellow": True}))
    # A run that did not validate (a defect, named) keeps its verdict; its other failures are in
    # pytest's own summary and in the JSON file.
    others = [*(run.other_failures if run is not None else ()),
              *([finished.invalid_because] if finished.invalid_because else [])]
    if others:
        # The verdict judges the acceptance checks only; these still fail the run (exit status).
        out.append((f"outside the acceptance verdict: {', '.join(others[:MAX_REASONS])}"
                    + (f" … and {len(others) - MAX_REASONS} more" if len(others) > MAX_REASONS else ""),
                    {"red": True}))
    return out


def correctness_lines(run: RunDocument | None) -> list[Line]:
    """One line for the known-answer set: accuracy with its interval, noise, and the paired verdict."""
    found = next((t.correctness for t in run.tests if t.correctness is not None), None) if run else None
    if run is None or found is None:
        return []
    acc = found.accuracy
    text = (f"correctness: {acc.correct} of {acc.n} correct ({acc.correct / acc.n:.1%}, 95% CI "
            f"{acc.low:.1%}–{acc.high:.1%}), {acc.unanswered} unanswered, self-flip rate "
            f"{found.self_flip_rate:.1%}")
    if found.floor is not None:
        text += f"; floor {found.floor.floor:.0%}: {found.floor.status.replace('_', ' ')}"
    paired = run.baseline.correctness if run.baseline is not None else None
    if paired is not None:
        words = {"pass": "GO", "fail": "NO-GO", "not_enough_data": "not enough data",
                 "cannot_decide": "cannot decide", "not_compared": "not compared"}
        text += f"; against the baseline: {words[paired.status]}"
        if paired.drop is not None:
            text += (f", drop {paired.drop * 100:+.1f} points ({(paired.low or 0) * 100:+.1f} to "
                     f"{(paired.high or 0) * 100:+.1f})")
        drift = paired.drift
        if drift is not None and drift.status != "not_measured" and drift.mean_excess is not None:
            said = "FOUND" if drift.status == "found" else "none"
            text += (f"; logprob drift {said} beyond the server's own ({drift.mean_excess:+.3f} nats, "
                     f"{drift.real_excess or 0:+d} prompts parting)")
    drifted = paired is not None and paired.drift is not None and paired.drift.status == "found"
    tint = {"red": True} if paired is not None and (paired.status == "fail" or drifted) else {}
    return [(text, tint)]


def reason_lines(run: RunDocument | None, reasons: list[str]) -> tuple[list[str], int]:
    """The verdict's lines as the page's verdict box says them, and how many failed checks they group.

    A NO-GO's failed checks are grouped into distinct findings, each with how many checks it stands
    for (report.words.verdict_box, the page's own grouping).
    """
    if run is None:  # the document did not validate: the verdict's own reasons, one by one
        return [reason.splitlines()[0][:300] for reason in reasons], 0
    from pytest_inferaccept.report.words import verdict_box

    box = verdict_box(run)
    out: list[str] = []
    for line in box.lines:
        if isinstance(line, int):
            out.append(run.verdict.reasons[line].splitlines()[0][:300])
        else:
            said = f"{line.title}: {line.seen}" if line.seen else line.title
            out.append(f"{said[:300]} ({line.count_words()})")
    findings = sum(not isinstance(line, int) for line in box.lines)
    # Only where findings stand for more checks than they are lines is there a grouping to point out.
    return out, len(box.failed) if len(box.failed) > findings else 0


def marker_slo_lines(slos: Sequence[tuple[str, Mapping[str, float]]]) -> list[str]:
    """After collection: the SLO each test's @slo marker gives ((test name, limits) per marked test)."""
    out = [f"inferaccept: SLO of {name}: {', '.join(f'{k}={v:g}' for k, v in limits.items())} "
           "(its @slo marker)" for name, limits in slos[:MAX_NAMED]]
    if len(slos) > MAX_NAMED:
        out.append(f"inferaccept: and {len(slos) - MAX_NAMED} more tests with an @slo marker")
    return out


MODEL_WIDTH = 40
"""The most characters of a model's name a column of the per-model lines shows."""


def per_model_lines(run: RunDocument) -> list[Line]:
    """Under the capability matrix, with --all-models: one line per capability, a column per model.

    The first line counts each model's core checks (those that ran once per model); each
    capability line gives the model's status over its own checks. Nothing without per-model results.
    """
    models = next((list(row.models) for row in run.capabilities.values() if row.models), [])
    if not models:
        return []
    checks: dict[str, dict[str, int]] = {m: {} for m in models}
    for test in run.tests:
        if test.model in checks:
            tally = checks[test.model]
            tally[test.outcome] = tally.get(test.outcome, 0) + 1
    core = {m: ", ".join(f"{n} {outcome}" for outcome, n in sorted(tally.items())) or "none ran"
            for m, tally in checks.items()}
    rows = [("model", {m: m[:MODEL_WIDTH] for m in models}), ("core checks", core)]
    rows += [(name, dict(row.models or {})) for name, row in run.capabilities.items()]
    widths = {m: max(len(cells.get(m, "")) for _, cells in rows) + 2 for m in models}
    failing = any(tally.get("failed") or tally.get("error") for tally in checks.values())
    out: list[Line] = [("per model (--all-models: the core checks ran once for each listed model):", {})]
    for label, cells in rows:
        text = "".join(f"{cells.get(m, '-'):<{widths[m]}}" for m in models).rstrip()
        markup = {"red": True} if label == "core checks" and failing else {}
        out.append((f"  {label:<22} {text}", markup))
    return out
