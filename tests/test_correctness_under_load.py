"""Known-answer items graded inside load: the bundled ladder and load test against the fake with each
correctness-under-load fault NO-GO for its own reason and GO without; the paired under-load comparison's
false NO-GO rate on an unchanged server, and its power, by seeded simulation."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_inferaccept.correctness.answerer import Answer
from pytest_inferaccept.correctness.items import load_bundled
from pytest_inferaccept.correctness.paired import SelfFlip, flip_probability
from pytest_inferaccept.correctness.under_load import (
    Asked,
    accuracy_verdict,
    choose,
    compare,
    graded_answer,
    interleaved,
    place,
)
from pytest_inferaccept.fake.config import FakeConfig
from pytest_inferaccept.fake.generation import Choice, wrong_when_busy
from pytest_inferaccept.fake.knowns import pieces
from pytest_inferaccept.load.engine import LoadRun
from pytest_inferaccept.load.records import RequestRecord
from tests._processes import fake_process

LEVELS = "2,8"
"""c=2: the step's requests and an item, 3 in flight; c=8: 9. The faults act above 3 (c=1, the alone
baseline itself, gets no items beside it)."""
ITEMS = "8"
LADDER_ARGS = ("--capacity", "--ladder", LEVELS, "--capacity-step-requests", "32", "--correctness-under-load",
               ITEMS, "--client-check", "warn", "-k", "ladder", "-p", "no:cacheprovider")
FAKE = ("--ttft", "0.02", "--itl", "0.005")
"""About 0.2 s an answer of the default workload: a step of 32 requests at c=8 holds every item."""


def _fake(tmp: pytest.TempPathFactory, *args: str) -> Iterator[str]:
    yield from fake_process(tmp.mktemp("fake"), *FAKE, *args)


@pytest.fixture
def clean(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _fake(tmp_path_factory)


@pytest.fixture
def wrong_when_crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _fake(tmp_path_factory, "--wrong-above-inflight", "3")


@pytest.fixture
def broken_by_overload(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _fake(tmp_path_factory, "--stays-wrong-after-overload", "3")


def _ladder(pytester: pytest.Pytester, url: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest_inprocess("--pyargs", "pytest_inferaccept.suites.test_capacity",
                                          "--server-url", url, "--inferaccept-json", "r.json", *LADDER_ARGS)
    doc = json.loads((pytester.path / "r.json").read_text())
    (ladder,) = [c for t in doc["tests"] for c in t.get("capacity", [])]
    return result, ladder


def test_the_clean_fake_keeps_its_answers_at_every_level_go(pytester: pytest.Pytester, clean: str) -> None:
    result, ladder = _ladder(pytester, clean)
    out = result.stdout.str()
    assert result.ret == 0, out
    assert ladder["status"] == "pass", ladder["reasons"]
    graded = ladder["findings"]["correctness"]
    assert graded["alone_correct"] == len(graded["items"]) == int(ITEMS), graded
    assert graded["self_flips"] == 0 and graded["logprobs"], graded
    assert graded["held_up_to"] == 8 and graded.get("failed_at") is None, graded
    assert graded["text"].startswith("answers held up to c=8 (8 items a level"), graded["text"]
    assert "answers held up to c=8" in ladder["headline"], ladder["headline"]
    for step in ladder["steps"]:
        level = step["correctness"]
        assert level["held"] and level["compared"] >= 6, (step["level"], level)
        assert level["correct"] == level["alone_correct"] == level["identical"] == level["compared"], level
        assert level["in_flight_min"] >= 1 and level["alpha"] == pytest.approx(0.05 / 3), level
    assert graded["after"]["correct"] == int(ITEMS) and graded["after"]["held"], graded["after"]


def test_answers_wrong_only_when_crowded_are_a_no_go_at_that_level(pytester: pytest.Pytester,
                                                                   wrong_when_crowded: str) -> None:
    result, ladder = _ladder(pytester, wrong_when_crowded)
    out = result.stdout.str()
    assert result.ret == 1 and "VERDICT: NO-GO" in out, out
    graded = ladder["findings"]["correctness"]
    assert (graded["held_up_to"], graded["failed_at"]) == (2, 8), graded
    assert graded["reasons"] and all(r.startswith("answers under load at c=8") for r in graded["reasons"])
    assert "stayed broken" not in out  # alone again after the load, the answers are right
    level = {s["level"]: s["correctness"] for s in ladder["steps"]}
    assert level[2]["held"] and not level[8]["held"], level
    assert level[8]["right_to_wrong"] >= 6 and level[8]["status"] == "fail", level[8]
    assert level[8]["real_changes"] >= 1 and level[8]["real_change_examples"], level[8]
    assert graded["after"]["held"] and graded["after"]["correct"] == int(ITEMS), graded["after"]
    assert "answers went wrong at c=8" in ladder["headline"] and "they held up to c=2" in ladder["headline"]


def test_answers_that_stay_wrong_after_an_overload_are_a_no_go_as_broken(pytester: pytest.Pytester,
                                                                         broken_by_overload: str) -> None:
    result, ladder = _ladder(pytester, broken_by_overload)
    out = result.stdout.str()
    assert result.ret == 1 and "VERDICT: NO-GO" in out, out
    graded = ladder["findings"]["correctness"]
    after = graded["after"]
    assert not after["held"] and after["correct"] == 0 and after["right_to_wrong"] == int(ITEMS), after
    assert any(r.startswith("answers after the load, worse than before it (the server stayed broken)")
               for r in graded["reasons"]), graded["reasons"]
    assert graded["failed_at"] == 8, graded
    assert "the server stayed broken (NO-GO)" in ladder["headline"], ladder["headline"]


def test_the_bundled_load_test_grades_its_items_and_fails_on_crowded_wrong_answers(
        pytester: pytest.Pytester, wrong_when_crowded: str) -> None:
    result = pytester.runpytest_inprocess(
        "--pyargs", "pytest_inferaccept.suites.test_load", "--server-url", wrong_when_crowded,
        "--load-requests", "40", "--load-concurrency", "4", "--correctness-under-load", ITEMS,
        "--client-check", "warn", "--inferaccept-json", "r.json", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == 1 and "answers went wrong under load" in out, out
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    graded = test["load"][0]["correctness"]
    assert graded["status"] == "fail" and graded["comparisons"] == 2, graded
    assert graded["under_load"]["right_to_wrong"] >= 6 and graded["after"]["held"], graded
    assert test["load"][0]["summary"]["counts"]["measured"] == 40  # the items are not load requests


# --- the pieces, without a server ---------------------------------------------------------------------


def test_the_fake_spoils_known_answers_above_the_crowd_and_for_good_after_an_overload() -> None:
    def known() -> list[Choice]:
        return [Choice(index=0, pieces=pieces("42"), known=True, completion_tokens=1)]

    crowded = FakeConfig(wrong_above_inflight=2)
    for in_flight, text in ((2, "42"), (3, "43"), (1, "42")):
        choices = known()
        assert not wrong_when_busy(choices, crowded, in_flight=in_flight, broken=False)
        assert choices[0].text == text
    once = FakeConfig(stays_wrong_after_overload=2)
    choices = known()
    assert not wrong_when_busy(choices, once, in_flight=2, broken=False) and choices[0].text == "42"
    assert wrong_when_busy(known(), once, in_flight=3, broken=False)
    choices = known()
    assert wrong_when_busy(choices, once, in_flight=1, broken=True) and choices[0].text == "43"


def _answer(item_id: str, text: str, logprobs: bool = False) -> Answer:
    lp = [{"token": t, "logprob": -0.1, "top_logprobs": [{"token": t, "logprob": -0.1}]}
          for t in pieces(text)] if logprobs else None
    return Answer(item_id, text, "stop", lp)


def test_without_logprobs_the_comparison_says_changed_or_identical_only() -> None:
    items = [i for i in load_bundled() if i.id in ("copy-000", "copy-001", "copy-002")]
    alone = {i.id: graded_answer(i, _answer(i.id, i.answers[0])) for i in items}
    here = [Asked(i, _answer(i.id, i.answers[0] if k else i.answers[0] + " again"), 0.0, 0.0, 3)
            for k, i in enumerate(items)]
    step = compare(alone, here, when="under_load", comparisons=2, tolerance=0.05, real_change_tolerance=0.1,
                   self_flip_rate=SelfFlip(0, 3), logprobs=False)
    assert (step.compared, step.correct, step.identical, step.real_changes) == (3, 2, 2, 0)
    assert step.real_change_share is None and step.held  # one item of three: not conclusive
    assert "changed vs identical only" in step.text, step.text


def test_answers_of_another_length_under_load_are_counted_and_named() -> None:
    items = [i for i in load_bundled() if i.id in ("copy-000", "copy-001", "copy-002")]
    alone = {i.id: graded_answer(i, _answer(i.id, i.answers[0])) for i in items}
    cut = items[1].answers[0][: len(items[1].answers[0]) // 2]  # half the answer: an early stop
    here = [Asked(items[0], _answer(items[0].id, items[0].answers[0]), 0.0, 0.0, 3),
            Asked(items[1], _answer(items[1].id, cut), 0.0, 0.0, 3),
            Asked(items[2], _answer(items[2].id, items[2].answers[0] + "!"), 0.0, 0.0, 3)]
    step = compare(alone, here, when="under_load", comparisons=2, tolerance=0.05, real_change_tolerance=0.1,
                   self_flip_rate=SelfFlip(0, 3), logprobs=False)
    assert step.length_outside == 1, step  # one character more is within 10%, half the answer is not
    (example,) = step.length_examples
    assert example.startswith("copy-001: ") and f"against {len(items[1].answers[0])} alone" in example
    assert "1 of 3 answers' length beyond ±10% of alone" in step.text, step.text


def test_an_item_is_compared_only_when_load_requests_were_in_flight_and_the_load_still_ran() -> None:
    items = interleaved(load_bundled())[:3]
    records = [RequestRecord(index=k, send=s, end=e) for k, (s, e) in enumerate(((0.0, 1.0), (0.5, 2.0)))]
    run = LoadRun(spec={}, records=records, window=(0.0, 2.0), selfcheck={"per_worker": [{"worker": 0,
                  "t0": 100.0}]}, server_metrics={}, stopped_by="requests")
    asked = [Asked(items[0], _answer(items[0].id, "x"), 100.6, 100.9),   # beside both
             Asked(items[1], _answer(items[1].id, "x"), 101.5, 102.5),   # answered after the load ended
             Asked(items[2], _answer(items[2].id, "x"), 99.0, 99.5)]     # before it
    place(asked, run)
    assert [(a.in_flight, a.inside) for a in asked] == [(2, True), (1, False), (0, False)]


def test_items_are_tried_kind_by_kind() -> None:
    kinds = [i.tags.get("kind") for i in interleaved(load_bundled())[:12]]
    assert len(set(kinds[:6])) == 6 and kinds[:6] == kinds[6:12], kinds


# --- statistics: seeded simulations --------------------------------------------------------------------


def _run_once(rng: random.Random, *, items: int, levels: int, rate: float, drop: float = 0.0) -> bool:
    """One simulated scenario on a server with self-flip rate `rate`; True when any comparison (each
    level, the after-load pass) is a NO-GO. Items are chosen on a first alone pass from a pool whose
    items the model gets right with probabilities like a tiny model's (46% on the whole), answered
    alone again, then at each level (the last `drop` more often wrong) and after."""
    q = flip_probability(rate)
    pool = [rng.random() < 0.46 for _ in range(4 * items)]  # the item's usual grade

    def answer(usual: bool, extra_wrong: float = 0.0) -> bool:
        right = usual != (rng.random() < q)
        return right and not rng.random() < extra_wrong

    first = [answer(u) for u in pool]
    chosen = [pool[i] for i in choose(first, items)]
    alone = [answer(u) for u in chosen]
    flips = SelfFlip(sum(not a for a in alone), len(chosen))  # each chosen item was right in the first pass
    comparisons = levels + 1
    for level in range(levels + 1):
        wrong = drop if level == levels - 1 else 0.0
        here = [answer(u, wrong) for u in chosen]
        verdict = accuracy_verdict(alone, here, comparisons=comparisons, tolerance=0.05, self_flip_rate=flips)
        if verdict.status == "fail":
            return True
    return False


@pytest.mark.parametrize("rate", [0.0, 0.02, 0.04, 0.08])
@pytest.mark.parametrize(("items", "levels"), [(12, 6), (12, 1), (16, 4)])
def test_an_unchanged_server_is_a_false_no_go_at_most_5_percent_of_the_time(rate: float, items: int,
                                                                           levels: int) -> None:
    rng = random.Random(f"under-load {rate} {items} {levels}")
    runs = 2000
    false = sum(_run_once(rng, items=items, levels=levels, rate=rate) for _ in range(runs))
    assert false / runs <= 0.05, (false, runs)


@pytest.mark.parametrize(("items", "levels", "drop"), [(12, 6, 0.9), (16, 4, 0.9), (8, 2, 1.0)])
def test_answers_that_go_wrong_at_a_level_are_found(items: int, levels: int, drop: float) -> None:
    """Nine in ten answers wrong at one level (every one with only 8 items: 6 of 8 are needed) is found."""
    rng = random.Random(f"drop {items} {levels}")
    runs = 500
    found = sum(_run_once(rng, items=items, levels=levels, rate=0.02, drop=drop) for _ in range(runs))
    assert found / runs >= 0.95, (found, runs)


def test_the_simulation_sees_the_self_flips_it_was_given() -> None:
    rng = random.Random("self-flip")
    q = flip_probability(0.04)
    flips = sum((rng.random() < q) != (rng.random() < q) for _ in range(100_000))
    assert flips / 100_000 == pytest.approx(0.04, abs=0.003)


def test_the_false_no_go_rate_is_not_zero_by_construction() -> None:
    """At 25% self-flips the exact test still fires sometimes: the simulation can see a false NO-GO."""
    rng = random.Random("noisy")
    fired = sum(_run_once(rng, items=12, levels=1, rate=0.25) for _ in range(2000))
    assert fired > 0
