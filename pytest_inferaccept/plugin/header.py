"""The report header: what a run tests, printed at the top of the log before anything runs."""

from __future__ import annotations

from pytest_inferaccept.scrub import Scrubber, strip_userinfo
from pytest_inferaccept.settings import Settings


def header_lines(settings: Settings, scrubber: Scrubber) -> list[str]:
    """Lines naming the server, model, required capabilities and SLO; none without a server."""
    if not settings.targets_server:
        return []
    if settings.server_preset:
        server = f"preset {settings.server_preset} (launched by the plugin)"
    elif settings.server_cmd:
        where = f" at {strip_userinfo(settings.server_url)}" if settings.server_url else ""
        server = f"launched by the plugin{where}: {settings.server_cmd}"
    else:
        server = strip_userinfo(settings.server_url or "")
    lines = [f"inferaccept: server under test: {server}"]
    if settings.model:
        lines.append(f"inferaccept: model: {settings.model}")
    if settings.embedding_model or settings.embedding_url:
        where = f" at {strip_userinfo(settings.embedding_url)}" if settings.embedding_url else ""
        lines.append(f"inferaccept: embeddings: {settings.embedding_model or 'discovered'}{where}")
    lines.append(f"inferaccept: required capabilities: {', '.join(settings.capabilities)}")
    load = settings.load
    if load.slo is not None:
        limits = ", ".join(f"{key}={value:g}" for key, value in load.slo.to_json().items())
        judge = "point estimate" if load.judge_on_point else "95% interval"
        lines.append(f"inferaccept: SLO: {limits} (from {load.slo_source}; judged on the {judge})")
    else:
        lines.append("inferaccept: SLO: none given for the run "
                     "(load tests without an @slo marker are measured, not judged)")
    # A launch command or URL may carry a token (HF_TOKEN=..., --api-key ...): never print it.
    return [scrubber.text(line) for line in lines]
