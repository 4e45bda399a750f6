"""A local SparkSession wired to Spark's stock Kafka connector.

Spark 4.0's ``format("kafka")`` source and sink live outside pyspark, in four jars: the
connector (``spark-sql-kafka-0-10_2.13``), its token provider, kafka-clients and
commons-pool2. The session takes them from the first of:

1. ``$KSHIM_SPARK_JARS``, when it names a directory holding all four (a copy made by hand,
   for a machine without Maven; never commit the jars);
2. the ``spark`` set of ``kshim.jvm`` (``kshim/jvm/poms/spark.xml``), which Maven resolves
   into ``~/.cache/kshim/jvm`` once: ``python -m kshim.jvm fetch spark``. When Maven and Java
   are on PATH and the set is not cached yet, the session fetches it first (about a minute);
3. ``spark.jars.packages`` with the POM's coordinate, resolved by Spark's own Ivy from Maven
   Central (or ``$DEFAULT_ARTIFACT_REPOSITORY``): the way for a machine with network but no
   Maven.

The POM pins the connector at pyspark's own version (pyproject.toml pins pyspark to it;
tests/sync/test_spark_session.py checks both). kafka-clients stays on 3.9.x: Spark 4.0's
connector calls ``DescribeTopicsResult.all()``, which kafka-clients 4.x removed
(``NoSuchMethodError`` at the first read).
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
# The kshim.jvm artifact set holding the connector and the three jars it needs.
ARTIFACT_SET = "spark"
CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10_2.13"
FETCH_COMMAND = f"python -m kshim.jvm fetch {ARTIFACT_SET}"
# pyspark sets this in the Python process spark-submit starts: the JVM is already running,
# with the jars spark-submit was given (--jars, --packages), and ours would be ignored.
GATEWAY_VARIABLE = "PYSPARK_GATEWAY_PORT"

# One glob per jar, so a directory holding a 4.0.x patch release of the connector also works.
# kafka-clients is pinned to 3.x on purpose (see the module docstring).
CONNECTOR_JAR_PATTERNS: tuple[str, ...] = (
    "spark-sql-kafka-0-10_2.13-4.0.*.jar",
    "spark-token-provider-kafka-0-10_2.13-4.0.*.jar",
    "commons-pool2-*.jar",
    "kafka-clients-3.*.jar",
)

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


def directory_jars() -> list[str] | None:
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


def cached_set_jars() -> list[str] | None:
    """Returns the ``spark`` set's jars when ``kshim.jvm`` has them cached, else None."""
    # Imported here: docker/compose.yaml runs this module under spark-submit with only
    # spark_examples mounted, and there the JVM's jars come from spark-submit anyway.
    from kshim.jvm.artifacts import cached_jars

    jars = cached_jars(ARTIFACT_SET)
    return None if jars is None else [str(jar) for jar in jars]


def maven_can_fetch() -> bool:
    """Returns whether ``kshim.jvm`` can fetch the set here: Maven and Java on PATH."""
    from kshim.jvm.artifacts import tools_problem

    return tools_problem() is None


def connector_jars() -> list[str] | None:
    """Returns the connector's four jars, from ``$KSHIM_SPARK_JARS`` or else the ``kshim.jvm``
    cache, fetching the set with Maven first when Maven is here; None without either.

    Blocks for as long as Maven takes (a minute on a cold ``~/.m2``); raises
    ``kshim.jvm.artifacts.JvmArtifactsError`` (one line) when Maven fails.
    """
    jars = directory_jars() or cached_set_jars()
    if jars is not None or not maven_can_fetch():
        return jars
    from kshim.jvm.artifacts import resolve

    return [str(jar) for jar in resolve(ARTIFACT_SET)]


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
    """Returns why connector tests must skip, or None when a JVM and the jars are here (or
    Maven, which fetches them when the first session starts).

    Tests skip rather than fall back to ``spark.jars.packages``: on a machine without Maven
    that fallback would fail minutes later with an opaque Ivy error instead of this line.
    """
    if not java_available():
        return "no Java runtime (set JAVA_HOME or put java on PATH); Spark needs a JVM"
    if directory_jars() is not None or cached_set_jars() is not None or maven_can_fetch():
        return None
    from kshim.jvm.artifacts import tools_problem

    return (
        f"Spark's Kafka connector is not cached and {tools_problem()}: then run "
        f"`{FETCH_COMMAND}`, or point ${JARS_DIRECTORY_VARIABLE} at its four jars "
        f"({jars_directory_problem()})"
    )


def maven_coordinate() -> str:
    """Returns the connector's Maven coordinate, ``group:artifact:version``, from the POM of
    the ``spark`` set (the version pyspark is pinned to)."""
    from kshim.jvm.artifacts import artifact_set

    [coordinate] = [
        coordinate
        for coordinate in artifact_set(ARTIFACT_SET).coordinates()
        if coordinate.split(":")[1] == CONNECTOR_ARTIFACT
    ]
    return coordinate


def connector_settings() -> dict[str, str]:
    """Returns the Spark settings that put the connector on a new JVM's classpath:
    ``spark.jars`` (the four jars of ``connector_jars``), else ``spark.jars.packages``.

    Blocks and raises as ``connector_jars`` does.
    """
    jars = connector_jars()
    if jars is not None:
        return {"spark.jars": ",".join(jars)}
    return {"spark.jars.packages": maven_coordinate()}


def kafka_spark_session(app_name: str, master: str = "local[2]") -> SparkSession:
    """Returns a local SparkSession that can read and write ``format("kafka")``.

    Takes the connector's jars as the module docstring says (``connector_settings``; may
    first fetch them with Maven, and raises ``JvmArtifactsError`` if that fails), except
    under spark-submit, whose JVM already has the jars it was given. The driver binds to
    loopback and the UI is off, so sessions start offline and side by side. Jars are only
    read when the JVM starts: if a session already exists in this process, ``getOrCreate``
    returns it unchanged, so stop it first. Call from one thread; the SparkSession is then
    usable from any thread.
    """
    # pyspark is heavy: imported only when a session is built, not to ask for a skip reason.
    from pyspark.sql import SparkSession

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
    if GATEWAY_VARIABLE not in os.environ:
        for key, value in connector_settings().items():
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    # Startup INFO lines are already printed by now; this quiets everything after them.
    session.sparkContext.setLogLevel("ERROR")
    return session
