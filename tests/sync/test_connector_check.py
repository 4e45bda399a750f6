"""The check that Spark can get its Kafka connector, made before a command starts Spark.

A fake JVM (``$JAVA_HOME/bin/java``, an empty file) and a fake home directory keep the
answers independent of the machine; Maven is a local HTTP server, or a closed port.
"""

from __future__ import annotations

import http.server
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.testing import free_port
from spark_examples.connector_check import (
    JAVA_MISSING,
    REPOSITORY_VARIABLE,
    spark_connector_problem,
)
from spark_examples.spark_session import JARS_DIRECTORY_VARIABLE, java_available, maven_coordinate
from spark_examples.testing import REPOSITORY_ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None, reason="pyspark is not installed"
)

CONNECTOR_JAR_NAMES = (
    "spark-sql-kafka-0-10_2.13-4.0.0.jar",
    "spark-token-provider-kafka-0-10_2.13-4.0.0.jar",
    "commons-pool2-2.12.0.jar",
    "kafka-clients-3.9.0.jar",
)
CONNECTOR_NOT_AVAILABLE = (
    "demo: error: the Spark Kafka connector is not available: set KSHIM_SPARK_JARS to a "
    "directory holding its jars (see spark_examples/README.md) or allow access to "
)


def _fake_java_home(root: Path) -> Path:
    java = root / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.touch()
    return root / "jdk"


def _closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/"


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine with a JVM, an empty jars directory and nothing in Maven's or Ivy's caches."""
    monkeypatch.setenv("JAVA_HOME", str(_fake_java_home(tmp_path)))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "jars").mkdir()
    monkeypatch.setenv(JARS_DIRECTORY_VARIABLE, str(tmp_path / "jars"))
    monkeypatch.setenv(REPOSITORY_VARIABLE, _closed_port_url())
    return tmp_path


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


def test_the_demo_says_what_to_set_without_jars_or_maven_and_starts_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "jars").mkdir()
    environment = {
        **os.environ,
        "JAVA_HOME": str(_fake_java_home(tmp_path)),
        "HOME": str(tmp_path / "home"),
        JARS_DIRECTORY_VARIABLE: str(tmp_path / "jars"),
        REPOSITORY_VARIABLE: _closed_port_url(),
    }
    result, elapsed = _run_demo(environment)
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


def test_the_jars_in_the_machines_cache_are_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    directory = os.environ.get(JARS_DIRECTORY_VARIABLE) or str(
        Path.home() / ".cache" / "kshim" / "spark-jars"
    )
    if not os.path.isdir(directory):
        pytest.skip(f"no connector jars at {directory} (see spark_examples/README.md)")
    monkeypatch.setenv(JARS_DIRECTORY_VARIABLE, directory)
    monkeypatch.setenv(REPOSITORY_VARIABLE, _closed_port_url())
    if not java_available():
        pytest.skip("no Java runtime on this machine")
    assert spark_connector_problem() is None


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
