"""Optional capabilities: one minimal probe each, once per run (shared by xdist workers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pytest_inferaccept.settings import Settings

if TYPE_CHECKING:
    from pytest_inferaccept.model import Probe as ProbeResult
    from pytest_inferaccept.run.servers import ServerManager


class CapabilityProbes:
    """What each probed capability showed, kept for the run."""

    def __init__(self, settings: Settings, servers: ServerManager) -> None:
        self.settings = settings
        self.servers = servers
        self.probes: dict[str, ProbeResult] = {}
        self.share: Callable[[str, Callable[[], ProbeResult]], ProbeResult] | None = None
        """Runs a probe once for all processes of the run (set in xdist workers), else None."""

    def probe(self, capability: str) -> ProbeResult:
        """Probe a capability once per session."""
        if capability not in self.probes:
            from pytest_inferaccept.probes import PROBES

            server = self.servers.server()

            def run() -> ProbeResult:
                with self.servers.client(self.settings.request_timeout) as client:
                    return PROBES[capability](client, server)

            result = self.share(capability, run) if self.share else run()
            if result.transient:
                return result  # a refused or reset connection may pass: probe again next time
            self.probes[capability] = result
        return self.probes[capability]

    def is_required(self, capability: str) -> bool:
        """True when the team requires this capability."""
        return capability in self.settings.capabilities
