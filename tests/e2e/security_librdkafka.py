"""confluent-kafka's and kcat's part in the security scenarios (both librdkafka, configured
alike): produce and read back, be refused at login and say why, be denied a topic, and
(confluent-kafka) commit a transaction and a group's offsets.

confluent-kafka reports a refusal to ``error_cb`` (_AUTHENTICATION with the broker's
message, _SSL or _TRANSPORT for TLS) and its log; kcat prints it on stderr and exits
non-zero. Every wait is bounded.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Sequence

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from tests.e2e.client_helpers import Deadline
from tests.e2e.security_support import (
    REFUSAL_WAIT_MS,
    WAIT_S,
    Login,
    SecureBroker,
    librdkafka_settings,
    logged,
)

KCAT = shutil.which("kcat")
KCAT_TIMEOUT_S = 30.0
KCAT_METADATA_WAIT_S = "1"  # kcat -L -m: seconds to wait for metadata
LIBRDKAFKA_LOGGER = "tests.e2e.librdkafka"


# --------------------------------------------------------------------------------------
# confluent-kafka
# --------------------------------------------------------------------------------------


def confluent_round_trip(
    broker: SecureBroker, login: Login, topic: str, values: Sequence[bytes]
) -> list[bytes]:
    settings = librdkafka_settings(broker, login)
    producer = Producer(dict(settings))
    reports: list[KafkaError | None] = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda e, _: reports.append(e))
    assert producer.flush(WAIT_S) == 0
    assert reports == [None] * len(values)
    # librdkafka wants a group.id even for a consumer that only assigns.
    consumer = Consumer({**settings, "group.id": f"{topic}-unused", "enable.auto.commit": False})
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
        return confluent_poll(consumer, len(values))
    finally:
        consumer.close()


def confluent_poll(consumer: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = Deadline(WAIT_S)
    while len(values) < count and not deadline.expired():
        message = consumer.poll(deadline.poll_timeout_s())
        if message is None:
            continue
        assert message.error() is None, message.error()
        values.append(message.value() or b"")
    return values


def confluent_refusal(broker: SecureBroker, login: Login) -> str:
    """librdkafka keeps retrying; its ``error_cb`` gets each failure (_AUTHENTICATION with
    the broker's message, _SSL or _TRANSPORT for TLS, _ALL_BROKERS_DOWN), and its log says
    more: the text of the first failure and what was logged with it."""
    errors: list[KafkaError] = []
    with logged(LIBRDKAFKA_LOGGER, logging.INFO) as lines:
        producer = Producer(
            {
                **librdkafka_settings(broker, login),
                "error_cb": errors.append,
                "logger": logging.getLogger(LIBRDKAFKA_LOGGER),
            }
        )
        deadline = Deadline(REFUSAL_WAIT_MS / 1000)
        while not errors and not deadline.expired():
            producer.poll(deadline.poll_timeout_s(0.1))
        producer.poll(0)  # log lines queued with the error
    return "\n".join([f"{error.name()}: {error.str()}" for error in errors] + lines)


def confluent_denial(broker: SecureBroker, login: Login, topic: str) -> str:
    producer = Producer(librdkafka_settings(broker, login))
    reports: list[KafkaError | None] = []
    producer.produce(topic, b"denied", partition=0, on_delivery=lambda e, _: reports.append(e))
    producer.flush(WAIT_S)
    [error] = reports
    assert error is not None
    return f"{error.name()}: {error.str()}"


def confluent_transaction_and_group(
    broker: SecureBroker, login: Login, topic: str, values: Sequence[bytes]
) -> tuple[list[bytes], int | None, int]:
    """As kafka_python_transaction_and_group, with librdkafka."""
    settings = librdkafka_settings(broker, login)
    producer = Producer({**settings, "transactional.id": f"{topic}-transaction"})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, partition=0)
    producer.commit_transaction(WAIT_S)
    consumer = Consumer(
        {
            **settings,
            "group.id": f"{topic}-group",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.subscribe([topic])
        read = confluent_poll(consumer, len(values))
        consumer.commit(asynchronous=False)
        partition = ConfluentTopicPartition(topic, 0)
        [committed] = consumer.committed([partition], timeout=WAIT_S)
        [position] = consumer.position([partition])
        return read, committed.offset, position.offset
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------
# kcat (librdkafka's command line)
# --------------------------------------------------------------------------------------


def kcat_librdkafka_version() -> tuple[int, ...] | None:
    """The librdkafka version kcat is built with (``kcat -V``), or None without kcat."""
    if KCAT is None:
        return None
    output = subprocess.run(
        [KCAT, "-V"], capture_output=True, text=True, timeout=KCAT_TIMEOUT_S, check=False
    ).stdout
    _, _, rest = output.partition("librdkafka ")
    version = rest.split(maxsplit=1)[0] if rest else ""
    return tuple(int(part) for part in version.split(".") if part.isdigit()) or None


def kcat(
    broker: SecureBroker, login: Login, *arguments: str, stdin: str = ""
) -> tuple[int, str, str]:
    """Runs kcat with ``login``'s settings; (exit status, stdout, stderr)."""
    if KCAT is None:
        pytest.skip("kcat is not installed (apt-get install kcat; scripts/test.sh does)")
    settings = librdkafka_settings(broker, login)
    command = [KCAT, "-b", settings.pop("bootstrap.servers"), *arguments]
    for key, value in settings.items():
        command += ["-X", f"{key}={value}"]
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, timeout=KCAT_TIMEOUT_S, check=False
    )
    return done.returncode, done.stdout, done.stderr


def kcat_round_trip(
    broker: SecureBroker, login: Login, topic: str, values: Sequence[bytes]
) -> list[bytes]:
    lines = "".join(f"{value.decode()}\n" for value in values)
    status, _, stderr = kcat(broker, login, "-P", "-t", topic, "-p", "0", stdin=lines)
    assert status == 0, stderr
    status, stdout, stderr = kcat(
        broker, login, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"
    )
    assert status == 0, stderr
    return [line.encode() for line in stdout.splitlines()]


def kcat_refusal(broker: SecureBroker, login: Login) -> str:
    """kcat -L logs each failed attempt on stderr, then gives up on the metadata."""
    status, _, stderr = kcat(broker, login, "-L", "-m", KCAT_METADATA_WAIT_S)
    assert status != 0
    assert "Failed to acquire metadata" in stderr
    return stderr


def kcat_denial(broker: SecureBroker, login: Login, topic: str) -> str:
    status, _, stderr = kcat(broker, login, "-P", "-t", topic, "-p", "0", stdin="denied\n")
    assert status != 0
    return stderr
