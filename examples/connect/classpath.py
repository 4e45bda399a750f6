"""The jars of a Kafka Connect 3.9 worker with Debezium's PostgreSQL connector, from Maven.

    python -m examples.connect.classpath    # fetches them if need be, prints the classpath

They are the ``connect`` set of ``kshim.jvm`` (``kshim/jvm/poms/connect.xml``: Kafka's
``connect-runtime`` 3.9 and its mirror connectors, ``debezium-connector-postgres`` 3.2 and
reload4j for logging),
which Maven resolves once into the cache (``python -m kshim.jvm fetch connect``); nothing is
committed to this repository. Maven's resolution gives one version of each library, so
Connect's REST server and plugin scanner get the jetty 9.4 and reflections 0.10 they were
built with, and the set holds no Debezium embedded engine: a worker runs connectors itself.

The order is the jars' names, as Kafka's ``bin/kafka-run-class.sh`` lists its ``libs/``
directory: a fixed order matters because a few API jars carry the same classes (Kafka's own
distribution ships ``jaxb-api`` beside ``jakarta.xml.bind-api``, for instance), and the
first on the classpath wins. Nothing here starts a JVM.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kshim.jvm.artifacts import JvmArtifactsError, resolve, unavailable_reason

ARTIFACT_SET = "connect"
# Jars the worker cannot run without: Connect's runtime and the PostgreSQL connector.
REQUIRED_PREFIXES = ("connect-runtime-", "kafka-clients-", "debezium-connector-postgres-")


class ClasspathError(RuntimeError):
    """The jars cannot be had, or lack one the worker needs; the message says why."""


def jars_unavailable_reason() -> str | None:
    """Why the jars cannot be had here (no Java, or not cached and no Maven), or None;
    asks no repository, so it is cheap enough for a test's collection."""
    return unavailable_reason(ARTIFACT_SET)


def worker_jars() -> list[Path]:
    """The worker's jars in classpath order, fetched by Maven first when not cached (this
    blocks, a minute or so on a cold cache). Raises ClasspathError when they cannot be had
    or one of REQUIRED_PREFIXES is missing."""
    try:
        jars = resolve(ARTIFACT_SET)
    except JvmArtifactsError as error:
        raise ClasspathError(str(error)) from None
    return checked_jars(jars)


def checked_jars(jars: Sequence[Path]) -> list[Path]:
    """``jars`` ordered by file name; raises ClasspathError naming the REQUIRED_PREFIXES
    that none of them starts with."""
    ordered = sorted(jars, key=lambda jar: jar.name)
    absent = [
        prefix
        for prefix in REQUIRED_PREFIXES
        if not any(jar.name.startswith(prefix) for jar in ordered)
    ]
    if absent:
        raise ClasspathError(f"the {ARTIFACT_SET} jars lack {', '.join(absent)}*.jar")
    return ordered


def classpath(jars: Sequence[Path]) -> str:
    """The ``-cp`` argument for ``jars``, in their order."""
    return os.pathsep.join(str(jar) for jar in jars)


def main(argv: Sequence[str] | None = None) -> int:
    """Prints the classpath; 1, with one line on stderr, when the jars cannot be had."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.connect.classpath", description=__doc__.split("\n\n")[0]
    )
    parser.parse_args(argv)
    try:
        jars = worker_jars()
    except ClasspathError as error:
        print(f"classpath: error: {error}", file=sys.stderr)
        return 1
    print(classpath(jars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
