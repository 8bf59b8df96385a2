"""Capacity results byte for byte across a change of the code that builds them: record, then replay.

Record (a pytest plugin): every capacity scenario a `loadgen` runs during the given tests is taped,
its inputs (each step's engine run, the telemetry sampler's answers, the liveness probes) and the
results document's `capacity` entry it produced:

    CAPACITY_TAPES=/tmp/tapes python -m pytest -p bench.capacity_tapes tests/test_capacity.py ...

Replay (after the change): each taped scenario runs again through the current code on the same
inputs, and its `capacity` entry is compared with the taped one, byte for byte; a table says which
are identical:

    python bench/capacity_tapes.py /tmp/tapes

The failure-recovery scenario is not taped: it kills and restarts a server and reads the clock.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import pickle
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

SCENARIOS = ("ladder", "sweep", "soak", "push", "push_length", "lengths", "interference", "prefix_cache",
             "multi_turn")
"""Scenario functions, each in the module of its name under pytest_inferaccept.capacity."""
INPUTS = ("measure", "sampler", "alive", "say")


def _dump(result: Any) -> str:
    """The `capacity` entry as the results document writes it."""
    from pytest_inferaccept.model import CapacityScenario

    if isinstance(result, CapacityScenario):
        scenario = result
    else:
        scenario = CapacityScenario.model_validate(result.to_json())
    return json.dumps(scenario.model_dump(mode="json", exclude_unset=True), sort_keys=False)


class _TapedSampler:
    """A sampler's answers, in order, per attribute: the real one recorded, or a tape replayed."""

    def __init__(self, real: Any = None, tape: dict[str, list[Any]] | None = None) -> None:
        self._real = real
        self.tape: dict[str, list[Any]] = tape if tape is not None else defaultdict(list)
        self._at: dict[str, int] = defaultdict(int)

    def _next(self, name: str) -> Any:
        i = self._at[name]
        self._at[name] += 1
        return copy.deepcopy(self.tape[name][i])

    def __enter__(self) -> _TapedSampler:
        if self._real is not None:
            self._real.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._real is not None:
            self._real.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._real is None:
            kind, value = self._next(name)
            if kind == "call":
                return lambda *a, **k: self._next(f"{name}()")
            return value
        attr = getattr(self._real, name)
        if callable(attr):
            self.tape[name].append(("call", None))

            def call(*a: Any, **k: Any) -> Any:
                out = attr(*a, **k)
                self.tape[f"{name}()"].append(copy.deepcopy(out))
                return out
            return call
        self.tape[name].append(("value", copy.deepcopy(attr)))
        return attr


_taped = [0]


def _record(name: str, original: Any) -> Any:
    signature = inspect.signature(original)

    def taped(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        values = dict(bound.arguments)
        runs: list[bytes] = []
        alive: list[Any] = []
        said: list[str] = []
        measure = values.get("measure")
        if measure is not None:
            owner = getattr(measure, "__self__", None)

            def measured(tag: str, **kw: Any) -> Any:
                result = measure(tag, **kw)
                runs.append(pickle.dumps({
                    "tag": tag, "label": result.label, "run": result.run, "slo": result.slo,
                    "client_check": result.client_check,
                    "point": owner.settings.load.judge_on_point if owner is not None else False}))
                return result
            values["measure"] = measured
        sampler = None
        if "sampler" in values:
            sampler = values["sampler"] = _TapedSampler(values["sampler"])
        if "alive" in values:
            real_alive = values["alive"]

            def checked(*a: Any, **k: Any) -> Any:
                out = real_alive(*a, **k)
                alive.append(out)
                return out
            values["alive"] = checked
        if "say" in values:
            real_say = values["say"]

            def said_line(line: str) -> None:
                said.append(line)
                real_say(line)
            values["say"] = said_line
        result = original(**values)
        rest = {k: v for k, v in bound.arguments.items() if k not in INPUTS}
        tape = {"scenario": name, "arguments": rest, "runs": runs, "alive": alive, "said": said,
                "sampler": dict(sampler.tape) if sampler is not None else None, "entry": _dump(result)}
        folder = Path(os.environ["CAPACITY_TAPES"])
        folder.mkdir(parents=True, exist_ok=True)
        _taped[0] += 1  # one file per scenario, named apart across xdist's worker processes
        (folder / f"{os.getpid()}.{_taped[0]:04d}-{name}.pickle").write_bytes(pickle.dumps(tape))
        return result

    return taped


def pytest_configure(config: Any) -> None:
    """Tape every scenario the run's loadgens start (pytester's in-process runs included)."""
    if not os.environ.get("CAPACITY_TAPES") or getattr(pytest_configure, "done", False):
        return
    pytest_configure.done = True  # type: ignore[attr-defined]
    for name in SCENARIOS:
        module = importlib.import_module(f"pytest_inferaccept.capacity.{name}")
        setattr(module, name, _record(name, getattr(module, name)))


def _result_of(taped: dict[str, Any]) -> Any:
    """A step's LoadResult from its engine run, through the current code's statistics and SLO judgement."""
    runner = importlib.import_module("pytest_inferaccept.loadgen")
    build = getattr(runner, "load_result", None)
    if build is not None:
        return build(taped["run"], taped["label"], slo=taped["slo"], point=taped["point"],
                     client_check_mode=taped["client_check"])
    from pytest_inferaccept.loadgen import client_check
    from pytest_inferaccept.run.load import LoadResult
    from pytest_inferaccept.stats import bottleneck_reasons, evaluate, summarize

    run, slo = taped["run"], taped["slo"]
    run.selfcheck = client_check(run)
    summary = summarize(run.records, run.window, slo=slo)
    evaluation = evaluate(summary, slo, point_estimate=taped["point"]) if slo is not None else None
    return LoadResult(label=taped["label"], run=run, summary=summary, slo=slo, evaluation=evaluation,
                      client_bound=bottleneck_reasons(run.selfcheck), client_check=taped["client_check"])


ADDED = ("slo",)
"""Keys a scenario's entry gained on purpose since the tapes were made; compared without them."""
ADAPT: dict[str, Any] = {}
"""scenario name → f(arguments) -> arguments, where a scenario's signature changed since the tapes."""


def replay(path: Path) -> tuple[bool, str, str]:
    """Run one tape through the current code: (identical, taped entry, replayed entry)."""
    tape = pickle.loads(path.read_bytes())
    name = tape["scenario"]
    module = importlib.import_module(f"pytest_inferaccept.capacity.{name}")
    function = getattr(module, name)
    arguments = dict(tape["arguments"])
    runs = [pickle.loads(r) for r in tape["runs"]]
    alive = list(tape["alive"])
    said: list[str] = []

    def measure(tag: str, **_: Any) -> Any:
        taped = runs.pop(0)
        assert taped["tag"] == tag, (taped["tag"], tag)
        return _result_of(taped)

    parameters = inspect.signature(function).parameters
    if "measure" in parameters:
        arguments["measure"] = measure
    if "sampler" in parameters and tape["sampler"] is not None:
        arguments["sampler"] = _TapedSampler(tape=tape["sampler"])
    if "alive" in parameters:
        arguments["alive"] = lambda *a, **k: alive.pop(0)
    if "say" in parameters:
        arguments["say"] = said.append
    if "seed" in parameters and arguments.get("seed") is None:
        # a fresh seed each run, drawn inside the scenario: the taped one, from its params
        arguments["seed"] = json.loads(tape["entry"])["params"].get("seed")
    if name in ADAPT:
        arguments = ADAPT[name](arguments)
    entry = _dump(function(**arguments))
    taped_keys = json.loads(tape["entry"]).keys()
    # ADDED keys (the SLO a scenario was judged with) are missing from tapes made before them
    entry = json.dumps({k: v for k, v in json.loads(entry).items() if k in taped_keys or k not in ADDED})
    # a scenario started without `say` (a test's own call) said nothing to compare
    return entry == tape["entry"] and (said == tape["said"] or not tape["said"]), tape["entry"], entry


def main(argv: list[str]) -> int:
    folder = Path(argv[1] if len(argv) > 1 else "/tmp/capacity-tapes")
    tapes = sorted(folder.glob("*.pickle"))
    if not tapes:
        print(f"no tapes in {folder}")
        return 2
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    different = []
    for path in tapes:
        name = path.stem.split("-", 1)[1]
        same, before, after = replay(path)
        counts[name][0] += 1
        counts[name][1] += same
        if not same:
            different.append((path.name, before, after))
    print(f"{'scenario':<14} {'taped':>6} {'identical':>10}")
    for name, (n, same) in sorted(counts.items()):
        print(f"{name:<14} {n:>6} {same:>10}")
    total = sum(n for n, _ in counts.values())
    print(f"{'all':<14} {total:>6} {sum(s for _, s in counts.values()):>10}")
    for name, before, after in different[:5]:
        print(f"\n{name} differs:")
        for i, (a, b) in enumerate(zip(before, after, strict=False)):
            if a != b:
                print(f"  at byte {i}: taped …{before[max(0, i - 120):i + 120]}…")
                print(f"  {'':>{len(str(i)) + 9}}replayed …{after[max(0, i - 120):i + 120]}…")
                break
        else:
            print(f"  lengths {len(before)} and {len(after)} (or the progress lines differ)")
    return 0 if not different else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main(sys.argv))
