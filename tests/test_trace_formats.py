"""Public trace formats (Mooncake JSONL, Azure LLM inference CSV) read into the project's own trace.

The samples in tests/data/traces are written by tests/data/traces/generate.py from a seed, in the
published formats; nothing in them is taken from a published trace.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_inferaccept.load.trace_formats import (
    BLOCK_TOKENS,
    block_words,
    convert,
    main,
    mooncake_prompt,
    parse_when,
    read_public_trace,
)
from pytest_inferaccept.load.workloads import WorkloadError, load_trace
from tests._processes import fake_process

SAMPLES = Path(__file__).resolve().parent / "data" / "traces"
MOONCAKE = SAMPLES / "mooncake_sample.jsonl"
AZURE = SAMPLES / "azure_sample.csv"


def _mooncake_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in MOONCAKE.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _moon(**fields: Any) -> str:
    line = {"timestamp": 0, "input_length": 600, "output_length": 8, "hash_ids": [0, 1]}
    line.update(fields)
    return json.dumps(line)


# ---------------------------------------------------------------------------------------------
# Mooncake


def test_a_mooncake_request_arrives_at_its_timestamp_in_seconds_with_its_recorded_lengths() -> None:
    rows = _mooncake_rows()
    entries = read_public_trace("mooncake", MOONCAKE)
    assert len(entries) == len(rows) == 40
    for row, entry in zip(rows, entries, strict=True):
        assert entry.arrival == pytest.approx(row["timestamp"] / 1000)
        assert entry.max_tokens == row["output_length"]
        assert entry.input_tokens == row["input_length"]
        assert entry.prompt is not None and len(entry.prompt.split()) == row["input_length"]
        assert entry.tags == ["mooncake"]


def test_two_mooncake_requests_with_the_same_first_two_hash_ids_share_exactly_those_two_blocks() -> None:
    first = mooncake_prompt([0, 1, 4], 1131, uid=2).split()
    second = mooncake_prompt([0, 1, 5], 1362, uid=3).split()
    shared = 2 * BLOCK_TOKENS
    assert first[:shared] == second[:shared]
    assert first[shared] != second[shared]  # the third blocks differ from their first word
    # The same pair in the shipped sample (lines 2 and 3) is built the same way.
    entries = read_public_trace("mooncake", MOONCAKE)
    assert entries[1].prompt is not None and entries[2].prompt is not None
    assert entries[1].prompt.split()[:shared + 1] == first[:shared + 1]
    assert entries[2].prompt.split()[:shared + 1] == second[:shared + 1]


def test_requests_with_different_first_hash_ids_share_no_block_text() -> None:
    # 5 and 92 are equal modulo the word list's length: the id's spelling still tells them apart.
    for a, b in ((0, 1), (5, 92), (7, 7 + 87**2)):
        assert block_words(a)[:4] != block_words(b)[:4], (a, b)
        assert len(block_words(a)) == BLOCK_TOKENS
    one = mooncake_prompt([0, 1], 1024, uid=1).split()
    other = mooncake_prompt([2, 1], 1024, uid=2).split()
    assert one[:BLOCK_TOKENS] != other[:BLOCK_TOKENS]
    assert one[BLOCK_TOKENS:] == other[BLOCK_TOKENS:]  # the same id makes the same text wherever it is


def test_the_last_block_is_trimmed_to_the_input_length_and_a_block_reads_the_same_everywhere() -> None:
    words = mooncake_prompt([3, 9, 12], 1100, uid=1).split()
    assert len(words) == 1100
    assert words[1024:] == list(block_words(12)[:76])
    again = mooncake_prompt([3, 9, 12], 1536, uid=99).split()
    assert again[:1100] == words  # the uid plays no part while the ids cover the whole prompt


def test_tokens_past_the_last_hash_id_are_text_of_the_request_own() -> None:
    one = mooncake_prompt([4], 700, uid=10)
    other = mooncake_prompt([4], 700, uid=11)
    assert one.split()[:BLOCK_TOKENS] == other.split()[:BLOCK_TOKENS]
    assert one.split()[BLOCK_TOKENS:BLOCK_TOKENS + 2] == ["Request", "10:"]
    assert other.split()[BLOCK_TOKENS:BLOCK_TOKENS + 2] == ["Request", "11:"]
    assert abs(len(one.split()) - 700) <= 2


def test_the_shared_prefix_share_counts_leading_blocks_an_earlier_request_sent(tmp_path: Path) -> None:
    trace = _write(tmp_path / "m.jsonl", [
        _moon(timestamp=0, input_length=1024, hash_ids=[0, 1]),
        _moon(timestamp=10, input_length=1300, hash_ids=[0, 1, 2]),  # 1024 tokens seen before
        _moon(timestamp=20, input_length=600, hash_ids=[0, 3]),  # 512 seen before
        _moon(timestamp=30, input_length=600, hash_ids=[5, 1]),  # id 1 after a new first block: no hit
    ])
    summary = convert("mooncake", trace, tmp_path / "out.jsonl")
    assert summary.shared_tokens == 1536 and summary.input_tokens == 1024 + 1300 + 600 + 600
    assert summary.shared_share == pytest.approx(1536 / 3524)
    assert summary.mean_rate == pytest.approx(3 / 0.03)


def test_hash_ids_not_covering_the_input_length_are_said_and_the_input_length_wins(tmp_path: Path) -> None:
    trace = _write(tmp_path / "m.jsonl", [_moon(input_length=2000, hash_ids=[0, 1])])
    summary = convert("mooncake", trace, tmp_path / "out.jsonl")
    (entry,) = load_trace(tmp_path / "out.jsonl")
    assert entry.prompt is not None and abs(len(entry.prompt.split()) - 2000) <= 2
    assert any("m.jsonl:1: 2 hash ids for 2000 tokens" in note for note in summary.notes), summary.notes


def test_unknown_mooncake_fields_are_ignored_and_named(tmp_path: Path) -> None:
    line = json.loads(_moon())
    line["session_id"] = 4
    trace = _write(tmp_path / "m.jsonl", [json.dumps(line)])
    summary = convert("mooncake", trace, tmp_path / "out.jsonl")
    assert any("'session_id' (1 line)" in note for note in summary.notes), summary.notes


# ---------------------------------------------------------------------------------------------
# Azure


def test_an_azure_row_arrives_in_seconds_since_the_first_row() -> None:
    entries = read_public_trace("azure", AZURE)
    lines = AZURE.read_text(encoding="utf-8").splitlines()[1:]
    assert len(entries) == len(lines) == 30
    first = parse_when(lines[0].split(",")[0])
    for line, entry in zip(lines, entries, strict=True):
        stamp, context, generated = line.split(",")
        assert entry.arrival == pytest.approx((parse_when(stamp) - first) / 1e9, abs=1e-6)
        assert entry.max_tokens == int(generated) and entry.input_tokens == int(context)
        assert entry.tags == ["azure"]
    # 18:15:46.6805900 to 18:15:46.8750966: seven fractional digits, read to the 100 ns tick.
    assert lines[1].startswith("2023-11-16 18:15:46.8750966")
    assert entries[1].arrival == pytest.approx(0.1945066, abs=1e-12)


def test_azure_date_times_are_read_with_seven_digits_and_an_optional_offset() -> None:
    base = parse_when("2023-11-16 18:15:46.6805900")
    assert parse_when("2023-11-16 18:15:46.6805901") - base == 100
    assert parse_when("2023-11-16T18:15:46.68059Z") == base
    assert parse_when("2023-11-16 19:15:46.6805900+01:00") == base
    assert parse_when("2023-11-16 18:15:47") - base == 319_410_000


def test_azure_prompts_are_unique_and_about_the_recorded_length() -> None:
    entries = read_public_trace("azure", AZURE)
    prompts = [e.prompt for e in entries]
    assert len(set(prompts)) == len(prompts)
    for entry in entries:
        assert entry.prompt is not None and entry.input_tokens is not None
        assert abs(len(entry.prompt.split()) - entry.input_tokens) <= 2


def test_zero_output_and_zero_context_tokens_are_sent_as_one_token_and_said(tmp_path: Path) -> None:
    trace = _write(tmp_path / "a.csv", ["TIMESTAMP,ContextTokens,GeneratedTokens",
                                         "2024-05-10 00:00:00.009930+00:00,100,0",
                                         "2024-05-10 00:00:01.009930+00:00,0,5"])
    summary = convert("azure", trace, tmp_path / "out.jsonl")
    first, second = load_trace(tmp_path / "out.jsonl")
    assert (first.max_tokens, first.tags) == (1, ["azure", "zero-output"])
    assert (second.input_tokens, second.tags) == (1, ["azure", "zero-input"])
    assert second.arrival == pytest.approx(1.0)
    text = "\n".join(summary.lines("out.jsonl"))
    assert "1 request recorded 0 output tokens; sent with max_tokens 1" in text
    assert "1 request recorded 0 input tokens" in text


def test_unsorted_timestamps_are_put_in_arrival_order_and_said(tmp_path: Path) -> None:
    trace = _write(tmp_path / "m.jsonl", [_moon(timestamp=0, output_length=1),
                                          _moon(timestamp=500, output_length=2),
                                          _moon(timestamp=200, output_length=3)])
    summary = convert("mooncake", trace, tmp_path / "out.jsonl")
    entries = load_trace(tmp_path / "out.jsonl")
    assert [(e.arrival, e.max_tokens) for e in entries] == [(0.0, 1), (0.2, 3), (0.5, 2)]
    assert any("1 line arrived earlier than the line before (first: m.jsonl:3)" in n for n in summary.notes)


# ---------------------------------------------------------------------------------------------
# Errors: file and line, the problem in plain words


@pytest.mark.parametrize(("lines", "message"), [
    ([_moon(), "{not json"], "bad.jsonl:2: not valid JSON"),
    (["[1, 2]"], "bad.jsonl:1: each line must be a JSON object, got list"),
    ([_moon(), "", _moon(timestamp=-5)], "bad.jsonl:3: timestamp must be >= 0"),
    ([_moon(output_length=-1)], "bad.jsonl:1: output_length must be >= 0"),
    ([_moon(input_length=0)], "bad.jsonl:1: input_length must be > 0"),
    ([_moon(input_length="600")], "bad.jsonl:1: input_length must be an integer"),
    ([_moon(hash_ids=[0, -1])], "bad.jsonl:1: hash_ids[1] must be >= 0"),
    ([json.dumps({"timestamp": 0, "input_length": 5, "output_length": 1})],
     "bad.jsonl:1: hash_ids is required"),
    ([""], "bad.jsonl: the trace file is empty (no request lines)"),
])
def test_a_bad_mooncake_line_is_named_by_file_and_line(tmp_path: Path, lines: list[str],
                                                        message: str) -> None:
    with pytest.raises(WorkloadError) as err:
        read_public_trace("mooncake", _write(tmp_path / "bad.jsonl", lines))
    assert str(err.value).startswith(message), str(err.value)


HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
ROW = "2023-11-16 18:15:46.6805900,374,44"


@pytest.mark.parametrize(("lines", "message"), [
    (["when,in,out", ROW], "bad.csv:1: the header must name TIMESTAMP, ContextTokens, GeneratedTokens; "
                           "missing TIMESTAMP, ContextTokens, GeneratedTokens"),
    ([HEADER, ROW, "yesterday,5,5"],
     "bad.csv:3: TIMESTAMP: not a date-time like 2023-11-16 18:15:46.6805900 (got 'yesterday')"),
    ([HEADER, "2023-11-16 18:15:46.6805900,-3,44"], "bad.csv:2: ContextTokens must be >= 0"),
    ([HEADER, "2023-11-16 18:15:46.6805900,374,4.5"], "bad.csv:2: GeneratedTokens must be an integer"),
    ([HEADER, "2023-11-16 18:15:46.6805900,374"], "bad.csv:2: 2 fields where the header names 3"),
    ([HEADER], "bad.csv: the trace file is empty (no request rows)"),
])
def test_a_bad_azure_row_is_named_by_file_and_line(tmp_path: Path, lines: list[str], message: str) -> None:
    with pytest.raises(WorkloadError) as err:
        read_public_trace("azure", _write(tmp_path / "bad.csv", lines))
    assert str(err.value).startswith(message), str(err.value)


# ---------------------------------------------------------------------------------------------
# The converter command


def test_the_converter_writes_a_trace_load_trace_reads_and_says_what_it_wrote(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mooncake.jsonl"
    assert main(["mooncake", str(MOONCAKE), str(out)]) == 0
    printed = capsys.readouterr().out
    entries = load_trace(out)
    rows = _mooncake_rows()
    assert len(entries) == 40
    span = rows[-1]["timestamp"] / 1000
    assert f"wrote 40 requests to {out}: arrivals span {span:.3f} s, mean rate {39 / span:.2f} requests/s" \
        in printed
    assert "shared prefix: 49.2% of the 45756 prompt tokens repeat a prefix" in printed, printed
    assert main(["azure", str(AZURE), str(tmp_path / "azure.jsonl")]) == 0
    assert "wrote 30 requests" in capsys.readouterr().out
    assert len(load_trace(tmp_path / "azure.jsonl")) == 30


def test_a_window_keeps_the_requests_in_it_with_arrivals_counted_from_its_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "window.jsonl"
    assert main(["mooncake", str(MOONCAKE), str(out), "--start", "2", "--duration", "2"]) == 0
    inside = [r for r in _mooncake_rows() if 2000 <= r["timestamp"] < 4000]
    entries = load_trace(out)
    assert [e.arrival for e in entries] == pytest.approx([r["timestamp"] / 1000 - 2 for r in inside])
    assert [e.max_tokens for e in entries] == [r["output_length"] for r in inside]
    printed = capsys.readouterr().out
    assert f"kept {len(inside)} of 40 requests: the requests arriving from 2 s to 4 s" in printed
    assert main(["azure", str(AZURE), str(out), "--limit", "5"]) == 0
    assert len(load_trace(out)) == 5 and "kept 5 of 30 requests: the first 5" in capsys.readouterr().out


def test_the_converter_refuses_bad_input_with_the_file_and_line(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    bad = _write(tmp_path / "bad.jsonl", [_moon(), _moon(output_length=-2)])
    assert main(["mooncake", str(bad), str(tmp_path / "out.jsonl")]) == 2
    assert "error: bad.jsonl:2: output_length must be >= 0" in capsys.readouterr().err
    assert main(["mooncake", str(MOONCAKE), str(tmp_path / "out.jsonl"), "--start", "999"]) == 2
    assert "no request of the trace falls in the window" in capsys.readouterr().err


def test_the_shipped_samples_are_what_the_seeded_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("trace_samples", SAMPLES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert MOONCAKE.read_text(encoding="utf-8").splitlines() == module.mooncake_lines()
    assert AZURE.read_text(encoding="utf-8").splitlines() == module.azure_lines()


# ---------------------------------------------------------------------------------------------
# Replayed by the headroom scenario


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fake server as its own process, answering in a few milliseconds."""
    yield from fake_process(tmp_path_factory.mktemp("formats"), "--ttft", "0.005", "--itl", "0.001")


HEADROOM = """
def test_headroom(loadgen):
    loadgen.require_capacity()
    loadgen.scenario("headroom", trace="mooncake.jsonl", factors=[2, 4])
"""


def test_a_converted_mooncake_trace_replays_in_the_headroom_scenario(pytester: pytest.Pytester,
                                                                     fake: str) -> None:
    assert main(["mooncake", str(MOONCAKE), str(pytester.path / "mooncake.jsonl")]) == 0
    pytester.makepyfile(HEADROOM)
    result = pytester.runpytest_inprocess("--server-url", fake, "--inferaccept-json", "r.json", "--capacity",
                                          "--client-check", "warn", "--slo", "ttft_p95=5",
                                          "--slo-judge", "point")
    doc: dict[str, Any] = json.loads((pytester.path / "r.json").read_text())
    (scenario,) = [c for t in doc["tests"] for c in t.get("capacity", [])]
    assert result.ret == 0, result.stdout.str()
    assert scenario["kind"] == "headroom" and scenario["status"] == "pass", scenario["headline"]
    steps = {s["level"]: s for s in scenario["steps"]}
    assert steps[2.0]["measured"] == 40 and steps[4.0]["measured"] == 40  # every converted request, once
    assert steps[4.0]["asked_rate"] == pytest.approx(2 * steps[2.0]["asked_rate"], rel=0.1)


DOC = Path(__file__).resolve().parent.parent / "docs" / "trace-format.md"


def test_the_documented_public_format_errors_are_the_real_ones(tmp_path: Path) -> None:
    rows = re.findall(r"^\| `(.+)` \| `((mooncake\.jsonl|azure\.csv):\d+: [^`]+)` \|$",
                      DOC.read_text(encoding="utf-8"), re.M)
    assert len(rows) >= 10
    for line, message, name in rows:
        if name == "azure.csv":
            path = _write(tmp_path / name, [HEADER, line])
            fmt = "azure"
        else:
            path = _write(tmp_path / name, [line])
            fmt = "mooncake"
        with pytest.raises(WorkloadError) as err:
            read_public_trace(fmt, path)
        assert str(err.value) == message
