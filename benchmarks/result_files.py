"""A benchmark's table printed and kept: OUTPUT.md for readers, OUTPUT.json for figures."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path


def machine_load() -> str:
    """The machine's size and how busy it was as a run ended, for a table's heading."""
    return f"{os.cpu_count()} CPUs, load average at the end {os.getloadavg()[0]:.1f}"


def write_result(
    output: Path, lines: list[str], document: Mapping[str, object], indent: int = 2
) -> None:
    """Prints ``lines`` and writes them to ``output`` as .md, ``document`` as .json."""
    print("\n".join(lines))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.with_suffix(".md").write_text("\n".join(lines) + "\n")
    output.with_suffix(".json").write_text(json.dumps(document, indent=indent) + "\n")
