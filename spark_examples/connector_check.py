"""Whether a local Spark can load its Kafka connector here, asked before Spark starts.

Without the connector's jars, ``kafka_spark_session`` fails only inside the JVM (Ivy's
"module not found", then pyspark's ``JAVA_GATEWAY_EXITED``) or in Maven, after a demo has
already started its broker and capture. Commands that build that session call
``require_spark_connector`` first, which gets the jars or says in one line what to run, and
exits.

It decides as ``kafka_spark_session`` does (spark_session.py). The jars in
``$KSHIM_SPARK_JARS``, when all four are there, or the ``spark`` set already in the
``kshim.jvm`` cache need nothing else. Where Maven and Java are on PATH, the set is fetched
now (``python -m kshim.jvm fetch spark``), and Maven's failure is the answer. Without Maven,
Spark resolves ``spark.jars.packages`` with Ivy, which looks in the local Maven repository
(``~/.m2/repository``) and its own cache (``~/.ivy2.5.2/cache``) before the network, so a
connector already there counts; failing that, the repository Spark would ask
(``$DEFAULT_ARTIFACT_REPOSITORY``, as in Spark's ``MavenUtils.createRepoResolvers``, else
Maven Central) must answer a HEAD request for the connector's POM within
``MAVEN_PROBE_TIMEOUT_S``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from kshim.jvm.artifacts import JvmArtifactsError, resolve, set_directory
from spark_examples.spark_session import (
    ARTIFACT_SET,
    FETCH_COMMAND,
    JARS_DIRECTORY_VARIABLE,
    cached_set_jars,
    directory_jars,
    jars_directory_problem,
    java_available,
    maven_can_fetch,
    maven_coordinate,
)

# Spark's own variable for the repository it resolves packages from (read in MavenUtils).
REPOSITORY_VARIABLE = "DEFAULT_ARTIFACT_REPOSITORY"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
# Bounds the whole probe, name resolution included (urllib's timeout covers only sockets).
MAVEN_PROBE_TIMEOUT_S = 3.0
# Spark 4.0's Ivy home when spark.jars.ivy is unset: user.home + "/.ivy2.5.2" in MavenUtils.
IVY_HOME = Path(".ivy2.5.2")
JAVA_MISSING = (
    "no Java runtime for Spark: install Java 17 or 21 and put java on PATH, or set JAVA_HOME"
)
PYSPARK_MISSING = "pyspark is not installed: pip install -e . (pyproject.toml pins its version)"
NOT_AVAILABLE = "the Spark Kafka connector is not available"


def spark_connector_problem(
    probe_timeout_s: float = MAVEN_PROBE_TIMEOUT_S, announce: Callable[[str], None] | None = None
) -> str | None:
    """Returns why a local Spark session with the Kafka connector cannot start, or None.

    Reads the environment as the session and Spark do. Runs Maven (up to a minute on a cold
    ``~/.m2``) when it is here and the jars are not cached, after passing a line saying so
    to ``announce``; otherwise waits for the network for at most about ``probe_timeout_s``,
    and only when no local copy has the connector. The answer is one line, meant to follow
    ``error:``.
    """
    if importlib.util.find_spec("pyspark") is None:
        return PYSPARK_MISSING
    if not java_available():
        return JAVA_MISSING
    if directory_jars() is not None or cached_set_jars() is not None:
        return None
    if maven_can_fetch():
        if announce is not None:
            announce(
                f"fetching Spark's Kafka connector with Maven into {set_directory(ARTIFACT_SET)}"
            )
        try:
            resolve(ARTIFACT_SET)
        except JvmArtifactsError as error:
            return f"{NOT_AVAILABLE}: {error}"
        return None
    return _ivy_problem(probe_timeout_s)


def _ivy_problem(probe_timeout_s: float) -> str | None:
    """Returns why Spark's Ivy cannot get the connector, or None when it can."""
    coordinate = maven_coordinate()
    if _cached_locally(coordinate, Path.home()):
        return None
    chosen = os.environ.get(REPOSITORY_VARIABLE)
    repository = chosen or MAVEN_CENTRAL
    repository_problem = probe_repository(_pom_url(repository, coordinate), probe_timeout_s)
    if repository_problem is None:
        return None
    allow = f"the repository in ${REPOSITORY_VARIABLE}" if chosen else "Maven Central"
    return (
        f"{NOT_AVAILABLE}: install Maven and run `{FETCH_COMMAND}`, set "
        f"{JARS_DIRECTORY_VARIABLE} to a directory holding its four jars, or allow access to "
        f"{allow} (see spark_examples/README.md) "
        f"[{jars_directory_problem()}; {repository}: {repository_problem}]"
    )


def require_spark_connector(program: str) -> None:
    """Returns when Spark can get its connector; else prints one line to stderr and exits 1.

    The line reads ``<program>: error: <why>``, as argparse reports a usage error. Says on
    stderr first when Maven is about to fetch the jars, since that can take a minute.
    """

    def say(line: str) -> None:
        print(f"{program}: {line}", file=sys.stderr, flush=True)

    problem = spark_connector_problem(announce=say)
    if problem is not None:
        say(f"error: {problem}")
        sys.exit(1)


def _pom_url(repository: str, coordinate: str) -> str:
    group, artifact, version = coordinate.split(":")
    path = f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.pom"
    return f"{repository.rstrip('/')}/{path}"


def _cached_locally(coordinate: str, home: Path) -> bool:
    """Returns whether Ivy would find the connector's jar without the network.

    Only the connector's own jar is looked for: its three dependencies are assumed to be
    there too, since Ivy fetched them in the same resolution.
    """
    group, artifact, version = coordinate.split(":")
    jar = f"{artifact}-{version}.jar"
    in_maven = home / ".m2" / "repository" / group.replace(".", "/") / artifact / version / jar
    in_ivy = home / IVY_HOME / "cache" / group / artifact / "jars" / jar
    return in_maven.is_file() or in_ivy.is_file()


def probe_repository(url: str, timeout_s: float) -> str | None:
    """Returns why a HEAD request for ``url`` failed, or None when it was answered.

    Runs in a daemon thread so that a hanging name lookup cannot hold the caller past
    ``timeout_s``; a thread still waiting then is left to end on its own.
    """
    outcome: list[str | None] = []

    def ask() -> None:
        outcome.append(_head(url, timeout_s))

    thread = threading.Thread(target=ask, name="maven-probe", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not outcome:
        return f"no answer within {timeout_s:g} s"
    return outcome[0]


def _head(url: str, timeout_s: float) -> str | None:
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return None
    except urllib.error.HTTPError as error:
        if error.code == 405:  # a server that refuses HEAD is still there for Ivy's GET
            return None
        return f"HTTP {error.code} for {url}"
    except (urllib.error.URLError, OSError) as error:
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        return f"unreachable ({reason})"
