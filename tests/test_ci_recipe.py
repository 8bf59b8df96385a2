"""The CI recipe in docs/ci.md: valid GitHub and GitLab YAML that uses only options the plugin has."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("check_jsonschema")
from ruamel.yaml import YAML  # a dependency of check-jsonschema

DOCS = Path(__file__).resolve().parent.parent / "docs"
RECIPES = {"github-actions.yml": "vendor.github-workflows", "gitlab-ci.yml": "vendor.gitlab-ci"}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _validate(path: Path, schema: str) -> subprocess.CompletedProcess[str]:
    # The schemas ship inside check-jsonschema: nothing is fetched, so this runs offline.
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
                          capture_output=True, text=True, check=False)


@pytest.mark.parametrize(("name", "schema"), RECIPES.items())
def test_each_ci_recipe_is_valid_against_its_ci_system_schema(name: str, schema: str) -> None:
    checked = _validate(DOCS / "ci" / name, schema)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_schema_check_catches_a_misspelt_key(tmp_path: Path) -> None:
    bad = tmp_path / "gitlab-ci.yml"
    bad.write_text((DOCS / "ci" / "gitlab-ci.yml").read_text().replace("  artifacts:", "  artefacts:"))
    checked = _validate(bad, RECIPES["gitlab-ci.yml"])
    assert checked.returncode != 0
    assert "artefacts" in checked.stdout


def _strings(node: object) -> list[str]:
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return [node] if isinstance(node, str) else []


def _pytest_flags() -> set[str]:
    commands = []
    for name in RECIPES:
        document = YAML(typ="safe").load((DOCS / "ci" / name).read_text())
        commands += [text for text in _strings(document) if re.search(r"\bpytest\s", text)]
    assert len(commands) == 2, commands
    return {flag for text in commands for flag in FLAG.findall(text)}


def test_the_recipes_use_only_options_pytest_and_the_plugin_have(tmp_path: Path) -> None:
    helped = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
                            capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    known = set(FLAG.findall(helped))
    used = _pytest_flags()
    assert {"--server-url", "--slo-profile", "--inferaccept-baseline", "--inferaccept-json",
            "--inferaccept-html"} <= used
    assert used - known == set()


def test_the_ci_page_quotes_each_recipe_as_it_is_in_its_file() -> None:
    page = (DOCS / "ci.md").read_text()
    for name in RECIPES:
        assert (DOCS / "ci" / name).read_text() in page, f"docs/ci.md does not quote docs/ci/{name}"


def test_the_recipes_slo_profile_is_one_the_plugin_accepts() -> None:
    from pytest_inferaccept.slo_profile import load_profile

    name, limits = load_profile(DOCS / "ci" / "slo.json")
    assert name == "chat-interactive" and limits["ttft_p95"] == 0.5
