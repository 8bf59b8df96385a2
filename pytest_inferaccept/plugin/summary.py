"""The terminal summary: server, capability matrix, verdict and its reasons."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_inferaccept.model import RunDocument
    from pytest_inferaccept.run.finish import FinishedRun

MAX_REASONS = 15
MAX_NAMED = 5
Line = tuple[str, dict[str, bool]]


def lines(finished: FinishedRun) -> list[Line]:
    """The summary as (text, markup) lines, read from the finished run's document."""
    out: list[Line] = []
    run, document, verdict = finished.run, finished.document, finished.verdict
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
    if document.get("baseline") is not None:
        from pytest_inferaccept.compare.render import section_lines

        out += [(text, {tint: True} if tint else {}) for text, tint in section_lines(document["baseline"])]
    colour = {"GO": {"green": True}, "NO-GO": {"red": True}, "INVALID": {"yellow": True}}
    counts = ", ".join(f"{v} {k}" for k, v in sorted(verdict.counts.items()))
    out.append((f"VERDICT: {verdict.status}" + (f"  ({counts})" if counts else ""),
                {"bold": True, **colour[verdict.status]}))
    for reason in verdict.reasons[:MAX_REASONS]:
        out.append((f"  - {reason.splitlines()[0][:300]}", {}))
    if len(verdict.reasons) > MAX_REASONS:
        out.append((f"  … and {len(verdict.reasons) - MAX_REASONS} more", {}))
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
    others = [*document.get("other_failures", ()),
              *([finished.invalid_because] if finished.invalid_because else [])]
    if others:
        # The verdict judges the acceptance checks only; these still fail the run (exit status).
        out.append((f"outside the acceptance verdict: {', '.join(others[:MAX_REASONS])}"
                    + (f" … and {len(others) - MAX_REASONS} more" if len(others) > MAX_REASONS else ""),
                    {"red": True}))
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
