"""``kshim topics`` as a user runs it: the real command (``python -m kshim topics``) in a child
process against a real ``kshim serve``, its tables, its ``--json`` lines and its one-line
errors.

The broker runs with node.id 7 and num.partitions 2, so that a leader of 7 and a topic of two
partitions made without ``--partitions`` come from the broker's answers, not from defaults
the command could have made up. Every wait is bounded; only processes started here are
signalled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kshim.testing import BrokerProcess, failure_lines, free_port

COMMAND_TIMEOUT_S = 60.0
NODE_ID = 7
BROKER_PARTITIONS = 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for this module; each test uses topics of its own names."""
    settings = [f"node.id={NODE_ID}", f"num.partitions={BROKER_PARTITIONS}"]
    process = BrokerProcess(tmp_path_factory.mktemp("topics") / "data", settings).start()
    yield process
    process.stop()
    assert failure_lines(process.log_text()) == []


def kshim_topics(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kshim", "topics", *arguments],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def succeeded(*arguments: str) -> list[str]:
    """The lines the command printed; fails the test unless it exited 0 and said nothing
    on stderr."""
    result = kshim_topics(*arguments)
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout.splitlines()


def json_lines(*arguments: str) -> list[Any]:
    return [json.loads(line) for line in succeeded(*arguments, "--json")]


def assert_one_error_line(result: subprocess.CompletedProcess[str], status: int, line: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""
    assert result.returncode == status


def listed(broker: BrokerProcess) -> dict[str, Any]:
    return {row["topic"]: row for row in json_lines("list", "--bootstrap", broker.bootstrap)}


def configs_set(broker: BrokerProcess, topic: str) -> dict[str, str]:
    """The configs describe says are set on ``topic``, which must all be topic overrides."""
    [described] = json_lines("describe", "--bootstrap", broker.bootstrap, "--topic", topic)
    assert {entry["source"] for entry in described["configs"]} <= {"DYNAMIC_TOPIC_CONFIG"}
    return {entry["name"]: entry["value"] for entry in described["configs"]}


def test_create_then_list_shows_names_partition_counts_and_internal(
    fresh_broker: BrokerProcess,
) -> None:
    bootstrap = fresh_broker.bootstrap
    created = succeeded(
        "create", "--bootstrap", bootstrap, "--topic", "orders", "--partitions", "3"
    )
    assert created == ["created topic orders (3 partitions, replication factor 1)"]
    succeeded("create", "--bootstrap", bootstrap, "--topic", "audit", "--replication-factor", "1")

    assert succeeded("list", "--bootstrap", bootstrap) == [
        "TOPIC   PARTITIONS  INTERNAL",
        "audit            1  no",
        "orders           3  no",
    ]
    assert json_lines("list", "--bootstrap", bootstrap) == [
        {"topic": "audit", "partitions": 1, "internal": False},
        {"topic": "orders", "partitions": 3, "internal": False},
    ]
    described = json_lines("describe", "--bootstrap", bootstrap)  # no --topic: every topic
    assert [(topic["topic"], len(topic["partitions"])) for topic in described] == [
        ("audit", 1),
        ("orders", 3),
    ]


def test_create_without_partitions_takes_the_brokers_default(broker: BrokerProcess) -> None:
    [created] = json_lines("create", "--bootstrap", broker.bootstrap, "--topic", "by-default")
    assert created["topic"] == "by-default"
    assert (created["partitions"], created["replication_factor"]) == (BROKER_PARTITIONS, 1)
    assert listed(broker)["by-default"]["partitions"] == BROKER_PARTITIONS


def test_describe_shows_partitions_and_the_configs_set_on_the_topic(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    succeeded(
        "create", "--bootstrap", bootstrap, "--topic", "described", "--partitions", "2",
        "--config", "cleanup.policy=compact", "retention.ms=60000",
    )  # fmt: skip

    assert succeeded("describe", "--bootstrap", bootstrap, "--topic", "described") == [
        "TOPIC      PARTITION  LEADER  REPLICAS  ISR",
        f"described          0       {NODE_ID}  {NODE_ID}         {NODE_ID}",
        f"described          1       {NODE_ID}  {NODE_ID}         {NODE_ID}",
        "",
        "TOPIC      CONFIG          VALUE    SOURCE",
        "described  cleanup.policy  compact  DYNAMIC_TOPIC_CONFIG",
        "described  retention.ms    60000    DYNAMIC_TOPIC_CONFIG",
    ]


def test_describe_json_carries_partitions_configs_and_the_created_topic_id(
    broker: BrokerProcess,
) -> None:
    bootstrap = broker.bootstrap
    [created] = json_lines(
        "create", "--bootstrap", bootstrap, "--topic", "as-json", "--config", "retention.ms=5000"
    )
    [described] = json_lines("describe", "--bootstrap", bootstrap, "--topic", "as-json")
    assert described["topic_id"] == created["topic_id"] != "AAAAAAAAAAAAAAAAAAAAAA"
    assert described["internal"] is False
    assert described["partitions"] == [
        {"partition": index, "leader": NODE_ID, "replicas": [NODE_ID], "isr": [NODE_ID]}
        for index in range(BROKER_PARTITIONS)
    ]
    assert described["configs"] == [
        {
            "name": "retention.ms",
            "value": "5000",
            "source": "DYNAMIC_TOPIC_CONFIG",
            "read_only": False,
            "sensitive": False,
        }
    ]


def test_describe_all_configs_adds_the_defaults(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    succeeded("create", "--bootstrap", bootstrap, "--topic", "all-configs")
    assert configs_set(broker, "all-configs") == {}

    arguments = ("describe", "--bootstrap", bootstrap, "--topic", "all-configs", "--all-configs")
    [described] = json_lines(*arguments)
    by_name = {entry["name"]: entry for entry in described["configs"]}
    assert by_name["cleanup.policy"]["value"] == "delete"
    assert by_name["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    assert "retention.ms" in by_name
    table = succeeded(*arguments)
    assert "all-configs  cleanup.policy" in "\n".join(table)


def test_a_closed_output_pipe_ends_the_command_quietly(broker: BrokerProcess) -> None:
    """``kshim topics describe ... | head -1``: the reader has gone when the command prints;
    the command stops without an error line (it said the broker broke the pipe)."""
    succeeded("create", "--bootstrap", broker.bootstrap, "--topic", "closed-pipe")
    reading, writing = os.pipe()
    os.close(reading)  # every write to the pipe now fails with EPIPE
    try:
        command = [sys.executable, "-m", "kshim", "topics", "describe"]
        command += ["--bootstrap", broker.bootstrap, "--topic", "closed-pipe", "--all-configs"]
        result = subprocess.run(
            command, stdout=writing, stderr=subprocess.PIPE, text=True,
            timeout=COMMAND_TIMEOUT_S, check=False,
        )  # fmt: skip
    finally:
        os.close(writing)
    assert (result.returncode, result.stderr) == (0, "")


def test_alter_config_then_describe_shows_the_change(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    succeeded(
        "create", "--bootstrap", bootstrap, "--topic", "altered",
        "--config", "cleanup.policy=compact", "retention.ms=60000",
    )  # fmt: skip

    altered = succeeded(
        "alter-config", "--bootstrap", bootstrap, "--topic", "altered",
        "--add-config", "retention.ms=120000", "max.message.bytes=2048",
        "--delete-config", "cleanup.policy",
    )  # fmt: skip

    assert altered == ["altered configs of topic altered"]
    assert configs_set(broker, "altered") == {"retention.ms": "120000", "max.message.bytes": "2048"}


def test_alter_config_json_says_what_changed(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    succeeded("create", "--bootstrap", bootstrap, "--topic", "altered-json")
    arguments = ("--bootstrap", bootstrap, "--topic", "altered-json")
    change = json_lines("alter-config", *arguments, "--add-config", "retention.ms=1000")
    assert change == [{"topic": "altered-json", "set": {"retention.ms": "1000"}, "deleted": []}]
    assert configs_set(broker, "altered-json") == {"retention.ms": "1000"}


def test_delete_then_list_no_longer_shows_it(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    succeeded("create", "--bootstrap", bootstrap, "--topic", "doomed")
    assert "doomed" in listed(broker)

    assert succeeded("delete", "--bootstrap", bootstrap, "--topic", "doomed") == [
        "deleted topic doomed"
    ]

    assert "doomed" not in listed(broker)
    table = succeeded("list", "--bootstrap", bootstrap)
    assert not any(line.startswith("doomed ") for line in table)


def test_creating_an_existing_topic_is_one_error_line_and_changes_nothing(
    broker: BrokerProcess,
) -> None:
    bootstrap = broker.bootstrap
    succeeded("create", "--bootstrap", bootstrap, "--topic", "twice", "--partitions", "3")

    again = kshim_topics(
        "create", "--bootstrap", bootstrap, "--topic", "twice", "--partitions", "5"
    )

    assert again.returncode == 1
    assert again.stdout == ""
    [line] = again.stderr.splitlines()
    assert line.startswith("kshim topics: error: cannot create topic twice: TOPIC_ALREADY_EXISTS")
    assert listed(broker)["twice"]["partitions"] == 3


def test_describing_an_unknown_topic_fails_and_does_not_create_it(broker: BrokerProcess) -> None:
    result = kshim_topics("describe", "--bootstrap", broker.bootstrap, "--topic", "nosuch")
    assert_one_error_line(
        result, 1, "kshim topics: error: cannot describe topic nosuch: UNKNOWN_TOPIC_OR_PARTITION"
    )
    # The broker auto-creates topics (auto.create.topics.enable) for Metadata requests that
    # allow it; describe must not.
    assert "nosuch" not in listed(broker)


def test_deleting_an_unknown_topic_fails(broker: BrokerProcess) -> None:
    result = kshim_topics("delete", "--bootstrap", broker.bootstrap, "--topic", "never-made")
    assert_one_error_line(
        result,
        1,
        "kshim topics: error: cannot delete topic never-made: UNKNOWN_TOPIC_OR_PARTITION "
        "(This server does not host this topic-partition.)",  # the broker's words, Kafka's
    )


def test_an_unknown_config_is_the_brokers_error(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    succeeded("create", "--bootstrap", bootstrap, "--topic", "badly-altered")
    result = kshim_topics(
        "alter-config", "--bootstrap", bootstrap, "--topic", "badly-altered",
        "--add-config", "no.such.config=1",
    )  # fmt: skip
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(
        "kshim topics: error: cannot alter configs of topic badly-altered: INVALID_CONFIG"
    )


@pytest.mark.parametrize(
    ("properties", "refused"),
    [
        (
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=secret-password\n",
            'sasl.jaas.config is not one login module: LoginModule required username="..." '
            'password="...";',
        ),
        (
            "ssl.truststore.location=/etc/kafka/truststore.jks\n",
            "security.protocol=PLAINTEXT does not use ssl.truststore.location "
            "(security.protocol=SSL or SASL_SSL does)",
        ),
        (
            "security.protocol=SSL\nssl.truststore.type=JKS\n"
            "ssl.truststore.location=/etc/kafka/truststore.jks\nssl.truststore.password=secret-password\n",
            "ssl.truststore.type=JKS is not supported: kshim's client reads PEM stores only "
            "(export a JKS or PKCS12 store's certificates and key to PEM with keytool "
            "-exportcert -rfc, or openssl pkcs12 -nodes)",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
            "sasl.kerberos.service.name=kafka\n",
            "not supported: sasl.kerberos.service.name (kshim's client takes "
            "security.protocol, sasl.* and ssl.* settings and client.id)",
        ),
    ],
)
def test_a_command_config_that_cannot_be_used_is_refused(
    broker: BrokerProcess, tmp_path: Path, properties: str, refused: str
) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(properties, encoding="utf-8")
    arguments = ("--bootstrap", broker.bootstrap, "--command-config", str(config))

    result = kshim_topics("create", *arguments, "--topic", "refused")

    assert_one_error_line(result, 2, f"kshim topics: error: --command-config {config}: {refused}")
    assert "secret-password" not in result.stderr
    assert "refused" not in listed(broker)


def test_a_tls_command_config_against_a_plaintext_listener_fails_without_a_change(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SSL\n", encoding="utf-8")
    arguments = ("--bootstrap", broker.bootstrap, "--command-config", str(config))

    result = kshim_topics("create", *arguments, "--topic", "not-over-tls")

    assert "Traceback" not in result.stderr, result.stderr
    assert (result.returncode, result.stdout) == (1, "")
    [line] = result.stderr.splitlines()
    assert line.startswith(f"kshim topics: error: cannot reach {broker.bootstrap}: TLS: "), line
    assert "not-over-tls" not in listed(broker)


def test_a_plaintext_command_config_with_a_client_id_is_accepted(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(
        "# as kafka-topics.sh takes it\nsecurity.protocol=plaintext\nclient.id=ops\n",
        encoding="utf-8",
    )
    arguments = ("--bootstrap", broker.bootstrap, "--command-config", str(config))
    succeeded("create", *arguments, "--topic", "with-config")
    assert "with-config" in listed(broker)


def test_alter_config_refuses_a_key_both_added_and_deleted(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    succeeded("create", "--bootstrap", bootstrap, "--topic", "contradicted")
    result = kshim_topics(
        "alter-config", "--bootstrap", bootstrap, "--topic", "contradicted",
        "--add-config", "retention.ms=1", "--delete-config", "retention.ms",
    )  # fmt: skip
    assert_one_error_line(result, 2, "kshim topics: error: both added and deleted: retention.ms")
    assert configs_set(broker, "contradicted") == {}


def test_an_unreachable_broker_is_one_error_line() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    result = kshim_topics("list", "--bootstrap", bootstrap)
    assert_one_error_line(
        result, 1, f"kshim topics: error: cannot reach {bootstrap}: connection refused"
    )
