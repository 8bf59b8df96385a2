"""Every kind of capacity scenario, in one place: the name the results write, its module, its method.

The run model describes `kind` from it, the capacity runner starts a kind by it
(`loadgen.scenario(kind, ...)`), and the report draws a kind it has no words of its own for from
the typed figures alone. A new kind is its module under pytest_inferaccept/capacity (with a
`start(runner, **options)` function that returns the scenario's result) and one line here.
Plain data: nothing is imported from here but the vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScenarioKind:
    """One kind of capacity scenario."""

    name: str
    """The scenario's `kind` in the results document."""
    module: str
    """Its module under pytest_inferaccept.capacity."""
    method: str
    """The `loadgen` method that starts it (a runner method, else the module's `start`)."""
    title: str = ""
    """The heading of its section in the report (the report's own entry may say more)."""
    unit: str = "concurrency"
    """What its levels are: concurrency, rate, prompt_tokens, bucket, turn or speed (× a trace's pace)."""
    reading: str | None = None
    """How the report reads a kind it has no entry of its own for: "climb" (knee, highest level
    within the SLOs, its chart) for a kind built on capacity/climb.py, else None (headline, reasons
    and the step table)."""


KINDS: tuple[ScenarioKind, ...] = (
    ScenarioKind("ladder", "ladder", "ladder"),
    ScenarioKind("sweep", "sweep", "sweep"),
    ScenarioKind("soak", "soak", "soak"),
    ScenarioKind("push", "push", "push"),
    ScenarioKind("push_length", "push_length", "push_length"),
    ScenarioKind("recovery", "recovery", "recovery"),
    ScenarioKind("length", "lengths", "lengths"),
    ScenarioKind("interference", "interference", "interference"),
    ScenarioKind("prefix", "prefix_cache", "prefix_cache"),
    ScenarioKind("multi_turn", "multi_turn", "multi_turn"),
    ScenarioKind("headroom", "headroom", "headroom", title="Headroom over the recorded traffic", unit="speed",
                 reading="climb"),
    ScenarioKind("spike", "spike", "spike", title="Traffic spike"),
    ScenarioKind("cancel", "cancel", "cancel", title="Cancellation hygiene"),
    ScenarioKind("rollback", "rollback", "rollback", title="Rollback drill"),
)

NAMES: tuple[str, ...] = tuple(kind.name for kind in KINDS)
"""Every kind the results may hold, in the order above."""


def by_name(name: str) -> ScenarioKind:
    """The kind called `name` (its results name or its method); ValueError naming the known ones."""
    for kind in KINDS:
        if name in (kind.name, kind.method):
            return kind
    raise ValueError(f"no capacity scenario of kind {name!r}; known: {', '.join(NAMES)}")
