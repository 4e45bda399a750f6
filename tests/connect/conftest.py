"""Fixtures of the Kafka Connect tests: a PostgreSQL cluster with logical decoding, and the
broker each module runs against, kshim or Apache Kafka.

``connect_broker`` (module) is parametrised over BROKERS, so that every Connect test runs
with the same assertions on kshim and on the reference: a kshim broker of the module's own,
or the session's Apache Kafka (``session_kafka``: Kafka 3.9 from kshim.jvm's pinned jars,
started once, skipped with the reason without Java or its jars). Both are a
``BrokerProcess`` (kshim.testing), which a test may kill and start again on the same port
and data. ``logical_postgres`` (session) is a private cluster (spark_examples/postgres_cluster.py)
with ``wal_level=logical``, as Debezium's pgoutput needs; ``source_database`` (module, so one
per broker) a fresh database on it, dropped at the end with its replication slots: a slot's
name is the whole cluster's, and the next broker's run of the module creates it again.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kshim.jvm.artifacts import JvmArtifactsError, resolve, unavailable_reason
from kshim.testing import BrokerProcess, KafkaProcess
from spark_examples.postgres_cluster import postgres_cluster, postgres_unavailable_reason

if TYPE_CHECKING:
    import psycopg

LOGICAL_DECODING = {"wal_level": "logical", "max_replication_slots": "10", "max_wal_senders": "10"}
KSHIM, KAFKA = "kshim", "kafka"
BROKERS = (KSHIM, KAFKA)
KAFKA_JARS = "kafka"  # kshim/jvm/poms/kafka.xml: Apache Kafka 3.9, the reference
# A stopped worker's walsender ends when it sees its connection closed; its slot stays
# "active" (and cannot be dropped) until then.
SLOT_RELEASE_TIMEOUT_S = 30.0
_database_numbers = itertools.count()


@pytest.fixture(scope="session")
def logical_postgres() -> Iterator[str]:
    """Base URL (``postgresql://kshim@127.0.0.1:PORT/``) of a cluster with logical decoding."""
    reason = postgres_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with postgres_cluster(LOGICAL_DECODING) as url:
        yield url


@pytest.fixture(scope="session")
def session_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaProcess]:
    """Apache Kafka for the whole session, its jars fetched first (so that its start timeout
    does not include Maven)."""
    reason = unavailable_reason(KAFKA_JARS)
    if reason is not None:
        pytest.skip(f"no Apache Kafka to compare with: {reason}")
    try:
        resolve(KAFKA_JARS)
    except JvmArtifactsError as error:
        pytest.skip(f"no Apache Kafka to compare with: {error}")
    # A group's first rebalance at once, as Kafka's own test harness sets it, rather than after
    # the 3 s that production defaults give members to arrive: Connect's workers join their
    # group at every start and restart, and the verdicts do not depend on the wait.
    kafka = KafkaProcess(
        Path(tmp_path_factory.mktemp("connect-kafka")) / "data",
        ["group.initial.rebalance.delay.ms=0"],
        jars=KAFKA_JARS,
    )
    kafka.start()
    yield kafka
    kafka.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``kshim_only`` (a kshim extension, such as T.full) are not collected for
    Apache Kafka, which has nothing of the kind to test: deselected, not skipped."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_kafka = callspec is not None and callspec.params.get("connect_broker") == KAFKA
        if on_kafka and item.get_closest_marker("kshim_only") is not None:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="module", params=BROKERS)
def connect_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """The module's broker: a kshim broker of its own, or the session's Apache Kafka (which
    each module leaves running; its topics and groups carry the module's names)."""
    if request.param == KAFKA:
        kafka: KafkaProcess = request.getfixturevalue("session_kafka")
        yield kafka
        return
    data_dir = Path(tmp_path_factory.mktemp("connect-broker")) / "data"
    # Metrics off: a broker kept for the session would hold the default metrics address.
    broker = BrokerProcess(data_dir, ["kshim.metrics.listen="]).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def source_database(logical_postgres: str, connect_broker: BrokerProcess) -> Iterator[str]:
    """URL of a new empty database on the logical-decoding cluster, one per module and
    broker; dropped, with its replication slots, once the module's workers are stopped."""
    import psycopg

    name = f"kshim_connect_{os.getpid()}_{next(_database_numbers)}"
    with psycopg.connect(logical_postgres + "postgres", autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    yield logical_postgres + name
    with psycopg.connect(logical_postgres + "postgres", autocommit=True) as connection:
        _drop_replication_slots(connection, name)
        # FORCE (PostgreSQL 13): the test's own connections may linger in a pool.
        connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _drop_replication_slots(connection: psycopg.Connection[Any], database: str) -> None:
    """Drops the slots of ``database``, waiting (bounded) for their walsenders to end."""
    query = "SELECT slot_name, active_pid FROM pg_replication_slots WHERE database = %s"
    deadline = time.monotonic() + SLOT_RELEASE_TIMEOUT_S
    while True:
        slots = connection.execute(query, (database,)).fetchall()
        for slot, active_pid in slots:
            if active_pid is None:
                connection.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        if all(active_pid is None for _, active_pid in slots):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"replication slots of {database} still in use: {slots}")
        time.sleep(0.2)
