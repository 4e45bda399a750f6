"""Package discovery in pyproject.toml: the wheel holds the kshim package and nothing else.

The broker's default data directory, ./kshim-data, sits beside the package in a checkout; the
former pattern "kshim*" made it (and any kshim-something directory) part of the wheel.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _find_settings() -> dict[str, Any]:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found: dict[str, Any] = settings["tool"]["setuptools"]["packages"]["find"]
    return found


def _package_directories() -> set[str]:
    """Dotted names of the directories under kshim/ that hold Python modules."""
    return {
        ".".join(module.parent.relative_to(ROOT).parts)
        for module in (ROOT / "kshim").rglob("*.py")
        if "__pycache__" not in module.parts
    }


@pytest.mark.parametrize("name", ["kshim-data", "kshim_data", "kshim-data.t-0", "kshimdata"])
def test_no_include_pattern_matches_a_data_directory(name: str) -> None:
    assert not any(fnmatch.fnmatchcase(name, pattern) for pattern in _find_settings()["include"])


def test_every_directory_of_modules_is_a_regular_package() -> None:
    # namespaces = false: a directory without __init__.py would silently leave the wheel.
    for dotted in _package_directories():
        assert (ROOT.joinpath(*dotted.split(".")) / "__init__.py").is_file(), dotted


def test_setuptools_finds_exactly_the_package(tmp_path: Path) -> None:
    setuptools = pytest.importorskip("setuptools")
    settings = _find_settings()
    assert settings.get("namespaces") is False  # so find_packages, not find_namespace_packages
    found = setuptools.find_packages(where=str(ROOT), include=settings["include"])
    assert set(found) == _package_directories()
    # A data directory beside the package, even one holding a module, stays out.
    (tmp_path / "kshim").mkdir()
    (tmp_path / "kshim" / "__init__.py").touch()
    for data in ("kshim-data/t-0", "kshim_data"):
        (tmp_path / data).mkdir(parents=True)
        (tmp_path / data / "__init__.py").touch()
    assert setuptools.find_packages(where=str(tmp_path), include=settings["include"]) == ["kshim"]
