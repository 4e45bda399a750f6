"""What the capture needs from the broker: its topic, the review hook it runs, a producer.

The capture writes one single-partition topic per source, so the topic's offset order is the
source's change order. Its producer is transactional (KIP-98): ``init_transactions`` makes the
broker settle the previous instance's open transaction before this one may begin, which is
when the broker's review hook (review.py) decides a batch a crashed capture left open.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from spark_examples.capture.review import REVIEW_HOOK_SETTING, transactional_id_for

INIT_RETRY_S = 0.5
NONE: Mapping[str, str] = {}  # no security settings: PLAINTEXT


def ensure_topic(
    bootstrap: str, topic: str, timeout_s: float = 30.0, security: Mapping[str, str] = NONE
) -> None:
    """Creates ``topic`` with one partition unless it exists; ``security`` is librdkafka's
    TLS and SASL settings (spark_examples/kafka_security.py), none for PLAINTEXT."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **security})
    metadata = admin.list_topics(timeout=timeout_s)
    if topic in metadata.topics:
        return
    future = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def broker_review_hook(
    bootstrap: str, timeout_s: float = 30.0, security: Mapping[str, str] = NONE
) -> str | None:
    """The broker's ``kshim.review.hook`` setting, or None if it does not report one."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **security})
    brokers = admin.list_topics(timeout=timeout_s).brokers
    resource = ConfigResource(ResourceType.BROKER, str(next(iter(brokers))))
    try:
        configs = admin.describe_configs([resource])[resource].result(timeout=timeout_s)
    except KafkaException:
        return None
    entry = configs.get(REVIEW_HOOK_SETTING)
    return entry.value if entry is not None and entry.value else None


def new_producer(
    bootstrap: str,
    topic: str,
    transaction_timeout_ms: int,
    stop: threading.Event,
    security: Mapping[str, str] = NONE,
) -> Producer:
    """A transactional producer after init_transactions (which settles any open batch),
    connecting with librdkafka's ``security`` settings.

    Retries init_transactions until it succeeds; raises KafkaException when the error is
    fatal or ``stop`` is set.
    """
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id_for(topic),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "transaction.timeout.ms": transaction_timeout_ms,
        "socket.timeout.ms": min(60_000, transaction_timeout_ms),
        **security,
    })  # fmt: skip
    while True:
        try:
            producer.init_transactions(30.0)
            return producer
        except KafkaException as error:
            # Undecided review (CONCURRENT_TRANSACTIONS) or broker down: ask again.
            if stop.is_set() or error.args[0].fatal():
                raise
            time.sleep(INIT_RETRY_S)
