"""The pipeline's Kafka client settings (spark_examples/kafka_security.py): ``--kafka-config``
and ``--kafka-option`` of capture and apply, given to Spark's source as ``kafka.<Java
name>`` options and to confluent-kafka in librdkafka's names; then the capture and the
apply job through a SASL_SSL listener (tests/secured_broker.py). The Spark run skips
without the connector jars."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trustme

from kshim.client.security import client_security, jaas_credentials
from spark_examples.apply.job import apply_error_message, start_apply
from spark_examples.apply.job import parse_arguments as apply_arguments
from spark_examples.capture.__main__ import parse_arguments as capture_arguments
from spark_examples.capture.shipper import run_capture
from spark_examples.databases import open_database
from spark_examples.kafka_security import (
    java_client_properties,
    librdkafka_settings,
    spark_kafka_options,
)
from spark_examples.testing import TABLE_NAMES, Workload, create_source_tables
from spark_examples.verify import compare_tables
from tests.secured_broker import SecuredBroker, running_secured_broker
from tests.sync.capture_helpers import read_topic
from tests.sync.conftest import REVIEW_HOOK
from tests.sync.spark_marks import SPARK_PIPELINE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

APPLY_TIMEOUT_S = 180

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="sync" password="sync-secret";'
)
JAVA_CONFIG = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.jaas.config": SCRAM_JAAS,
    "ssl.truststore.location": "/etc/kshim/ca.pem",
    "ssl.keystore.location": "/etc/kshim/client.pem",
    "ssl.key.password": "key-secret",
}


def test_java_settings_become_spark_options_and_librdkafka_settings() -> None:
    security = client_security(JAVA_CONFIG)
    assert spark_kafka_options(security) == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.endpoint.identification.algorithm": "https",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/kshim/ca.pem",
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.location": "/etc/kshim/client.pem",
        "kafka.ssl.key.password": "key-secret",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": SCRAM_JAAS,
    }
    assert librdkafka_settings(security) == {
        "security.protocol": "SASL_SSL",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": "/etc/kshim/ca.pem",
        # OpenSSL takes the chain and the key each from the one PEM keystore file.
        "ssl.certificate.location": "/etc/kshim/client.pem",
        "ssl.key.location": "/etc/kshim/client.pem",
        "ssl.key.password": "key-secret",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "sync",
        "sasl.password": "sync-secret",
    }


def test_librdkafka_settings_become_java_ones(tmp_path: Path) -> None:
    ca = trustme.CA()
    client = ca.issue_cert("sync@example.com")
    client.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    (tmp_path / "chain.pem").write_bytes(b"".join(b.bytes() for b in client.cert_chain_pems))
    awkward = 'p"ss\\word'
    security = client_security(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "sync",
            "sasl.password": awkward,
            "ssl.ca.location": str(tmp_path / "ca.pem"),
            "ssl.certificate.location": str(tmp_path / "chain.pem"),
            "ssl.key.location": str(tmp_path / "key.pem"),
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    java = java_client_properties(security)
    # Java takes no separate key and certificate files: they go inline.
    assert java["ssl.keystore.key"] == client.private_key_pem.bytes().decode()
    assert java["ssl.keystore.certificate.chain"] == (tmp_path / "chain.pem").read_text()
    assert java["ssl.endpoint.identification.algorithm"] == ""
    assert jaas_credentials(java["sasl.jaas.config"], "PLAIN") == ("sync", awkward)
    back = client_security(java)
    assert (back.protocol, back.mechanism, back.username, back.password) == (
        "SASL_SSL",
        "PLAIN",
        "sync",
        awkward,
    )
    assert back.tls is not None and back.tls.check_hostname is False
    assert back.ssl_context() is not None  # the inline key and chain load


def test_capture_and_apply_take_a_config_file_and_options(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="sync" password="from-file";\n',
        encoding="utf-8",
    )
    common = ["--bootstrap", "b:9092", "--topic", "t", "--kafka-config", str(config)]
    # An option wins over the file; one given empty takes the file's away.
    override = [
        "--kafka-option", "sasl.jaas.config=",
        "--kafka-option", "sasl.username=other",
        "--kafka-option", "sasl.password=from=option",
    ]  # fmt: skip
    capture = capture_arguments(["--source", "sqlite:///s.db", "--tables", "a", *common])
    apply = apply_arguments(["--dest", "sqlite:///d.db", "--checkpoint", "c", *common, *override])
    assert capture.kafka_settings == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "sync",
        "sasl.password": "from-file",
    }
    assert apply.security is not None
    assert (apply.security.username, apply.security.password) == ("other", "from=option")
    assert spark_kafka_options(apply.security)["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="other" password="from=option";'
    )


def test_settings_that_cannot_be_used_stop_the_command_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = [
        "--source",
        "sqlite:///s.db",
        "--tables",
        "a",
        "--bootstrap",
        "b:1",
        "--topic",
        "t",
    ]
    with pytest.raises(SystemExit) as exited:
        capture_arguments([*arguments, "--kafka-option", "ssl.truststore.type=JKS"])
    assert exited.value.code == 2
    said = capsys.readouterr().err.splitlines()[-1]
    assert said == (
        "python -m spark_examples.capture: error: Kafka client settings: security.protocol="
        "PLAINTEXT does not use ssl.truststore.type (security.protocol=SSL or SASL_SSL does)"
    )
    with pytest.raises(SystemExit):
        capture_arguments([*arguments, "--kafka-config", str(tmp_path / "missing.properties")])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m spark_examples.capture: error: cannot read --kafka-config "
        f"{tmp_path / 'missing.properties'}: No such file or directory"
    )


@pytest.fixture
def reviewing_broker(tmp_path: Path, registry: Path) -> Iterator[SecuredBroker]:
    """A SASL_SSL broker running the capture's review hook (the registry fixture set its
    directory in the environment the broker inherits)."""
    work = tmp_path / "broker"
    work.mkdir()
    with running_secured_broker(work, [REVIEW_HOOK]) as broker:
        yield broker


def shop_source(tmp_path: Path, operations: int) -> tuple[str, int]:
    """A SQLite source with the demo tables and ``operations`` random changes logged;
    its URL and how many changes it logged."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    database = open_database(url)
    try:
        create_source_tables(database)
        Workload(database).run(operations)
        [(logged,)] = database.execute("SELECT count(*) FROM kshim_change_log")
    finally:
        database.close()
    return url, int(logged)


def test_the_capture_ships_through_a_sasl_ssl_listener(
    reviewing_broker: SecuredBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broker = reviewing_broker
    broker.add_scram_user("SCRAM-SHA-256", "capture", "capture-secret")
    config = tmp_path / "capture.properties"
    config.write_text(
        broker.java_properties("SCRAM-SHA-256", "capture", "capture-secret"), encoding="utf-8"
    )
    url, logged = shop_source(tmp_path, 40)
    arguments = capture_arguments(
        ["--source", url, "--tables", ",".join(TABLE_NAMES), "--bootstrap", broker.secured,
         "--topic", "shop", "--kafka-config", str(config), "--once"]
    )  # fmt: skip
    shipped = run_capture(
        url, TABLE_NAMES, broker.secured, "shop", once=True,
        kafka_security=arguments.kafka_settings,
    )  # fmt: skip
    assert shipped == logged
    assert "WARNING" not in capsys.readouterr().out  # the hook setting was read over SASL_SSL
    sequences = [record.seq for record in read_topic(broker.plaintext, "shop")]
    assert sequences == list(range(1, logged + 1))


def spark_pipeline(test: Callable[..., None]) -> Callable[..., None]:
    for mark in SPARK_PIPELINE:
        test = mark(test)
    return test


@spark_pipeline
def test_the_apply_job_reads_through_a_sasl_ssl_listener(
    reviewing_broker: SecuredBroker, tmp_path: Path, spark: SparkSession
) -> None:
    broker = reviewing_broker
    url, logged = shop_source(tmp_path, 60)
    settings = librdkafka_settings(broker.alice())
    shipped = run_capture(url, TABLE_NAMES, broker.secured, "shop", True, kafka_security=settings)
    assert shipped == logged
    # Spark's Java consumer authenticates with SCRAM (the capture above used PLAIN).
    broker.add_scram_user("SCRAM-SHA-512", "apply", "apply-secret")
    config = tmp_path / "apply.properties"
    config.write_text(
        broker.java_properties("SCRAM-SHA-512", "apply", "apply-secret"), encoding="utf-8"
    )
    dest = f"sqlite:///{tmp_path / 'replica.db'}"
    options = apply_arguments(
        ["--bootstrap", broker.secured, "--topic", "shop", "--dest", dest,
         "--checkpoint", str(tmp_path / "checkpoint"), "--once", "--kafka-config", str(config)]
    )  # fmt: skip
    query = start_apply(spark, options)
    assert query.awaitTermination(APPLY_TIMEOUT_S), "the apply job did not finish in time"
    assert apply_error_message(query) is None
    assert compare_tables(url, dest, TABLE_NAMES) == []
