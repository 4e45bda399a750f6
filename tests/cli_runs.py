"""``kshim`` run as a user runs it: a child process, its output captured as text, every run
bounded, and no KSHIM_* variable of the test's environment leaking into it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

COMMAND_TIMEOUT_S = 60.0


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any KSHIM_* variable, plus ``extra``."""
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("KSHIM_")
    }
    environment.update(extra or {})
    return environment


def run_kshim(
    *arguments: str, environment: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``kshim`` with ``arguments``, finished (its status is the caller's to check)."""
    return subprocess.run(
        [sys.executable, "-m", "kshim", *arguments],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
        env=clean_environment(environment),
    )
