"""The known-answer item schema, the JSONL loader's errors, and the bundled set."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pytest_inferaccept.correctness import generate
from pytest_inferaccept.correctness.items import ItemSetError, load_bundled, load_items, parse_items


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "team.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = json.dumps({"id": "q1", "prompt": "What is 2 + 2?", "grader": "number", "answer": 4})


def test_a_teams_set_loads_with_prompt_or_messages_and_tags(tmp_path: Path) -> None:
    second = json.dumps({"id": "q2", "messages": [{"role": "system", "content": "Be brief."},
                                                  {"role": "user", "content": "Capital of Peru?"}],
                         "grader": "fact", "answers": ["Lima"], "max_tokens": 10, "tags": {"kind": "geo"}})
    items = load_items(_write(tmp_path, GOOD, "", second))
    assert [i.id for i in items] == ["q1", "q2"]
    assert items[0].answers == ("4",)
    assert items[0].chat_messages() == [{"role": "user", "content": "What is 2 + 2?"}]
    assert items[1].token_budget() == 10
    assert items[1].tags == {"kind": "geo"}


@pytest.mark.parametrize(("line", "words"), [
    ("{not json", "not valid JSON"),
    ('{"id": "x", "prompt": "p", "grader": "numbr", "answer": "1"}', "unknown grader 'numbr'"),
    ('{"id": "x", "prompt": "p", "grader": "fact"}', "needs 'answer' or 'answers'"),
    ('{"id": "x", "prompt": "p", "grader": "json"}', "needs a 'schema'"),
    ('{"id": "x", "prompt": "p", "grader": "number", "answer": "many"}', "numeric answers"),
    ('{"id": "x", "prompt": "p", "grader": "choice", "answer": "E"}', "letters A-D"),
    ('{"id": "x", "grader": "fact", "answer": "a"}', "exactly one of 'prompt' or 'messages'"),
    ('{"id": "x", "prompt": "p", "grader": "fact", "answer": "a", "colour": 1}', "unknown key 'colour'"),
    ('{"id": "x", "prompt": "p", "grader": "json", "schema": {"type": 5}}', "invalid schema"),
    ('[1, 2]', "must be a JSON object"),
], ids=["bad-json", "unknown-grader", "missing-answer", "json-without-schema", "number-not-numeric",
        "choice-not-a-letter", "no-prompt", "unknown-key", "bad-schema", "not-an-object"])
def test_a_bad_line_is_refused_naming_the_file_and_the_line(tmp_path: Path, line: str, words: str) -> None:
    path = _write(tmp_path, GOOD, line)
    with pytest.raises(ItemSetError) as err:
        load_items(path)
    assert str(err.value).startswith(f"{path} line 2: ")
    assert words in str(err.value)
    assert err.value.line == 2


def test_a_duplicate_id_names_both_lines() -> None:
    with pytest.raises(ItemSetError, match=r"f line 2: duplicate id 'q1' \(first on line 1\)"):
        parse_items([GOOD, GOOD], "f")


def test_an_empty_or_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ItemSetError, match="no items"):
        load_items(_write(tmp_path, ""))
    with pytest.raises(ItemSetError, match="cannot be read"):
        load_items(tmp_path / "absent.jsonl")


def test_the_bundled_set_has_about_200_items_of_every_kind_and_difficulty() -> None:
    items = load_bundled()
    assert len(items) == 200
    kinds = Counter(i.tags["kind"] for i in items)
    assert set(kinds) == {"arithmetic", "choice", "fact", "copy", "json", "extraction"}
    assert all(kinds[k] >= 15 for k in kinds)
    levels = Counter(i.tags["difficulty"] for i in items)
    assert set(levels) == {"easy", "medium", "hard"}
    assert min(levels.values()) >= 40
    assert Counter(i.grader for i in items).keys() == {"number", "choice", "fact", "copy", "json"}


def test_the_shipped_file_is_what_the_seeded_generator_writes() -> None:
    assert generate.OUT.read_text(encoding="utf-8") == generate.render()


def test_the_choice_items_put_the_right_letter_at_every_position() -> None:
    letters = Counter(i.answers[0] for i in load_bundled() if i.grader == "choice")
    assert set(letters) == {"A", "B", "C", "D"}
    assert min(letters.values()) >= 5


def test_the_example_set_in_the_docs_loads() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "correctness.md").read_text(encoding="utf-8")
    block = doc.split("```json\n", 1)[1].split("```", 1)[0]
    items = parse_items(block.splitlines(), "docs/correctness.md")
    assert [i.grader for i in items] == ["number", "fact", "json"]
