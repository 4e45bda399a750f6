"""Kafka behind a ``kshim gateway``: with ``KSHIM_COMPAT_VIA_GATEWAY=1`` the suite's Kafka
is reached through a gateway started in front of it, so that every scenario's verdict on
Kafka through the gateway can be compared with Kafka's own (docs/gateway.md).

The gateway runs as ``python -m kshim gateway``, a process of its own stopped by its PID
at the end. The single-node Kafka of ``kshim.jvm`` is broker 1, reached at the port after
the broker port base.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from compat_tests.kafka_sources import wait_until_answering
from kshim.testing import free_port

VIA_GATEWAY_VARIABLE = "KSHIM_COMPAT_VIA_GATEWAY"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
KAFKA_NODE_ID = 1


def via_gateway() -> bool:
    return os.environ.get(VIA_GATEWAY_VARIABLE, "") == "1"


@contextlib.contextmanager
def gateway_in_front(upstream: str) -> Iterator[str]:
    """A gateway relaying to ``upstream`` until the block ends; yields its bootstrap."""
    port = free_port()
    base = free_port() - KAFKA_NODE_ID
    command = [sys.executable, "-m", "kshim", "gateway", "--upstream", upstream]
    command += ["--listen", f"127.0.0.1:{port}", "--broker-port-base", str(base)]
    with tempfile.TemporaryDirectory(prefix="kshim-gateway-") as directory:
        log_path = os.path.join(directory, "gateway.log")
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a group of its own: wait_until_answering watches it
            )
        try:
            wait_until_answering(process, port, time.perf_counter(), START_TIMEOUT_S, log_path)
            yield f"127.0.0.1:{port}"
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
