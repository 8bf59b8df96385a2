"""Workloads: trace files (and their errors), replay and resampling, synthetic lengths and prompts."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from pytest_inferaccept.load.workloads import (
    Fixed,
    Normal,
    Sampled,
    SyntheticWorkload,
    TraceEntry,
    TraceWorkload,
    Uniform,
    WorkloadError,
    bucket,
    load_trace,
    make_prompt,
    parse_distribution,
    realised,
)

DOC = Path(__file__).resolve().parent.parent / "docs" / "trace-format.md"
GOOD = '{"prompt": "hello there", "max_tokens": 4}'


def write(tmp_path: Path, *lines: str, name: str = "trace.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def error_of(path: Path) -> str:
    with pytest.raises(WorkloadError) as info:
        load_trace(path)
    return str(info.value)


# -- trace files --------------------------------------------------------------------------------


def test_a_trace_line_holds_messages_or_a_prompt_with_its_options(tmp_path: Path) -> None:
    path = write(tmp_path,
                 '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "arrival": 0}',
                 "",
                 '{"prompt": "p", "max_tokens": 3, "arrival": 1.5, "tags": ["rag"], "input_tokens": 40}')
    first, second = load_trace(path)
    assert first.messages == [{"role": "user", "content": "hi"}] and first.arrival == 0.0
    assert second.prompt == "p" and second.tags == ["rag"] and second.input_tokens == 40


BAD_LINES: dict[str, str] = {
    "max_tokens must be > 0": '{"prompt": "x", "max_tokens": 0}',
    "max_tokens is required": '{"prompt": "x"}',
    "max_tokens must be an integer": '{"prompt": "x", "max_tokens": "12"}',
    "arrival must be >= 0": '{"prompt": "x", "max_tokens": 1, "arrival": -1}',
    "give exactly one of messages or prompt":
        '{"prompt": "x", "messages": [{"role": "user"}], "max_tokens": 1}',
    "messages[0] has no role": '{"messages": [{"content": "x"}], "max_tokens": 1}',
    "prompt must not be empty": '{"prompt": "", "max_tokens": 1}',
    "unknown field 'max_token' (allowed: messages, prompt, max_tokens, arrival, tags, input_tokens)":
        '{"prompt": "x", "max_token": 1}',
    "each line must be a JSON object, got list": "[1, 2]",
    "not valid JSON (Expecting ',' delimiter at column 33)": '{"prompt": "x", "max_tokens": 1 "tags": []}',
}


@pytest.mark.parametrize("problem", list(BAD_LINES))
def test_a_bad_line_is_reported_with_file_name_and_line_number(tmp_path: Path, problem: str) -> None:
    path = write(tmp_path, GOOD, GOOD, BAD_LINES[problem], GOOD)
    assert error_of(path) == f"trace.jsonl:3: {problem}"


def test_an_empty_trace_file_is_an_error(tmp_path: Path) -> None:
    assert error_of(write(tmp_path, "", "  ")) == "trace.jsonl: the trace file is empty (no request lines)"


def test_a_missing_trace_file_is_an_error(tmp_path: Path) -> None:
    message = error_of(tmp_path / "trace.jsonl")
    assert message == "trace.jsonl: cannot read the trace file (No such file or directory)"


def test_the_documented_error_messages_are_the_real_ones(tmp_path: Path) -> None:
    rows = re.findall(r"`(trace\.jsonl:(\d+): ([^`]+))`", DOC.read_text(encoding="utf-8"))
    assert len(rows) >= 8
    for message, line, problem in rows:
        bad = BAD_LINES[problem]
        path = write(tmp_path, *([GOOD] * (int(line) - 1)), bad)
        assert error_of(path) == message


def test_the_documented_example_trace_loads(tmp_path: Path) -> None:
    block = re.search(r"```jsonl\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block is not None
    entries = load_trace(write(tmp_path, block.group(1)))
    assert len(entries) == 3
    assert TraceWorkload(tuple(entries)).has_arrivals


def test_replay_order_wraps_around_and_resampling_is_seeded(tmp_path: Path) -> None:
    lines = [json.dumps({"prompt": f"p{i}", "max_tokens": i + 1}) for i in range(5)]
    path = write(tmp_path, *lines)
    replay = TraceWorkload.from_file(path)
    assert [replay.item(i, i).prompt for i in range(7)] == ["p0", "p1", "p2", "p3", "p4", "p0", "p1"]
    a = TraceWorkload.from_file(path, order="resample", seed=1)
    b = TraceWorkload.from_file(path, order="resample", seed=1)
    c = TraceWorkload.from_file(path, order="resample", seed=2)
    draws = [a.item(i, i).prompt for i in range(40)]
    assert draws == [b.item(i, i).prompt for i in range(40)]
    assert draws != [c.item(i, i).prompt for i in range(40)]
    assert set(draws) == {f"p{i}" for i in range(5)}


def test_a_unique_prefix_marks_the_last_user_message_only() -> None:
    messages = [{"role": "system", "content": "shared"}, {"role": "user", "content": "q"}]
    entry = TraceEntry.model_validate({"messages": messages, "max_tokens": 2})
    item = TraceWorkload((entry,), unique_prefix=True).item(0, 42)
    assert item.messages == [{"role": "system", "content": "shared"},
                             {"role": "user", "content": "Request 42: q"}]
    assert entry.messages == messages  # the trace itself is untouched


# -- lengths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tokens", "name"), [(1, "short"), (127, "short"), (128, "medium"), (1023, "medium"),
                                              (1024, "long"), (8192, "long"), (8193, "very_long")])
def test_lengths_fall_into_buckets(tokens: int, name: str) -> None:
    assert bucket(tokens) == name


def test_distributions_draw_within_their_bounds() -> None:
    rng = random.Random(0)
    assert {Fixed(7).sample(rng) for _ in range(10)} == {7}
    uniform = [Uniform(10, 20).sample(rng) for _ in range(500)]
    assert min(uniform) == 10 and max(uniform) == 20
    normal = [Normal(5, 20).sample(rng) for _ in range(500)]
    assert min(normal) == 1  # clipped, never zero or negative
    assert Sampled((3, 9)).sample(rng) in (3, 9)


def test_lengths_can_be_sampled_from_a_trace(tmp_path: Path) -> None:
    path = write(tmp_path, '{"prompt": "x", "max_tokens": 10, "input_tokens": 300}',
                 '{"prompt": "' + "abcd" * 50 + '", "max_tokens": 20}')
    trace = TraceWorkload.from_file(path)
    assert Sampled.from_trace(trace, "output").values == (10, 20)
    assert Sampled.from_trace(trace, "input").values == (300, 50)


@pytest.mark.parametrize(("text", "dist"), [("128", Fixed(128)), ("fixed(64)", Fixed(64)),
                                            ("uniform(8, 16)", Uniform(8, 16)),
                                            ("normal(512, 128)", Normal(512.0, 128.0))])
def test_distributions_are_read_from_text(text: str, dist: object) -> None:
    assert parse_distribution(text) == dist


@pytest.mark.parametrize(("text", "words"), [("gauss(1, 2)", "cannot read"), ("uniform(9, 3)", "below"),
                                             ("fixed(0)", "positive"), ("uniform(3)", "number of arguments")])
def test_a_bad_distribution_is_an_error_in_plain_words(text: str, words: str) -> None:
    with pytest.raises(WorkloadError, match=re.escape(words)):
        parse_distribution(text)


# -- synthetic prompts --------------------------------------------------------------------------


def test_synthetic_prompts_have_about_the_asked_length_and_a_unique_prefix() -> None:
    work = SyntheticWorkload(input=Fixed(200), output=Fixed(16), seed=3)
    a, b = work.item(0, 0), work.item(1, 1)
    assert a.messages is not None and b.messages is not None
    text_a, text_b = a.messages[0]["content"], b.messages[0]["content"]
    assert text_a.startswith("Request 0:") and text_b.startswith("Request 1:")
    assert 190 <= len(text_a.split()) <= 205  # whitespace words, as the fake server counts tokens
    assert a.max_tokens == 16 and a.input_tokens == 200
    assert work.item(0, 0) == a  # deterministic


def test_a_shared_prefix_is_the_same_for_every_prompt() -> None:
    work = SyntheticWorkload(input=Fixed(100), shared_prefix=30, chat=False)
    p1, p2 = work.item(0, 10).prompt, work.item(1, 11).prompt
    assert p1 is not None and p2 is not None
    assert p1.split()[:30] == p2.split()[:30]
    assert p1.split()[30:32] == ["Request", "10:"]


def test_make_prompt_without_a_request_number_is_only_words() -> None:
    prompt = make_prompt(50, random.Random(1), uid=None)
    assert len(prompt.split()) == 50 and "Request" not in prompt


def test_the_realised_length_distribution_counts_buckets() -> None:
    assert realised([5, 200, 2000, 9000, 10]) == {"short": 2, "medium": 1, "long": 1, "very_long": 1}
