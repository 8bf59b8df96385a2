"""Conditions that differ between two runs, and which of them make the figures incomparable.

A different model or a different declared condition (--condition gpu=..., tp=...) means the two
runs measured different things: their figures are shown, never called a regression. A different
client host, platform, load setting or SLO profile is flagged only: CI runners change host names
on every run, and per-run load differences are judged where they matter (each load run's own ask).
"""

from __future__ import annotations

from typing import Any, Literal

from pytest_inferaccept.model import ConditionDifference, LoadSettings, RunBody

Effect = Literal["untrusted", "flagged"]


def conditions_of(doc: RunBody) -> dict[str, tuple[str, Any, Effect]]:
    """The conditions of one run: key -> (label, value, what a difference means)."""
    cond = doc.conditions
    load = cond.settings.load or LoadSettings()
    server = doc.server
    out: dict[str, tuple[str, Any, Effect]] = {
        "model": ("model", server.model if server else cond.settings.model, "untrusted"),
        "embedding_model": ("embedding model", server.embedding_model if server else None, "flagged"),
        "client_host": ("client host", cond.client_host, "flagged"),
        "client_platform": ("client platform", cond.client_platform, "flagged"),
        "cpu_count": ("client CPU count", cond.cpu_count, "flagged"),
        "server_preset": ("server preset", cond.settings.server_preset, "flagged"),
        "slo": ("SLO profile", load.slo, "flagged"),
        "slo_judge": ("SLO judged on", load.slo_judge, "flagged"),
        "load": ("bundled load settings", {"concurrency": load.concurrency, "requests": load.requests,
                                           "duration": load.duration, "workers": load.workers}, "flagged"),
    }
    for key, value in cond.declared.items():
        out[f"declared.{key}"] = (f"declared condition {key}", value, "untrusted")
    return out


def differences(old: RunBody, new: RunBody) -> list[ConditionDifference]:
    """Every condition whose value differs (a declared condition present in one run only included)."""
    before, after = conditions_of(old), conditions_of(new)
    out = []
    for key in dict.fromkeys([*before, *after]):
        label, old_value, effect = before.get(key) or after[key]
        new_value = after[key][1] if key in after else None
        old_value = old_value if key in before else None
        if old_value != new_value:
            out.append(ConditionDifference(key=key, label=label, before=old_value, after=new_value,
                                           effect=effect))
    return out
