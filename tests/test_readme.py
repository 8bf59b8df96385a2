"""The README's example acceptance tests run as written against the fake server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests._processes import FAKE_CMD

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_example_passes_against_a_correct_server(pytester: pytest.Pytester) -> None:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- example: .*? -->\n```python\n(.*?)```", text, re.DOTALL)
    assert match, "the README lost its example block"
    pytester.makepyfile(test_example=match.group(1))
    # The fake as a process with known timing: load measured against an instant server in the
    # same process would only measure the client. This test is about the example, not this
    # machine: when other tests keep the cores busy the self-check rightly calls the client the
    # bottleneck (seen: event loop 59 ms late at p99 under 4 xdist workers), so that is a warning.
    result = pytester.runpytest_inprocess("--server-cmd", f"{FAKE_CMD} --ttft 0.02 --itl 0.002",
                                          "--capabilities", "chat,tools", "--client-check", "warn")
    result.assert_outcomes(passed=2)
    assert "VERDICT: GO" in result.stdout.str()


def test_the_readme_quick_start_commands_are_the_ones_ci_runs() -> None:
    text = README.read_text(encoding="utf-8")
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -e '.[dev]'" in text and "pip install -q -e '.[dev]'" in ci
    assert "\n    pytest\n" in text and "\npytest\n" in ci
