"""kafka-python's and aiokafka's part in the security scenarios, and every client's by
name: produce some values and read them back, be refused at login and say why, be denied
a topic, and (kafka-python, confluent-kafka) commit a transaction and a group's offsets.

kafka-python and aiokafka both fail to bootstrap when refused (KafkaTimeoutError after
``bootstrap_timeout_ms``; KafkaConnectionError after one attempt) and log the reason,
which ``refusal`` returns for the test to match. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AiokafkaTopicPartition
from aiokafka.errors import KafkaConnectionError
from aiokafka.errors import TopicAuthorizationFailedError as AiokafkaTopicAuthorizationFailed
from aiokafka.helpers import create_ssl_context

from tests.e2e.client_helpers import Deadline
from tests.e2e.security_librdkafka import (
    confluent_denial,
    confluent_refusal,
    confluent_round_trip,
    confluent_transaction_and_group,
    kcat_denial,
    kcat_refusal,
    kcat_round_trip,
)
from tests.e2e.security_support import (
    REFUSAL_WAIT_MS,
    REQUEST_TIMEOUT_MS,
    WAIT_S,
    Login,
    SecureBroker,
    client_certificate,
    logged,
    python_client_settings,
    trusted_ca,
)

with warnings.catch_warnings():
    # kafka-python 3.0.12 reads its schemas with importlib.resources' legacy API at import.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaTimeoutError, TopicAuthorizationFailedError

T = TypeVar("T")
CLIENTS = ("kafka-python", "aiokafka", "confluent", "kcat")
RoundTrip = Callable[[SecureBroker, Login, str, Sequence[bytes]], list[bytes]]
LoginRefusal = Callable[[SecureBroker, Login], str]
Denial = Callable[[SecureBroker, Login, str], str]
# (values read, the group's committed offset, the consumer's position)
TransactionAndGroup = Callable[
    [SecureBroker, Login, str, Sequence[bytes]], tuple[list[bytes], int | None, int]
]


# --------------------------------------------------------------------------------------
# kafka-python
# --------------------------------------------------------------------------------------


def kafka_python_producer(broker: SecureBroker, login: Login, **more: Any) -> KafkaProducer:
    return KafkaProducer(
        **python_client_settings(broker, login),
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        max_block_ms=REQUEST_TIMEOUT_MS,
        bootstrap_timeout_ms=REQUEST_TIMEOUT_MS,
        **more,
    )


def kafka_python_poll(consumer: KafkaConsumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = Deadline(WAIT_S)
    while len(values) < count and not deadline.expired():
        for records in consumer.poll(timeout_ms=500).values():
            values += [record.value for record in records]
    return values


def kafka_python_round_trip(
    broker: SecureBroker, login: Login, topic: str, values: Sequence[bytes]
) -> list[bytes]:
    producer = kafka_python_producer(broker, login)
    try:
        futures = [producer.send(topic, value, partition=0) for value in values]
        producer.flush(timeout=WAIT_S)
        for future in futures:
            future.get(timeout=WAIT_S)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        **python_client_settings(broker, login),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS + 1000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        return kafka_python_poll(consumer, len(values))
    finally:
        consumer.close()


def kafka_python_refusal(broker: SecureBroker, login: Login) -> str:
    """kafka-python gives up bootstrapping (KafkaTimeoutError) and logs each attempt's
    failure as a warning: the broker's answer, or the TLS error."""
    with (
        logged("kafka") as lines,
        pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"),
    ):
        KafkaProducer(**python_client_settings(broker, login), bootstrap_timeout_ms=REFUSAL_WAIT_MS)
    return "\n".join(lines)


def kafka_python_denial(broker: SecureBroker, login: Login, topic: str) -> str:
    producer = kafka_python_producer(broker, login)
    try:
        with pytest.raises(TopicAuthorizationFailedError) as denied:
            producer.send(topic, b"denied", partition=0).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=5)
    return str(denied.value)


def kafka_python_transaction_and_group(
    broker: SecureBroker, login: Login, topic: str, values: Sequence[bytes]
) -> tuple[list[bytes], int | None, int]:
    """Commits ``values`` in one transaction, reads them in a group (read_committed) and
    commits its position: (values read, committed offset, position)."""
    producer = kafka_python_producer(broker, login, transactional_id=f"{topic}-transaction")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in values:
            producer.send(topic, value, partition=0)
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        topic,
        **python_client_settings(broker, login),
        group_id=f"{topic}-group",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        request_timeout_ms=REQUEST_TIMEOUT_MS + 1000,
    )
    try:
        read = kafka_python_poll(consumer, len(values))
        consumer.commit()
        partition = TopicPartition(topic, 0)
        return read, consumer.committed(partition), consumer.position(partition)
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------
# aiokafka
# --------------------------------------------------------------------------------------


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs an aiokafka scenario on an event loop of its own, bounded."""

    async def bounded() -> T:
        return await asyncio.wait_for(coroutine, WAIT_S * 2)

    return asyncio.run(bounded())


def aiokafka_settings(broker: SecureBroker, login: Login) -> dict[str, Any]:
    """kafka-python's settings, TLS as an ``ssl_context`` (aiokafka takes no file names)."""
    settings = {
        key: value
        for key, value in python_client_settings(broker, login).items()
        if not key.startswith("ssl_")
    }
    if "SSL" in login.security_protocol:
        certificate = client_certificate(broker.certificates, login)
        settings["ssl_context"] = create_ssl_context(
            cafile=trusted_ca(broker.certificates, login),
            certfile=None if certificate is None else certificate.certificate,
            keyfile=None if certificate is None else certificate.key,
        )
    settings["request_timeout_ms"] = REQUEST_TIMEOUT_MS
    return settings


async def _aiokafka_round_trip(
    broker: SecureBroker, login: Login, topic: str, values: Sequence[bytes]
) -> list[bytes]:
    producer = AIOKafkaProducer(**aiokafka_settings(broker, login))
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        **aiokafka_settings(broker, login),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        consumer.assign([AiokafkaTopicPartition(topic, 0)])
        read: list[bytes] = []
        while len(read) < len(values):
            for records in (await consumer.getmany(timeout_ms=500)).values():
                read += [record.value for record in records]
        return read
    finally:
        await consumer.stop()


def aiokafka_round_trip(
    broker: SecureBroker, login: Login, topic: str, values: Sequence[bytes]
) -> list[bytes]:
    return run(_aiokafka_round_trip(broker, login, topic, values))


async def _aiokafka_refusal(broker: SecureBroker, login: Login) -> None:
    producer = AIOKafkaProducer(**aiokafka_settings(broker, login))
    try:
        with pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
            await producer.start()
    finally:
        await producer.stop()


def aiokafka_refusal(broker: SecureBroker, login: Login) -> str:
    """aiokafka's start() raises KafkaConnectionError("Unable to bootstrap ...") after one
    attempt, having logged why as an error."""
    with logged("aiokafka") as lines:
        run(_aiokafka_refusal(broker, login))
    return "\n".join(lines)


async def _aiokafka_denial(broker: SecureBroker, login: Login, topic: str) -> str:
    producer = AIOKafkaProducer(**aiokafka_settings(broker, login))
    await producer.start()
    try:
        with pytest.raises(AiokafkaTopicAuthorizationFailed) as denied:
            await producer.send_and_wait(topic, b"denied", partition=0)
    finally:
        await producer.stop()
    return str(denied.value)


def aiokafka_denial(broker: SecureBroker, login: Login, topic: str) -> str:
    with logged("aiokafka", logging.CRITICAL):  # it logs the denial as an error too
        return run(_aiokafka_denial(broker, login, topic))


ROUND_TRIPS: dict[str, RoundTrip] = {
    "kafka-python": kafka_python_round_trip,
    "aiokafka": aiokafka_round_trip,
    "confluent": confluent_round_trip,
    "kcat": kcat_round_trip,
}
REFUSALS: dict[str, LoginRefusal] = {
    "kafka-python": kafka_python_refusal,
    "aiokafka": aiokafka_refusal,
    "confluent": confluent_refusal,
    "kcat": kcat_refusal,
}
DENIALS: dict[str, Denial] = {
    "kafka-python": kafka_python_denial,
    "aiokafka": aiokafka_denial,
    "confluent": confluent_denial,
    "kcat": kcat_denial,
}
TRANSACTIONS_AND_GROUPS: dict[str, TransactionAndGroup] = {
    "kafka-python": kafka_python_transaction_and_group,
    "confluent": confluent_transaction_and_group,
}
