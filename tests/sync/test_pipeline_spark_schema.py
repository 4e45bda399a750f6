"""Schema changes through the Spark apply job: test_capture_schema.py's stages, applied by
``--once`` runs of the job into SQLite and DuckDB, end equal to the source, schemas included.
Skipped without the connector jars."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from kshim.testing import BrokerProcess
from spark_examples.capture.shipper import run_capture
from spark_examples.databases import open_database
from spark_examples.verify import compare_tables
from tests.sync.capture_helpers import create_items
from tests.sync.pipeline_scenario import apply_once
from tests.sync.spark_marks import SPARK_PIPELINE
from tests.sync.test_capture_schema import TOPIC, evolve_source

pytestmark = SPARK_PIPELINE


def test_schema_changes_through_the_spark_job(
    spark: SparkSession, review_broker: BrokerProcess, tmp_path: Path
) -> None:
    source_url = f"sqlite:///{tmp_path}/source.db"
    dests = [f"sqlite:///{tmp_path}/dest.db", f"duckdb:///{tmp_path}/dest.duckdb"]
    stage = [0]

    def sync(tables: list[str]) -> None:
        run_capture(source_url, ["*"], review_broker.bootstrap, TOPIC, once=True)
        stage[0] += 1
        if stage[0] % 2:  # every other stage: Spark batches holding more than one change
            return
        for index, dest in enumerate(dests):
            apply_once(spark, review_broker.bootstrap, TOPIC, dest, tmp_path / f"cp{index}")
            assert compare_tables(source_url, dest, tables) == [], dest

    source = open_database(source_url)
    try:
        create_items(source)
        sync(["items"])
        evolve_source(source, sync)
        if stage[0] % 2:
            stage[0] += 1
            sync(["items", "orders"])
    finally:
        source.close()
