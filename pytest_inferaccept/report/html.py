"""The go/no-go page: one self-contained HTML file rendered from the results document.

Jinja2 escapes every value the template prints (autoescape on), so nothing a server sends can
add markup; the page carries no script at all, and its Content-Security-Policy forbids any.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_inferaccept.model import RunDocument, load
from pytest_inferaccept.report.view import build_page

MASK = "***"


def environment() -> Any:
    """The jinja2 environment of every page the package renders: autoescape on, strict names."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_inferaccept.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def page_css() -> str:
    """The package's own stylesheet, inlined into every page."""
    return resources.files("pytest_inferaccept.report").joinpath("templates/report.css").read_text("utf-8")


def _run(document: RunDocument | dict[str, Any]) -> RunDocument:
    """The typed run: as given, or validated from a results document read from a file."""
    return document if isinstance(document, RunDocument) else load(document)


def render(document: RunDocument | dict[str, Any], *, secrets: tuple[str, ...] = ()) -> str:
    """The page for a run (or a results document), as HTML text."""
    from markupsafe import Markup

    from pytest_inferaccept.report.charts import capacity_charts, load_charts

    run = _run(document)
    page = build_page(run)
    # Only two kinds of value go in unescaped: the package's own CSS and the SVG charts, which
    # charts._svg has checked for script.
    charts = [(caption, Markup(svg)) for caption, svg in load_charts(run)]
    scenario_charts = {anchor: [(caption, Markup(svg)) for caption, svg in drawn]
                       for anchor, drawn in capacity_charts(run).items()}
    text: str = environment().get_template("report.html.j2").render(
        page=page, charts=charts, capacity_charts=scenario_charts, css=Markup(page_css()))
    # The document is scrubbed before it gets here; this last pass also catches a secret in the
    # form the template printed it (escaped).
    return mask_printed(text, secrets)


def mask_printed(text: str, secrets: Iterable[str]) -> str:
    """The page with every secret masked, as written and as the template escaped it."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK).replace(html.escape(secret), MASK)
    return text


def write_page(path: Path, text: str) -> None:
    """Write a page atomically (a half-written file never replaces a good one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write(path: Path, document: RunDocument | dict[str, Any], *, secrets: tuple[str, ...] = ()) -> None:
    """Write the page for a results document atomically."""
    write_page(path, render(document, secrets=secrets))


def summary_fragment(document: RunDocument | dict[str, Any]) -> str:
    """The verdict, its reasons and the plain-words answer, as an HTML fragment for pytest-html."""
    page = build_page(_run(document))
    text: str = environment().get_template("pytest_html_summary.html.j2").render(page=page)
    return text


def evidence_fragment(payload: dict[str, Any], settings: dict[str, Any]) -> str:
    """One test's evidence (from its report's inferaccept data) as an HTML fragment for pytest-html."""
    from pytest_inferaccept.model import Evidence
    from pytest_inferaccept.report.evidence_view import evidence_view

    view = evidence_view(Evidence.model_validate(payload.get("evidence") or {}),
                         authenticated=settings.get("api_key") == "<set>",
                         max_time=settings.get("request_timeout"))
    if view.empty:
        return ""
    text: str = environment().get_template("pytest_html_evidence.html.j2").render(ev=view)
    return text
