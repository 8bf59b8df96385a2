"""The terminal summary: server, capability matrix, verdict and its reasons."""

from __future__ import annotations

from pytest_inferaccept.session import AcceptanceSession
from pytest_inferaccept.verdict import Verdict

MAX_REASONS = 15
MAX_NAMED = 5
Line = tuple[str, dict[str, bool]]


def lines(session: AcceptanceSession, verdict: Verdict) -> list[Line]:
    """The summary as (text, markup) lines."""
    out: list[Line] = []
    server = session._server
    if server is not None:
        out.append((f"server: {server.base_url}  model: {server.model}"
                    + (f"  launched: {server.launched}" if server.launched else ""), {}))
        if server.log_path:
            out.append((f"server log: {', '.join(str(p) for p in server.log_paths)}", {}))
    matrix = session.capability_matrix()
    if matrix:
        out.append(("capabilities:", {}))
        for name, row in matrix.items():
            req = "required" if row["required"] else "probed"
            detail = row["probe"]["detail"] if row["probe"] else ""
            out.append((f"  {name:<22} {row['status']:<14} {req:<9} {detail[:90]}", {}))
    if session.baseline is not None:
        from pytest_inferaccept.compare.render import section_lines

        out += [(text, {tint: True} if tint else {}) for text, tint in section_lines(session.baseline)]
    colour = {"GO": {"green": True}, "NO-GO": {"red": True}, "INVALID": {"yellow": True}}
    counts = ", ".join(f"{v} {k}" for k, v in sorted(verdict.counts.items()))
    out.append((f"VERDICT: {verdict.status}" + (f"  ({counts})" if counts else ""),
                {"bold": True, **colour[verdict.status]}))
    for reason in verdict.reasons[:MAX_REASONS]:
        out.append((f"  - {reason.splitlines()[0][:300]}", {}))
    if len(verdict.reasons) > MAX_REASONS:
        out.append((f"  … and {len(verdict.reasons) - MAX_REASONS} more", {}))
    if session.deselected:
        names = ", ".join(n.rsplit("::", 1)[-1] for n in session.deselected[:MAX_NAMED])
        rest = len(session.deselected) - MAX_NAMED
        more = f" and {rest} more" if rest > 0 else ""
        out.append((f"  a subset: {len(session.deselected)} acceptance checks were deselected "
                    f"(-k, -m or --deselect) and did not run: {names}{more}", {"yellow": True}))
    for warning in verdict.warnings[:MAX_REASONS]:
        out.append((f"  warning: {warning[:200]}", {"yellow": True}))
    others = session.other_failures
    if others:
        # The verdict judges the acceptance checks only; these still fail the run (exit status).
        out.append((f"outside the acceptance verdict: {', '.join(others[:MAX_REASONS])}"
                    + (f" … and {len(others) - MAX_REASONS} more" if len(others) > MAX_REASONS else ""),
                    {"red": True}))
    return out
