"""The compose file's Spark job: write rows to kshim with Spark's Kafka sink, read them back.

Runs under spark-submit in the official Spark image, with the connector from --packages;
the session comes from spark_examples.spark_session, mounted next to this file. Exits
non-zero when what Spark reads back differs from what it wrote.
"""

from __future__ import annotations

import os
import sys
import uuid

from spark_examples.spark_session import kafka_spark_session

ROWS = 100


def main() -> int:
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP", "kshim:9092")
    topic = f"compose-roundtrip-{uuid.uuid4().hex[:8]}"
    spark = kafka_spark_session("kshim-compose-roundtrip")
    written = [(f"key-{index}", f"value-{index}") for index in range(ROWS)]
    (
        spark.createDataFrame(written, "key STRING, value STRING")
        .coalesce(1)  # one producer, so Kafka order is row order
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )
    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .selectExpr("offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
        .orderBy("offset")
        .collect()
    )
    read = [(row["key"], row["value"]) for row in rows]
    spark.stop()
    if read != written or [row["offset"] for row in rows] != list(range(ROWS)):
        print(f"MISMATCH: wrote {ROWS} rows to {topic}, read back {len(read)}", file=sys.stderr)
        return 1
    print(f"OK: {ROWS} rows written to and read back from {topic} on {bootstrap}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
