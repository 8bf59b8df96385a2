"""How many measured requests a run needs for its SLO (docs/statistics.md, "How runs are sized").

Two numbers per SLO. The *least* is the fewest measured requests on which every limit could
pass at all, on a perfect server: fewer cannot support the SLO and are refused before anything
is sent. The *plan* is the count at which a server that misses each limit only half as often as
the limit allows (0.5% failing against `error_rate=0.01`, 2.5% of TTFT over the limit of a
`ttft_p95`) passes at least 90% of runs: the size a run gets when the team gives none.

Every limit on a share is a count rule: a percentile p passes when at most k of n values lie
beyond its limit, an error rate L when at most k of n requests failed, a goodput g when at most
k of n were not good, with k the most the judging rule allows at n. For the two-sided interval
at 95% that k is the largest with P(Binomial(n, s) <= k) <= 2.5%, s being the share the limit
allows (1 - p, L, 1 - g); for MLPerf's early stopping the same with 1%; on the point estimate
k = floor(n s). A server whose true share is m then passes with probability P(Binomial(n, m) <= k),
so one binomial sum plans every limit. As n grows that chance rises in a sawtooth (it falls
between the counts where k steps up), so the plan is the first count from which it stays at or
above the power, not the first count that touches it.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from pytest_inferaccept.slo_profile import judged_by_early_stopping
from pytest_inferaccept.stats.early_stopping import MLPERF_CONFIDENCE, MLPERF_TOLERANCE
from pytest_inferaccept.stats.percentiles import (
    MEAN_MIN_SAMPLES,
    PERCENTILE_LEVELS,
    binom_cdf,
    first_true,
    min_sample_size,
)

if TYPE_CHECKING:
    from pytest_inferaccept.markers import LatencyLimit, SloSpec

PLAN_POWER = 0.9
"""The least chance a server inside its limits by PLAN_MARGIN has to pass a planned run."""
PLAN_MARGIN = 0.5
"""The server a plan is made for misses each limit this share as often as the limit allows."""
EARLY_STOPPING_TAILS = ("p90", "p95", "p99", "p999")
"""Percentiles an MLPerf-named profile judges by early stopping (ITL aside: its unit is the answer)."""

_CEILING = 100_000_000  # no plan is made beyond this many requests


def point_floor(stat: str) -> int:
    """Fewest samples on which a latency statistic is judged on its point estimate.

    A percentile p needs 1 / (1 - p) samples before its estimate is more than the largest
    value seen (p99: 100); a mean, MEAN_MIN_SAMPLES; a maximum, one.
    """
    if stat == "max":
        return 1
    if stat == "mean":
        return MEAN_MIN_SAMPLES
    return math.ceil(1 / (1 - PERCENTILE_LEVELS[stat]) - 1e-9)


def proportion_point_floor(limit: float, *, minimum: bool) -> int:
    """Fewest requests on which a rate limit is judged on its point estimate: enough that one
    request more or less on the wrong side moves the estimate by no more than the limit's
    distance from the end of the scale (error_rate 0.01: 100; goodput_min 0.95: 20)."""
    room = 1.0 - limit if minimum else limit
    return 1 if room <= 0 else math.ceil(1 / room - 1e-9)


@dataclass(frozen=True)
class CountRule:
    """When a limit on a share passes: at most `most_over(n)` of n samples beyond it.

    `allowed` is the share beyond the limit that the limit allows; `tail` the most a server
    exactly at the limit may pass (the interval's one tail, or MLPerf's 1 - c), None when the
    limit is judged on its point estimate; `least` the fewest samples the row judges at all.
    """

    allowed: float
    tail: float | None
    least: int = 1
    percentile: bool = False
    """On the point estimate: a type-7 percentile (at most floor((n - 1) s) beyond) rather than a
    share (at most floor(n s))."""

    def first_n(self, over: int) -> int:
        """The fewest samples at which `over` of them beyond the limit still pass."""
        return _first_n(self, over)

    def most_over(self, n: int) -> int:
        """The most of n samples that may lie beyond the limit with the limit passing; -1: none may pass."""
        if n < self.least:
            return -1
        if self.tail is None:
            return math.floor((n - 1 if self.percentile else n) * self.allowed + 1e-9)
        tail, allowed = self.tail, self.allowed
        if binom_cdf(0, n, allowed) > tail:
            return -1
        # P(Binomial(n, s) <= k) grows with k: the last k at or under the tail
        return first_true(lambda k: binom_cdf(k, n, allowed) > tail, 0, n + 1) - 1

    def chance(self, n: int, share: float) -> float:
        """The chance n samples pass when each lies beyond the limit with probability `share`."""
        most = self.most_over(n)
        return 0.0 if most < 0 else binom_cdf(most, n, share)


@lru_cache(maxsize=4096)
def _first_n(rule: CountRule, over: int) -> int:
    if rule.tail is None:
        needed = over / rule.allowed + (1 if rule.percentile else 0)
        return max(rule.least, math.ceil(needed - 1e-9), over + 1)
    tail = rule.tail

    def passes(n: int) -> bool:
        # for a fixed count beyond the limit, the chance of so few falls as n grows
        return binom_cdf(over, n, rule.allowed) <= tail

    low = max(rule.least, over + 1)
    if passes(low):
        return low
    high = 2 * low
    while not passes(high):
        low, high = high, 2 * high
    return first_true(passes, low, high)


@dataclass(frozen=True, kw_only=True)
class LimitNeed:
    """What one limit of an SLO asks of a run's size."""

    key: str
    """The limit's key, e.g. error_rate or ttft_p99."""
    setting: str
    """The limit as written, e.g. error_rate=0.01."""
    least: int
    """Fewest measured requests on which the limit could pass at all."""
    rule: CountRule | None
    """Its count rule; None where no share decides it (a mean, a maximum, a rate over the window)."""
    judged_by: str
    """How the row is judged, in words."""
    margin_words: str = ""
    """The server the plan is made for, in words (e.g. '0.5% failing')."""


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """The sizes an SLO asks of a run: the least that could pass, and the planned count."""

    least: int
    least_key: str
    planned: int
    planned_key: str
    power: float
    margin: float
    needs: tuple[LimitNeed, ...]

    def need(self, key: str) -> LimitNeed | None:
        """The need of the limit with this key."""
        return next((need for need in self.needs if need.key == key), None)

    def chance(self, n: int) -> tuple[float, str]:
        """The weakest limit's chance to pass n measured requests on the planned-for server, and its key."""
        chances = [(need.rule.chance(n, self.margin * need.rule.allowed), need.key)
                   for need in self.needs if need.rule is not None]
        return min(chances, default=(1.0, ""))

    def planned_words(self) -> str:
        """Why the plan is its size, in a sentence's worth of words."""
        need = self.need(self.planned_key)
        least = self.need(self.least_key)
        if need is None or need.rule is None or self.planned <= self.least:
            setting = least.setting if least is not None else self.least_key
            return f"{setting} needs {self.least} measured requests to pass even on a perfect server"
        several = sum(other.rule is not None for other in self.needs) > 1
        others = " and as far inside the other limits" if several else ""
        return (f"{self.planned} measured requests give a server {need.margin_words} for {need.setting}"
                f"{others} a {self.power:.0%} chance to pass (a perfect server passes from {self.least})")

    def refusal(self, requests: int) -> str:
        """Why `requests` measured requests cannot support the SLO, or '' when they can."""
        if requests >= self.least:
            return ""
        need = self.need(self.least_key)
        why = f" ({need.judged_by})" if need is not None and need.judged_by else ""
        setting = need.setting if need is not None else self.least_key
        return (f"{requests} measured requests cannot support the SLO: {setting} needs at least "
                f"{self.least} to pass even on a perfect server{why}; ask for {self.least} or more "
                f"({self.planned} give a server at half its limits a {self.power:.0%} chance to pass), "
                f"or give no count and the run is sized from the SLO")

    def power_words(self, requests: int) -> str:
        """At a count below the plan: how often the planned-for server passes; '' at or above it."""
        if requests >= self.planned:
            return ""
        chance, key = self.chance(requests)
        need = self.need(key)
        if need is None or need.rule is None:
            return ""
        return (f"at {requests} measured requests a server {need.margin_words} for {need.setting} passes "
                f"{chance:.0%} of runs; {self.planned} give {self.power:.0%}")

    def time_words(self, requests: int | None, duration: float | None, rate: float | None, *,
                   option: str = "") -> str:
        """What the time bound does to a run of `requests` (None: as many as the time allows), as a
        phrase without its subject ('stops at 120 s, so ...'), or '' when it cannot cut the run short.

        `option` names what sets the bound, for the advice to raise it.
        """
        if duration is None:
            return ""
        raise_it = f" (raise {option} to hold it)" if option else ""
        wanted = self.least if requests is None else requests
        if rate is not None:
            expected = rate * duration
            if expected >= wanted:
                return ""
            power = self.power_words(math.floor(expected))
            return (f"stops at {duration:g} s, which holds about {expected:.0f} of the {wanted} planned at "
                    f"{rate:g} requests/s" + (f": {power}" if power else "") + raise_it)
        if requests is None or requests <= self.least:
            return (f"stops at {duration:g} s, so a server answering fewer than {wanted / duration:.1f} "
                    f"requests/s cannot reach the {self.least} a pass needs{raise_it}")
        return (f"stops at {duration:g} s, so a server answering fewer than {requests / duration:.1f} "
                f"requests/s ends it sooner, with less power, and one under {self.least / duration:.1f} "
                f"requests/s cannot reach the {self.least} a pass needs{raise_it}")

    def time_refusal(self, duration: float | None, rate: float | None) -> str:
        """Why an open-loop run's time bound cannot hold the least the SLO needs, or ''."""
        if duration is None or rate is None or rate * duration >= self.least:
            return ""
        need = self.need(self.least_key)
        setting = need.setting if need is not None else self.least_key
        return (f"at {rate:g} requests/s for at most {duration:g} s about {rate * duration:.0f} measured "
                f"requests can be sent, fewer than the {self.least} {setting} needs to pass even on a "
                f"perfect server; give a duration of {math.ceil(self.least / rate)} s or more "
                f"(--load-duration or duration=)")


def _setting(key: str, limit: float) -> str:
    return f"{key}={limit:g}"


def _percent(share: float) -> str:
    text = f"{share * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _latency_need(lim: LatencyLimit, slo: SloSpec, confidence: float, point_estimate: bool) -> LimitNeed:
    setting = _setting(lim.key, lim.limit)
    if lim.stat == "max":
        return LimitNeed(key=lim.key, setting=setting, least=1, rule=None,
                         judged_by="on the observed maximum")
    if lim.stat == "mean":
        least = point_floor("mean") if point_estimate else MEAN_MIN_SAMPLES
        return LimitNeed(key=lim.key, setting=setting, least=least, rule=None,
                         judged_by=f"a mean is judged from {least} values")
    p = PERCENTILE_LEVELS[lim.stat]
    allowed = 1.0 - p
    if judged_by_early_stopping(slo) and lim.stat in EARLY_STOPPING_TAILS and lim.metric != "itl":
        tail = 1.0 - MLPERF_CONFIDENCE
        allowed = 1.0 - (p - MLPERF_TOLERANCE)
        rule = CountRule(allowed=allowed, tail=tail)
        rule = CountRule(allowed=allowed, tail=tail, least=rule.first_n(0))
        judged_by = "MLPerf's early stopping, one-sided 99%"
    elif point_estimate:
        rule = CountRule(allowed=allowed, tail=None, least=point_floor(lim.stat), percentile=True)
        judged_by = "on the point estimate"
    else:
        rule = CountRule(allowed=allowed, tail=(1.0 - confidence) / 2.0, least=min_sample_size(p, confidence))
        judged_by = f"a {confidence:.0%} interval for {lim.stat}"
    unit = "answers" if lim.metric == "itl" else "values"
    return LimitNeed(key=lim.key, setting=setting, least=rule.least, rule=rule, judged_by=judged_by,
                     margin_words=f"with {_percent(PLAN_MARGIN * allowed)} of {lim.metric} {unit} over "
                                  f"{lim.limit:g} s")


def _share_need(key: str, limit: float, *, minimum: bool, confidence: float,
                point_estimate: bool) -> LimitNeed:
    setting = _setting(key, limit)
    allowed = 1.0 - limit if minimum else limit
    if allowed <= 0 or allowed >= 1:
        # at the end of the scale the row is judged on the count, and any count can pass
        return LimitNeed(key=key, setting=setting, least=1, rule=None, judged_by="judged on the count")
    if point_estimate:
        rule = CountRule(allowed=allowed, tail=None, least=proportion_point_floor(limit, minimum=minimum))
        judged_by = "on the point estimate"
    else:
        tail = (1.0 - confidence) / 2.0
        rule = CountRule(allowed=allowed, tail=tail)
        rule = CountRule(allowed=allowed, tail=tail, least=rule.first_n(0))
        judged_by = (f"no failure in {rule.least} puts the {confidence:.0%} upper bound at or under "
                     f"{_percent(limit)}" if not minimum else
                     f"every one of {rule.least} good puts the {confidence:.0%} lower bound at or over "
                     f"{_percent(limit)}")
    what = "not good" if minimum else "failing"
    return LimitNeed(key=key, setting=setting, least=rule.least, rule=rule, judged_by=judged_by,
                     margin_words=f"with {_percent(PLAN_MARGIN * allowed)} {what}")


def limit_needs(slo: SloSpec, *, confidence: float = 0.95,
                point_estimate: bool = False) -> tuple[LimitNeed, ...]:
    """What each limit of the SLO asks of a run's size, in the SLO's order."""
    needs = [_latency_need(lim, slo, confidence, point_estimate) for lim in slo.latency]
    if slo.error_rate is not None:
        needs.append(_share_need("error_rate", slo.error_rate, minimum=False, confidence=confidence,
                                 point_estimate=point_estimate))
    if slo.goodput_min is not None:
        needs.append(_share_need("goodput_min", slo.goodput_min, minimum=True, confidence=confidence,
                                 point_estimate=point_estimate))
    if slo.min_samples is not None:
        needs.append(LimitNeed(key="min_samples", setting=f"min_samples={slo.min_samples}",
                               least=slo.min_samples, rule=None,
                               judged_by="the SLO asks for that many"))
    return tuple(needs)


def planned_count(rules: list[CountRule], *, start: int, margin: float = PLAN_MARGIN,
                  power: float = PLAN_POWER) -> int:
    """The fewest n >= start from which every rule together passes with at least `power` up to 2n.

    The chance that all pass is bounded below by one minus the sum of each one's chance to fail
    (whatever ties them), and each chance only falls between the counts where its rule lets one
    more sample lie beyond the limit; so checking the sum at the last count before each such step
    checks every count between.
    """
    if not rules:
        return start

    def shortfall(n: int) -> float:
        return math.fsum(1.0 - rule.chance(n, margin * rule.allowed) for rule in rules)

    n, found = start, None
    while n <= _CEILING:
        step = min(rule.first_n(rule.most_over(n) + 1) for rule in rules)
        if shortfall(step - 1) <= 1.0 - power:
            found = n if found is None else found
            if step - 1 >= 2 * found:
                return found
        else:
            found = None
        n = step
    raise ValueError(f"no run of up to {_CEILING} requests gives the asked power")


def plan_run(slo: SloSpec, *, confidence: float = 0.95, point_estimate: bool = False,
             power: float = PLAN_POWER, margin: float = PLAN_MARGIN) -> RunPlan:
    """The least measured requests on which the SLO could pass, and the count planned for power."""
    needs = limit_needs(slo, confidence=confidence, point_estimate=point_estimate)
    least = max(needs, key=lambda need: need.least, default=None)
    start = least.least if least is not None else 1
    rules = [need.rule for need in needs if need.rule is not None]
    planned = planned_count(rules, start=start, margin=margin, power=power)
    # the limit that asks for most on its own is the one the plan is named after
    alone = [(planned_count([need.rule], start=need.least, margin=margin, power=power), -i)
             for i, need in enumerate(needs) if need.rule is not None]
    driver = needs[-max(alone)[1]].key if alone and planned > start else (least.key if least else "")
    return RunPlan(least=start, least_key=least.key if least else "", planned=planned, planned_key=driver,
                   power=power, margin=margin, needs=needs)


def requests_to_pass(slo: SloSpec, *, confidence: float = 0.95,
                     point_estimate: bool = False) -> tuple[int, str]:
    """The fewest measured requests on which every limit of the SLO could pass, and which limit
    sets that number (as the limit's key): what a perfect server still needs to show.

    Percentiles need their order-statistic minimum (p99: 368 at 95%), or under an MLPerf-named
    profile MLPerf's early-stopping minimum (p99: 459); an error rate L needs n with
    1 - a**(1/n) <= L (1%: 368); goodput g needs a**(1/n) >= g; a mean, MEAN_MIN_SAMPLES (100).
    ITL counts answers. In point mode the floors of `point_floor`.
    """
    plan = plan_run(slo, confidence=confidence, point_estimate=point_estimate)
    return plan.least, plan.least_key


def samples_to_claim(rule: CountRule, share: float) -> int | None:
    """About how many samples pass the rule if `share` of them keep lying beyond the limit.

    None when the share is at or above what the rule allows (more samples will not settle it).
    """
    if share >= rule.allowed:
        return None

    def claims(n: int) -> bool:
        return rule.most_over(n) >= math.ceil(share * n - 1e-9)

    n = max(rule.least, 1)
    while not claims(n):
        if n > _CEILING:
            return None
        n *= 2
    return first_true(claims, n // 2, n) if n > rule.least else n


def over_limit(sorted_values: list[float], limit: float) -> int:
    """How many of the sorted values lie beyond the limit (failures, infinite, always do)."""
    return len(sorted_values) - bisect_right(sorted_values, limit)
