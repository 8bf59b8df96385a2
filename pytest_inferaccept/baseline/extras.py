"""The parts of the comparison read from evidence: /metrics names, server metadata, answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pytest_inferaccept.answers import EMBEDDING_MIN_COSINE, compare_answers, compare_embeddings
from pytest_inferaccept.baseline.change import Status, change
from pytest_inferaccept.checks.metrics import RENAMED_METRICS, SERVER_TITLES, MetricRename, known_rename
from pytest_inferaccept.gate_settings import GateSettings
from pytest_inferaccept.model import AnswerChange, AnswerConsistency, BaselineChange, EmbeddingDrift, RunBody

MAX_LISTED = 12


def _values(doc: RunBody, key: str) -> Iterator[Any]:
    for test in doc.tests:
        if key in test.evidence.values:
            yield test.evidence.values[key]


def _first(doc: RunBody, key: str) -> Any:
    return next(_values(doc, key), None)


def metric_names(doc: RunBody) -> set[str] | None:
    """The metric family names /metrics served in a run (None: the run did not record them)."""
    found = [v for v in _values(doc, "metric_names") if isinstance(v, list)]
    return {str(n) for names in found for n in names} if found else None


def _served(doc: RunBody) -> dict[str, str | None]:
    table = _first(doc, "operator_metrics")
    if not isinstance(table, dict):
        return {}
    return {str(r.get("concern")): r.get("served") for r in table.get("metrics", []) if isinstance(r, dict)}


RENAME_STATUS: Status = "changed"
"""How a renamed metric (its old name gone, its new name served) is judged: a change a dashboard
owner must act on, named with both names and warned about, not a regression: what was measured is
still served, under its new name (a metric that disappeared under every name stays a regression)."""


def _rename(rename: MetricRename, item: str, was: tuple[bool, bool],
            now: tuple[bool, bool]) -> BaselineChange | None:
    """The change between two runs of one known rename; `was` and `now` say (old served, new served)."""
    old, new = rename.old, rename.new
    title = f"{SERVER_TITLES.get(rename.server, rename.server)}"
    hidden = (f"{title} hides it from {rename.hidden_in} unless the server is started with "
              f"{rename.show_hidden}, and removes it in {rename.removed_in}")
    cases: dict[tuple[tuple[bool, bool], tuple[bool, bool]], tuple[Status, str]] = {
        ((True, False), (False, True)): (RENAME_STATUS, f"renamed in this version: {old} is now {new} "
                                         "(a dashboard reading the old name shows nothing)"),
        ((True, False), (True, True)): ("changed", f"deprecated in this version: {old} is still served "
                                        f"beside its new name {new}; {hidden}: move dashboards to {new}"),
        ((True, True), (False, True)): (RENAME_STATUS, f"hidden or removed in this version: {old}, the "
                                        f"deprecated name of {new}, is no longer served (a dashboard "
                                        "still reading the old name shows nothing)"),
        ((False, True), (True, False)): ("regression", f"back to the old name in this version: {new} is "
                                         f"{old} again (a dashboard reading {new} shows nothing)"),
        ((True, True), (True, False)): ("regression", f"{new} is no longer served, only its old name "
                                        f"{old} (a dashboard reading {new} shows nothing)"),
        ((False, True), (True, True)): ("changed", f"{old}, the deprecated name of {new}, is served "
                                        "again beside it"),
    }
    found = cases.get((was, now))
    if found is None:
        return None
    status, detail = found
    served_before = [n for n, on in zip((old, new), was, strict=True) if on]
    served_now = [n for n, on in zip((old, new), now, strict=True) if on]
    return change(kind="operator_metric", status=status, item=item, before=served_before, after=served_now,
                  detail=detail)


def operator_metrics(old: RunBody, new: RunBody) -> list[BaselineChange]:
    """Operator metrics renamed or gone (a dashboard goes blank), and metric names that disappeared.

    A rename RENAMED_METRICS knows is named as one (with the name it had and the name it has), not
    as a name that disappeared; the metric names both runs recorded show whether an old name is
    still served beside the new one (the deprecation window), which is a change, not a regression.
    """
    out: list[BaselineChange] = []
    explained: set[str] = set()
    old_names, new_names = metric_names(old), metric_names(new)
    have_names = old_names is not None and new_names is not None
    before, after = _served(old), _served(new)
    for concern, name in before.items():
        if name is None or concern not in after:
            continue
        now = after[concern]
        rename = known_rename(name, now) if now is not None else None
        if now is None:
            out.append(change(kind="operator_metric", status="regression", item=concern, before=name,
                              after=None, detail=f"operator metric for {concern} disappeared: {name} "
                              "is no longer served (dashboards and alerts on it go blank)"))
        elif rename is not None and not have_names:
            was = (name == rename.old, name == rename.new)
            renamed = _rename(rename, concern, was, (not was[0], not was[1]))
            out += [renamed] if renamed else []
        elif rename is None and now != name:
            out.append(change(kind="operator_metric", status="regression", item=concern, before=name,
                              after=now, detail=f"operator metric for {concern} renamed: {name} → {now} "
                              "(dashboards on the old name go blank)"))
        explained.add(name)
    if old_names is None or new_names is None:
        return out
    renamed_to: set[str] = set()
    for rename in RENAMED_METRICS:
        then = (rename.old in old_names, rename.new in old_names)
        today = (rename.old in new_names, rename.new in new_names)
        if not any(today):
            continue  # gone under both names: a metric that disappeared, judged below
        renamed = _rename(rename, rename.new, then, today)
        if renamed is not None:
            out.append(renamed)
            explained.update((rename.old, rename.new))
            renamed_to.update(n for n in (rename.old, rename.new) if n in new_names)
    gone = sorted(old_names - new_names - explained)
    added = sorted(new_names - old_names - renamed_to)
    if gone:
        maybe = f"; new names: {', '.join(added[:MAX_LISTED])}" if added else ""
        out.append(change(kind="operator_metric", status="regression", item="metric names",
                          before=gone, after=added, detail=f"{len(gone)} metric name(s) disappeared "
                          f"from /metrics: {', '.join(gone[:MAX_LISTED])}{maybe}"))
    elif added:
        out.append(change(kind="operator_metric", status="changed", item="metric names", before=[],
                          after=added, detail=f"new metric names on /metrics: "
                          f"{', '.join(added[:MAX_LISTED])}"))
    return out


def _flatten(data: Any, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    if isinstance(data, dict) and depth < 3:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key), depth + 1))
        return out
    return {prefix: data}


def server_version(version_info: dict[str, Any]) -> str | None:
    """The server's version string, from whichever version endpoint gave one."""
    for key, value in _flatten(version_info).items():
        if key.rsplit(".", 1)[-1] in ("version", "build_info", "build") and isinstance(value, (str, int)):
            return str(value)
    return None


def server_metadata(old: RunBody, new: RunBody) -> list[BaselineChange]:
    """Changed server version, model and served models (information, not a regression)."""
    if old.server is None or new.server is None:
        return []
    out = []
    before, after = _flatten(old.server.version_info), _flatten(new.server.version_info)
    for key in sorted({*before, *after}):
        if before.get(key) != after.get(key) and not isinstance(before.get(key) or after.get(key), list):
            out.append(change(kind="server", status="changed", item=key, before=before.get(key),
                              after=after.get(key), detail=f"server {key}: {before.get(key)!r} → "
                              f"{after.get(key)!r}"))
    for label, was, now in (("model", old.server.model, new.server.model),
                            ("served models", old.server.served_models, new.server.served_models)):
        if was != now:
            out.append(change(kind="server", status="changed", item=label, before=was, after=now,
                              detail=f"{label}: {was!r} → {now!r}"))
    return out[:MAX_LISTED * 2]


def answers(old: RunBody, new: RunBody, gate: GateSettings,
            trusted: bool) -> tuple[list[BaselineChange], AnswerConsistency | None]:
    """Answers and embeddings of the fixed prompts, compared by prompt id."""
    out: list[BaselineChange] = []
    # Only what was compared is given: a run without embeddings writes no `embeddings` key.
    found: dict[str, Any] = {}
    drift_status: Status = "regression" if gate.answer_drift == "fail" and trusted else "changed"
    was, now = _first(old, "answers"), _first(new, "answers")
    if isinstance(was, list) and isinstance(now, list):
        result = compare_answers(was, now, gate.answer_threshold)
        found.update(compared=result.compared, identical=result.identical,
                     exact_match_rate=result.exact_match_rate, threshold=gate.answer_threshold,
                     changed=[AnswerChange(id=c.id, before=c.before, after=c.after, similarity=c.similarity,
                                           drifted=c.drifted) for c in result.changes])
        for c in result.changes:
            word = " drifted" if c.drifted else ""
            out.append(change(kind="answer", status=drift_status if c.drifted else "changed", item=c.id,
                              before=c.before, after=c.after, detail=f"answer {c.id!r}{word}: "
                              f"similarity {c.similarity:.2f} to the baseline's"
                              + (f" (threshold {gate.answer_threshold:g})" if c.drifted else "")))
    was_e, now_e = _first(old, "embeddings"), _first(new, "embeddings")
    if isinstance(was_e, list) and isinstance(now_e, list):
        cosines = compare_embeddings(was_e, now_e)
        found["embeddings"] = [EmbeddingDrift(id=pid, cosine=value, drifted=bad)
                               for pid, value, bad in cosines]
        for pid, value, drifted in cosines:
            if drifted:
                shown = "vectors of different length" if value is None else f"cosine {value:.4f}"
                out.append(change(kind="embedding", status=drift_status, item=pid, before=None, after=value,
                                  detail=f"embedding {pid!r} drifted: {shown} to the baseline's "
                                  f"(minimum {EMBEDDING_MIN_COSINE:g})"))
    if not found:
        return out, None
    return out, AnswerConsistency(**found, policy=gate.answer_drift)
