"""Compare results files offline: `python -m pytest_inferaccept.compare OLD.json NEW.json`.

Two files: what changed since the first, exit 1 on a regression. Three or more (or --side-by-side):
the framework-selection view, one column per run, its findings grouped by area; --html PATH also
writes it as a page. Exit 2 when a file cannot be used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from pytest_inferaccept.baseline.read import BaselineError, read_document
from pytest_inferaccept.gate_settings import PolicyError, parse_gate


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m pytest_inferaccept.compare", description=__doc__)
    parser.add_argument("files", nargs="+", type=Path, help="results files (--inferaccept-json)")
    parser.add_argument("--side-by-side", action="store_true", help="one column per run, even for two")
    parser.add_argument("--regression-tolerance", action="append", default=[], metavar="KEY=FRACTION")
    parser.add_argument("--answer-drift", choices=("warn", "fail"), default="warn")
    parser.add_argument("--answer-drift-threshold", default=None, metavar="RATIO")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--html", type=Path, default=None, metavar="PATH",
                        help="also write the side-by-side view as an HTML page (implies --side-by-side)")
    args = parser.parse_args(argv)
    if len(args.files) < 2:
        parser.error("give two results files (baseline first), or more for the side-by-side view")
    try:
        gate = parse_gate(None, "\n".join(args.regression_tolerance), args.answer_drift,
                          args.answer_drift_threshold, None)
        docs = [read_document(path) for path in args.files]
    except (BaselineError, PolicyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.side_by_side or args.html is not None or len(docs) > 2:
        from pytest_inferaccept.compare.side import table
        from pytest_inferaccept.scrub import Scrubber
        from pytest_inferaccept.settings import API_KEY_ENV

        # The runs scrubbed their results; this catches a key in a file from elsewhere, as the run would.
        secrets = tuple(filter(None, [os.environ.get(API_KEY_ENV)]))
        names = [p.name for p in args.files]
        print(table(names, docs, Scrubber(secrets).text))
        if args.html is not None:
            from pytest_inferaccept.compare.side_html import write

            write(args.html, names, docs, secrets=secrets)
            print(f"side-by-side page written to {args.html}")
        return 0
    from pytest_inferaccept.baseline.diff import compare
    from pytest_inferaccept.compare.render import section_lines

    section = compare(docs[0], docs[1], gate, path=str(args.files[0]))
    if args.json:
        # The `baseline` section as a run with --inferaccept-baseline writes it.
        print(json.dumps(section.model_dump(exclude_unset=True), indent=2, default=str))
    else:
        print(f"{args.files[1]} compared with {args.files[0]}")
        for text, _ in section_lines(section):
            print(text)
    return 1 if section.status == "regressed" else 0


if __name__ == "__main__":
    sys.exit(main())
