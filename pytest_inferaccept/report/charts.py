"""Load and capacity charts as inline SVG, drawn with matplotlib when installed (tables are always there).

matplotlib is optional (`pip install pytest-inferaccept[charts]`): without it the page shows the
same numbers as tables only. Figures are drawn on their own canvas, never through pyplot, so
the report does not change the backend of the process that writes it.
"""

from __future__ import annotations

import importlib
import io
import re
from collections.abc import Callable
from typing import Any

from pytest_inferaccept.model import (
    CapacityScenario,
    CheckResult,
    HeadroomEstimate,
    LoadResult,
    RunDocument,
    Trend,
)
from pytest_inferaccept.report.capacity_kinds import Plot, Unit, kind_of
from pytest_inferaccept.report.capacity_view import numbered
from pytest_inferaccept.report.units import status_class
from pytest_inferaccept.report.words import short_name, slo_of

X_KEYS: dict[str, str] = {"concurrency": "concurrency (requests in flight)", "rate": "request rate (req/s)"}
_LATENCY = re.compile(r"^(ttft|itl|tpot|e2e)_")
Chart = tuple[str, str]
KNEE_COLOUR = "#b26a00"
BEST_COLOUR = "#2e7d32"
HEADROOM_COLOUR = "#d81b60"
MISSED_COLOUR = "#b3261e"
HELD_COLOUR = "#6a1b9a"
"""The highest level where the known-answer items held under load (docs/correctness.md, "Under load")."""
_RC = {"svg.hashsalt": "inferaccept", "svg.fonttype": "none", "font.size": 9}


def available() -> bool:
    """True when matplotlib can be imported."""
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        return False
    return True


def _mpl(module: str) -> Any:
    # Imported by name: matplotlib is optional, so the type checker may not have it either.
    return importlib.import_module(f"matplotlib{module}")


def _ask(run: LoadResult, key: str) -> int | float | None:
    """What a run asked on an x axis (X_KEYS): its concurrency or its request rate."""
    return run.spec.concurrency if key == "concurrency" else run.spec.rate


def _throughput(run: LoadResult) -> int | float | None:
    """A run's output tokens per second (the summary's typed figure)."""
    return run.summary.throughput_tokens_per_s


def _x_axis(runs: list[LoadResult]) -> str | None:
    for key in X_KEYS:
        xs = [_ask(run, key) for run in runs]
        if all(x is not None for x in xs) and len(set(xs)) > 1:
            return key
    return None


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    _mpl(".backends.backend_svg").FigureCanvasSVG(figure).print_svg(buffer, metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]  # drop the XML prolog and doctype: the SVG sits inside HTML
    # Only numbers and the plugin's own SLO keys are drawn, but the page never trusts its input.
    if re.search(r"<script|\son\w+\s*=|javascript:", text, re.IGNORECASE):
        return ""
    return text


def _latency_chart(test: CheckResult, runs: list[LoadResult], x_key: str) -> Chart | None:
    series: dict[str, list[tuple[float, float, float | None, float | None, float | None]]] = {}
    for run in runs:
        x = _ask(run, x_key)
        if x is None:
            continue
        for row in run.slo.rows if run.slo else []:
            if _LATENCY.match(row.key) and row.measured is not None:
                series.setdefault(row.key, []).append(
                    (float(x), row.measured, row.ci_low, row.ci_high, row.limit))
    if not series:
        return None
    fig = _mpl(".figure").Figure(figsize=(7.2, 3.4), dpi=100)
    ax = fig.add_subplot()
    for key, points in sorted(series.items()):
        points.sort()
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        low = [p[1] - p[2] if p[2] is not None else 0.0 for p in points]
        high = [p[3] - p[1] if p[3] is not None else 0.0 for p in points]
        line = ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=key)
        limit = points[0][4]
        if limit is not None:
            ax.axhline(limit, linestyle="--", linewidth=1, color=line[0].get_color(),
                       label=f"{key} limit")
    best = [float(x) for x, r in ((_ask(r, x_key), r) for r in runs)
            if x is not None and r.slo and status_class(r.slo.status) == "pass"]
    if best:
        ax.axvline(max(best), color="#2e7d32", linewidth=1, linestyle=":",
                   label=f"highest level within SLOs: {max(best):g}")
    ax.set_xlabel(X_KEYS[x_key])
    ax.set_ylabel("seconds")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return (f"Latency against {x_key}: {short_name(test.nodeid)} (bars: 95% CI)", _svg(fig))


def _throughput_chart(test: CheckResult, runs: list[LoadResult], x_key: str) -> Chart | None:
    if any(_throughput(r) is None for r in runs):
        return None
    pairs = ((_ask(r, x_key), _throughput(r)) for r in runs)
    points = sorted((float(x), float(y)) for x, y in pairs if x is not None and y is not None)
    fig = _mpl(".figure").Figure(figsize=(7.2, 3.0), dpi=100)
    ax = fig.add_subplot()
    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", color="#37474f")
    ax.set_xlabel(X_KEYS[x_key])
    ax.set_ylabel("output tokens/s")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return (f"Throughput against {x_key}: {short_name(test.nodeid)}", _svg(fig))


def load_charts(doc: RunDocument) -> list[Chart]:
    """(caption, inline SVG) per chart; empty when matplotlib is missing or no series has 2 points."""
    # matplotlib is slow to import: only when some test has a series to draw.
    if not any(len(test.load) > 1 for test in doc.tests) or not available():
        return []
    charts: list[Chart] = []
    # A fixed hash salt and text kept as text: the same data gives the same, smaller SVG.
    with _mpl("").rc_context(_RC):
        for test in doc.tests:
            x_key = _x_axis(test.load) if len(test.load) > 1 else None
            if x_key is None:
                continue
            for draw in (_latency_chart, _throughput_chart):
                chart = draw(test, test.load, x_key)
                if chart is not None and chart[1]:
                    charts.append(chart)
    return charts


def _level_axis(ax: Any, unit: Unit, levels: list[float]) -> None:
    """Levels on the x axis: a doubling ladder on a log-2 scale, ticks at the levels measured."""
    if unit.doubling and levels and min(levels) > 0 and max(levels) / min(levels) >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    ax.set_xticklabels([f"{x:g}" for x in levels], rotation=45 if len(levels) > 8 else 0)
    ax.minorticks_off()
    ax.set_xlabel(unit.axis)


def _level_marks(ax: Any, unit: Unit, knee: float | None, best: float | None,
                 held: float | None = None) -> None:
    if held is not None:
        ax.axvline(held, color=HELD_COLOUR, linestyle="-.", linewidth=1.2,
                   label=f"answers held up to {unit.level(held)}")
    if best is not None:
        ax.axvline(best, color=BEST_COLOUR, linestyle=":", linewidth=1.6,
                   label=f"highest within the SLOs: {unit.level(best)}")
    if knee is not None:
        ax.axvline(knee, color=KNEE_COLOUR, linestyle="--", linewidth=1.2,
                   label=f"knee: {unit.level(knee)}")


def _headroom_marks(ax: Any, room: HeadroomEstimate, levels: list[float]) -> None:
    """The headroom's interval shaded (to the last factor where it is open above), its point a line."""
    pct = f"{room.confidence:.0%}"
    top = room.high if room.high is not None else levels[-1]
    if top > room.low:
        ax.axvspan(room.low, top, color=HEADROOM_COLOUR, alpha=0.12, label=f"headroom: {pct} interval"
                   + ("" if room.high is not None else " (open above)"))
    if room.point is not None:
        ax.axvline(room.point, color=HEADROOM_COLOUR, linestyle="-", linewidth=1.4,
                   label=f"headroom: {room.point:.3g}×")


def _climb_chart(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Chart | None:
    """Throughput and latency p95 against the level, with the knee and the highest SLO level marked."""
    steps = scenario.steps
    if len(steps) < 2:
        return None
    slo = slo_of(doc, test)
    unit = kind_of(scenario.kind).unit
    knee = scenario.findings.knee.level if scenario.findings.knee is not None else None
    best = scenario.findings.max_slo_level
    graded = scenario.findings.correctness
    tokens = any(s.throughput_tokens_per_s for s in steps)
    fig = _mpl(".figure").Figure(figsize=(10.4, 3.6), dpi=100)
    left, right = fig.subplots(1, 2)
    through = [(s.level, s.throughput_tokens_per_s if tokens else s.request_rate_per_s) for s in steps]
    left.plot([x for x, y in through if y is not None], [y for _, y in through if y is not None], marker="o",
              color="#37474f", label="output tokens/s" if tokens else "requests/s")
    left.set_ylabel("output tokens/s" if tokens else "requests/s")
    left.set_ylim(bottom=0)
    left.set_title("throughput", fontsize=9)
    missed_label = "SLO missed"
    for metric, label, marker, colour in (("ttft_p95", "TTFT p95", "o", "#1565c0"),
                                          ("e2e_p95", "e2e p95", "s", "#00838f")):
        points = [(s.level, getattr(s, metric), status_class(s.slo_status) == "fail") for s in steps
                  if getattr(s, metric) is not None]
        if not points:
            continue
        line = right.plot([p[0] for p in points], [p[1] for p in points], marker=marker, label=label,
                          color=colour)[0]
        limit = slo.get(metric)
        if limit is not None:
            right.axhline(limit, color=line.get_color(), linestyle="--", linewidth=1, label=f"{label} limit")
        missed = [p for p in points if p[2]]
        if missed:
            right.scatter([p[0] for p in missed], [p[1] for p in missed], marker="x", s=70, zorder=5,
                          color=MISSED_COLOUR, label=missed_label)
            missed_label = "_nolegend_"
    right.set_ylabel("seconds")
    right.set_ylim(bottom=0)
    right.set_title("latency p95", fontsize=9)
    levels = sorted({s.level for s in steps})
    room = scenario.findings.headroom
    for ax in (left, right):
        _level_axis(ax, unit, levels)
        _level_marks(ax, unit, knee, best, graded.held_up_to if graded is not None else None)
        if room is not None:
            _headroom_marks(ax, room, levels)
        if graded is not None:
            wrong = [s.level for s in steps if s.correctness is not None and not s.correctness.held]
            if wrong:
                ax.scatter(wrong, [0] * len(wrong), marker="v", s=60, zorder=6, color=MISSED_COLOUR,
                           label="answers wrong under load", clip_on=False)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return (f"Throughput and latency p95 against {unit.against}: {short_name(test.nodeid)} (knee and highest "
            "level within the SLOs marked)", _svg(fig))


def _trend_line(ax: Any, trend: Trend | None, span: float, colour: str, scale: float = 1.0) -> None:
    start, slope = (trend.start, trend.slope_per_s) if trend is not None else (None, None)
    if start is not None and slope is not None and span > 0:
        ax.plot([0, span], [start * scale, (start + slope * span) * scale], linestyle="--", linewidth=1,
                color=colour, alpha=0.8)


def _soak_chart(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Chart | None:
    """TTFT and end-to-end window medians over the soak, memory beside them, failures per window if any."""
    series, checks = scenario.series, scenario.findings.checks
    latency = [(name, label, points, colour) for name, label, points, colour in (
        ("ttft", "TTFT median", series.ttft, "#1565c0"), ("e2e", "e2e median", series.e2e, "#00838f"))
        if len(points) >= 2]
    memory = series.memory_bytes if len(series.memory_bytes) >= 2 else []
    errors = series.errors
    panels = int(bool(latency)) + int(bool(memory)) + int(bool(errors))
    if not panels:
        return None
    fig = _mpl(".figure").Figure(figsize=(10.4 if panels > 1 else 7.2, 3.3), dpi=100)
    axes = list(fig.subplots(1, panels, squeeze=False)[0])
    if latency:
        ax = axes.pop(0)
        for name, label, points, colour in latency:
            ax.plot([t for t, _ in points], [v for _, v in points], marker=".", label=label, color=colour)
            check = checks.get(f"{name}_drift")
            _trend_line(ax, check.trend if check else None, points[-1][0], colour)
        ax.set_ylabel("seconds")
        ax.set_ylim(bottom=0)
        ax.set_title("latency per window (dashed: fitted trend)", fontsize=9)
        ax.legend(fontsize=8, loc="best")
    if memory:
        ax = axes.pop(0)
        ax.plot([t for t, _ in memory], [v / 2**20 for _, v in memory], color="#6a1b9a", marker=".")
        check = checks.get("memory_growth")
        _trend_line(ax, check.trend if check else None, memory[-1][0], "#6a1b9a", scale=1 / 2**20)
        ax.set_ylabel("MiB")
        ax.set_ylim(bottom=0)
        ax.set_title("server memory", fontsize=9)
    if errors:
        ax = axes.pop(0)
        width = (series.window_s or 1.0) * 0.8
        ax.bar([t for t, _ in errors], [n for _, n in errors], width=width, color=MISSED_COLOUR)
        ax.set_ylabel("failed requests")
        ax.set_title("failures per window", fontsize=9)
    for ax in fig.axes:
        ax.set_xlabel("seconds into the soak")
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return (f"The soak over time: {short_name(test.nodeid)}", _svg(fig))


def _spike_chart(doc: RunDocument, test: CheckResult, scenario: CapacityScenario) -> Chart | None:
    """TTFT and e2e per window across the spike, the recovery limits dashed, the spike shaded."""
    series, spike = scenario.series, scenario.findings.spike
    latency = [(label, points, colour) for label, points, colour in (
        ("TTFT", series.ttft, "#1565c0"), ("e2e", series.e2e, "#00838f")) if len(points) >= 2]
    if spike is None or not latency:
        return None
    fig = _mpl(".figure").Figure(figsize=(7.2, 3.3), dpi=100)
    ax = fig.add_subplot()
    ax.axvspan(spike.spike_start_s, spike.spike_end_s, color="#ffcc80", alpha=0.35, label="spike")
    for label, points, colour in latency:
        ax.plot([t for t, _ in points], [v for _, v in points], marker=".", label=f"{label} per window",
                color=colour)
        for key, limit in spike.limits.items():
            if key.split("_")[0] == label.lower():
                ax.axhline(limit, color=colour, linestyle="--", linewidth=1, label=f"{key} limit")
    if spike.recovery_s is not None:
        ax.axvline(spike.spike_end_s + spike.recovery_s, color=BEST_COLOUR, linestyle=":", linewidth=1.6,
                   label=f"back within: {spike.recovery_s:.1f} s after")
    ax.set_xlabel("seconds into the timeline (by send time)")
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    which = "the SLO's limits" if spike.reference == "slo" else "the pre-spike p95 × tolerance"
    return (f"Latency across the spike: {short_name(test.nodeid)} (dashed: {which})", _svg(fig))


PLOTS: dict[Plot, Callable[[RunDocument, CheckResult, CapacityScenario], Chart | None]] = {
    "climb": _climb_chart, "soak": _soak_chart, "spike": _spike_chart,
}
"""How each reading of report/capacity_kinds.py is charted."""


def capacity_charts(doc: RunDocument) -> dict[str, list[Chart]]:
    """(caption, inline SVG) per capacity scenario anchor; empty when matplotlib is missing."""
    drawn = [(anchor, test, s, plot) for anchor, test, s in numbered(doc)
             if (plot := kind_of(s.kind).plot) is not None]
    if not drawn or not available():
        return {}
    out: dict[str, list[Chart]] = {}
    with _mpl("").rc_context(_RC):
        for anchor, test, scenario, plot in drawn:
            chart = PLOTS[plot](doc, test, scenario)
            if chart is not None and chart[1]:
                out[anchor] = [chart]
    return out
