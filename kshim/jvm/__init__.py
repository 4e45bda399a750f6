"""The JVM programs kshim is compared with and driven by, from Maven Central.

Apache Kafka (the reference broker of the compatibility suite and the benchmarks), Spark's
stock Kafka connector and a Kafka Connect worker with Debezium are pinned in one POM each
(``poms/``), resolved by Maven into a cache under ``~/.cache/kshim/jvm`` and never
committed (``artifacts``); ``kafka_server`` runs the Kafka of those jars as a single-node
KRaft broker. ``python -m kshim.jvm`` is the command line of both. Nothing here is imported
by the broker itself.
"""
