"""Thousands of topics over SASL_SSL: large requests and answers through the TLS path.

librdkafka asks Metadata for every topic it produces to in one request (about 36 KB of
names at 1,500 topics: the request that once closed the connection over PLAINTEXT, see
test_many_topics.py). Over TLS such a request arrives as several TLS records, decrypted
into the read buffers a piece at a time, and the answers (Metadata for every topic, fetches
of every partition) go out encrypted in pieces. Every record must be acknowledged and read
back, at its acknowledged offset, over the same listener.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from kshim.testing import failure_lines
from tests.e2e.client_helpers import Deadline, unique_topic
from tests.e2e.security_support import (
    LOGINS,
    SecureBroker,
    librdkafka_settings,
    make_certificates,
)
from tests.e2e.test_many_topics import create_topics, descriptors_for

pytestmark = pytest.mark.timeout(180)

TOPICS = 1_500
WAIT_S = 60.0
LOGIN = LOGINS["sasl_ssl-scram-sha-256"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    directory: Path = tmp_path_factory.mktemp("security-many-topics")
    with descriptors_for(TOPICS):
        started = SecureBroker(directory / "data", make_certificates(directory)).start()
    try:
        started.add_scram_user(LOGIN.user, LOGIN.password)
        yield started
    finally:
        started.stop()
    assert failure_lines(started.log_text()) == []


def test_thousands_of_topics_produced_and_read_over_sasl_ssl(broker: SecureBroker) -> None:
    prefix = unique_topic("tls-many")
    topics = [f"{prefix}-{index:05d}" for index in range(TOPICS)]
    create_topics(broker.bootstrap, topics)
    settings = librdkafka_settings(broker, LOGIN)

    acknowledged: dict[str, int | None] = {}
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)
        else:
            acknowledged[str(message.topic())] = message.offset()

    producer = Producer({**settings, "acks": "all", "linger.ms": 5})
    for topic in topics:
        producer.produce(topic, topic.encode(), partition=0, on_delivery=delivered)
    assert producer.flush(WAIT_S) == 0
    assert failures == []
    assert acknowledged == dict.fromkeys(topics, 0)

    consumer = Consumer({**settings, "group.id": f"{prefix}-unused", "enable.auto.commit": False})
    try:
        consumer.assign([ConfluentTopicPartition(t, 0, OFFSET_BEGINNING) for t in topics])
        read: dict[str, tuple[int | None, bytes | None]] = {}
        deadline = Deadline(WAIT_S)
        while len(read) < TOPICS and not deadline.expired():
            message = consumer.poll(deadline.poll_timeout_s(0.5))
            if message is not None and message.error() is None:
                read[str(message.topic())] = (message.offset(), message.value())
    finally:
        consumer.close()
    assert read == {topic: (0, topic.encode()) for topic in topics}
