"""Expected per-check outcomes for a known server, compared with a results file.

An expectations file pins what the bundled suites report against one server build, so that a
change in the project or in the server shows up as a diff in CI. An outcome may be a list of
allowed outcomes only where a check's result depends on timing, and its `why` must say so:

    python -m pytest_inferaccept.expectations compare results.json expectations/llama-cpp.json
    python -m pytest_inferaccept.expectations record results.json expectations/llama-cpp.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SCHEMA = "pytest-inferaccept/expectations/1"


def check_id(nodeid: str) -> str:
    """A node id without the path that depends on how the suites were invoked."""
    path, sep, rest = nodeid.partition("::")
    if "suites/" in path:
        path = path.rsplit("suites/", 1)[1]
    return f"{path}{sep}{rest}"


def _skip_kind(message: str) -> str:
    """The stable part of a skip reason: 'unsupported: tools' from 'unsupported: tools: HTTP 400 ...'."""
    parts = message.split(":")
    if parts[0].strip() in ("unsupported", "broken") and len(parts) > 1:
        return ":".join(parts[:2]).strip()
    return parts[0].strip()


def observed(results: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Per check id: outcome, and for skips the stable part of the reason."""
    out: dict[str, dict[str, str]] = {}
    for test in results.get("tests", []):
        entry = {"outcome": str(test["outcome"])}
        if test["outcome"] == "skipped":
            entry["skip"] = _skip_kind(str(test.get("message", "")))
        out[check_id(str(test["nodeid"]))] = entry
    return out


def compare(results: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """Differences between a run and its expectations (empty when they agree)."""
    seen = observed(results)
    want: Mapping[str, Mapping[str, str]] = expected.get("checks", {})
    diffs: list[str] = []
    for cid, exp in sorted(want.items()):
        got = seen.get(cid)
        if got is None:
            diffs.append(f"{cid}: expected {exp['outcome']}, but it did not run")
            continue
        allowed = exp["outcome"] if isinstance(exp["outcome"], list) else [exp["outcome"]]
        if got["outcome"] not in allowed:
            why = f" (documented: {exp['why']})" if exp.get("why") else ""
            diffs.append(f"{cid}: expected {' or '.join(allowed)}, got {got['outcome']}{why}")
        elif exp["outcome"] == "skipped" and exp.get("skip") and got.get("skip") != exp["skip"]:
            diffs.append(f"{cid}: skipped as {got.get('skip')!r}, expected {exp['skip']!r}")
    for cid in sorted(set(seen) - set(want)):
        diffs.append(f"{cid}: ran ({seen[cid]['outcome']}) but has no expectation; record it")
    return diffs


def record(results: Mapping[str, Any], previous: Mapping[str, Any] | None) -> dict[str, Any]:
    """An expectations document from a run, keeping the explanations already written."""
    old: Mapping[str, Mapping[str, str]] = (previous or {}).get("checks", {})
    checks: dict[str, dict[str, str]] = {}
    for cid, entry in sorted(observed(results).items()):
        new = dict(entry)
        before = old.get(cid, {})
        allowed = before.get("outcome")
        if isinstance(allowed, list) and entry["outcome"] in allowed:
            new["outcome"] = allowed  # a documented either-way check
        if before.get("why") and (allowed == entry["outcome"] or isinstance(allowed, list)):
            new["why"] = before["why"]
        checks[cid] = new
    server = results.get("server") or {}
    kept = {k: v for k, v in (previous or {}).items() if k not in ("schema", "server", "model", "checks")}
    # Keys the recorder does not write (a stage's `deselected` checks with their reasons) stay as written.
    return {"schema": SCHEMA, "server": server.get("launched") or server.get("base_url"),
            "model": server.get("model"), "checks": checks, **kept}


def totals(results: Mapping[str, Any]) -> dict[str, int]:
    """Counts per outcome."""
    counts: dict[str, int] = {}
    for entry in observed(results).values():
        counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    return counts


def main(argv: list[str] | None = None) -> int:
    """CLI: compare or record."""
    parser = argparse.ArgumentParser(prog="python -m pytest_inferaccept.expectations")
    parser.add_argument("action", choices=("compare", "record"))
    parser.add_argument("results", type=Path)
    parser.add_argument("expectations", type=Path)
    args = parser.parse_args(argv)
    try:
        results = json.loads(args.results.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"cannot read results {args.results}: {exc}", file=sys.stderr)
        return 2
    previous = None
    if args.expectations.exists():
        previous = json.loads(args.expectations.read_text(encoding="utf-8"))
    counts = ", ".join(f"{v} {k}" for k, v in sorted(totals(results).items()))
    verdict = (results.get("verdict") or {}).get("status")
    print(f"{args.expectations.stem}: {counts}; verdict {verdict}")
    if args.action == "record":
        doc = record(results, previous)
        args.expectations.parent.mkdir(parents=True, exist_ok=True)
        args.expectations.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n",
                                     encoding="utf-8")
        print(f"recorded {len(doc['checks'])} checks in {args.expectations}")
        return 0
    if previous is None:
        print(f"no expectations file {args.expectations}", file=sys.stderr)
        return 2
    diffs = compare(results, previous)
    for line in diffs:
        print(f"  CHANGED {line}")
    summary = "matches its expectations" if not diffs else f"{len(diffs)} change(s)"
    print(f"{args.expectations.stem}: {summary}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
