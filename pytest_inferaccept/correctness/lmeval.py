"""A paired verdict on two lm-evaluation-harness runs:
`python -m pytest_inferaccept.correctness.lmeval BEFORE.jsonl AFTER.jsonl`.

lm-eval's `--log_samples` writes `samples_<task>_<date>.jsonl`, one JSON object per document and
filter: `doc_id`, `filter`, the document, the target, the responses and each per-sample metric
(`acc`, `exact_match`, ...). Each document of the candidate run is compared with the same
document of the baseline run, by the exact paired gate of `correctness.paired` (McNemar on the
discordant documents, a conservative interval for the drop, a tolerance in points).

lm-eval answers each document once, so the noise of an unchanged server is unknown unless the
candidate run is repeated (`--again`). Exit status: 0 pass, 1 NO-GO, 2 a file cannot be used,
3 not enough data (or cannot decide: the server's own answers change too often).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Only the command imports this module (never the plugin), so pydantic loads at the top.
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_inferaccept.correctness.paired import (
    PairedVerdict,
    SelfFlip,
    accuracy,
    judge_pairs,
    self_flip,
)

PREFERRED_METRICS = ("acc", "exact_match")
"""The metric used when none is named: the first of these a file has."""

EXIT = {"pass": 0, "fail": 1, "not_enough_data": 3, "cannot_decide": 3}
UNUSABLE = 2

# Keys lm-eval writes on every sample line; any other key holding a number is a metric.
_SAMPLE_KEYS = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter",
                          "metrics", "doc_hash", "prompt_hash", "target_hash"})
_SHOWN_CHANGES = 10


class SamplesError(ValueError):
    """A samples file that cannot be used, naming the file and, where it applies, the line."""

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        where = f"{path} line {line}" if line is not None else path
        super().__init__(f"{where}: {problem}")
        self.path, self.line, self.problem = path, line, problem


@dataclass(frozen=True)
class Sample:
    """One logged document under one filter: its identity, its score and what was answered."""

    doc_id: int
    filter: str
    line: int
    correct: bool
    doc_hash: str | None
    target: str
    response: str


@dataclass
class SamplesFile:
    """A validated samples file: every line's fields, the metrics it carries, by (doc_id, filter)."""

    path: str
    rows: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)


class SampleLine(BaseModel):
    """One line of a samples file, as lm-eval documents it (the fields the gate reads)."""

    # Metric fields are named by the task, so unknown keys are kept, not refused.
    model_config = ConfigDict(extra="allow")
    doc_id: int = Field(ge=0, strict=True)
    filter: str = "none"
    """Absent in logs written before lm-eval had filters on samples: one filter, "none"."""
    metrics: list[str] | None = None
    doc_hash: str | None = None
    target: Any = None
    filtered_resps: list[Any] | None = None


def _problem(exc: ValidationError) -> str:
    """A validation error in a few words: the field and what is wrong with it."""
    parts = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"])
        parts.append(f"missing {loc!r}" if e["type"] == "missing" else f"{loc}: {e['msg']}")
    return "; ".join(parts)


def _metrics_of(row: Mapping[str, Any]) -> list[str]:
    """The metric names of one line: its `metrics` list, else the keys that hold a number."""
    listed = row.get("metrics")
    if listed:
        return [str(m) for m in listed]
    return [k for k, v in row.items() if k not in _SAMPLE_KEYS and isinstance(v, (int, float))]


def read_samples(path: str | Path) -> SamplesFile:
    """Every line of an lm-eval samples file, validated; a bad line names the file and line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise SamplesError(str(p), None, f"cannot be read ({why})") from None
    out = SamplesFile(str(p))
    seen: dict[tuple[int, str], int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            why = f"not valid JSON ({exc.msg} at column {exc.colno})"
            raise SamplesError(out.path, number, why) from None
        if not isinstance(data, dict):
            raise SamplesError(out.path, number, f"a sample must be a JSON object, got {type(data).__name__}")
        try:
            row = SampleLine.model_validate(data).model_dump()
        except ValidationError as exc:
            raise SamplesError(out.path, number, f"not an lm-eval sample: {_problem(exc)}") from None
        key = (row["doc_id"], row["filter"])
        if key in seen:
            raise SamplesError(out.path, number, f"doc_id {key[0]} (filter {key[1]!r}) again, first on line "
                                                 f"{seen[key]}: one run's samples per file")
        seen[key] = number
        for metric in _metrics_of(row):
            if metric not in out.metrics:
                out.metrics.append(metric)
        out.rows.append((number, row))
    if not out.rows:
        raise SamplesError(out.path, None,
                           "no samples (is this a samples_<task>_<date>.jsonl from --log_samples?)")
    return out


def choose_metric(files: Sequence[SamplesFile], wanted: str | None) -> str:
    """The metric to judge: the one asked for, else the first of acc / exact_match all files have."""
    for f in files:
        if wanted is not None and wanted not in f.metrics:
            has = ", ".join(f.metrics) or "none"
            raise SamplesError(f.path, None, f"no metric {wanted!r}; this file has: {has}")
    if wanted is not None:
        return wanted
    for metric in PREFERRED_METRICS:
        if all(metric in f.metrics for f in files):
            return metric
    # name the file that lacks them (the first one when each has one of them, but not the same)
    lacking = [f for f in files if not any(m in f.metrics for m in PREFERRED_METRICS)] or files
    has = ", ".join(lacking[0].metrics) or "none"
    raise SamplesError(lacking[0].path, None, f"none of {', '.join(PREFERRED_METRICS)} in every file; this "
                                              f"file has: {has}; name a 0/1 metric with --metric")


def _text(value: Any) -> str:
    """A response or target as a short line (lm-eval logs lists and nested lists)."""
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def samples_of(f: SamplesFile, metric: str) -> dict[tuple[int, str], Sample]:
    """Each (doc_id, filter) of a file scored right or wrong by a 0/1 metric."""
    out: dict[tuple[int, str], Sample] = {}
    for number, row in f.rows:
        if metric not in row:
            raise SamplesError(f.path, number, f"no {metric!r} on this line; it has: "
                                               f"{', '.join(_metrics_of(row)) or 'no metrics'}")
        value = row[metric]
        # bool is an int; a float 1.0 / 0.0 is what lm-eval writes for acc and exact_match.
        if isinstance(value, (int, float)) and value in (0, 1):
            correct = bool(value)
        else:
            raise SamplesError(f.path, number, f"{metric} = {value!r} is not a right/wrong score (0 or 1): "
                                               "the paired gate needs a per-document 0/1 metric such as acc "
                                               "or exact_match")
        out[(row["doc_id"], row["filter"])] = Sample(
            doc_id=row["doc_id"], filter=row["filter"], line=number, correct=correct,
            doc_hash=row["doc_hash"], target=_text(row.get("target")),
            response=_text(row.get("filtered_resps")))
    return out


def pair(before: Mapping[tuple[int, str], Sample], after: Mapping[tuple[int, str], Sample],
         before_path: str, after_path: str) -> list[tuple[Sample, Sample]]:
    """The samples both runs logged, matched by (doc_id, filter); a changed document is an error."""
    shared = sorted(before.keys() & after.keys())
    if not shared:
        raise SamplesError(after_path, None,
                           f"no document in common with {before_path} (same task? same filters?)")
    pairs = []
    for key in shared:
        x, y = before[key], after[key]
        if x.doc_hash is not None and y.doc_hash is not None and x.doc_hash != y.doc_hash:
            raise SamplesError(after_path, y.line, f"doc_id {key[0]} is a different document from "
                                                   f"{before_path} line {x.line} (doc_hash differs): the "
                                                   "runs are not of the same data")
        pairs.append((x, y))
    return pairs


@dataclass(frozen=True)
class FilterVerdict:
    """The paired verdict of one filter, with what it was made from."""

    filter: str
    verdict: PairedVerdict
    before_correct: int
    after_correct: int
    only_before: int
    only_after: int
    right_to_wrong: list[tuple[Sample, Sample]]
    wrong_to_right: list[tuple[Sample, Sample]]

    def to_json(self) -> dict[str, Any]:
        """The verdict as JSON-ready data."""
        v = self.verdict
        flip = v.self_flip
        return {
            "filter": self.filter, "status": v.status, "message": v.message, "n": v.n, "b": v.b, "c": v.c,
            "drop": v.drop, "drop_low": v.low, "drop_high": v.high, "p_value": v.p_value,
            "tolerance": v.tolerance, "items_to_decide": v.needed_n,
            "self_flip": None if flip is None else {"flips": flip.flips, "n": flip.n, "rate": flip.rate},
            "before_correct": self.before_correct, "after_correct": self.after_correct,
            "only_in_before": self.only_before, "only_in_after": self.only_after,
            "right_to_wrong": [x.doc_id for x, _ in self.right_to_wrong],
            "wrong_to_right": [x.doc_id for x, _ in self.wrong_to_right],
        }


def judge_filter(name: str, pairs: Sequence[tuple[Sample, Sample]], *, tolerance: float,
                 noise: SelfFlip | None, only_before: int, only_after: int) -> FilterVerdict:
    """The paired gate on one filter's documents."""
    b = [(x, y) for x, y in pairs if x.correct and not y.correct]
    c = [(x, y) for x, y in pairs if y.correct and not x.correct]
    verdict = judge_pairs(len(b), len(c), len(pairs), tolerance=tolerance, self_flip_rate=noise)
    return FilterVerdict(filter=name, verdict=verdict, before_correct=sum(x.correct for x, _ in pairs),
                         after_correct=sum(y.correct for _, y in pairs), only_before=only_before,
                         only_after=only_after, right_to_wrong=b, wrong_to_right=c)


def compare_files(before: str | Path, after: str | Path, *, again: str | Path | None = None,
                  metric: str | None = None, tolerance: float = 0.05,
                  only_filter: str | None = None) -> tuple[str, list[FilterVerdict]]:
    """(the metric judged, one verdict per filter) for two samples files and an optional repeat."""
    files = [read_samples(p) for p in (before, after, *(() if again is None else (again,)))]
    chosen = choose_metric(files, metric)
    scored = [samples_of(f, chosen) for f in files]
    filters = sorted({k[1] for k in scored[0]} & {k[1] for k in scored[1]})
    if only_filter is not None:
        if only_filter not in filters:
            raise SamplesError(files[1].path, None, f"no filter {only_filter!r} in both files; they share: "
                                                    f"{', '.join(filters) or 'none'}")
        filters = [only_filter]
    out = []
    for name in filters:
        side = [{k: s for k, s in d.items() if k[1] == name} for d in scored]
        pairs = pair(side[0], side[1], files[0].path, files[1].path)
        noise = None
        if again is not None:
            repeat = pair(side[1], side[2], files[1].path, files[2].path)
            noise = self_flip([x.correct for x, _ in repeat], [y.correct for _, y in repeat])
        out.append(judge_filter(name, pairs, tolerance=tolerance, noise=noise,
                                only_before=len(side[0].keys() - side[1].keys()),
                                only_after=len(side[1].keys() - side[0].keys())))
    return chosen, out


def overall(verdicts: Sequence[FilterVerdict]) -> str:
    """The worst status over the filters: fail, then undecided, then pass."""
    statuses = [v.verdict.status for v in verdicts]
    for status in ("fail", "cannot_decide", "not_enough_data"):
        if status in statuses:
            return status
    return "pass"


NOISE_UNMEASURED = ("noise not measured: lm-eval answers each document once, so how many of the changed "
                    "documents an unchanged server would change by itself is unknown. The exact test and "
                    "the interval do not assume a noise-free server, but the noise check (\"cannot decide\" "
                    "above 5% self-flip) was not applied: run the candidate again and pass it with --again.")


def _change(x: Sample, y: Sample) -> str:
    return f"doc {x.doc_id} (target {x.target!r}): {x.response!r} → {y.response!r}"


def render(before: str, after: str, metric: str, verdicts: Sequence[FilterVerdict]) -> list[str]:
    """The verdict as terminal lines, one block per filter."""
    lines = [f"{after} compared with {before}, document by document (metric {metric})"]
    for fv in verdicts:
        v = fv.verdict
        outcomes_b = ["correct"] * fv.before_correct + ["wrong"] * (v.n - fv.before_correct)
        outcomes_a = ["correct"] * fv.after_correct + ["wrong"] * (v.n - fv.after_correct)
        acc_b, acc_a = accuracy(outcomes_b), accuracy(outcomes_a)
        lines.append(f"filter {fv.filter!r}: {v.n} documents in both runs")
        for label, acc in (("before", acc_b), ("after", acc_a)):
            lines.append(f"  {label}: {acc.correct} of {acc.n} right, {acc.value:.1%} "
                         f"(95% CI {acc.low:.1%}–{acc.high:.1%})")
        if fv.only_before or fv.only_after:
            lines.append(f"  not compared: {fv.only_before} documents only in {before}, "
                         f"{fv.only_after} only in {after}")
        lines.append(f"  {v.message}")
        if v.self_flip is None:
            lines.append(f"  {NOISE_UNMEASURED}")
        for title, changes in (("right → wrong", fv.right_to_wrong), ("wrong → right", fv.wrong_to_right)):
            if changes:
                more = f" (first {_SHOWN_CHANGES})" if len(changes) > _SHOWN_CHANGES else ""
                lines.append(f"  {title}: {len(changes)} documents{more}")
                lines.extend(f"    {_change(x, y)}" for x, y in changes[:_SHOWN_CHANGES])
    return lines


def _points(text: str) -> float:
    value = float(text)
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"a tolerance in accuracy points lies between 0 and 100, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m pytest_inferaccept.correctness.lmeval",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path, help="the baseline run's samples_<task>_<date>.jsonl")
    parser.add_argument("after", type=Path, help="the candidate run's samples file, same task")
    parser.add_argument("--again", type=Path, default=None, metavar="AFTER2",
                        help="the candidate run repeated unchanged: measures the self-flip rate (noise)")
    parser.add_argument("--metric", default=None,
                        help="the per-document 0/1 metric (default: the first of acc, exact_match present)")
    parser.add_argument("--filter", default=None, dest="only_filter", metavar="NAME",
                        help="judge this filter only (default: each filter both files have, on its own)")
    parser.add_argument("--tolerance", type=_points, default=5.0, metavar="POINTS",
                        help="the largest acceptable drop in accuracy points (default 5)")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    args = parser.parse_args(argv)
    try:
        metric, verdicts = compare_files(args.before, args.after, again=args.again, metric=args.metric,
                                         tolerance=args.tolerance / 100, only_filter=args.only_filter)
    except SamplesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return UNUSABLE
    status = overall(verdicts)
    if args.json:
        print(json.dumps({"before": str(args.before), "after": str(args.after),
                          "again": None if args.again is None else str(args.again), "metric": metric,
                          "status": status, "noise_measured": args.again is not None,
                          "filters": [v.to_json() for v in verdicts]}, indent=2))
    else:
        print("\n".join(render(str(args.before), str(args.after), metric, verdicts)))
    return EXIT[status]


if __name__ == "__main__":
    sys.exit(main())
