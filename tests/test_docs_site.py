"""The manual builds as a site (MkDocs, strict: a broken link or anchor, a page left out of
the navigation, a repository file linked that does not exist all fail), and its reference
pages are what the code generates: a configuration key or a command missing from them fails
here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kshim.broker.config.keys import BROKER_DEFAULTS, TOPIC_CONFIGS
from kshim.cli import reference_pages

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"

pytestmark = pytest.mark.timeout(300)


def test_the_reference_pages_are_generated_from_the_code(tmp_path: Path) -> None:
    written = reference_pages.write_pages(tmp_path)

    for path in written:
        committed = (REFERENCE / path.name).read_text(encoding="utf-8")
        assert path.read_text(encoding="utf-8") == committed, (
            f"docs/reference/{path.name} is stale: run python -m kshim.cli.reference_pages"
        )


def test_every_key_and_command_is_in_the_reference() -> None:
    keys = (REFERENCE / "configuration-keys.md").read_text(encoding="utf-8")
    commands = (REFERENCE / "command-line.md").read_text(encoding="utf-8")

    for key in [*BROKER_DEFAULTS, *TOPIC_CONFIGS]:
        assert f"| `{key}` |" in keys, key
    for name in ("serve", "produce", "tail", "groups describe", "users list", "acls add"):
        assert f"## `kshim {name}`" in commands, name


def test_the_site_builds_without_a_warning(tmp_path: Path) -> None:
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=environment,
    )

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "index.html").is_file()
    assert (tmp_path / "reference" / "configuration-keys.html").is_file()
    # A repository file the manual links to is carried into the site.
    assert (tmp_path / "repository" / "benchmarks" / "results" / "security.json").is_file()
