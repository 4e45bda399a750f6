"""Entry file for ``spark-submit``, which runs a .py file rather than a module.

    spark-submit --master spark://HOST:7077 \
        --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0 \
        spark_examples/apply/spark_submit.py --bootstrap HOST:PORT --topic T --dest URL \
        --checkpoint DIR

The session comes from spark-submit (master, packages, resources), not from
``spark_session.kafka_spark_session``, whose local master would override ``--master``.
"""

from __future__ import annotations

import os
import sys

# Run as a file, Python puts spark_examples/apply/ itself on sys.path; the directory holding
# the spark_examples package is needed to import it (in cluster deploy mode, ship the
# package with --py-files instead).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pyspark.sql import SparkSession

from spark_examples.apply.job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], SparkSession.builder.appName("kshim-apply").getOrCreate()))
