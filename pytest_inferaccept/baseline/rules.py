"""How one figure's change is judged: intervals first, so that noise is never called a regression.

Latencies (lower is better, relative tolerance t): a regression when the new interval's lower end
lies above the old interval's upper end × (1 + t); an improvement when the new upper end × (1 + t)
lies below the old lower end. Error rate (absolute, points): new low > old high + t. Goodput
(absolute, higher is better): new high < old low − t. Throughput and request rate have no interval:
their point values are compared, a regression below old × (1 − t).
"""

from __future__ import annotations

import math
from typing import Literal

from pytest_inferaccept.baseline.figures import HIGHER_IS_BETTER, Figure
from pytest_inferaccept.gate_settings import ABSOLUTE

Judged = Literal["regression", "improvement", "same", "no_interval"]


def judge(key: str, old: Figure, new: Figure, tolerance: float) -> Judged:
    """Judge one figure's change under its tolerance."""
    if key in ABSOLUTE:
        if old.low is None or old.high is None or new.low is None or new.high is None:
            return "no_interval"
        if key in HIGHER_IS_BETTER:
            worse, better = new.high < old.low - tolerance, new.low > old.high + tolerance
        else:
            worse, better = new.low > old.high + tolerance, new.high < old.low - tolerance
    elif key in HIGHER_IS_BETTER:
        worse = new.value < old.value * (1 - tolerance)
        better = new.value > old.value * (1 + tolerance)
    else:
        if old.low is None or old.high is None or new.low is None or new.high is None:
            return "no_interval"
        worse = new.low > old.high * (1 + tolerance)
        better = new.high * (1 + tolerance) < old.low
    return "regression" if worse else "improvement" if better else "same"


def relative(old: float, new: float) -> str:
    """The change as a signed percentage of the old value ('+190%'), or '' when old is zero."""
    if old == 0 or math.isinf(new) or math.isinf(old):
        return ""
    return f"{(new - old) / abs(old) * 100:+.0f}%"
