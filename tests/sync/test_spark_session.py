"""Where ``kafka_spark_session`` takes Spark's Kafka connector from, and that it is the
connector of the installed pyspark.

The order is ``$KSHIM_SPARK_JARS``, then the ``spark`` set of the ``kshim.jvm`` cache, then
``spark.jars.packages`` with the POM's coordinate (spark_session.py). The choice is checked
without a JVM; one session then shows the four jars on ``spark.jars`` and kafka-clients 3.9
loaded from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kshim.jvm.artifacts import ARTIFACT_SETS, CACHE_VARIABLE, cached_jars
from spark_examples.spark_session import (
    FETCH_COMMAND,
    JARS_DIRECTORY_VARIABLE,
    connector_settings,
    connector_unavailable_reason,
    directory_jars,
    maven_coordinate,
)
from tests.sync.spark_marks import UNAVAILABLE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pyspark = pytest.importorskip("pyspark")

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
KAFKA_CLIENTS_VERSION = "3.9.0"


def _jar_names(version: str) -> set[str]:
    return {
        f"spark-sql-kafka-0-10_2.13-{version}.jar",
        f"spark-token-provider-kafka-0-10_2.13-{version}.jar",
        f"kafka-clients-{KAFKA_CLIENTS_VERSION}.jar",
        "commons-pool2-2.12.0.jar",
    }


def test_the_pom_pins_the_connector_at_the_installed_pyspark_version() -> None:
    assert ARTIFACT_SETS["spark"].coordinates() == [f"{CONNECTOR}:{pyspark.__version__}"]
    assert maven_coordinate() == f"{CONNECTOR}:{pyspark.__version__}"


def test_a_jars_directory_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = _jar_names("4.0.0")
    for name in names:
        (tmp_path / name).touch()
    monkeypatch.setenv(JARS_DIRECTORY_VARIABLE, str(tmp_path))
    settings = connector_settings()
    assert list(settings) == ["spark.jars"]
    assert {Path(jar).name for jar in settings["spark.jars"].split(",")} == names
    assert {Path(jar).parent for jar in settings["spark.jars"].split(",")} == {tmp_path}


def test_a_directory_lacking_a_jar_is_passed_over_for_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = cached_jars("spark")
    if cached is None:
        pytest.skip(f"the spark set is not cached: {FETCH_COMMAND}")
    (tmp_path / "kafka-clients-3.9.0.jar").touch()
    monkeypatch.setenv(JARS_DIRECTORY_VARIABLE, str(tmp_path))
    assert connector_settings() == {"spark.jars": ",".join(str(jar) for jar in cached)}


def test_without_jars_or_maven_spark_resolves_the_poms_coordinate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(JARS_DIRECTORY_VARIABLE, raising=False)
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn, no java
    assert connector_settings() == {"spark.jars.packages": f"{CONNECTOR}:{pyspark.__version__}"}


def test_without_jars_or_maven_the_tests_skip_saying_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.touch()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.delenv(JARS_DIRECTORY_VARIABLE, raising=False)
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    reason = connector_unavailable_reason()
    assert reason is not None
    assert f"`{FETCH_COMMAND}`" in reason
    assert "\n" not in reason


@pytest.mark.spark
@pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")
def test_the_session_puts_the_four_jars_on_spark_jars(spark: SparkSession) -> None:
    chosen = directory_jars()  # $KSHIM_SPARK_JARS, when it holds all four, comes first
    if chosen is None:
        cached = cached_jars("spark")
        assert cached is not None  # the session fetched the set if it was not cached
        chosen = [str(jar) for jar in cached]
    assert spark.sparkContext.getConf().get("spark.jars") == ",".join(chosen)
    assert {Path(jar).name for jar in chosen} == _jar_names(pyspark.__version__)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    assert jvm.org.apache.kafka.common.utils.AppInfoParser.getVersion() == KAFKA_CLIENTS_VERSION
