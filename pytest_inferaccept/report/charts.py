"""Load charts as inline SVG, drawn with matplotlib when it is installed (tables are always there).

matplotlib is optional (`pip install pytest-inferaccept[charts]`): without it the page shows the
same numbers as tables only. Figures are drawn on their own canvas, never through pyplot, so
the report does not change the backend of the process that writes it.
"""

from __future__ import annotations

import importlib
import io
import re
from typing import Any

from pytest_inferaccept.report.model import CheckResult, LoadResult, RunDocument
from pytest_inferaccept.report.units import status_class
from pytest_inferaccept.report.words import short_name

X_KEYS: dict[str, str] = {"concurrency": "concurrency (requests in flight)", "rate": "request rate (req/s)"}
THROUGHPUT_KEYS = ("throughput_tokens_per_s", "output_tokens_per_s", "throughput", "tokens_per_s")
_LATENCY = re.compile(r"^(ttft|itl|tpot|e2e)_")
Chart = tuple[str, str]


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


def _x_axis(runs: list[LoadResult]) -> str | None:
    for key in X_KEYS:
        xs = [run.spec.get(key) for run in runs]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs) and len(set(xs)) > 1:
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
        for row in run.slo.rows if run.slo else []:
            if _LATENCY.match(row.key) and row.measured is not None:
                series.setdefault(row.key, []).append(
                    (float(run.spec[x_key]), row.measured, row.ci_low, row.ci_high, row.limit))
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
    best = [float(r.spec[x_key]) for r in runs if r.slo and status_class(r.slo.status) == "pass"]
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
    key = next((k for k in THROUGHPUT_KEYS if all(isinstance(r.summary.get(k), (int, float)) for r in runs)),
               None)
    if key is None:
        return None
    points = sorted((float(r.spec[x_key]), float(r.summary[key])) for r in runs)
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
    with _mpl("").rc_context({"svg.hashsalt": "inferaccept", "svg.fonttype": "none", "font.size": 9}):
        for test in doc.tests:
            x_key = _x_axis(test.load) if len(test.load) > 1 else None
            if x_key is None:
                continue
            for draw in (_latency_chart, _throughput_chart):
                chart = draw(test, test.load, x_key)
                if chart is not None and chart[1]:
                    charts.append(chart)
    return charts
