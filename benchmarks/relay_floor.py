"""What relaying Kafka's traffic costs any process on this machine: a Kafka with a second
listener whose clients go through socat, a C byte relay, beside ``kshim gateway``
(benchmarks/gateway.py).

socat (``apt-get install socat``) copies bytes from one socket to the other and does nothing
else: a read and a write per chunk each way, the floor under any user-space relay, whatever
its language. Kafka's brokers must name the relay in their Metadata answers or the clients
would leave it after bootstrapping, so this Kafka has two listeners: ``PLAINTEXT``, reached
directly (and by the gateways, which rewrite the addresses themselves), and ``RELAY``,
advertised at socat's port and reached only through it (Kafka's per-listener
``advertised.listeners``). socat forks a child per connection: its CPU is the live tree's
plus what the children that ended left in the parent's account (cutime, cstime).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.brokers import CLOCK_TICKS, RunningBroker
from kshim.jvm import artifacts
from kshim.testing import KafkaProcess, free_port, wait_for_port

LOOPBACK = "127.0.0.1"
# Bytes per read and write: asyncio's and uvloop's read buffers are 256 KiB, so socat moves
# a large Fetch answer in as few calls as the gateway does.
SOCAT_BLOCK = 262_144
START_TIMEOUT_S = 10.0


def socat_missing() -> str | None:
    """Why the socat route cannot run here, or None."""
    return None if shutil.which("socat") else "socat is not installed (apt-get install socat)"


@dataclass
class ForkingRelay(RunningBroker):
    """A relay that forks per connection: the children that ended count too."""

    def user_and_system_seconds(self) -> tuple[float, float]:
        user, system = super().user_and_system_seconds()
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            user += int(fields[13]) / CLOCK_TICKS  # cutime: reaped children's user time
            system += int(fields[14]) / CLOCK_TICKS  # cstime
        return user, system


@dataclass(frozen=True)
class RelayedKafka:
    kafka: RunningBroker  # its PLAINTEXT listener, reached directly
    relayed: RunningBroker  # the RELAY listener through socat; the relay's CPU is its own


@contextlib.contextmanager
def kafka_behind_socat() -> Iterator[RelayedKafka]:
    """Kafka 3.9 from the pinned jars with its RELAY listener behind socat, until the
    block ends."""
    artifacts.resolve("kafka")
    direct, relay, controller, socat_port = (free_port() for _ in range(4))
    settings = [
        f"listeners=PLAINTEXT://{LOOPBACK}:{direct},RELAY://{LOOPBACK}:{relay},"
        f"CONTROLLER://{LOOPBACK}:{controller}",
        f"advertised.listeners=PLAINTEXT://{LOOPBACK}:{direct},RELAY://{LOOPBACK}:{socat_port}",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,RELAY:PLAINTEXT",
        f"controller.quorum.voters=1@{LOOPBACK}:{controller}",
    ]
    with tempfile.TemporaryDirectory(prefix="bench-relay-kafka-") as directory:
        broker = KafkaProcess(Path(directory) / "kafka", settings, port=direct).start()
        try:
            assert broker.process is not None
            kafka = RunningBroker("kafka", broker.bootstrap, broker.process.pid, None)
            with running_socat(socat_port, relay) as socat:
                yield RelayedKafka(kafka, socat)
        finally:
            broker.stop()


@contextlib.contextmanager
def running_socat(listen_port: int, target_port: int) -> Iterator[ForkingRelay]:
    command = [
        "socat", "-b", str(SOCAT_BLOCK),
        f"TCP-LISTEN:{listen_port},bind={LOOPBACK},fork,reuseaddr,nodelay",
        f"TCP:{LOOPBACK}:{target_port},nodelay",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(LOOPBACK, listen_port, START_TIMEOUT_S)
        yield ForkingRelay("socat", f"{LOOPBACK}:{listen_port}", process.pid, None, process)
    finally:
        process.terminate()
        process.wait(START_TIMEOUT_S)
