"""The full-data view ``T.full`` read by real clients against a real ``kshim serve``.

- confluent-kafka reads the latest value per key at original offsets (overwritten
  keys, keyless records gone; a tombstone kept), then streams later changes;
- kafka-python reads the same view; producing to it and creating ``X.full`` are refused;
- a confluent transactional producer: aborted records never appear, records of an open
  transaction only after commit;
- a kill -9 and a clean restart keep the view exact.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import pytest
from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition as AioTopicPartition  # type: ignore[import-untyped]
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KafkaTopicPartition

from kshim.testing import BrokerProcess
from tests.e2e.client_helpers import Deadline, unique_topic
from tests.e2e.partition_reading import consume_until_end

pytestmark = pytest.mark.timeout(120)

View = dict[bytes, tuple[int, bytes | None]]  # key -> (offset, value)
Write = tuple[bytes | None, bytes | None]
WRITES: list[Write] = [
    (b"a", b"1"),  # 0: replaced by 3
    (b"b", b"1"),  # 1: deleted by 5
    (None, b"keyless"),  # 2: never in the view
    (b"a", b"2"),  # 3
    (b"c", b"1"),  # 4
    (b"b", None),  # 5: tombstone, kept for delete.retention.ms
]
EXPECTED: View = {b"a": (3, b"2"), b"c": (4, b"1"), b"b": (5, None)}


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=20)


def produce(bootstrap: str, topic: str, writes: Sequence[Write]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in writes:
        producer.produce(topic, value=value, key=key, partition=0)
    assert producer.flush(20) == 0


@contextlib.contextmanager
def view_consumer(bootstrap: str, topic: str) -> Iterator[Consumer]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
         "isolation.level": "read_committed", "fetch.wait.max.ms": 100,
         "enable.partition.eof": True}
    )  # fmt: skip
    consumer.assign([ConfluentTopicPartition(topic + ".full", 0, OFFSET_BEGINNING)])
    try:
        yield consumer
    finally:
        consumer.close()


def wait_view_caught_up(consumer: Consumer, topic: str, deadline: Deadline) -> int:
    """Waits until ``topic.full``'s high watermark reaches ``topic``'s last stable offset."""
    while True:
        _, source = consumer.get_watermark_offsets(
            ConfluentTopicPartition(topic, 0), timeout=5, cached=False
        )
        _, view = consumer.get_watermark_offsets(
            ConfluentTopicPartition(topic + ".full", 0), timeout=5, cached=False
        )
        if view >= source:
            return int(view)
        assert not deadline.expired(), f"view at {view}, topic at {source}"


def read_until(consumer: Consumer, view: View, high_watermark: int, deadline: Deadline) -> View:
    """Applies consumed records to ``view`` until librdkafka reports the end of the
    partition at ``high_watermark`` or later. Its application position stays after the
    last record returned, but its fetch position crosses removed records (the batches'
    last offsets span them), which the end-of-partition event's offset shows."""
    partition = ConfluentTopicPartition(consumer.assignment()[0].topic, 0)
    low, _ = consumer.get_watermark_offsets(partition, timeout=5, cached=False)
    if low >= high_watermark:
        return view  # nothing to read

    def apply(message: Message) -> None:
        key, offset = message.key(), message.offset()
        assert key is not None and offset is not None
        view[key] = (offset, message.value())

    consume_until_end(consumer, high_watermark, deadline, apply)
    return view


def read_view(bootstrap: str, topic: str) -> View:
    deadline = Deadline()
    with view_consumer(bootstrap, topic) as consumer:
        high_watermark = wait_view_caught_up(consumer, topic, deadline)
        return read_until(consumer, {}, high_watermark, deadline)


def test_confluent_reads_snapshot_then_streams_changes(shared_broker: BrokerProcess) -> None:
    topic = unique_topic("full")
    create_topic(shared_broker.bootstrap, topic)
    produce(shared_broker.bootstrap, topic, WRITES)
    deadline = Deadline()
    with view_consumer(shared_broker.bootstrap, topic) as consumer:
        high_watermark = wait_view_caught_up(consumer, topic, deadline)
        view = read_until(consumer, {}, high_watermark, deadline)
        assert view == EXPECTED
        produce(shared_broker.bootstrap, topic, [(b"a", b"3"), (b"d", b"1"), (b"c", None)])
        high_watermark = wait_view_caught_up(consumer, topic, deadline)
        view = read_until(consumer, view, high_watermark, deadline)
    assert view == {b"b": (5, None), b"a": (6, b"3"), b"d": (7, b"1"), b"c": (8, None)}
    assert read_view(shared_broker.bootstrap, topic) == view  # a fresh reader agrees


def test_kafka_python_reads_view_and_writes_are_refused(shared_broker: BrokerProcess) -> None:
    topic = unique_topic("full-kp")
    create_topic(shared_broker.bootstrap, topic)
    produce(shared_broker.bootstrap, topic, [*WRITES, (None, b"tail")])  # a gap at 6
    read_view(shared_broker.bootstrap, topic)  # waits for the view to catch up
    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, consumer_timeout_ms=2000)
    partition = KafkaTopicPartition(topic + ".full", 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    view: View = {}
    deadline = Deadline()
    while consumer.position(partition) < 7:  # crosses the gap to the high watermark
        assert not deadline.expired()
        for message in consumer.poll(timeout_ms=500).get(partition, []):
            view[message.key] = (message.offset, message.value)
    consumer.close()
    assert view == EXPECTED
    # Named, the view is answered; it is left out of the listing of every topic, which
    # pattern subscriptions match (api/records/metadata.py).
    lister = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    named = lister.list_topics(topic + ".full", timeout=10).topics[topic + ".full"]
    assert named.error is None and list(named.partitions) == [0]
    assert topic + ".full" not in lister.list_topics(timeout=10).topics

    producer = KafkaProducer(bootstrap_servers=shared_broker.bootstrap, retries=0)
    with pytest.raises(Exception, match="InvalidRequest"):
        producer.send(topic + ".full", key=b"x", value=b"y", partition=0).get(timeout=20)
    producer.close()
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    with pytest.raises(KafkaException) as refused:  # names of views are reserved
        admin.create_topics([NewTopic(topic + ".full", 1, 1)])[topic + ".full"].result(timeout=20)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
    with pytest.raises(KafkaException) as delete_refused:
        admin.delete_topics([topic + ".full"])[topic + ".full"].result(timeout=20)
    assert delete_refused.value.args[0].code() == KafkaError.POLICY_VIOLATION


def test_view_configs_are_described_read_only(shared_broker: BrokerProcess) -> None:
    """Admin tools describe a view by name: it answers with its topic's settings,
    compacted and read-only, and refuses changes."""
    topic = unique_topic("full-configs")
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"delete.retention.ms": "1234"})])[
        topic
    ].result(timeout=20)
    view = ConfigResource(ResourceType.TOPIC, topic + ".full")
    configs = admin.describe_configs([view])[view].result(timeout=20)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["delete.retention.ms"].value == "1234"
    assert configs["kshim.full.view"].value == "false"
    assert all(entry.is_read_only for entry in configs.values())
    entry = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
    change = ConfigResource(ResourceType.TOPIC, topic + ".full", incremental_configs=[entry])
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([change])[change].result(timeout=20)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION


def test_transactions_only_committed_data(shared_broker: BrokerProcess) -> None:
    topic = unique_topic("full-txn")
    create_topic(shared_broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "transactional.id": topic})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce(topic, key=b"a", value=b"aborted", partition=0)
    producer.produce(topic, key=b"z", value=b"aborted", partition=0)
    assert producer.flush(20) == 0  # in the log before the abort (abort drops queued ones)
    producer.abort_transaction(20)
    producer.begin_transaction()
    producer.produce(topic, key=b"b", value=b"committed", partition=0)
    producer.flush(20)
    assert read_view(shared_broker.bootstrap, topic) == {}  # still open: not in the view
    producer.commit_transaction(20)
    view = read_view(shared_broker.bootstrap, topic)
    assert view == {b"b": (3, b"committed")}  # after aborted 0, 1 and the marker at 2


def test_view_survives_kill_and_restart(fresh_broker: BrokerProcess) -> None:
    topic = unique_topic("full-kill")
    create_topic(fresh_broker.bootstrap, topic)
    produce(fresh_broker.bootstrap, topic, WRITES)
    assert read_view(fresh_broker.bootstrap, topic) == EXPECTED
    produce(fresh_broker.bootstrap, topic, [(b"a", b"4")])
    fresh_broker.kill()
    fresh_broker.start()
    expected = {**EXPECTED, b"a": (6, b"4")}
    assert read_view(fresh_broker.bootstrap, topic) == expected
    fresh_broker.stop()
    fresh_broker.start()
    produce(fresh_broker.bootstrap, topic, [(b"c", b"2")])
    assert read_view(fresh_broker.bootstrap, topic) == {**expected, b"c": (7, b"2")}


async def test_aiokafka_reads_the_view_to_its_end(shared_broker: BrokerProcess) -> None:
    """aiokafka's read_committed consumer crosses the removed records up to the high
    watermark (its position ends there) and gets exactly the live keys."""
    topic = unique_topic("full-aio")
    create_topic(shared_broker.bootstrap, topic)
    produce(shared_broker.bootstrap, topic, WRITES)
    assert read_view(shared_broker.bootstrap, topic) == EXPECTED  # the view has caught up
    high_watermark = len(WRITES)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=shared_broker.bootstrap, isolation_level="read_committed",
        enable_auto_commit=False, auto_offset_reset="earliest",
    )  # fmt: skip
    await consumer.start()
    try:
        partition = AioTopicPartition(topic + ".full", 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        view: View = {}
        deadline = Deadline()
        while await consumer.position(partition) < high_watermark:
            assert not deadline.expired(), "aiokafka did not reach the high watermark"
            batches = await consumer.getmany(partition, timeout_ms=500)
            for message in batches.get(partition, []):
                view[message.key] = (message.offset, message.value)
    finally:
        await consumer.stop()
    assert view == EXPECTED
