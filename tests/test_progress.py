"""Progress during long phases: throttled whole lines with the time taken, none under -q."""

from __future__ import annotations

import sys

import pytest

from pytest_inferaccept.progress import Progress, clock_text


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _progress(lines: list[str], clock: _Clock) -> Progress:
    return Progress("load concurrency=8", lines.append, first_after=5, every=10, clock=clock)


def test_a_phase_shows_its_first_line_after_a_while_then_at_most_one_line_per_interval() -> None:
    lines: list[str] = []
    clock = _Clock()
    progress = _progress(lines, clock)
    for second in range(0, 31):
        clock.now = 100.0 + second
        progress.update(f"{second * 10} requests done, p95 TTFT 0.31 s")
    assert lines == [
        "inferaccept: load concurrency=8 (5 s): 50 requests done, p95 TTFT 0.31 s",
        "inferaccept: load concurrency=8 (15 s): 150 requests done, p95 TTFT 0.31 s",
        "inferaccept: load concurrency=8 (25 s): 250 requests done, p95 TTFT 0.31 s",
    ]
    clock.now = 200.0
    progress.done("400 requests, p95 TTFT 0.30 s")
    assert lines[-1] == "inferaccept: load concurrency=8 (done in 1 min 40 s): 400 requests, p95 TTFT 0.30 s"
    assert progress.update("after the end") is False and len(lines) == 4


def test_a_quick_phase_stays_silent_even_when_it_ends() -> None:
    lines: list[str] = []
    clock = _Clock()
    with _progress(lines, clock) as progress:
        clock.now += 2
        progress.update("almost nothing to say")
    assert lines == []


def test_elapsed_time_reads_in_seconds_then_minutes() -> None:
    assert [clock_text(s) for s in (0.4, 59.4, 60, 125.9, 3601)] == ["0 s", "59 s", "1 min 00 s",
                                                                    "2 min 05 s", "60 min 01 s"]


def _slow_start(seconds: float) -> str:
    return f"sleep {seconds}; exec {sys.executable} -m pytest_inferaccept.fake --port {{port}}"


FAST_PROGRESS = """
import pytest
from pytest_inferaccept.plugin.keys import SESSION_KEY

@pytest.hookimpl(trylast=True)  # after the plugin has made the session
def pytest_configure(config):
    config.stash[SESSION_KEY].progress_timing = (0.5, 1.0)  # seconds, not the default 5 and 10
"""


# Without -q the wait must last several progress intervals to show their throttling; under -q it
# need only last well past the first line's 0.5 s (1 s of sleep, then the fake's own start), so
# that the run would have shown lines had it not been quiet.
@pytest.mark.parametrize(("quiet", "sleep"), [(False, 2.5), (True, 1.0)], ids=["default", "-q"])
def test_a_server_slow_to_start_shows_that_the_run_waits_for_it_unless_quiet(
        pytester: pytest.Pytester, quiet: bool, sleep: float) -> None:
    pytester.makeconftest(FAST_PROGRESS)
    pytester.makepyfile("def test_health(http_client):\n"
                        "    assert http_client.get('/health').status_code == 200\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--server-cmd", _slow_start(sleep),
                                          *(["-q"] if quiet else []))
    out = result.stdout.str()
    assert result.ret == 0, out
    waiting = [line for line in out.splitlines() if "waiting for the server at http://127.0.0.1:" in line]
    if quiet:
        assert waiting == []
        return
    assert waiting, out
    assert all(line.startswith("inferaccept: chat server (") and "last seen: " in line for line in waiting)
    # Throttled: at most one line a second here (the poll runs five times a second).
    seconds = [int(line.split("(", 1)[1].split(" s)", 1)[0]) for line in waiting]
    assert seconds == sorted(set(seconds))
