"""A throwaway PostgreSQL cluster for the database synchronisation tests.

``postgres_server`` (session) starts a private cluster (spark_examples/postgres_cluster.py: a
temporary directory, a free loopback port, trust authentication) and yields
``postgresql://kshim@127.0.0.1:PORT/``. Without an ``initdb`` under
/usr/lib/postgresql/*/bin the fixture skips with the reason.

``postgres_url`` (function) creates a fresh database per test and yields its URL.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kshim.testing import BrokerProcess
from spark_examples.apply.sink import ensure_state_table
from spark_examples.capture import review as capture_review
from spark_examples.databases import Database, open_database
from spark_examples.postgres_cluster import ROLE, postgres_cluster, postgres_unavailable_reason
from spark_examples.testing import registry_environment
from tests.sync.capture_helpers import create_items

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REVIEW_HOOK = f"{capture_review.REVIEW_HOOK_SETTING}={capture_review.REVIEW_HOOK}"
_database_numbers = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Base URL of a private PostgreSQL cluster, stopped at the end of the session."""
    reason = postgres_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with postgres_cluster() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def source_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A capture source database URL, once per source engine."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/source.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def source(source_url: str) -> Iterator[Database]:
    """The source database, with an ``items`` table (capture_helpers.ITEM_COLUMNS)."""
    db = open_database(source_url)
    create_items(db)
    yield db
    db.close()


@pytest.fixture
def review_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BrokerProcess]:
    """A broker asking the capture's review hook; the registry is private to the test.

    ``KSHIM_CAPTURE_REGISTRY`` is set before the broker starts (it inherits it) and stays
    set for the test, so captures run by the test register where the hook looks.
    """
    monkeypatch.setenv(capture_review.REGISTRY_VARIABLE, str(tmp_path / "registry"))
    settings = [REVIEW_HOOK, "kshim.review.retry.ms=300", "kshim.review.check.interval.ms=200"]
    broker = BrokerProcess(tmp_path / "broker", settings=settings).start()
    yield broker
    broker.stop()


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """URL of a new empty database owned by ``kshim`` on the session cluster."""
    import psycopg

    name = f"kshim_test_{os.getpid()}_{next(_database_numbers)}"
    with psycopg.connect(postgres_server + "postgres", autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name} OWNER {ROLE}")
    yield postgres_server + name


@pytest.fixture(params=["sqlite", "duckdb", "postgresql"])
def any_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """An empty destination with the apply state table, once per engine."""
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
    else:
        url = f"{request.param}:///{tmp_path}/dest.{request.param}"
    database = open_database(url)
    ensure_state_table(database)
    yield database
    database.close()


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """One SparkSession with the Kafka connector per test module (spark_marks skips the
    modules that need it when the connector's jars are absent)."""
    from spark_examples.spark_session import kafka_spark_session

    session = kafka_spark_session("kshim-sync-pipeline")
    yield session
    session.stop()


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The capture registry, in the environment the broker and the capture inherit."""
    for name, value in registry_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path / "capture-registry"
