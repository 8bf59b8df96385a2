"""The parts of the comparison read from evidence: /metrics names, server metadata, answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pytest_inferaccept.answers import EMBEDDING_MIN_COSINE, compare_answers, compare_embeddings
from pytest_inferaccept.compare.change import Change, Status
from pytest_inferaccept.compare.policy import GateSettings
from pytest_inferaccept.report.model import RunDocument

MAX_LISTED = 12


def _values(doc: RunDocument, key: str) -> Iterator[Any]:
    for test in doc.tests:
        if key in test.evidence.values:
            yield test.evidence.values[key]


def _first(doc: RunDocument, key: str) -> Any:
    return next(_values(doc, key), None)


def metric_names(doc: RunDocument) -> set[str] | None:
    """The metric family names /metrics served in a run (None: the run did not record them)."""
    found = [v for v in _values(doc, "metric_names") if isinstance(v, list)]
    return {str(n) for names in found for n in names} if found else None


def _served(doc: RunDocument) -> dict[str, str | None]:
    table = _first(doc, "operator_metrics")
    if not isinstance(table, dict):
        return {}
    return {str(r.get("concern")): r.get("served") for r in table.get("metrics", []) if isinstance(r, dict)}


def operator_metrics(old: RunDocument, new: RunDocument) -> list[Change]:
    """Operator metrics renamed or gone (a dashboard goes blank), and metric names that disappeared."""
    out: list[Change] = []
    explained: set[str] = set()
    before, after = _served(old), _served(new)
    for concern, name in before.items():
        if name is None or concern not in after:
            continue
        now = after[concern]
        if now is None:
            out.append(Change(kind="operator_metric", status="regression", item=concern, before=name,
                              after=None, detail=f"operator metric for {concern} disappeared: {name} "
                              "is no longer served (dashboards and alerts on it go blank)"))
        elif now != name:
            out.append(Change(kind="operator_metric", status="regression", item=concern, before=name,
                              after=now, detail=f"operator metric for {concern} renamed: {name} → {now} "
                              "(dashboards on the old name go blank)"))
        explained.add(name)
    old_names, new_names = metric_names(old), metric_names(new)
    if old_names is not None and new_names is not None:
        gone = sorted(old_names - new_names - explained)
        added = sorted(new_names - old_names)
        if gone:
            maybe = f"; new names: {', '.join(added[:MAX_LISTED])}" if added else ""
            out.append(Change(kind="operator_metric", status="regression", item="metric names",
                              before=gone, after=added, detail=f"{len(gone)} metric name(s) disappeared "
                              f"from /metrics: {', '.join(gone[:MAX_LISTED])}{maybe}"))
        elif added:
            out.append(Change(kind="operator_metric", status="changed", item="metric names", before=[],
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


def server_metadata(old: RunDocument, new: RunDocument) -> list[Change]:
    """Changed server version, model and served models (information, not a regression)."""
    if old.server is None or new.server is None:
        return []
    out = []
    before, after = _flatten(old.server.version_info), _flatten(new.server.version_info)
    for key in sorted({*before, *after}):
        if before.get(key) != after.get(key) and not isinstance(before.get(key) or after.get(key), list):
            out.append(Change(kind="server", status="changed", item=key, before=before.get(key),
                              after=after.get(key), detail=f"server {key}: {before.get(key)!r} → "
                              f"{after.get(key)!r}"))
    for label, was, now in (("model", old.server.model, new.server.model),
                            ("served models", old.server.served_models, new.server.served_models)):
        if was != now:
            out.append(Change(kind="server", status="changed", item=label, before=was, after=now,
                              detail=f"{label}: {was!r} → {now!r}"))
    return out[:MAX_LISTED * 2]


def answers(old: RunDocument, new: RunDocument, gate: GateSettings,
            trusted: bool) -> tuple[list[Change], dict[str, Any] | None]:
    """Answers and embeddings of the fixed prompts, compared by prompt id."""
    out: list[Change] = []
    section: dict[str, Any] = {}
    drift_status: Status = "regression" if gate.answer_drift == "fail" and trusted else "changed"
    was, now = _first(old, "answers"), _first(new, "answers")
    if isinstance(was, list) and isinstance(now, list):
        result = compare_answers(was, now, gate.answer_threshold)
        section.update(compared=result.compared, identical=result.identical,
                       exact_match_rate=result.exact_match_rate, threshold=gate.answer_threshold,
                       changed=[{"id": c.id, "before": c.before, "after": c.after, "similarity": c.similarity,
                                 "drifted": c.drifted} for c in result.changes])
        for c in result.changes:
            word = " drifted" if c.drifted else ""
            out.append(Change(kind="answer", status=drift_status if c.drifted else "changed", item=c.id,
                              before=c.before, after=c.after, detail=f"answer {c.id!r}{word}: "
                              f"similarity {c.similarity:.2f} to the baseline's"
                              + (f" (threshold {gate.answer_threshold:g})" if c.drifted else "")))
    was_e, now_e = _first(old, "embeddings"), _first(new, "embeddings")
    if isinstance(was_e, list) and isinstance(now_e, list):
        cosines = compare_embeddings(was_e, now_e)
        section["embeddings"] = [{"id": pid, "cosine": value, "drifted": bad} for pid, value, bad in cosines]
        for pid, value, drifted in cosines:
            if drifted:
                shown = "vectors of different length" if value is None else f"cosine {value:.4f}"
                out.append(Change(kind="embedding", status=drift_status, item=pid, before=None, after=value,
                                  detail=f"embedding {pid!r} drifted: {shown} to the baseline's "
                                  f"(minimum {EMBEDDING_MIN_COSINE:g})"))
    if section:
        section["policy"] = gate.answer_drift
    return out, section or None
