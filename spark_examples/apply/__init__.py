"""The apply side: a kshim topic into a destination database, exactly once, on Spark.

After the VENUS paper's lower adapter: Spark's stock Kafka connector reads the capture's
topic ``T`` (or the full-data view ``T.full`` to bootstrap a new destination) with
read_committed, and every micro-batch is applied in one destination transaction together
with the next offset to apply, so replays are skipped.

- job.py: the Structured Streaming query and the ``python -m spark_examples.apply`` command;
- sink.py: the exactly-once sink, without Spark: ordering, skipping, retries;
- bulk.py: the bulk statements of the sink's fast path (arrays per column on PostgreSQL and
  DuckDB, multi-row VALUES on SQLite);
- consumer.py: the same sink fed by a plain Kafka consumer, without Spark;
- spark_submit.py: the same job as a file for ``spark-submit``;
- __main__.py: ``python -m spark_examples.apply``.
"""
