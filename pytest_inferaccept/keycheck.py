"""Whether the server enforces the team's API key: a warning, or a NO-GO when auth is required."""

from __future__ import annotations

from pytest_inferaccept.capabilities import ProbeResult

UNENFORCED = "the server accepted requests without your API key"


def key_findings(api_key: str | None, probe: ProbeResult | None, *,
                 required: bool) -> tuple[list[str], list[str]]:
    """(warnings, failures) of the run about its key, from the `auth` probe made at the start."""
    if not api_key or probe is None or probe.status != "unsupported":
        return [], []
    # A key the server does not check protects nothing: say so even when auth was not asked for.
    warning = f"{UNENFORCED} ({probe.detail})"
    if required:
        return [warning], [f"{UNENFORCED}, and auth is required ({probe.detail})"]
    return [warning], []
