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


@pytest.mark.parametrize(("text", "read"), [
    # llama.cpp b11434 + SmolLM2-135M, "What is 2 times 5?": the result follows the equals sign
    ("2 * 5 = 10\n\nThis is a classic example of a multiplication of a number by itself and 5.", "10"),
    ("3 + 4 = 7, not 8", "7"), ("x = 3 + 4 = 7", "7"), ("5 times 9 equals 45, like 9 times 5.", "45"),
    ("3 - 6 = 1.\n\nSo, the answer is 1.", "1"), ("12 + 30 = 42", "42"),
])
def test_a_worked_answer_is_read_at_its_last_equals_sign_not_at_a_number_in_later_prose(
        text: str, read: str) -> None:
    assert read_number(text) == read


def test_a_bare_number_on_the_first_line_is_the_answer_whatever_prose_follows() -> None:
    # llama.cpp b11434 + SmolLM2-135M answered "13" and then rambled until max_tokens
    item = _item("number", answer="13")
    text = "13\n\nThis is a classic fallacy: the number 13 is spread over the items in the order of 5, 15"
    assert read_number(text) == "13"
    assert grade(item, text, "length").outcome == "correct"
    assert read_number("18.\n\nThen 20 more.") == "18"


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


def test_a_fact_answer_that_first_repeats_the_question_is_read_on_the_line_after_it() -> None:
    # llama.cpp b11434 + SmolLM2-135M echoed the question before answering it
    item = _item("fact", answers=["Prague"])
    assert grade(item, "To which city was the order shipped?\nThe answer is Prague.", "stop").correct
    assert grade(item, "To which city was it shipped?\n\nPrague", "stop").correct
    assert not grade(item, "Was it Prague?\nNo, Oslo.", "stop").correct
    assert not grade(item, "Which city? Oslo or Prague?", "stop").correct


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
