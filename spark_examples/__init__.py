"""Database synchronisation through kshim, with the apply side on Spark.

After the VENUS paper's capture / transmit / apply pipeline: changes of a source database are
captured by triggers into a change log, shipped in Kafka transactions to one kshim topic,
and applied exactly once to destination databases of other kinds by a Spark Structured
Streaming job on Spark's stock Kafka connector; a new destination bootstraps from the
topic's full-data view ``T.full``.

- capture/: the capture from the source database, its triggers and its review hook;
- apply/: the Spark apply job and its exactly-once sink;
- verify.py: the consistency checker; demo.py: the one-command demo;
- change_format.py: one change as one Kafka record (shared by capture and apply);
- debezium_format.py: Debezium's change events (Kafka Connect's JsonConverter) read as the
  same changes, for ``apply --format debezium``;
- databases/: one interface over SQLite, PostgreSQL and DuckDB (shared by all of the above);
- kafka_security.py: the Kafka client settings of a broker with TLS or SASL, for capture and
  apply (``--kafka-config``, ``--kafka-option``);
- spark_session.py: a local SparkSession wired to the Kafka connector;
- cluster.py: a Spark standalone cluster (a master, workers) on this machine, from pyspark's
  own distribution, for spark-submit;
- testing.py: a random workload, the capture as a child process, and probes, for the demo,
  the tests and the benchmark.

Commands: ``python -m spark_examples.capture``, ``.apply``, ``.verify``, ``.demo`` and
``.cluster``.
"""
