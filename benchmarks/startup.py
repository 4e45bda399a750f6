"""Time from process start to the first answered request, fresh or after kill -9."""

from __future__ import annotations

import subprocess
import sys
import time

from kshim.client.frames import MalformedResponseError, encode_request
from kshim.client.wire import WireConnection
from kshim.protocol.apis import API_VERSIONS_KEY
from kshim.testing import broker_environment, free_port

# Encoded once, here, so that the time measured holds no kio schema import of this process.
API_VERSIONS_V0 = encode_request(API_VERSIONS_KEY, 0, 1, {}, client_id="bench")
DEADLINE_S = 60.0
PROBE_TIMEOUT_S = 1.0


def time_to_first_answer(
    data_dir: str, port: int | None = None
) -> tuple[float, subprocess.Popen[bytes]]:
    """Starts ``kshim serve`` and returns (seconds until an ApiVersions answer, the process).
    Its bytecode is cached, as an installed kshim's is (benchmarks/brokers.py)."""
    port = port or free_port()
    started = time.perf_counter()
    command = [sys.executable, "-m", "kshim", "serve", "--listen", f"127.0.0.1:{port}"]
    command += ["--data-dir", data_dir, "--log-level", "WARNING"]
    process = subprocess.Popen(
        command, env=broker_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    while time.perf_counter() - started < DEADLINE_S:
        if answers_api_versions(port):
            return time.perf_counter() - started, process
        time.sleep(0.005)
    process.kill()
    raise TimeoutError("kshim never answered")


def answers_api_versions(port: int) -> bool:
    """True when a broker on the loopback ``port`` answers an ApiVersions v0 request with a
    frame (undecoded: it is the answer's arrival that is timed)."""
    try:
        with WireConnection("127.0.0.1", port, PROBE_TIMEOUT_S) as connection:
            connection.send(API_VERSIONS_V0)
            connection.read_frame()
    except (OSError, MalformedResponseError):
        return False
    return True
