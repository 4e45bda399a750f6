"""End to end on Spark with PostgreSQL: as source and destination, and across engines.

The experiment of tests/sync/pipeline_scenario.py at a smaller scale: a PostgreSQL source (capture
triggers in PL/pgSQL) into a PostgreSQL and a DuckDB destination at once, through a broker
kill and a capture kill. One scenario holds every engine pair the Spark runs add (a SQLite
source is test_pipeline_spark.py's; each engine's types are test_apply.py's, without Spark):
a second run of a few thousand paced changes would cost half a minute for no new path.
Skipped without the connector jars or without a PostgreSQL installation.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.sync.pipeline_scenario import Scenario, SessionApplier, run_scenario
from tests.sync.spark_marks import SPARK_PIPELINE

pytestmark = SPARK_PIPELINE
_names = itertools.count()


def another_database(postgres_server: str) -> str:
    """A second fresh database on the session's cluster (postgres_url gives one per test)."""
    import psycopg

    name = f"kshim_dest_{os.getpid()}_{next(_names)}"
    with psycopg.connect(postgres_server + "postgres", autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return postgres_server + name


@pytest.mark.usefixtures("registry")
def test_postgresql_source_to_postgresql_and_duckdb_through_broker_and_capture_kills(
    spark: SparkSession, tmp_path: Path, postgres_url: str, postgres_server: str
) -> None:
    run_scenario(
        SessionApplier(spark),
        tmp_path,
        Scenario(
            source_url=postgres_url,
            destinations=[another_database(postgres_server), f"duckdb:///{tmp_path}/dest.duckdb"],
            operations=3_000,
            seed=23,
            per_second=200,
        ),
    )
