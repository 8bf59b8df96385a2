"""Every kind of capacity scenario as the report takes it: its title, its words, its view and its chart.

One entry a kind. `unit` says how its levels read (on a step, in a sentence, as a heading, on an
axis); `sentences`, `facts` and `plot` name how the plain-words answer (words.py), the Capacity
section (capacity_view.py) and the charts (charts.py) read it, each of which holds one function
for each such reading. A kind with no facts shows its headline, reasons and step table; one with
no plot has no chart. A kind missing here is drawn the generic way (`kind_of`). This module
imports none of the three, so each of them can look a kind up here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Sentences = Literal["climb", "soak", "push", "refusal", "headline"]
"""How a kind is told in the answer: a climb's SLO level and knee, a soak's checks, a push's boundary,
a refusal's headline and reasons, or the generic 'kind (check): headline'."""
Facts = Literal["climb", "soak", "push", "refusal", "recovery", "lengths", "interference", "prefix", "turns",
                "cancel"]
"""Which facts its section lists beside the step table, and how that table names its rows and which
columns of its own it adds: a climb's, a soak's checks and windows, a boundary's (a push's shedding, a
prompt length's refusal), a recovery's way back, latency by length bucket, short prompts alone and
mixed with long ones, unique and shared prefixes, TTFT per conversation turn, or what a cancellation burst
left behind (gauges, counter, answers after it)."""
Plot = Literal["climb", "soak", "spike"]
"""Its chart: throughput and latency against the level, the soak over time, or latency across a spike."""


@dataclass(frozen=True, kw_only=True)
class Unit:
    """How the levels of a scenario read: on a step, in a sentence, as a heading and on a chart's axis."""

    step: str
    """A level on a step, as the terminal prints it: 'c={:g}'."""
    one: str
    """A level of one in a sentence: '{:g} concurrent user'."""
    many: str
    """Any other level in a sentence: '{:g} concurrent users'."""
    heading: str
    """The heading of the level column of the step table."""
    axis: str
    """The label of the level axis of a chart."""
    against: str
    """What a chart plots against, in its caption."""
    doubling: bool
    """Levels that double from one to the next: a log-2 axis when they span a factor of 4 or more."""
    achieved: Literal["concurrency", "rate"] | None
    """Which achieved load the step table shows beside the level (None: neither)."""
    serves: str
    """The verb of a climb's answer: 'Serves 8 concurrent users within your SLOs'."""
    users: str
    """What a climb serves, in 'Cannot tell how many concurrent users the server serves'."""
    bare: str
    """A level where a sentence has already said the unit: 'beyond {:g}'."""
    steps: str
    """What the measured levels are called: 'no knee within the levels measured'."""

    def level(self, level: float) -> str:
        """'c=8', '4.5 req/s', '2048 tokens'."""
        return self.step.format(level)

    def amount(self, level: float) -> str:
        """'1 concurrent user', '8 concurrent users', '4.5 requests/s'."""
        return (self.one if level == 1 else self.many).format(level)


CONCURRENCY: Final = Unit(
    step="c={:g}", one="{:g} concurrent user", many="{:g} concurrent users", heading="concurrency",
    axis="concurrency (requests in flight)", against="concurrency", doubling=True, achieved="concurrency",
    serves="Serves", users="concurrent users", bare="{:g}", steps="levels")
RATE: Final = Unit(
    step="{:g} req/s", one="{:g} requests/s", many="{:g} requests/s", heading="rate asked",
    axis="request rate asked (req/s)", against="request rate", doubling=False, achieved="rate",
    serves="Sustains", users="requests/s", bare="{:g} requests/s", steps="rates")
PROMPT_TOKENS: Final = Unit(
    step="{:g} tokens", one="{:g} prompt token", many="{:g} prompt tokens", heading="prompt",
    axis="prompt length (tokens)", against="prompt length", doubling=True, achieved=None,
    serves="Answers", users="prompt tokens", bare="{:g} tokens", steps="lengths")
BUCKET: Final = Unit(
    step="{:g} tokens", one="{:g} token", many="{:g} tokens", heading="length bucket",
    axis="tokens asked (middle of the bucket's range)", against="length", doubling=True, achieved=None,
    serves="Answers", users="tokens", bare="{:g} tokens", steps="buckets")
SPEED: Final = Unit(
    step="speed={:g}", one="{:g}× the recorded traffic", many="{:g}× the recorded traffic",
    heading="speed (× recorded)", axis="speed (× the recorded arrival pace)", against="speed", doubling=False,
    achieved="rate", serves="Holds", users="× the recorded traffic", bare="{:g}×", steps="speeds")
TURN: Final = Unit(
    step="turn {:g}", one="turn {:g}", many="turn {:g}", heading="turn", axis="turn of the conversation",
    against="turn", doubling=False, achieved=None, serves="Answers", users="turns", bare="turn {:g}",
    steps="turns")


@dataclass(frozen=True, kw_only=True)
class CapacityKind:
    """What the report does with one kind of scenario."""

    title: str
    """The heading of its section."""
    unit: Unit = CONCURRENCY
    order: int = 5
    """Where the answer tells it: how many users first, then how it holds and breaks, then the rest."""
    sentences: Sentences = "headline"
    facts: Facts | None = None
    plot: Plot | None = None
    slo_column: bool = True
    """Whether its step table has an SLO column (a scenario not judged against an SLO has none)."""


KINDS: Final[dict[str, CapacityKind]] = {
    "ladder": CapacityKind(title="Concurrency ladder", order=0, sentences="climb", facts="climb",
                           plot="climb"),
    "sweep": CapacityKind(title="Open-loop rate sweep", unit=RATE, order=1, sentences="climb", facts="climb",
                          plot="climb"),
    "soak": CapacityKind(title="Soak", order=2, sentences="soak", facts="soak", plot="soak"),
    "push": CapacityKind(title="Push to failure", order=3, sentences="push", facts="push"),
    "push_length": CapacityKind(title="Prompt length boundary", unit=PROMPT_TOKENS, order=4,
                                sentences="refusal", facts="refusal", slo_column=False),
    "recovery": CapacityKind(title="Failure recovery", order=5, facts="recovery", slo_column=False),
    "length": CapacityKind(title="Latency by prompt and answer length", unit=BUCKET, order=6, facts="lengths",
                           slo_column=False),
    "interference": CapacityKind(title="Long prompts against short ones", order=7, facts="interference",
                                 slo_column=False),
    "prefix": CapacityKind(title="Shared prefix against unique prompts", order=8, facts="prefix",
                           slo_column=False),
    "multi_turn": CapacityKind(title="Multi-turn conversations", unit=TURN, order=9, facts="turns",
                               slo_column=False),
    "spike": CapacityKind(title="Traffic spike", order=10, plot="spike"),
    "cancel": CapacityKind(title="Cancellation hygiene", order=11, facts="cancel", slo_column=False),
}
"""The kinds this report has words of its own for; any other registered kind is drawn from its
line in scenario_kinds.py (`kind_of`)."""

UNITS: Final[dict[str, Unit]] = {"concurrency": CONCURRENCY, "rate": RATE, "prompt_tokens": PROMPT_TOKENS,
                                 "bucket": BUCKET, "turn": TURN, "speed": SPEED}
"""A unit by the name a scenario_kinds.py line gives it."""


def kind_of(kind: str) -> CapacityKind:
    """The kind's entry; a kind without one is drawn from its registry line (title, unit, and the
    climb's facts, sentences and chart when it is built on the climb), else generically by its name."""
    from pytest_inferaccept.scenario_kinds import by_name

    if kind in KINDS:
        return KINDS[kind]
    try:
        registered = by_name(kind)
    except ValueError:
        return CapacityKind(title=kind)
    climbs = registered.reading == "climb"
    return CapacityKind(title=registered.title or kind, unit=UNITS.get(registered.unit, CONCURRENCY),
                        sentences="climb" if climbs else "headline", facts="climb" if climbs else None,
                        plot="climb" if climbs else None)


def level_words(kind: str, level: float) -> str:
    """A scenario's level as the terminal prints it: 'c=8', '4.5 req/s', '2048 tokens'."""
    return kind_of(kind).unit.level(level)
