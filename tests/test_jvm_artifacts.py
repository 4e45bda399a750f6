"""kshim.jvm: the pinned POMs, the cache a second run reuses, Maven's errors in one line, and
the configuration of Apache Kafka started from the jars.

Nothing here runs Maven or a JVM, except the last test, which starts the cached Kafka (and
skips with the reason when there is no Java or no cached copy).
"""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kshim.jvm import artifacts, kafka_server
from kshim.jvm.__main__ import listeners as jvm_listeners
from kshim.jvm.__main__ import main as jvm_main

MAVEN_COORDINATE = re.compile(r"^[\w.-]+:[\w.-]+:\d[\w.-]*$")


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(artifacts.CACHE_VARIABLE, str(tmp_path / "cache"))
    return tmp_path / "cache"


def fake_tool(directory: Path, name: str, script: str) -> None:
    """An executable ``name`` in ``directory`` running the shell ``script``."""
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_every_set_pins_exact_versions() -> None:
    for chosen in artifacts.ARTIFACT_SETS.values():
        coordinates = chosen.coordinates()
        assert coordinates, chosen.name
        assert all(MAVEN_COORDINATE.match(c) for c in coordinates), coordinates
        assert not any("SNAPSHOT" in c or "[" in c for c in coordinates)


def test_the_spark_connector_is_the_installed_pysparks() -> None:
    pyspark = pytest.importorskip("pyspark")
    spark = artifacts.ARTIFACT_SETS["spark"]
    assert spark.version_of("spark-sql-kafka-0-10_2.13") == pyspark.__version__


def test_the_reference_kafka_is_the_3_9_line_the_connector_ships_with() -> None:
    version = artifacts.ARTIFACT_SETS["kafka"].version_of("kafka_2.13")
    assert version.startswith("3.9.")
    assert artifacts.ARTIFACT_SETS["connect"].version_of("connect-runtime") == version


def test_a_set_lives_under_the_digest_of_its_pom(empty_cache: Path) -> None:
    directory = artifacts.set_directory("kafka")
    assert directory.parent == empty_cache / "kafka"
    assert directory.name == artifacts.ARTIFACT_SETS["kafka"].digest()
    assert artifacts.set_directory("kafka4") != directory


def test_a_complete_cached_set_needs_no_maven(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = artifacts.set_directory("spark")
    (directory / artifacts.JARS).mkdir(parents=True)
    (directory / artifacts.JARS / "b.jar").write_bytes(b"")
    (directory / artifacts.JARS / "a.jar").write_bytes(b"")
    assert artifacts.cached_jars("spark") is None  # no marker yet: cut off half way
    (directory / artifacts.COMPLETE_MARKER).write_text("a.jar\nb.jar\n")
    fake_tool(tmp_path, "java", "exit 0")
    monkeypatch.setenv("PATH", str(tmp_path))  # java, and no mvn at all

    assert artifacts.resolve("spark") == [
        directory / artifacts.JARS / "a.jar",
        directory / artifacts.JARS / "b.jar",
    ]
    assert artifacts.unavailable_reason("spark") is None


def test_without_maven_or_java_the_reason_is_one_line(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert artifacts.unavailable_reason("kafka") == artifacts.tools_problem()
    assert "no Java runtime" in str(artifacts.tools_problem())
    fake_tool(tmp_path, "java", "exit 0")
    reason = artifacts.unavailable_reason("kafka")
    assert reason is not None and "Maven (mvn) is not on PATH" in reason
    with pytest.raises(artifacts.JvmArtifactsError, match="cannot fetch the kafka jars"):
        artifacts.resolve("kafka")


def test_a_maven_failure_names_what_failed_and_leaves_nothing_that_looks_done(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tool(tmp_path, "java", "exit 0")
    fake_tool(
        tmp_path,
        "mvn",
        'echo "[INFO] Scanning"; printf "\\033[0m[ERROR] Could not find artifact x:y:jar:1.0 "; '
        'echo "in central -> [Help 1]"; '
        'echo "[ERROR] -> [Help 1]"; echo "[ERROR] Re-run Maven using the -X switch"; exit 1',
    )
    monkeypatch.setenv("PATH", str(tmp_path))

    with pytest.raises(artifacts.JvmArtifactsError) as raised:
        artifacts.resolve("kafka4")

    assert str(raised.value) == (
        "Maven could not fetch the kafka4 jars: Could not find artifact x:y:jar:1.0 in central"
    )
    assert artifacts.cached_jars("kafka4") is None
    assert [path.name for path in (empty_cache / "kafka4").iterdir()] == [
        f"{artifacts.set_directory('kafka4').name}.lock"
    ]


def test_maven_is_asked_once_then_the_cache_answers(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls"
    fake_tool(tmp_path, "java", "exit 0")
    # Writes one jar where -DoutputDirectory says, as copy-dependencies does.
    fake_tool(
        tmp_path,
        "mvn",
        f'echo "$@" >> {calls}; for a in "$@"; do case "$a" in -DoutputDirectory=*) '
        'd="${a#-DoutputDirectory=}"; mkdir -p "$d"; : > "$d/kafka-clients-3.9.0.jar";; '
        "esac; done",
    )
    # Ours first; the system's directories for the shell tools the fake uses.
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path), "/usr/bin", "/bin"]))

    first = artifacts.resolve("spark")
    second = artifacts.resolve("spark")

    assert [jar.name for jar in first] == ["kafka-clients-3.9.0.jar"] == [j.name for j in second]
    [arguments] = calls.read_text().splitlines()
    assert artifacts.COPY_GOAL in arguments and "--global-settings" in arguments
    assert (artifacts.set_directory("spark") / artifacts.COMPLETE_MARKER).read_text() == (
        "kafka-clients-3.9.0.jar\n"
    )


def test_maven_reads_a_settings_file_mirroring_everything_to_one_repository(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(artifacts.REPOSITORY_VARIABLE, raising=False)
    assert f"<mirrorOf>*</mirrorOf><url>{artifacts.MAVEN_CENTRAL}</url>" in (
        artifacts._settings_xml()
    )
    monkeypatch.setenv(artifacts.REPOSITORY_VARIABLE, "https://repo.example/maven2/")
    assert "<url>https://repo.example/maven2/</url>" in artifacts._settings_xml()


def test_the_command_line_says_what_is_wrong_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert jvm_main(["fetch", "nope"]) == 1
    assert capsys.readouterr().err == (
        "jvm: error: no JVM artifact set 'nope'; known: kafka, kafka4, spark, connect\n"
    )
    with pytest.raises(SystemExit):
        jvm_main(["kafka", "--port", "1", "--data-dir", "/tmp/x", "--jars", "spark"])


def test_kafkas_configuration_is_the_sample_with_this_runs_addresses(tmp_path: Path) -> None:
    settings = kafka_server.server_properties(
        9092, 9093, tmp_path / "logs", {"log.flush.interval.messages": "1"}
    )
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert settings["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert settings["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert settings["log.dirs"] == str(tmp_path / "logs")
    assert settings["offsets.topic.replication.factor"] == "1"
    assert settings["log.flush.interval.messages"] == "1"
    assert "group.initial.rebalance.delay.ms" not in settings  # Kafka's default, 3 s
    text = kafka_server.properties_text({"a": "1", "b.c": "x,y"})
    assert text == "a=1\nb.c=x,y\n"


def test_extra_listeners_are_named_after_their_protocol(tmp_path: Path) -> None:
    settings = kafka_server.server_properties(9092, 9093, tmp_path, {}, {"SASL_SSL": 9094})
    assert settings["listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093"
    )
    assert settings["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094"
    )
    assert settings["listener.security.protocol.map"] == (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL"
    )
    assert jvm_listeners(["sasl_ssl=9094"]) == {"SASL_SSL": 9094}
    with pytest.raises(artifacts.JvmArtifactsError, match="PROTOCOL=PORT"):
        jvm_listeners(["CONTROLLER=1"])


def test_cluster_ids_are_kafkas_22_character_base64url_uuids() -> None:
    ids = {kafka_server.random_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster) for cluster in ids)
    assert not any(cluster.startswith("-") for cluster in ids)


def test_the_logging_settings_follow_the_backend_in_the_jars(tmp_path: Path) -> None:
    log4j1 = kafka_server.logging_options([Path("reload4j-1.2.25.jar")], tmp_path)
    assert log4j1 == [f"-Dlog4j.configuration=file:{tmp_path / 'log4j.properties'}"]
    log4j2 = kafka_server.logging_options([Path("log4j-core-2.25.5.jar")], tmp_path)
    assert log4j2 == [f"-Dlog4j2.configurationFile={tmp_path / 'log4j2.properties'}"]
    assert "rootLogger.level = WARN" in (tmp_path / "log4j2.properties").read_text()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_kafka_from_the_jars_answers_and_stops_with_its_process(tmp_path: Path) -> None:
    reason = artifacts.unavailable_reason("kafka")
    if reason is not None or artifacts.cached_jars("kafka") is None:
        pytest.skip(reason or "the kafka jars are not cached: python -m kshim.jvm fetch kafka")
    port = kafka_server.free_port()
    command = [sys.executable, "-m", "kshim.jvm", "kafka", "--port", str(port)]
    command += ["--data-dir", str(tmp_path / "kafka")]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        assert _wait_for_listener(port, process, timeout_s=120), "Kafka did not listen within 120 s"
        # The launcher became the JVM: the process started here is Kafka itself.
        assert "java" in Path(f"/proc/{process.pid}/cmdline").read_bytes().decode()
        assert (tmp_path / "kafka" / "logs" / kafka_server.META_PROPERTIES).is_file()
    finally:
        os.killpg(process.pid, 15)
        process.wait(60)


def _wait_for_listener(port: int, process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False
