"""The package's rooms keep their order: no import cycle between modules or between rooms (a
folder counts as one room), no import from a lower room to a higher one, nothing imports the
package facade, pytest only in the glue and the suites, nothing outside them imports the glue,
and only the model reads the keys it does not know.

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

FACADE = "(package)"
"""The room of `pytest_inferaccept/__init__.py`: it re-exports names of every room, so it sits
above them all, and no module may import it."""

LAYERS: tuple[tuple[str, ...], ...] = (
    # 0. Foundations: the typed run model (model.py), vocabularies, evidence, the verdict rule,
    #    protocol validators, the standalone fake server and the server presets; the version and
    #    the lazy-export helper (each a module of its own, so no room needs the facade).
    ("model", "_bound_errors", "scrub", "capabilities", "markers", "slo_profile", "evidence", "progress",
     "launcher", "verdict", "checks", "fake", "servers", "_version", "_lazy", "scenario_kinds"),
    # 1. Talking to the server and measuring: clients, the load engine, statistics, probes; and the
    #    settings with the plain-data options they resolve for higher rooms (capacity_settings,
    #    gate_settings), which therefore live here too, not in the folders that read them.
    ("http", "server", "load", "stats", "robustness", "outage", "keycheck", "probes", "answers",
     "correctness", "expectations", "settings", "capacity_settings", "gate_settings"),
    # 2. The run's core: the session and its ledger, the loadgen object, capacity scenarios, the
    #    typed run model and the finished document.
    #    The baseline comparison is here too: the verdict reads what it finds, so run/ calls it.
    ("capacity", "run", "session", "loadgen", "results", "baseline"),
    # 3. Readers of a finished run: the report and the comparison.
    ("report", "compare"),
    # 4. pytest: hooks, fixtures, options (the glue) and the bundled acceptance suites.
    ("plugin", "suites"),
    # 5. The public facade: lazy re-exports for a team's own tests and tools.
    (FACADE,),
)
GLUE = ("plugin", "suites")


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _unit(module: str) -> str:
    """The room a module belongs to: its folder below the package (whole), or itself at the root."""
    return FACADE if module == NAME else module.removeprefix(f"{NAME}.").split(".")[0]


def _layer(unit: str) -> int:
    for n, layer in enumerate(LAYERS):
        if unit in layer:
            return n
    raise AssertionError(f"{unit} is in no layer: add it to LAYERS (and docs/architecture.md)")


def _imports() -> dict[str, set[str]]:
    """Module → the package's modules it imports (anywhere in its source, the facade included)."""
    out: dict[str, set[str]] = defaultdict(set)
    for module, path in MODULES.items():
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
                if target != module:
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


def _rooms(imports: dict[str, set[str]]) -> dict[str, set[str]]:
    """Room → the other rooms it imports: a folder counts as one room, whatever its modules."""
    rooms: dict[str, set[str]] = defaultdict(set)
    for module, targets in imports.items():
        for target in targets:
            if _unit(module) != _unit(target):
                rooms[_unit(module)].add(_unit(target))
    return rooms


def _leftover_reads(name: str, source: str) -> list[str]:
    """`file:line` of each read of a model's leftover keys (`model_extra`, by attribute or getattr)."""
    found: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr == "model_extra") or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and any(isinstance(a, ast.Constant) and a.value == "model_extra" for a in node.args)):
            found.append(node.lineno)
    return [f"{name}:{line}" for line in sorted(found)]


IMPORTS = _imports()


def test_no_module_imports_itself_round_a_cycle() -> None:
    assert _cycles(IMPORTS) == []


def test_no_module_imports_the_package_facade() -> None:
    # the facade re-exports names of every room: a room importing it closes a cycle through them all
    importers = sorted(m for m, ts in IMPORTS.items() if NAME in ts)
    assert importers == [], f"these import `{NAME}` itself; import from the module that defines the name"


def test_no_folder_imports_itself_round_a_cycle_through_other_rooms() -> None:
    circles = _cycles(_rooms(IMPORTS))
    # the module imports that close each circle, so the message says which line to move
    edges = sorted(f"{m} → {t}" for circle in circles for m, ts in IMPORTS.items() for t in ts
                   if _unit(m) in circle and _unit(t) in circle and _unit(m) != _unit(t))
    assert circles == [], "folders import each other round a circle: " + "; ".join(edges)


def test_a_folder_circle_is_found_where_no_module_cycle_closes() -> None:
    # a settings module inside a higher room's folder: no module cycle, but the folders circle
    imports = {"p.settings": {"p.capacity.settings"}, "p.capacity.ladder": {"p.settings"}}
    assert _cycles(imports) == []
    assert _cycles(_rooms({f"{NAME}.{m[2:]}": {f"{NAME}.{t[2:]}" for t in ts}
                           for m, ts in imports.items()})) == [["capacity", "settings"]]


def test_a_room_is_a_whole_folder_or_a_root_module() -> None:
    # no module is named as a room of its own, so no folder can straddle two layers
    assert [unit for layer in LAYERS for unit in layer if "." in unit] == []


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


def test_only_the_model_reads_keys_it_does_not_know() -> None:
    # a reader reaching into `model_extra` depends on a key no field types: type the field instead
    reads = [read for path in sorted(PACKAGE.rglob("*.py")) if path != PACKAGE / "model.py"
             for read in _leftover_reads(path.relative_to(PACKAGE).as_posix(),
                                         path.read_text(encoding="utf-8"))]
    assert reads == [], "model_extra read outside model.py at " + ", ".join(reads)


def test_a_leftover_read_is_found_by_attribute_and_by_getattr() -> None:
    source = "a = run.summary.model_extra\nb = getattr(check, 'model_extra', None)\nc = check.model_fields\n"
    assert _leftover_reads("x.py", source) == ["x.py:1", "x.py:2"]


@pytest.mark.parametrize("unit", sorted({_unit(m) for m in MODULES}))
def test_every_room_is_in_a_layer(unit: str) -> None:
    _layer(unit)
