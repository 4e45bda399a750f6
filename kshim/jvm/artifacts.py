"""Pinned sets of JVM jars, resolved by Maven into a cache that a second run reuses for free.

Each set is one POM in ``poms/`` (the versions live there and nowhere else). Resolving a set
runs ``mvn dependency:copy-dependencies`` on it into a fresh directory under the cache
(``$KSHIM_JVM_CACHE``, else ``$XDG_CACHE_HOME/kshim/jvm``, else ``~/.cache/kshim/jvm``),
named by the POM's digest, so a changed pin resolves anew and an unchanged one never asks
Maven again (the directory is complete once its marker file is written, after the copy).
Maven's own repository (``~/.m2``) keeps the downloads. Maven reads a settings file of ours
that mirrors every repository to Maven Central (``$KSHIM_MAVEN_REPOSITORY`` to use another):
Spark's POMs name a Google Cloud mirror first, which a machine limited to Maven Central
cannot reach.

Functions here block (Maven can take a minute on a cold cache); a lock file makes
concurrent resolutions of one set wait for each other instead of racing.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

try:
    import fcntl
except ImportError:  # not on Windows, where concurrent resolutions are not guarded
    fcntl = None  # type: ignore[assignment]

CACHE_VARIABLE = "KSHIM_JVM_CACHE"
REPOSITORY_VARIABLE = "KSHIM_MAVEN_REPOSITORY"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
# The plugin's version is pinned too, so that what a set resolves to never depends on the
# Maven installation's default plugin versions.
COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
COMPLETE_MARKER = "complete"
JARS = "jars"
MAVEN_TIMEOUT_S = 900.0
POM_NAMESPACE = "{http://maven.apache.org/POM/4.0.0}"
ERROR_LINES = 2
# Maven 3.8 colours its output even in batch mode on some terminals, and ends its error
# lines with a pointer to its wiki.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
HELP_REFERENCE = re.compile(r"\s*-> \[Help \d+\]$")
MAVEN_ADVICE = ("To see the full", "Re-run Maven", "For more information", "[Help", "->")


@dataclass(frozen=True, slots=True)
class ArtifactSet:
    """One POM's jars: ``name`` is how commands and tests ask for it."""

    name: str
    pom: str
    summary: str

    def pom_text(self) -> str:
        return importlib.resources.files("kshim.jvm").joinpath("poms", self.pom).read_text("utf-8")

    def digest(self) -> str:
        return hashlib.sha256(self.pom_text().encode()).hexdigest()[:16]

    def coordinates(self) -> list[str]:
        """The POM's direct dependencies as ``group:artifact:version``, in its order."""
        root = ElementTree.fromstring(self.pom_text())
        return [
            ":".join(_text(dependency, field) for field in ("groupId", "artifactId", "version"))
            for dependency in root.iter(f"{POM_NAMESPACE}dependency")
        ]

    def version_of(self, artifact_id: str) -> str:
        """The pinned version of the direct dependency ``artifact_id``; KeyError if none."""
        for coordinate in self.coordinates():
            _, artifact, version = coordinate.split(":")
            if artifact == artifact_id:
                return version
        raise KeyError(f"{self.pom} has no dependency {artifact_id}")


def _text(element: ElementTree.Element, field: str) -> str:
    child = element.find(f"{POM_NAMESPACE}{field}")
    return (child.text or "").strip() if child is not None else ""


ARTIFACT_SETS: dict[str, ArtifactSet] = {
    artifact_set.name: artifact_set
    for artifact_set in (
        ArtifactSet("kafka", "kafka.xml", "Apache Kafka 3.9 broker (the reference)"),
        ArtifactSet("kafka4", "kafka4.xml", "Apache Kafka 4 broker (a second column)"),
        ArtifactSet("spark", "spark.xml", "Spark's Kafka connector for the pinned pyspark"),
        ArtifactSet("connect", "connect.xml", "Kafka Connect 3.9 with Debezium's PostgreSQL"),
    )
}


class JvmArtifactsError(RuntimeError):
    """A set cannot be had here; the message is one line saying why and what to install."""


def artifact_set(name: str) -> ArtifactSet:
    """The set called ``name``; raises JvmArtifactsError naming the known ones."""
    try:
        return ARTIFACT_SETS[name]
    except KeyError:
        known = ", ".join(ARTIFACT_SETS)
        raise JvmArtifactsError(f"no JVM artifact set {name!r}; known: {known}") from None


def cache_root() -> Path:
    configured = os.environ.get(CACHE_VARIABLE)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kshim" / "jvm"


def set_directory(name: str) -> Path:
    """Where the set's jars are (or will be) kept, for its current POM."""
    chosen = artifact_set(name)
    return cache_root() / chosen.name / chosen.digest()


def cached_jars(name: str) -> list[Path] | None:
    """The set's jars when a complete resolution of its current POM is cached, else None."""
    directory = set_directory(name)
    if not (directory / COMPLETE_MARKER).is_file():
        return None
    return sorted((directory / JARS).glob("*.jar"))


def tools_problem() -> str | None:
    """Why Maven cannot resolve anything here (no ``mvn`` or no ``java``), or None."""
    if shutil.which("java") is None:
        return "no Java runtime on PATH: install Java 17 (apt-get install openjdk-17-jre-headless)"
    if shutil.which("mvn") is None:
        return "Maven (mvn) is not on PATH: install Maven 3.8+ (apt-get install maven)"
    return None


def unavailable_reason(name: str) -> str | None:
    """Why the set cannot be had here, or None when it is cached or Maven and Java can
    fetch it (a fetch may still fail: the repository is only asked by ``resolve``)."""
    if shutil.which("java") is None:
        return tools_problem()
    if cached_jars(name) is not None:
        return None
    problem = tools_problem()
    return f"the {name} jars are not cached and {problem}" if problem else None


def resolve(name: str) -> list[Path]:
    """The set's jars, from the cache or else fetched by Maven first. Raises
    JvmArtifactsError (one line) when Maven or Java is missing or Maven fails."""
    jars = cached_jars(name)
    if jars is not None:
        return jars
    problem = tools_problem()
    if problem is not None:
        raise JvmArtifactsError(f"cannot fetch the {name} jars: {problem}")
    directory = set_directory(name)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with _locked(directory.parent / f"{directory.name}.lock"):
        jars = cached_jars(name)  # another process may have finished it while we waited
        if jars is None:
            _fetch(artifact_set(name), directory)
            jars = cached_jars(name)
    assert jars is not None
    return jars


def classpath(name: str) -> str:
    """The set's jars as a ``-cp`` argument, resolving them first."""
    return os.pathsep.join(str(jar) for jar in resolve(name))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+b") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _fetch(chosen: ArtifactSet, directory: Path) -> None:
    """Runs Maven into a staging directory beside ``directory``, then moves it into place and
    writes the marker: a resolution cut off half way leaves no directory that looks done."""
    shutil.rmtree(directory, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        pom = staging / "pom.xml"
        pom.write_text(chosen.pom_text(), encoding="utf-8")
        settings = staging / "settings.xml"
        settings.write_text(_settings_xml(), encoding="utf-8")
        _run_maven(chosen.name, pom, settings, staging / JARS)
        staging.rename(directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    (directory / COMPLETE_MARKER).write_text(
        "\n".join(jar.name for jar in sorted((directory / JARS).glob("*.jar"))) + "\n",
        encoding="utf-8",
    )


def _settings_xml() -> str:
    repository = os.environ.get(REPOSITORY_VARIABLE) or MAVEN_CENTRAL
    return (
        "<settings><mirrors><mirror><id>kshim-repository</id><mirrorOf>*</mirrorOf>"
        f"<url>{repository}</url></mirror></mirrors></settings>\n"
    )


def _run_maven(name: str, pom: Path, settings: Path, output: Path) -> None:
    command = [
        "mvn",
        "--batch-mode",
        "--quiet",
        "-Dstyle.color=never",
        "--global-settings",
        str(settings),
        "--file",
        str(pom),
        COPY_GOAL,
        "-DincludeScope=runtime",
        f"-DoutputDirectory={output}",
    ]
    try:
        finished = subprocess.run(
            command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise JvmArtifactsError(
            f"Maven did not fetch the {name} jars within {MAVEN_TIMEOUT_S:.0f} s"
        ) from None
    if finished.returncode != 0:
        raise JvmArtifactsError(f"Maven could not fetch the {name} jars: {_maven_error(finished)}")


def _maven_error(finished: subprocess.CompletedProcess[str]) -> str:
    """Maven's first error lines, without its advice on re-running (they say which
    artifact, repository or POM line failed)."""
    found = []
    for line in ANSI_ESCAPE.sub("", finished.stdout + finished.stderr).splitlines():
        text = line
        for level in ("[ERROR]", "[FATAL]"):
            text = text.replace(level, "")
        text = HELP_REFERENCE.sub("", text).strip()
        if text != line.strip() and text and not text.startswith(MAVEN_ADVICE):
            found.append(text)
    return " ".join(found[:ERROR_LINES]) or f"exit status {finished.returncode}"
