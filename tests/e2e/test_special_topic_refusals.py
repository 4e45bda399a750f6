"""A new user's first steps with ``T.delay`` and ``T.full``, with confluent-kafka and
aiokafka against a real ``kshim serve``, and what the broker's log says.

- Auto-creation on: producing to ``T.delay`` of a ``T`` that does not exist yet creates
  ``T`` (the producers' Metadata request), and the records arrive in ``T`` at their due
  time; a pattern subscription matching ``T`` and ``T.delay`` is assigned ``T`` only.
- Auto-creation off: both producers fail with an unknown topic, and the broker logs once
  (WARNING) that ``T`` must be created first.
- A produce to ``T.full`` is refused, several times from two clients, and the broker logs
  the reason once (WARNING).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.errors import UnknownTopicOrPartitionError
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kshim.testing import BrokerProcess
from tests.e2e.client_helpers import Deadline, unique_topic

pytestmark = pytest.mark.timeout(60)

DELIVER_AT = "kshim-deliver-at"
DUE_IN_MS = 1500
CLOCK_SLACK_MS = 50  # the consumer's and the broker's clocks are one, read at two moments
CLIENT_ID = "refusal-e2e"
NO_METRICS = "kshim.metrics.listen="


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def due_header(due_ms: int) -> list[tuple[str, str | bytes | None]]:
    return [(DELIVER_AT, str(due_ms).encode())]


def confluent_reports(topic: str, count: int, **settings: str | int) -> list[KafkaError | None]:
    """Produces ``count`` records to ``topic`` due now, one request each, and returns each
    record's delivery error (None: written)."""
    producer = Producer({"bootstrap.servers": settings.pop("bootstrap"), "client.id": CLIENT_ID,
                         "linger.ms": 0, **settings})  # fmt: skip
    errors: list[KafkaError | None] = []

    def report(error: KafkaError | None, _: Message) -> None:
        errors.append(error)

    for index in range(count):
        producer.produce(topic, value=b"%d" % index, headers=due_header(now_ms()),
                         on_delivery=report)  # fmt: skip
        assert producer.flush(15) == 0
    return errors


def warnings_about(broker: BrokerProcess, topic: str) -> list[str]:
    """The broker log's WARNING lines of the refusal log about ``topic``."""
    text = Path(broker.log_path).read_text(errors="replace")
    return [
        line
        for line in text.splitlines()
        if " WARNING kshim.broker.refusal_log: " in line and f"topic {topic}," in line
    ]


@pytest.fixture
def strict_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of its own that auto-creates no topic."""
    broker = BrokerProcess(tmp_path / "data", [NO_METRICS, "auto.create.topics.enable=false"])
    broker.start()
    yield broker
    broker.stop()


async def test_producing_to_the_companion_of_a_new_topic_creates_it_and_delivers(
    shared_broker: BrokerProcess,
) -> None:
    bootstrap = shared_broker.bootstrap
    prefix = unique_topic("delay-first")
    by_confluent, by_aiokafka = prefix + "-c", prefix + "-a"
    due_ms = now_ms() + DUE_IN_MS
    [error] = confluent_reports(by_confluent + ".delay", 1, bootstrap=bootstrap,
                                **{"message.timeout.ms": 10_000})  # fmt: skip
    assert error is None, error
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await producer.start()
    try:
        await producer.send_and_wait(by_aiokafka + ".delay", b"0", headers=due_header(due_ms))
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=prefix,
                                auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    # Matches T.delay's name too; Metadata for all topics never lists it, so only T is read.
    consumer.subscribe(pattern=f"^{re.escape(prefix)}-.*")
    await consumer.start()
    try:
        arrivals: dict[str, int] = {}
        deadline = Deadline(20)
        while len(arrivals) < 2:
            assert not deadline.expired(), f"arrived: {arrivals}"
            batches = await consumer.getmany(timeout_ms=200)
            for topic_partition, records in batches.items():
                for _ in records:
                    arrivals[topic_partition.topic] = now_ms()
        assert {tp.topic for tp in consumer.assignment()} == {by_confluent, by_aiokafka}
    finally:
        await consumer.stop()
    # confluent's record was due when produced, aiokafka's at due_ms.
    assert arrivals[by_aiokafka] >= due_ms - CLOCK_SLACK_MS, "delivered before its due time"


async def test_without_auto_creation_the_companion_of_no_topic_is_unknown_and_logged_once(
    strict_broker: BrokerProcess,
) -> None:
    bootstrap = strict_broker.bootstrap
    topic = unique_topic("delay-no-target")
    [error] = confluent_reports(topic + ".delay", 1, bootstrap=bootstrap,
                                **{"topic.metadata.propagation.max.ms": 300,
                                   "message.timeout.ms": 5_000})  # fmt: skip
    assert error is not None
    assert error.code() in (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART), error
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=1_000,
                                retry_backoff_ms=100)  # fmt: skip
    await producer.start()
    try:
        with pytest.raises(UnknownTopicOrPartitionError):
            await producer.send_and_wait(topic + ".delay", b"x", headers=due_header(now_ms()))
    finally:
        await producer.stop()
    # Several Metadata requests from two clients within a minute: one line.
    [line] = warnings_about(strict_broker, topic + ".delay")
    assert line.endswith(
        f"UNKNOWN_TOPIC_OR_PARTITION: create {topic} first: {topic}.delay delays records"
        f" for {topic}, which does not exist"
    )


async def test_a_produce_to_a_view_is_refused_and_logged_once(
    shared_broker: BrokerProcess,
) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("full-refused")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=20)
    errors = confluent_reports(topic + ".full", 3, bootstrap=bootstrap,
                               **{"message.timeout.ms": 10_000, "retries": 0})  # fmt: skip
    assert [None if error is None else error.code() for error in errors] == [
        KafkaError.INVALID_REQUEST
    ] * 3
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await producer.start()
    try:
        with pytest.raises(AioKafkaError):
            await producer.send_and_wait(topic + ".full", b"x")
    finally:
        await producer.stop()
    reason = f"{topic}.full is a read-only full-data view; produce to its topic instead"
    [line] = warnings_about(shared_broker, topic + ".full")
    assert line.endswith(
        f"Produce refused: topic {topic}.full, client '{CLIENT_ID}', INVALID_REQUEST: {reason}"
    )
