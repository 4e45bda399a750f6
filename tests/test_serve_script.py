"""The README's first command, ``bash scripts/serve.sh``, as a user runs it: it builds (or
reuses) the broker's own environment, says once per start how to put the other ``kshim``
commands on PATH, and runs ``kshim serve`` with the arguments given, in its own process
(``exec``), stopped cleanly by SIGTERM. The first run on a fresh clone installs kshim's
dependencies from pip's cache, hence the long timeout."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALL_TIMEOUT_S = 600.0

pytestmark = pytest.mark.timeout(900)


def test_serve_script_runs_the_broker_and_says_how_to_reach_the_commands(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KSHIM_")}
    environment["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # no kshim on it
    process = subprocess.Popen(
        ["bash", "scripts/serve.sh", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir),
         "--set", "kshim.metrics.listen="],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
    )  # fmt: skip
    try:
        listening = read_line_starting(process, "kshim listening on ", INSTALL_TIMEOUT_S)
    finally:
        process.send_signal(signal.SIGTERM)  # serve.sh exec'd kshim serve: this process
        try:
            _, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate(timeout=60)
    venv_bin = ROOT / ".venv-serve" / "bin"
    hint = (
        f'serve.sh: kshim\'s other commands are in .venv-serve/bin: export PATH="{venv_bin}:$PATH"'
    )
    assert hint in stderr.splitlines(), stderr
    assert listening.endswith(f"(PLAINTEXT), data in {data_dir}"), listening
    assert process.returncode == 0, stderr
    assert "kshim stopped after" in stderr, stderr


def read_line_starting(process: subprocess.Popen[str], prefix: str, timeout_s: float) -> str:
    """The first line of the process's stdout that starts with ``prefix``."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        readable, _, _ = select.select([process.stdout], [], [], 0.5)
        if readable:
            line = process.stdout.readline().rstrip("\n")
            if line.startswith(prefix):
                return line
    raise AssertionError(f"no line starting {prefix!r} within {timeout_s} s")
