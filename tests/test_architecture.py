"""The package's rooms keep their order: no import cycle, no import from a lower room to a higher
one, pytest only in the glue and the suites, and nothing outside them imports the glue.

Read from the source with `ast` (imports inside functions and under TYPE_CHECKING count too), so
a lazy import cannot hide a dependency. docs/architecture.md draws the same rooms.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_inferaccept"
NAME = "pytest_inferaccept"

LAYERS: tuple[tuple[str, ...], ...] = (
    # 0. Foundations: the typed run model (model.py), vocabularies, evidence, the verdict rule,
    #    protocol validators, the standalone fake server and the server presets.
    ("model", "_bound_errors", "scrub", "capabilities", "markers", "slo_profile", "evidence", "progress",
     "launcher", "verdict", "checks", "fake", "servers"),
    # 1. Talking to the server and measuring: clients, the load engine, statistics, probes; and the
    #    settings, which resolve each room's own (capacity.settings, compare.policy,
    #    robustness.config are plain data, so they sit here with them).
    ("http", "server", "load", "stats", "robustness", "outage", "keycheck", "probes", "answers",
     "correctness", "expectations", "settings", "capacity.settings", "compare.policy"),
    # 2. The run's core: the session and its ledger, the loadgen object, capacity scenarios, the
    #    typed run model and the finished document.
    ("capacity", "run", "session", "loadgen", "results"),
    # 3. Readers of a finished run: the report and the comparison.
    ("report", "compare"),
    # 4. pytest: hooks, fixtures, options (the glue) and the bundled acceptance suites.
    ("plugin", "suites"),
)
GLUE = ("plugin", "suites")


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _unit(module: str) -> str:
    """The room a module belongs to: its subpackage, a root module, or a module named on its own."""
    rest = module.removeprefix(f"{NAME}.")
    if rest == NAME:
        return "(package)"
    named = {u for layer in LAYERS for u in layer}
    parts = rest.split(".")
    return ".".join(parts[:2]) if ".".join(parts[:2]) in named else parts[0]


def _layer(unit: str) -> int:
    for n, layer in enumerate(LAYERS):
        if unit in layer:
            return n
    raise AssertionError(f"{unit} is in no layer: add it to LAYERS (and docs/architecture.md)")


def _imports() -> dict[str, set[str]]:
    """Module → the package's modules it imports (anywhere in its source), the facade left out."""
    out: dict[str, set[str]] = defaultdict(set)
    for module, path in MODULES.items():
        if module == NAME:
            continue  # the public facade: lazy re-exports of the rooms, above all of them
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(NAME):
                base = node.module or ""
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
                targets = subs if len(subs) == len(node.names) else [base, *subs]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith(NAME)]
            else:
                continue
            for target in targets:
                while target not in MODULES and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target != module and target != NAME:  # `from pytest_inferaccept import __version__`
                    out[module].add(target)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if node not in index:
            visit(node)
    return found


IMPORTS = _imports()


def test_no_module_imports_itself_round_a_cycle() -> None:
    assert _cycles(IMPORTS) == []


def test_no_room_imports_itself_round_a_cycle() -> None:
    rooms: dict[str, set[str]] = defaultdict(set)
    for module, targets in IMPORTS.items():
        for target in targets:
            if _unit(module) != _unit(target):
                rooms[_unit(module)].add(_unit(target))
    assert _cycles(rooms) == []


def test_no_room_imports_a_higher_one() -> None:
    upward = sorted(f"{m} → {t}" for m, ts in IMPORTS.items() for t in ts
                    if _layer(_unit(m)) < _layer(_unit(t)))
    assert upward == []


def test_nothing_but_the_glue_and_the_suites_imports_the_glue_or_pytest() -> None:
    into_glue = sorted(f"{m} → {t}" for m, ts in IMPORTS.items() for t in ts
                       if _unit(t) == "plugin" and _unit(m) not in GLUE)
    assert into_glue == []
    with_pytest = []
    for module, path in MODULES.items():
        if _unit(module) in GLUE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "pytest" or n.startswith(("pytest.", "_pytest")) for n in names):
                with_pytest.append(module)
    assert with_pytest == []


@pytest.mark.parametrize("unit", sorted({_unit(m) for m in MODULES} - {"(package)"}))
def test_every_room_is_in_a_layer(unit: str) -> None:
    _layer(unit)
