"""The public API: the names a team's tests import from the package itself, loaded on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pytest_inferaccept

ALIASES = {"CapacityResult": "CapacityScenario"}
"""Public names that are another type under the name earlier releases exported (the run model's own)."""


@pytest.mark.parametrize("name", [n for n in pytest_inferaccept.__all__ if n != "__version__"])
def test_every_public_name_imports_from_the_package(name: str) -> None:
    value = getattr(pytest_inferaccept, name)
    assert value.__name__ == ALIASES.get(name, name)
    assert name in dir(pytest_inferaccept)


def test_all_lists_exactly_the_lazily_loaded_names() -> None:
    assert sorted(pytest_inferaccept.__all__) == sorted(["__version__", *pytest_inferaccept._EXPORTS])


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = pytest_inferaccept.Nope  # type: ignore[attr-defined]


def test_importing_the_package_loads_none_of_the_public_modules() -> None:
    # pytest imports the package before every run: the names must cost nothing until used (only the
    # two standard-library helpers the facade is made of load: the version and the lazy lookup)
    code = ("import sys, pytest_inferaccept; "
            "print(sorted(m for m in sys.modules if m.startswith('pytest_inferaccept.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['pytest_inferaccept._lazy', 'pytest_inferaccept._version']"


def test_the_version_is_the_one_its_own_module_holds() -> None:
    from pytest_inferaccept._version import __version__

    assert pytest_inferaccept.__version__ == __version__
