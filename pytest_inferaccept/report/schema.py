"""The JSON Schema of the results document, generated from the typed model.

`python -m pytest_inferaccept.report.schema` rewrites results.schema.json beside this module;
`--check` exits 1 when the committed file differs from what the model generates.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("results.schema.json")
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def json_schema() -> dict[str, Any]:
    """The schema of a version-1 results document, as generated from the model."""
    from pytest_inferaccept.model import SCHEMA_ID, RunDocument

    generated = RunDocument.model_json_schema(by_alias=True, mode="validation")
    generated["title"] = "pytest-inferaccept results"
    generated["description"] = (f"One acceptance run of an inference server ({SCHEMA_ID}). New keys may "
                                "be added within version 1; none is removed or changes meaning.")
    return {"$schema": DIALECT, **generated}


def render() -> str:
    """The schema as the text of results.schema.json."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with --check, compare) the committed schema file."""
    parser = argparse.ArgumentParser(prog="python -m pytest_inferaccept.report.schema",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the committed file is not what the model generates")
    parser.add_argument("--output", type=Path, default=SCHEMA_PATH, help="where to write the schema")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run python -m pytest_inferaccept.report.schema",
                  file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
