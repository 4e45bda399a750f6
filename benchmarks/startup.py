"""Time from process start to the first answered request, fresh or after kill -9."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time

from kshim.testing import free_port

# ApiVersions v0 request: api_key 18, version 0, correlation id 1, client id "bench".
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
DEADLINE_S = 60.0


def time_to_first_answer(
    data_dir: str, port: int | None = None
) -> tuple[float, subprocess.Popen[bytes]]:
    """Starts ``kshim serve`` and returns (seconds until an ApiVersions answer, the process)."""
    port = port or free_port()
    started = time.perf_counter()
    command = [sys.executable, "-m", "kshim", "serve", "--listen", f"127.0.0.1:{port}"]
    command += ["--data-dir", data_dir, "--log-level", "WARNING"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while time.perf_counter() - started < DEADLINE_S:
        if _answers(port):
            return time.perf_counter() - started, process
        time.sleep(0.005)
    process.kill()
    raise TimeoutError("kshim never answered")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
            return len(sock.recv(4)) == 4
    except OSError:
        return False
