"""Fixtures of the Kafka Connect tests: a PostgreSQL cluster with logical decoding, a broker.

``logical_postgres`` (session) is a private cluster (tests/postgres_cluster.py) with
``wal_level=logical``, as Debezium's pgoutput needs; ``source_database`` (module) a fresh
database on it; ``connect_broker`` (module) a kshim broker of the module's own.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.testing import BrokerProcess
from tests.postgres_cluster import postgres_cluster, postgres_unavailable_reason

LOGICAL_DECODING = {"wal_level": "logical", "max_replication_slots": "10", "max_wal_senders": "10"}
_database_numbers = itertools.count()


@pytest.fixture(scope="session")
def logical_postgres() -> Iterator[str]:
    """Base URL (``postgresql://kshim@127.0.0.1:PORT/``) of a cluster with logical decoding."""
    reason = postgres_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with postgres_cluster(LOGICAL_DECODING) as url:
        yield url


@pytest.fixture(scope="module")
def source_database(logical_postgres: str) -> str:
    """URL of a new empty database on the logical-decoding cluster."""
    import psycopg

    name = f"kshim_connect_{os.getpid()}_{next(_database_numbers)}"
    with psycopg.connect(logical_postgres + "postgres", autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return logical_postgres + name


@pytest.fixture(scope="module")
def connect_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A kshim broker for one test module."""
    broker = BrokerProcess(Path(tmp_path_factory.mktemp("connect-broker")) / "data").start()
    yield broker
    broker.stop()
