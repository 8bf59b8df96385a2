"""Graders: numbers, letters, facts, copies and JSON read the way a person would, and a cut answer
is unanswered, not wrong."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_inferaccept.correctness.graders import grade, read_choice, read_number
from pytest_inferaccept.correctness.items import Item


def _item(grader: str, **rest: Any) -> Item:
    return Item.model_validate({"id": "t", "prompt": "q", "grader": grader, **rest})


@pytest.mark.parametrize(("text", "read"), [
    ("42", "42"), ("The answer is 42.", "42"), ("12 + 30 = 42", "42"), ("1,234.0", "1,234.0"),
    ("Answer: 7 (since 3 + 4 = 7 and not 8)", "7"), ("It costs $15.", "15"), ("-3", "-3"), ("none", None),
])
def test_a_number_is_read_after_answer_is_else_the_last_one(text: str, read: str | None) -> None:
    assert read_number(text) == read


@pytest.mark.parametrize(("text", "correct"), [
    ("1234", True), ("1,234", True), ("1234.0", True), ("The total is 1,234 pencils.", True),
    ("1243", False), ("12 34", False), ("one thousand", False),
])
def test_a_number_answer_is_correct_after_commas_and_trailing_zero_are_normalised(text: str,
                                                                                   correct: bool) -> None:
    assert grade(_item("number", answer="1234"), text, "stop").correct is correct


@pytest.mark.parametrize(("text", "letter"), [
    ("B", "B"), ("(C)", "C"), ("Answer: D", "D"), ("The answer is (B).", "B"), ("C) banana", "C"),
    ("A dog is not a fruit; B", "B"), ("I think C.", "C"), ("A", "A"), ("apple", None),
])
def test_a_letter_is_read_from_answer_then_brackets_then_the_first_standalone_one(text: str,
                                                                                  letter: str | None) -> None:
    assert read_choice(text) == letter


def test_a_choice_answer_is_graded_on_its_letter() -> None:
    item = _item("choice", answer="B")
    assert grade(item, "Answer: (B) apple", "stop").outcome == "correct"
    assert grade(item, "C", "stop").outcome == "wrong"
    assert grade(item, "no idea", "stop").reason == "no letter A-D in the answer"


@pytest.mark.parametrize(("text", "correct"), [
    ("Paris", True), ("paris.", True), ("The capital of France is Paris.", True), ("PARÍS", True),
    ("Lyon", False), ("Parisian", False), ("\nParis", True), ("Lyon\nParis", False),
])
def test_a_fact_is_matched_normalised_on_the_first_line(text: str, correct: bool) -> None:
    assert grade(_item("fact", answers=["Paris"]), text, "stop").correct is correct


def test_a_fact_accepts_any_of_its_answers_and_ignores_articles() -> None:
    item = _item("fact", answers=["William Shakespeare", "Shakespeare"])
    assert grade(item, "shakespeare", "stop").correct
    assert grade(_item("fact", answers=["the Amazon"]), "Amazon", "stop").correct


def test_a_copy_must_be_exact_apart_from_surrounding_whitespace() -> None:
    item = _item("copy", answer="river lamp, Window!")
    assert grade(item, "  river lamp, Window!\n", "stop").correct
    assert not grade(item, "river lamp, window!", "stop").correct
    assert not grade(item, '"river lamp, Window!"', "stop").correct


SCHEMA = {"type": "object", "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


@pytest.mark.parametrize(("text", "correct"), [
    ('{"name": "Ada", "age": 36}', True),
    ('Here it is:\n```json\n{"name": "Ada", "age": 36}\n```', True),
    ('{"name": "Ada", "age": "36"}', False), ('{"name": "Ada"}', False), ("name: Ada", False),
    ('{broken} then {"name": "Ada", "age": 36}', True),
])
def test_json_is_the_first_object_in_the_answer_validated_by_the_schema(text: str, correct: bool) -> None:
    assert grade(_item("json", schema=SCHEMA), text, "stop").correct is correct


def test_an_answer_cut_by_max_tokens_is_unanswered_unless_already_correct() -> None:
    item = _item("number", answer="56")
    cut = grade(item, "Let me think step by step: 7 times 8", "length")
    assert cut.outcome == "unanswered"
    assert "cut by max_tokens" in cut.reason
    assert grade(item, "56, because", "length").outcome == "correct"
    assert grade(item, "Let me think step by step: 7 times 8", "stop").outcome == "wrong"


def test_a_failed_request_is_unanswered_and_an_empty_answer_wrong() -> None:
    item = _item("fact", answer="Paris")
    assert grade(item, None, None).outcome == "unanswered"
    assert grade(item, "", "stop").reason == "empty answer"
