"""End to end on Spark in local mode: capture -> kshim -> Spark apply, with the VENUS
consistency experiment (tests/sync/pipeline_scenario.py) run by this process's session.

The SQLite destination gets ``--once`` runs, as a scheduler would start them, and a DuckDB
destination one streaming query that lives through the kills; a destination started late
from ``T.full`` (bootstrap) converges too. tests/sync/test_spark_cluster.py runs the same
scenario on a standalone cluster. Skipped without the connector jars.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from kshim.testing import BrokerProcess
from spark_examples.apply.job import ApplyOptions, apply_error_message, start_apply
from spark_examples.apply.sink import next_offset
from spark_examples.change_format import encode_key, encode_value
from spark_examples.databases import open_database
from spark_examples.testing import REPOSITORY_ROOT, topic_end_offset, wait_until
from tests.sync.pipeline_scenario import (
    APPLY_TIMEOUT_S,
    TOPIC,
    Scenario,
    SessionApplier,
    apply_once,
    run_scenario,
)
from tests.sync.spark_marks import SPARK_PIPELINE

pytestmark = SPARK_PIPELINE


def test_sqlite_source_to_sqlite_and_duckdb_through_broker_and_capture_kills(
    spark: SparkSession, tmp_path: Path, registry: Path
) -> None:
    run_scenario(
        SessionApplier(spark),
        tmp_path,
        Scenario(
            source_url=f"sqlite:///{tmp_path}/source.db",
            destinations=[f"sqlite:///{tmp_path}/dest.db"],  # --once runs, as a scheduler would
            streamed=[f"duckdb:///{tmp_path}/dest.duckdb"],  # one query through every kill
            operations=6_000,
        ),
    )


def test_late_destination_bootstraps_from_the_full_view(
    spark: SparkSession, tmp_path: Path, registry: Path
) -> None:
    run_scenario(
        SessionApplier(spark),
        tmp_path,
        Scenario(
            source_url=f"sqlite:///{tmp_path}/source.db",
            destinations=[f"sqlite:///{tmp_path}/dest.db"],
            operations=1_500,
            kill_broker=False,
            kill_capture=False,
            late_destination=f"sqlite:///{tmp_path}/late.db",
            seed=11,
            per_second=150,
        ),
    )
    late = open_database(f"sqlite:///{tmp_path}/late.db")
    try:  # it only ever read the view
        assert late.execute("SELECT topic FROM kshim_apply_state") == [(TOPIC + ".full",)]
    finally:
        late.close()


def _a_bad_change(bootstrap: str, tmp_path: Path) -> tuple[str, str]:
    """A topic of three inserts whose second the destination's CHECK refuses; returns the
    topic and the destination's URL."""
    from confluent_kafka import Producer

    topic = f"apply-failure-{tmp_path.name}"
    columns = {"id": "integer", "name": "text"}
    producer = Producer({"bootstrap.servers": bootstrap})
    for offset, name in enumerate(["ok", "bad", "ok"]):
        row = {"id": offset, "name": name}
        producer.produce(topic, encode_value(offset, "insert", "t", columns, row),
                         encode_key("t", {"id": offset}))  # fmt: skip
    assert producer.flush(30) == 0
    dest = f"sqlite:///{tmp_path}/dest.db"
    database = open_database(dest)
    database.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT CHECK (name <> 'bad'))")
    database.close()
    return topic, dest


def _nothing_applied(dest: str, topic: str) -> None:
    database = open_database(dest)
    try:  # the good record before it was rolled back with it: nothing skipped, nothing half
        assert database.execute("SELECT count(*) FROM t") == [(0,)]
        assert next_offset(database, topic, 0) == 0
    finally:
        database.close()


def test_a_change_that_cannot_be_applied_stops_the_cli_job_naming_its_offset(
    shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic, dest = _a_bad_change(shared_broker.bootstrap, tmp_path)
    command = [
        sys.executable, "-m", "spark_examples.apply", "--bootstrap", shared_broker.bootstrap,
        "--topic", topic, "--dest", dest, "--checkpoint", str(tmp_path / "checkpoint"),
        "--once", "--max-retries", "1",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=APPLY_TIMEOUT_S,
                            check=False, cwd=REPOSITORY_ROOT)  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    expected = f"apply stopped: ApplyError: cannot apply topic {topic} partition 0 offset 1 key"
    assert expected in result.stderr
    assert "after 2 attempt(s)" in result.stderr
    _nothing_applied(dest, topic)


def test_a_streaming_query_stops_at_once_when_its_last_batch_cannot_be_applied(
    spark: SparkSession, shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    """The failed write is the last batch's (it is written while Spark waits for the next,
    apply/pipelined.py) and no next batch comes: the query must stop by itself, naming the
    record, as a foreachBatch that raised would have stopped it."""
    topic, dest = _a_bad_change(shared_broker.bootstrap, tmp_path)
    options = ApplyOptions(shared_broker.bootstrap, topic, dest, str(tmp_path / "checkpoint"),
                           max_retries=1)  # fmt: skip
    query = start_apply(spark, options)
    try:
        wait_until(lambda: not query.isActive, APPLY_TIMEOUT_S, "the query stopped")
    finally:
        query.stop()
    message = apply_error_message(query)
    assert message is not None
    assert message.startswith(f"ApplyError: cannot apply topic {topic} partition 0 offset 1 key")
    _nothing_applied(dest, topic)


def test_bootstrap_goes_on_when_the_view_compacts_past_its_position(
    spark: SparkSession, shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    """Every record below the reader's position gets superseded (the view's first live
    record moves past it). Nothing is lost, the newer records follow, and T.full's log start
    stays put, so the job, with failOnDataLoss=true as on T, goes on."""
    from confluent_kafka import Producer

    topic, columns = f"compacted-{tmp_path.name}", {"id": "integer", "name": "text"}
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})

    def write(changes: list[tuple[int, str]]) -> None:
        for row_id, name in changes:
            row = {"id": row_id, "name": name}
            producer.produce(topic, encode_value(0, "update", "t", columns, row),
                             encode_key("t", {"id": row_id}))  # fmt: skip
        assert producer.flush(30) == 0
        end = topic_end_offset(shared_broker.bootstrap, topic)
        wait_until(lambda: topic_end_offset(shared_broker.bootstrap, topic + ".full") >= end,
                   30, "the view caught up")  # fmt: skip

    dest, checkpoint = f"sqlite:///{tmp_path}/dest.db", tmp_path / "checkpoint"
    write([(1, "v1"), (2, "v1")])  # offsets 0, 1
    apply_once(spark, shared_broker.bootstrap, topic + ".full", dest, checkpoint)
    write([(1, "v2"), (1, "v3"), (2, "v2")])  # offsets 2, 3, 4: the view's first live is 3
    apply_once(spark, shared_broker.bootstrap, topic + ".full", dest, checkpoint)  # from 2
    database = open_database(dest)
    try:
        assert list(database.rows("t")) == [{"id": 1, "name": "v3"}, {"id": 2, "name": "v2"}]
        assert next_offset(database, topic + ".full", 0) == 5
    finally:
        database.close()
