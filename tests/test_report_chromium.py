"""The page opened in headless Chromium: the verdict shows, nothing runs, nothing is injected."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests._report_runs import Page, report_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                                                          "(Debian: apt-get install chromium)")


def _chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args,
         page.as_uri()],
        capture_output=True, text=True, timeout=90, check=False)


@pytest.mark.parametrize(("name", "status"),
                         [("nogo", "NO-GO"), ("hostile", "NO-GO"), ("invalid", "INVALID")])
def test_chromium_shows_the_verdict_with_no_script_and_no_console_message(
        name: str, status: str, pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory,
        tmp_path: Path) -> None:
    run = report_run(name, pytester, tmp_path_factory)
    done = _chromium(run.html_path, tmp_path / "profile", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = Page(done.stdout)
    assert " ".join(dom.text_of["verdict"].split()).startswith(status)
    assert not dom.tags("script") and not dom.tags("img") and not dom.tags("iframe")
    assert [n for _, attrs in dom.elements for n in attrs if n.lower().startswith("on")] == []
    # Any console line would be a script error or a blocked injection: the page has neither.
    assert [line for line in done.stderr.splitlines() if ":CONSOLE" in line] == []


def test_chromium_takes_a_screenshot_of_the_page(pytester: pytest.Pytester,
                                                 tmp_path_factory: pytest.TempPathFactory,
                                                 tmp_path: Path) -> None:
    run = report_run("nogo", pytester, tmp_path_factory)
    shot = tmp_path / "page.png"
    done = _chromium(run.html_path, tmp_path / "profile", "--hide-scrollbars", "--window-size=1280,1600",
                     f"--screenshot={shot}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
