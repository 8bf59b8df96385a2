"""A server that stopped during the run: one cause each time, and the failures it explains.

No pytest here. The plugin asks `before_test` whether the server can serve a test and
`explain_failure` whether a failed test is a consequence of a stop rather than a finding.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pytest_inferaccept.outage import SLOW_PROBE_PAUSE, answers, connection_failure, origin
from pytest_inferaccept.scrub import Scrubber

if TYPE_CHECKING:
    from pytest_inferaccept.model import Cause, Exchange
    from pytest_inferaccept.run.servers import ServerManager


class OutageLedger:
    """Every time the server stopped during the run, with the failures it explains."""

    def __init__(self, servers: ServerManager, scrubber: Scrubber, log: Callable[[str], None]) -> None:
        self.servers = servers
        self.scrubber = scrubber
        self._log = log
        self.causes: list[Cause] = []
        """Every stop of the server, in order."""
        self.caused_by: dict[str, tuple[int, str]] = {}
        """Test id -> (index in causes, the message that explains its failure)."""

    def before_test(self, test: str) -> str | None:
        """None when the server can serve this test; else why not (the test is then a consequence)."""
        for cause in self._open_causes(test):
            if cause.kind == "exited" or cause.main:
                return self._attribute(cause, test, consequence=True)[1]
        exited = self._exited(during=None)
        if exited is not None:
            return self._attribute(exited, test, consequence=True)[1]
        self.servers.last_test = test
        return None

    def explain_failure(self, test: str, exc: BaseException | None,
                        exchanges: Sequence[Exchange] = ()) -> tuple[int, str] | None:
        """(index in causes, message) when the server's stop explains this failed test, else None.

        A launched process that exited explains it; so does a failed connection when a quick
        probe confirms that the server no longer answers at all.
        """
        if test in self.caused_by:
            return self.caused_by[test]
        cause = self._exited(during=test)
        if cause is not None:
            return self._attribute(cause, test, consequence=False)
        failure = connection_failure(exc, exchanges)
        root = self._root_of(failure.origin if failure else None)
        if failure is None or root is None:
            return None
        for known in self.causes:
            if known.answered_again_before is None and (known.kind == "exited"
                                                        or known.server == origin(root)):
                return self._attribute(known, test, consequence=True)
        seen = answers(root)
        if seen is None:
            return None  # it still answers: the failure is the test's own finding
        assert self.servers.current is not None
        from pytest_inferaccept.model import Cause

        cause = Cause(kind="stopped answering", server=origin(root), reason=self.scrubber.text(seen),
                      main=origin(root) == origin(self.servers.current.base_url), during=test,
                      last_request=self.scrubber.text(failure.describe()))
        self.add(cause)
        return self._attribute(cause, test, consequence=False)

    def _root_of(self, seen_origin: str | None) -> str | None:
        """The root URL of the server under test a failed request went to (the main one when unknown).

        None for a request to anywhere else: another host refusing is not the server stopping.
        """
        server = self.servers.current
        if server is None:
            return None
        for root in (server.base_url, server.embedding_url or server.base_url):
            if seen_origin is None or origin(root) == seen_origin:
                return root
        return None

    def _open_causes(self, test: str) -> list[Cause]:
        """The causes still in force; a server that answers again closes its cause."""
        still: list[Cause] = []
        for cause in self.causes:
            if cause.answered_again_before is not None:
                continue
            if cause.kind == "stopped answering" and cause.due_for_probe():
                started = time.monotonic()
                if answers(cause.server) is None:
                    cause.answered_again_before = test
                    self._log(f"inferaccept: {cause.who} answers again (before test {test})")
                    continue
                if time.monotonic() - started > 1.0:
                    # A probe that waited for its timeout is not repeated before every test.
                    cause.next_probe = time.monotonic() + SLOW_PROBE_PAUSE
            still.append(cause)
        return still

    def _exited(self, during: str | None) -> Cause | None:
        """A new cause when a launched process has exited (once: a process does not come back)."""
        if any(c.kind == "exited" for c in self.causes):
            return None
        proc = next((p for p in self.servers.processes
                     if p.returncode is not None and p not in self.servers.killed_on_purpose), None)
        if proc is None or proc.returncode is None:
            return None
        self.servers.check_alive()  # keeps the full death message, log tail included, in self.servers.death
        code = proc.returncode
        server = self.servers.current.base_url if self.servers.current else ""
        from pytest_inferaccept.model import Cause

        cause = Cause(kind="exited", server=origin(server) if server else "",
                      reason=f"exit code {code}" if code >= 0 else f"killed by signal {-code}",
                      during=during, after=None if during else self.servers.last_test,
                      detail=self.servers.death or self.scrubber.text(proc.death_message()))
        self.add(cause)
        return cause

    def add(self, cause: Cause) -> None:
        self.causes.append(cause)
        """A new cause, said once as it happens."""
        # Said once, as it happens; the summary and the report give the final count.
        self._log(f"inferaccept: {cause.headline()}; the failures that follow from it are "
                 "reported as its consequences")

    def _attribute(self, cause: Cause, test: str, *, consequence: bool) -> tuple[int, str]:
        index = next(i for i, c in enumerate(self.causes) if c is cause)
        if not consequence:
            message = cause.detail if cause.kind == "exited" else cause.first_message()
        elif cause.kind == "exited" and not cause.during and not cause.consequences:
            message = cause.detail  # the first to notice a death between tests tells it whole
            cause.consequences.append(test)
        else:
            message = cause.consequence_message()
            cause.consequences.append(test)
        self.caused_by[test] = (index, message)
        return index, message
