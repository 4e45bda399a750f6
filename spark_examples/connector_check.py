"""Whether a local Spark can load its Kafka connector here, asked before Spark starts.

Without the connector's jars and without Maven, ``kafka_spark_session`` fails only inside the
JVM: Ivy's "module not found", then pyspark's ``JAVA_GATEWAY_EXITED``, after a demo has
already started its broker and capture. Commands that build that session call
``require_spark_connector`` first, which says in one line what to set and exits.

It decides as ``kafka_spark_session`` does. The jars in ``$KSHIM_SPARK_JARS``, when all four
are there, need nothing else. Otherwise Spark resolves ``spark.jars.packages`` with Ivy, which
looks in the local Maven repository (``~/.m2/repository``) and its own cache
(``~/.ivy2.5.2/cache``) before the network, so a connector already there counts; failing
that, the repository Spark would ask (``$DEFAULT_ARTIFACT_REPOSITORY``, as in Spark's
``MavenUtils.createRepoResolvers``, else Maven Central) must answer a HEAD request for the
connector's POM within ``MAVEN_PROBE_TIMEOUT_S``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

from spark_examples.spark_session import (
    JARS_DIRECTORY_VARIABLE,
    jars_directory_problem,
    java_available,
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
PYSPARK_MISSING = "pyspark is not installed: pip install 'pyspark>=4.0,<4.1'"


def spark_connector_problem(probe_timeout_s: float = MAVEN_PROBE_TIMEOUT_S) -> str | None:
    """Returns why a local Spark session with the Kafka connector cannot start, or None.

    Reads the environment as the session and Spark do. Waits for the network for at most
    about ``probe_timeout_s``, and only when neither ``$KSHIM_SPARK_JARS`` nor a local copy
    has the connector. The answer is one line, meant to follow ``error:``.
    """
    if importlib.util.find_spec("pyspark") is None:
        return PYSPARK_MISSING
    if not java_available():
        return JAVA_MISSING
    jars_problem = jars_directory_problem()
    if jars_problem is None:
        return None
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
        f"the Spark Kafka connector is not available: set {JARS_DIRECTORY_VARIABLE} to a "
        f"directory holding its jars (see spark_examples/README.md) or allow access to {allow} "
        f"[{jars_problem}; {repository}: {repository_problem}]"
    )


def require_spark_connector(program: str) -> None:
    """Returns when Spark can get its connector; else prints one line to stderr and exits 1.

    The line reads ``<program>: error: <why>``, as argparse reports a usage error.
    """
    problem = spark_connector_problem()
    if problem is not None:
        print(f"{program}: error: {problem}", file=sys.stderr, flush=True)
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
