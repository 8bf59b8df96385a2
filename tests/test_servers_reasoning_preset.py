"""The llama-cpp-reasoning preset: llama-server's reasoning parser driven by SmolLM2 through the
project's own chat template and grammar, shipped as package data and installed into the cache."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest

from pytest_inferaccept.servers import PRESETS
from pytest_inferaccept.servers._cache import Step, run_step, step_is_done
from pytest_inferaccept.servers._recipes import SHIPPED_TEMPLATES, Preparer
from pytest_inferaccept.servers._specs import (
    CHAT_MODEL,
    REASONING_GRAMMAR,
    REASONING_TEMPLATE,
    Layout,
    recipe,
)
from pytest_inferaccept.settings import PRESETS as OPTION_PRESETS

NAME = "llama-cpp-reasoning"
ROOT = Path(__file__).resolve().parents[1]


def _quiet(_msg: str) -> None:
    pass


def _flag(argv: tuple[str, ...], flag: str) -> str:
    assert flag in argv, f"{flag} missing from {argv}"
    return argv[argv.index(flag) + 1]


def _files_step(layout: Layout) -> Step:
    (step,) = [s for s in Preparer(layout, _quiet).steps(NAME) if s.name == "reasoning-files"]
    return step


def _render(messages: list[dict[str, str]], **extra: object) -> str:
    env = jinja2.Environment(autoescape=False)
    template = env.from_string((SHIPPED_TEMPLATES / REASONING_TEMPLATE).read_text(encoding="utf-8"))
    return template.render(messages=messages, add_generation_prompt=True, **extra)


def test_the_reasoning_preset_can_be_chosen_with_server_preset() -> None:
    assert NAME in PRESETS
    assert set(PRESETS) <= set(OPTION_PRESETS)


def test_the_reasoning_preset_runs_the_llama_cpp_build_and_model_with_its_parser_template_and_grammar(
    tmp_path: Path,
) -> None:
    layout = Layout(tmp_path)
    plain, reasoning = recipe("llama-cpp", layout).chat.argv, recipe(NAME, layout).chat.argv
    assert reasoning[0] == plain[0] == str(layout.llama_server)
    assert _flag(reasoning, "-m") == _flag(plain, "-m") == str(layout.smollm2_gguf)
    assert _flag(reasoning, "--alias") == CHAT_MODEL
    assert "--jinja" in reasoning
    assert _flag(reasoning, "--reasoning-format") == "deepseek"
    assert _flag(reasoning, "--chat-template-file") == str(layout.reasoning_template)
    assert _flag(reasoning, "--grammar-file") == str(layout.reasoning_grammar)
    # the plain preset keeps its tool template and no grammar
    assert _flag(plain, "--chat-template-file") == str(layout.tool_template)
    assert "--grammar-file" not in plain and "--reasoning-format" not in plain


def test_the_reasoning_preset_shares_the_llama_cpp_build_instead_of_building_again(tmp_path: Path) -> None:
    prep = Preparer(Layout(tmp_path), _quiet)
    plain = {s.name: s.key for s in prep.steps("llama-cpp")}
    reasoning = {s.name: s.key for s in prep.steps(NAME)}
    for shared in ("llama-src", "smollm2-gguf", "llama-build"):
        assert reasoning[shared] == plain[shared]
    assert set(reasoning) - set(plain) == {"reasoning-files"}


def test_the_template_and_grammar_ship_as_package_data() -> None:
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["pytest_inferaccept"]
    package = ROOT / "pytest_inferaccept"
    shipped = {p for pattern in globs for p in package.glob(pattern)}
    for name in (REASONING_TEMPLATE, REASONING_GRAMMAR):
        assert SHIPPED_TEMPLATES / name in shipped, f"{name} is not matched by package-data {globs}"


def test_preparing_installs_the_template_and_grammar_beside_the_tool_template(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    step = _files_step(layout)
    assert run_step(tmp_path, step, _quiet) is True
    for name, installed in ((REASONING_TEMPLATE, layout.reasoning_template),
                            (REASONING_GRAMMAR, layout.reasoning_grammar)):
        assert installed.parent == layout.tool_template.parent
        assert installed.read_bytes() == (SHIPPED_TEMPLATES / name).read_bytes()
    assert not list(layout.tool_template.parent.glob("*.part"))
    assert json.loads((tmp_path / "steps" / "reasoning-files.done").read_text())["key"] == step.key
    assert run_step(tmp_path, step, _quiet) is False  # up to date: nothing copied again


def test_a_hand_edited_copy_in_the_cache_is_installed_again(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    step = _files_step(layout)
    run_step(tmp_path, step, _quiet)
    layout.reasoning_grammar.write_text("root ::= \"edited\"\n")
    assert step_is_done(tmp_path, step) is False
    assert run_step(tmp_path, step, _quiet) is True
    assert layout.reasoning_grammar.read_bytes() == (SHIPPED_TEMPLATES / REASONING_GRAMMAR).read_bytes()


def test_the_template_opens_the_assistant_turn_for_thinking() -> None:
    prompt = _render([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    assert prompt == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                      "<|im_start|>assistant\n<think>\n")


def test_the_template_closes_the_thought_at_once_when_thinking_is_switched_off() -> None:
    prompt = _render([{"role": "user", "content": "Hi"}], enable_thinking=False)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_an_earlier_turn_shows_its_reasoning_between_the_think_tags() -> None:
    # How llama-server's template analysis finds the reasoning markers the parser splits on.
    turns = [{"role": "user", "content": "Hi"},
             {"role": "assistant", "content": "Hello.", "reasoning_content": "greet them"},
             {"role": "user", "content": "Again"}]
    prompt = _render(turns)
    assert "<|im_start|>assistant\n<think>\ngreet them\n</think>\n\nHello.<|im_end|>\n" in prompt


def test_the_grammar_forces_a_short_thought_its_end_tag_then_one_sentence() -> None:
    rules: dict[str, str] = {}
    for line in (SHIPPED_TEMPLATES / REASONING_GRAMMAR).read_text(encoding="utf-8").splitlines():
        if "::=" in line and not line.lstrip().startswith("#"):
            name, _, body = line.partition("::=")
            rules[name.strip()] = body.strip()
    assert rules["root"] == 'thought "\\n</think>\\n\\n" sentence'
    assert rules["thought"] == 'word (" " word){19,27}'  # 20 to 28 words
    assert "<think>" not in rules["root"]  # the template has opened the block already
    assert rules["sentence"].endswith('"."')
