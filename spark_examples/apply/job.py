"""The apply job: a Spark Structured Streaming query from a kshim topic into a database.

    python -m spark_examples.apply --bootstrap HOST:PORT --topic T --dest URL --checkpoint DIR \
        [--format kshim|debezium] [--kafka-config client.properties] [--kafka-option KEY=VALUE ...]

The source is Spark's stock ``format("kafka")`` with standard options only (a broker that
wants TLS or SASL gets the Kafka client settings of --kafka-config and --kafka-option as
``kafka.<name>`` options, spark_examples/kafka_security.py); nothing but the topic name is
kshim-specific, so the same job reads ``T`` (changes) or ``T.full`` (the
full-data view: a new destination's snapshot, then every change). Each micro-batch goes to
``sink.apply_batch``: one destination transaction holding the rows and the next offset,
which makes the sink exactly-once (see spark_examples/README.md), written while Spark reads
the next batch (pipelined.py); a started job reads from the destination's next offsets.
``--once`` drains what is committed now (trigger availableNow) and exits; otherwise the
query runs until stopped. The exit status is non-zero when a record could not be applied.
``python -m spark_examples.apply`` runs ``main`` (__main__.py), and so does spark_submit.py
under ``spark-submit``.

``--format debezium`` reads Debezium's change events (Kafka Connect's JsonConverter, with or
without schemas: spark_examples/debezium_format.py) instead of the capture's records;
``--topic`` then names Debezium's topics, one per table, comma-separated (each may be its
full-data view ``prefix.schema.table.full``), and the same sink applies them.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kshim.client.security import ClientSecurity
from kshim.client.topic_admin import TopicAdmin
from spark_examples.apply.collector import collection_paused
from spark_examples.apply.pipelined import ApplyQuery, PipelinedWrites, Write
from spark_examples.apply.progress import default_group, report_progress
from spark_examples.apply.sink import (
    DEFAULT_MAX_RETRIES,
    FORMATS,
    ApplyError,
    SourceRecord,
    apply_batch,
    ensure_state_table,
    stored_offsets,
)
from spark_examples.databases import open_database
from spark_examples.kafka_security import add_kafka_arguments, kafka_security, spark_kafka_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# A micro-batch pays about 0.15 to 0.25 s of Spark's own work whatever its size (query
# progress, durationMs: latestOffset, walCommit, commitOffsets, queryPlanning), a tenth of a
# batch of 20,000 changes on 2 cores; batches of 60,000 measured no less CPU per change (the
# driver's Python and the JVM cost per change, about 35 and 25 ms per 1,000), so the bound
# stays where the driver holds little.
DEFAULT_MAX_OFFSETS_PER_TRIGGER = 20_000
DEFAULT_TRIGGER_INTERVAL = "1 second"
# The Java consumer's poll inside each Spark task; generous, as on a loaded 2-core machine.
POLL_TIMEOUT_MS = "20000"
# Bytes per fetch: a micro-batch of 20,000 changes is about 5 MB, which the consumer's
# defaults (1 MiB per partition) split into several round trips per batch.
MAX_PARTITION_FETCH_BYTES = str(16 << 20)
EARLIEST = -2  # in Spark's startingOffsets JSON
RUN_PREFIX = "run-"  # a run's own checkpoint directory (run_checkpoint)


@dataclass(frozen=True, slots=True)
class ApplyOptions:
    """One apply query: where it reads, where it writes, and how it is triggered."""

    bootstrap: str
    topic: str
    dest: str
    checkpoint: str
    once: bool = False
    max_retries: int = DEFAULT_MAX_RETRIES
    max_offsets_per_trigger: int = DEFAULT_MAX_OFFSETS_PER_TRIGGER
    trigger_interval: str = DEFAULT_TRIGGER_INTERVAL
    security: ClientSecurity | None = None  # None: PLAINTEXT
    record_format: str = "kshim"  # a name in sink.FORMATS: "kshim" or "debezium"
    # The consumer group the job's progress is committed to (progress.py); "" commits none.
    group: str = ""


def read_changes(spark: SparkSession, options: ApplyOptions, start: str = "earliest") -> DataFrame:
    """The streaming source: standard connector options only.

    read_committed hides half messages until the capture commits them and never shows
    aborted ones. failOnDataLoss stays true on T and T.full alike: on T a missing offset is
    a lost change, and an exactly-once sink must stop rather than apply around it; T.full
    keeps its log start where the view was built from (as a compacted Kafka topic does), so
    superseded records never look like lost data. TLS and SASL settings are the Java
    client's, as ``kafka.<name>`` options.
    """
    security = {} if options.security is None else spark_kafka_options(options.security)
    return (
        spark.readStream.format("kafka")
        .options(**security)
        .option("kafka.bootstrap.servers", options.bootstrap)
        .option("subscribe", options.topic)
        .option("startingOffsets", start)
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "true")
        .option("maxOffsetsPerTrigger", str(options.max_offsets_per_trigger))
        .option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
        .option("kafka.max.partition.fetch.bytes", MAX_PARTITION_FETCH_BYTES)
        .load()
        .select("topic", "partition", "offset", "key", "value")
    )


def batch_records(frame: DataFrame) -> list[SourceRecord]:
    """The micro-batch's records, moved to the driver as Arrow columns.

    ``toArrow`` (Spark 4.0, pyarrow on the driver only: executors build the Arrow batches in
    the JVM) instead of ``collect``: ``collect`` pickles every row in the JVM and unpickles
    it into a ``Row`` in Python. On 100,000 records of about 120 bytes, measured side by side
    in one session, Arrow took 0.8 to 1.0 s of JVM CPU and 0.07 s of the driver's Python
    against 1.4 and 0.65 s for ``collect`` (spark_examples/README.md, "Where the Spark job's
    time goes"). Columns in read_changes' select order; key and value arrive as bytes.
    """
    table = frame.toArrow()
    with collection_paused():  # several objects a change: collector.py
        topics, partitions, offsets, keys, values = (
            table.column(index).to_pylist() for index in range(5)
        )
        return [
            SourceRecord(topic=topic, partition=partition, offset=offset, key=key, value=value)
            for topic, partition, offset, key, value in zip(
                topics, partitions, offsets, keys, values, strict=True
            )
        ]


def batch_write(
    dest: str,
    max_retries: int,
    report: Callable[[str], None] | None = None,
    record_format: str = "kshim",
    progress: Callable[[list[SourceRecord]], object] | None = None,
) -> Write:
    """Returns the write of one micro-batch's records: order by offset, apply in one
    transaction.

    The writes stay on the driver: executors' Python workers would need the sink's packages
    on every worker, and a one-partition topic gives one task per batch anyway, so they
    would do the same work in the same order, one hop further. The destination is opened
    per batch, so other processes (verify) can open it between. ``record_format`` names the
    records' format in ``sink.FORMATS``; ``progress`` hears each batch's records once the
    destination committed them (progress.py).
    """
    decoder = FORMATS[record_format]

    def write(records: list[SourceRecord], batch_id: int) -> None:
        database = open_database(dest)
        try:
            result = apply_batch(database, records, max_retries=max_retries, decoder=decoder)
        finally:
            database.close()
        if progress is not None:
            progress(records)
        if report is not None:
            last = max(record.offset for record in records)
            report(
                f"batch {batch_id}: {result.applied} applied, {result.skipped} already applied,"
                f" up to offset {last} -> {dest}"
            )

    return write


def foreach_batch(writes: PipelinedWrites) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function: the batch to the driver, its write to ``writes``.

    Batches are bounded by maxOffsetsPerTrigger, so moving them to the driver is safe
    (batch_records: one job, where ``toLocalIterator`` serves the batch partition by
    partition through a second socket, about 1.4x slower on a batch of 40,000 records).
    """

    def read_then_write(frame: DataFrame, batch_id: int) -> None:
        records = batch_records(frame)
        if records:
            writes.submit(records, batch_id)

    return read_then_write


def starting_offsets(options: ApplyOptions) -> str:
    """Where the query starts: the destination's next offset of each partition it holds
    (kshim_apply_state), earliest for a partition it has none of; ``earliest`` when it
    holds none. Spark's checkpoint is not consulted: it may have recorded a batch whose
    write was still in flight (pipelined.py). Spark wants every partition of the topics
    named once one is, so the broker is asked for their partitions (AdminError when one
    does not exist)."""
    topics = options.topic.split(",")
    database = open_database(options.dest)
    try:
        ensure_state_table(database)
        held = stored_offsets(database, topics)
    finally:
        database.close()
    if not held:
        return "earliest"
    with TopicAdmin.connected(options.bootstrap, security=options.security) as admin:
        counts = admin.partition_counts(topics)
    offsets = {
        topic: {str(partition): held.get((topic, partition), EARLIEST)
                for partition in range(counts[topic])}
        for topic in topics
    }  # fmt: skip
    return json.dumps(offsets)


def run_checkpoint(checkpoint: str) -> str:
    """A checkpoint directory of this run's own under ``checkpoint`` (a local path or a
    Hadoop URI): Spark needs one, and a restarted job must not resume from an earlier
    run's (starting_offsets). Earlier runs' directories under a local path are removed."""
    if "://" not in checkpoint or checkpoint.startswith("file://"):
        parent = Path(checkpoint.removeprefix("file://"))
        for earlier in parent.glob(f"{RUN_PREFIX}*"):
            shutil.rmtree(earlier, ignore_errors=True)
    return f"{checkpoint.rstrip('/')}/{RUN_PREFIX}{uuid.uuid4().hex[:12]}"


def start_apply(
    spark: SparkSession, options: ApplyOptions, report: Callable[[str], None] | None = None
) -> ApplyQuery:
    """Starts the query where the destination left off and returns it (not awaited)."""
    start = starting_offsets(options)
    write = batch_write(
        options.dest, options.max_retries, report, options.record_format, _progress(options)
    )
    writes = PipelinedWrites(write)
    writer = (
        read_changes(spark, options, start)
        .writeStream.foreachBatch(foreach_batch(writes))
        .option("checkpointLocation", run_checkpoint(options.checkpoint))
        .queryName(f"kshim-apply {options.topic} -> {options.dest}")  # unique per session
    )
    if options.once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=options.trigger_interval)
    return ApplyQuery(writer.start(), writes)


def _progress(options: ApplyOptions) -> Callable[[list[SourceRecord]], object] | None:
    if not options.group:
        return None
    return lambda records: report_progress(
        options.bootstrap, options.group, records, options.security
    )


def apply_error_message(query: ApplyQuery) -> str | None:
    """The failure of a stopped query: the ApplyError line when there is one, else all of it."""
    error = query.exception()
    if error is None:
        return None
    if isinstance(error, ApplyError):  # the last write's, raised after Spark's query ended
        return f"{ApplyError.__name__}: {error}"
    text = str(error)
    # The Python traceback inside Spark's message ends with "module.ApplyError: message".
    found = re.search(rf"\b{ApplyError.__name__}: .*", text)
    return found.group(0) if found else text


def run(spark: SparkSession, options: ApplyOptions) -> int:
    """Runs the query until it ends (--once) or is interrupted; returns the exit status:
    non-zero when a write failed, the one in flight when interrupted included."""
    query = start_apply(spark, options, report=print)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()  # waits for the write in flight, whose failure is read below
    except Exception:  # the failure is read from the query below
        pass
    message = apply_error_message(query)
    if message is not None:
        print(f"apply stopped: {message}", file=sys.stderr)
        return 1
    return 0


def parse_arguments(argv: Sequence[str] | None = None) -> ApplyOptions:
    """The options of the command line (argparse exits on a usage error, unusable Kafka
    client settings included)."""
    parser = argparse.ArgumentParser(
        prog="python -m spark_examples.apply", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker")
    parser.add_argument(
        "--topic",
        required=True,
        help="T for changes, T.full to bootstrap; with --format debezium, Debezium's topics "
        "(one per table, comma-separated)",
    )
    parser.add_argument(
        "--format",
        choices=sorted(FORMATS),
        default="kshim",
        help="the records' format: kshim's capture (default) or Debezium's change events",
    )
    parser.add_argument("--dest", required=True, help="destination database URL")
    parser.add_argument(
        "--checkpoint",
        required=True,
        help="Spark's checkpoint directory: each run checkpoints under it in a directory of "
        "its own, and resumes where the destination left off",
    )
    parser.add_argument("--once", action="store_true", help="drain what is there, then exit")
    parser.add_argument("--max-retries", type=int, default=DEFAULT_MAX_RETRIES)
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, default=DEFAULT_MAX_OFFSETS_PER_TRIGGER
    )
    parser.add_argument("--trigger-interval", default=DEFAULT_TRIGGER_INTERVAL)
    parser.add_argument(
        "--group-id",
        help="consumer group the progress is committed to, so the broker reports the lag "
        "(default: kshim-apply- and a digest of --dest; '' for none)",
    )
    add_kafka_arguments(parser)
    arguments = parser.parse_args(argv)
    return ApplyOptions(
        bootstrap=arguments.bootstrap,
        topic=arguments.topic,
        dest=arguments.dest,
        checkpoint=arguments.checkpoint,
        once=arguments.once,
        max_retries=arguments.max_retries,
        max_offsets_per_trigger=arguments.max_offsets_per_trigger,
        trigger_interval=arguments.trigger_interval,
        security=kafka_security(parser, arguments.kafka_config, arguments.kafka_option),
        record_format=arguments.format,
        group=default_group(arguments.dest) if arguments.group_id is None else arguments.group_id,
    )


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    """Entry point; builds a local session unless given one (spark-submit passes its own)."""
    options = parse_arguments(argv)
    if spark is None:
        from spark_examples.connector_check import require_spark_connector
        from spark_examples.spark_session import kafka_spark_session  # pyspark is slow to load

        require_spark_connector("apply")
        spark = kafka_spark_session(f"kshim-apply-{options.topic}")
    try:
        return run(spark, options)
    finally:
        spark.stop()
