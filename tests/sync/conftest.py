"""A throwaway PostgreSQL cluster for the database synchronisation tests.

``postgres_server`` (session) runs ``initdb`` in a temporary directory and starts the
cluster on a free loopback port with trust authentication and its unix socket inside that
directory, so it touches nothing system-wide; it yields ``postgresql://kshim@127.0.0.1:PORT/``.
Running as root, the cluster runs as user ``postgres`` (PostgreSQL refuses root) through
``runuser -u postgres --`` in a directory chowned to it. Without an ``initdb`` under
/usr/lib/postgresql/*/bin the fixture skips with the reason.

``postgres_url`` (function) creates a fresh database per test and yields its URL.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kshim.testing import BrokerProcess, free_port
from spark_examples.capture import review as capture_review
from spark_examples.databases import Database, open_database
from spark_examples.testing import registry_environment
from tests.sync.capture_helpers import create_items

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROLE = "kshim"
REVIEW_HOOK = f"{capture_review.REVIEW_HOOK_SETTING}={capture_review.REVIEW_HOOK}"
_database_numbers = itertools.count()


def _postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _as_cluster_user(command: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


def _run(command: list[str]) -> None:
    result = subprocess.run(
        _as_cluster_user(command), capture_output=True, text=True, timeout=120, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"{command[0]} failed: {result.stdout}\n{result.stderr}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Base URL of a private PostgreSQL cluster, stopped at the end of the session."""
    binaries = _postgres_bin()
    if binaries is None:
        pytest.skip("PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin)")
    root = Path(tempfile.mkdtemp(prefix="kshim-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data = root / "data"
    port = free_port()
    _run([str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"])
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    _run([str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"),
          "-w", "-t", "60", "start"])  # fmt: skip
    try:
        _create_role(port)
        yield f"postgresql://{ROLE}@127.0.0.1:{port}/"
    finally:
        _run([str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)


def _create_role(port: int) -> None:
    import psycopg

    with psycopg.connect(
        f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True
    ) as connection:
        connection.execute(f"CREATE ROLE {ROLE} LOGIN SUPERUSER")


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
