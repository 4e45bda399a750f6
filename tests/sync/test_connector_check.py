"""The check that Spark can get its Kafka connector, made before a command starts Spark.

A fake JVM (``$JAVA_HOME/bin/java``, an empty file), a fake home directory, an empty
``kshim.jvm`` cache and a PATH without Maven keep the answers independent of the machine;
Spark's Maven repository is a local HTTP server, or a closed port. The tests of the Maven
fetch run the real ``mvn`` against a closed port.
"""

from __future__ import annotations

import http.server
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.jvm import artifacts
from kshim.testing import free_port
from spark_examples.connector_check import (
    JAVA_MISSING,
    REPOSITORY_VARIABLE,
    spark_connector_problem,
)
from spark_examples.spark_session import (
    JARS_DIRECTORY_VARIABLE,
    cached_set_jars,
    java_available,
    maven_coordinate,
)
from spark_examples.testing import REPOSITORY_ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None, reason="pyspark is not installed"
)

# The PATH this process started with, where the Maven tests find the real tools.
ORIGINAL_PATH = os.environ.get("PATH", "")
TOOLS = ("mvn", "java")
MACHINE_MAVEN_REPOSITORY = Path.home() / ".m2" / "repository"
CONNECTOR_JAR_NAMES = (
    "spark-sql-kafka-0-10_2.13-4.0.0.jar",
    "spark-token-provider-kafka-0-10_2.13-4.0.0.jar",
    "commons-pool2-2.12.0.jar",
    "kafka-clients-3.9.0.jar",
)
CONNECTOR_NOT_AVAILABLE = (
    "demo: error: the Spark Kafka connector is not available: install Maven and run "
    "`python -m kshim.jvm fetch spark`, set KSHIM_SPARK_JARS to a directory holding its four "
    "jars, or allow access to "
)


def _fake_java_home(root: Path) -> Path:
    java = root / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.touch()
    return root / "jdk"


def _closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/"


def _bare_machine(root: Path) -> dict[str, str]:
    """The variables of a machine with a JVM but no Maven, an empty jars directory and
    nothing in the kshim.jvm, Maven or Ivy caches; Spark's repository is a closed port."""
    (root / "jars").mkdir()
    (root / "bin").mkdir()
    return {
        "JAVA_HOME": str(_fake_java_home(root)),
        "HOME": str(root / "home"),
        "PATH": str(root / "bin"),
        artifacts.CACHE_VARIABLE: str(root / "jvm-cache"),
        JARS_DIRECTORY_VARIABLE: str(root / "jars"),
        REPOSITORY_VARIABLE: _closed_port_url(),
    }


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process on a bare machine (``_bare_machine``)."""
    for name, value in _bare_machine(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path


def _with_maven(monkeypatch: pytest.MonkeyPatch, local_repository: Path) -> None:
    """Puts the real ``mvn`` and ``java`` back on PATH, with ``local_repository`` as Maven's
    ``~/.m2/repository`` and a closed port as its remote one."""
    tools = [shutil.which(tool, path=ORIGINAL_PATH) for tool in TOOLS]
    if None in tools:
        pytest.skip("needs mvn and java on PATH")
    monkeypatch.setenv("PATH", os.pathsep.join(str(Path(str(tool)).parent) for tool in tools))
    monkeypatch.delenv("JAVA_HOME")  # the fake one; mvn would try to run it
    # Maven takes its home from Java's user.home (the password file), not from $HOME.
    monkeypatch.setenv("MAVEN_OPTS", f"-Dmaven.repo.local={local_repository}")
    monkeypatch.setenv(artifacts.REPOSITORY_VARIABLE, _closed_port_url())
    monkeypatch.setenv(artifacts.REPOSITORY_VARIABLE, _closed_port_url())


class _Repository(http.server.BaseHTTPRequestHandler):
    """Answers HEAD with the status in the server's ``status`` attribute."""

    def do_HEAD(self) -> None:
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def repository() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Repository)
    server.status = 200  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def _run_demo(environment: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "spark_examples.demo"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPOSITORY_ROOT,
        env=environment,
    )
    return result, time.monotonic() - started


def test_the_demo_says_what_to_run_without_jars_or_maven_and_starts_nothing(
    tmp_path: Path,
) -> None:
    result, elapsed = _run_demo({**os.environ, **_bare_machine(tmp_path)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == ""  # no broker, capture or Spark was started: none said so
    [line] = result.stderr.splitlines()
    assert line.startswith(CONNECTOR_NOT_AVAILABLE + "the repository in $DEFAULT_ARTIFACT_")
    assert "Connection refused" in line
    assert elapsed < 10


def test_the_demo_says_java_is_missing(tmp_path: Path) -> None:
    environment = {**os.environ, "PATH": str(tmp_path)}
    environment.pop("JAVA_HOME", None)
    result, elapsed = _run_demo(environment)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"demo: error: {JAVA_MISSING}"]
    assert elapsed < 10


def test_the_four_jars_are_enough_without_maven(machine: Path) -> None:
    for name in CONNECTOR_JAR_NAMES:
        (machine / "jars" / name).touch()
    assert spark_connector_problem() is None


def test_a_missing_jar_is_named(machine: Path) -> None:
    for name in CONNECTOR_JAR_NAMES[1:]:
        (machine / "jars" / name).touch()
    problem = spark_connector_problem()
    assert problem is not None
    assert "lacks spark-sql-kafka-0-10_2.13-4.0.*.jar;" in problem
    assert problem.startswith("the Spark Kafka connector is not available: ")


def test_the_jars_in_the_machines_kshim_jvm_cache_are_enough_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if cached_set_jars() is None or not java_available():
        pytest.skip("needs Java and the spark set cached: python -m kshim.jvm fetch spark")
    # The machine's cache, found before HOME moves; no Maven, no Ivy copy, no network.
    monkeypatch.setenv(artifacts.CACHE_VARIABLE, str(artifacts.cache_root()))
    for name, value in _bare_machine(tmp_path).items():
        if name != artifacts.CACHE_VARIABLE:
            monkeypatch.setenv(name, value)
    assert spark_connector_problem() is None


def test_maven_fetches_the_set_when_it_is_not_cached(
    machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Offline, from the machine's own Maven repository (filled by `kshim.jvm fetch spark`).
    local_repository = MACHINE_MAVEN_REPOSITORY
    group, artifact, version = maven_coordinate().split(":")
    if not (local_repository / group.replace(".", "/") / artifact / version).is_dir():
        pytest.skip(f"the connector is not in {local_repository}: python -m kshim.jvm fetch spark")
    _with_maven(monkeypatch, local_repository)
    assert spark_connector_problem() is None
    fetched = cached_set_jars()
    assert fetched is not None
    assert sorted(Path(jar).name for jar in fetched) == sorted(CONNECTOR_JAR_NAMES)
    assert all(Path(jar).is_relative_to(machine / "jvm-cache") for jar in fetched)


def test_maven_failing_to_fetch_the_set_is_said_in_one_line(
    machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_maven(monkeypatch, machine / "empty-m2")
    announced: list[str] = []
    problem = spark_connector_problem(announce=announced.append)
    assert announced == [
        f"fetching Spark's Kafka connector with Maven into {artifacts.set_directory('spark')}"
    ]
    assert problem is not None
    assert problem.startswith(
        "the Spark Kafka connector is not available: Maven could not fetch the spark jars: "
    )
    assert "\n" not in problem
    assert not artifacts.set_directory("spark").exists()


def test_a_repository_holding_the_connector_is_enough(
    machine: Path, monkeypatch: pytest.MonkeyPatch, repository: http.server.ThreadingHTTPServer
) -> None:
    monkeypatch.setenv(REPOSITORY_VARIABLE, f"http://127.0.0.1:{repository.server_port}/maven2")
    assert spark_connector_problem() is None


def test_a_repository_without_the_connector_is_not_enough(
    machine: Path, monkeypatch: pytest.MonkeyPatch, repository: http.server.ThreadingHTTPServer
) -> None:
    repository.status = 404  # type: ignore[attr-defined]
    monkeypatch.setenv(REPOSITORY_VARIABLE, f"http://127.0.0.1:{repository.server_port}/maven2")
    problem = spark_connector_problem()
    assert problem is not None
    _, artifact, version = maven_coordinate().split(":")
    assert f"HTTP 404 for http://127.0.0.1:{repository.server_port}/maven2/org/apache/spark/" in (
        problem
    )
    assert f"/{artifact}/{version}/{artifact}-{version}.pom" in problem


def test_a_repository_that_never_answers_is_given_up_on_in_time(
    machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never accepts
        monkeypatch.setenv(REPOSITORY_VARIABLE, f"http://127.0.0.1:{silent.getsockname()[1]}/")
        started = time.monotonic()
        problem = spark_connector_problem(probe_timeout_s=0.3)
        elapsed = time.monotonic() - started
    assert problem is not None
    assert "no answer within 0.3 s" in problem or "timed out" in problem
    assert elapsed < 2


@pytest.mark.parametrize("cache", ["maven", "ivy"])
def test_a_connector_in_a_local_cache_is_enough_offline(machine: Path, cache: str) -> None:
    group, artifact, version = maven_coordinate().split(":")
    jar = f"{artifact}-{version}.jar"
    home = machine / "home"
    if cache == "maven":
        path = home / ".m2" / "repository" / group.replace(".", "/") / artifact / version / jar
    else:
        path = home / ".ivy2.5.2" / "cache" / group / artifact / "jars" / jar
    path.parent.mkdir(parents=True)
    path.touch()
    assert spark_connector_problem() is None
