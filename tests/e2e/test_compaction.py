"""A compacted topic read by real clients against a real ``kshim serve``.

confluent-kafka produces keys written over and over (in multi-record batches, so the
cleaner rewrites batches as well as dropping whole ones) and a tombstone; the broker's log
cleaner compacts the topic in the background. Then:

- confluent-kafka and kafka-python read it from the beginning across the removed ranges
  to the high watermark: each key's latest record at its original offset, nothing else;
- a consumer positioned at a removed offset gets the next record;
- ListOffsets: the earliest offset is still 0 (compaction never moves the log start),
  and an offset by timestamp of a removed record is the next record's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KafkaTopicPartition

from kshim.testing import BrokerProcess
from tests.e2e.client_helpers import Deadline, unique_topic
from tests.e2e.partition_reading import consume_until_end

pytestmark = pytest.mark.timeout(180)

SETTINGS = [
    "log.cleaner.backoff.ms=50",
    "kshim.wal.checkpoint.interval.ms=20",  # rolled segments are sealed, so cleanable, soon
]
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "min.cleanable.dirty.ratio": "0.01",
}
KEYS = [b"k%d" % index for index in range(5)]
ROUNDS = 40
BASE_TIMESTAMP_MS = 1_700_000_000_000
Read = list[tuple[int, bytes | None, bytes | None]]  # offset, key, value
Stamped = list[tuple[int, int]]  # offset, timestamp


def _writes() -> list[tuple[bytes, bytes | None]]:
    writes: list[tuple[bytes, bytes | None]] = [
        (key, b"%s:%d" % (key, round_number)) for round_number in range(ROUNDS) for key in KEYS
    ]
    writes.append((KEYS[-1], None))  # a tombstone: kept for delete.retention.ms (a day)
    writes += [(b"tail", b"%d" % index) for index in range(40)]  # rolls the segments above
    return writes


WRITES = _writes()
MAIN = len(WRITES) - 40  # the writes before the tail
EXPECTED_MAIN = {key: (offset, value) for offset, (key, value) in enumerate(WRITES[:MAIN])}


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    broker = BrokerProcess(tmp_path_factory.mktemp("compaction") / "data", SETTINGS).start()
    try:
        topic = unique_topic("compacted")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIGS)])[topic].result(20)
        producer = Producer(  # batches of up to three records
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.num.messages": 3}
        )
        for index, (key, value) in enumerate(WRITES):
            producer.produce(topic, value=value, key=key, timestamp=BASE_TIMESTAMP_MS + index)
        assert producer.flush(20) == 0
        _wait_compacted(broker.bootstrap, topic)
        yield broker, topic
    finally:
        broker.stop()


def _main_part(records: Read) -> dict[bytes | None, tuple[int, bytes | None]]:
    return {key: (offset, value) for offset, key, value in records if offset < MAIN}


def _wait_compacted(bootstrap: str, topic: str) -> None:
    deadline = Deadline(60)
    while True:
        records = read_confluent(bootstrap, topic, 0)
        main = [record for record in records if record[0] < MAIN]
        if len(main) == len(KEYS):
            assert _main_part(records) == EXPECTED_MAIN
            return
        assert not deadline.expired(), f"{len(main)} records left of the first {MAIN}"


@contextlib.contextmanager
def _confluent(bootstrap: str) -> Iterator[Consumer]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
         "enable.partition.eof": True, "fetch.wait.max.ms": 50}
    )  # fmt: skip
    try:
        yield consumer
    finally:
        consumer.close()


def read_confluent(bootstrap: str, topic: str, start: int) -> Read:
    with _confluent(bootstrap) as consumer:
        partition = ConfluentTopicPartition(topic, 0)
        _, high_watermark = consumer.get_watermark_offsets(partition, timeout=10)
        consumer.assign([ConfluentTopicPartition(topic, 0, start)])
        records: Read = []

        def keep(message: Message) -> None:
            offset = message.offset()
            assert offset is not None
            records.append((offset, message.key(), message.value()))

        consume_until_end(consumer, high_watermark, Deadline(), keep)
        return records


def read_kafka_python(bootstrap: str, topic: str, start: int) -> Read:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partition = KafkaTopicPartition(topic, 0)
        consumer.assign([partition])
        high_watermark = consumer.end_offsets([partition])[partition]
        consumer.seek(partition, start)
        records: Read = []
        deadline = Deadline()
        while consumer.position(partition) < high_watermark:
            assert not deadline.expired(), f"stuck at {consumer.position(partition)}"
            for batch in consumer.poll(timeout_ms=200).values():
                records += [(record.offset, record.key, record.value) for record in batch]
        return records
    finally:
        consumer.close()


def _check_compacted(records: Read) -> None:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    for offset, key, value in records:
        assert WRITES[offset] == (key, value), f"offset {offset} is not as produced"
    assert _main_part(records) == EXPECTED_MAIN
    assert [offset for offset in offsets if offset >= MAIN][-1] == len(WRITES) - 1


def test_clients_read_a_compacted_topic_from_the_beginning(
    compacted: tuple[BrokerProcess, str],
) -> None:
    broker, topic = compacted
    from_confluent = read_confluent(broker.bootstrap, topic, 0)
    _check_compacted(from_confluent)
    assert read_kafka_python(broker.bootstrap, topic, 0) == from_confluent
    assert "compacted" in broker.log_text()


def test_records_keep_their_timestamps(compacted: tuple[BrokerProcess, str]) -> None:
    """The cleaner keeps a tombstone's batch with its delete horizon in the batch's base
    timestamp (KIP-534): record timestamps must not change for any client."""
    broker, topic = compacted
    with _confluent(broker.bootstrap) as consumer:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        stamped: Stamped = []

        def keep(message: Message) -> None:
            offset = message.offset()
            assert offset is not None
            stamped.append((offset, message.timestamp()[1]))

        consume_until_end(consumer, len(WRITES), Deadline(), keep)
    assert stamped and all(stamp == BASE_TIMESTAMP_MS + offset for offset, stamp in stamped)
    assert (MAIN - 1, BASE_TIMESTAMP_MS + MAIN - 1) in stamped  # the tombstone
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        partition = KafkaTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        found: Stamped = []
        deadline = Deadline()
        while len(found) < len(stamped):
            assert not deadline.expired()
            for batch in consumer.poll(timeout_ms=200).values():
                found += [(record.offset, record.timestamp) for record in batch]
        assert found == stamped
    finally:
        consumer.close()


def test_a_consumer_at_a_removed_offset_gets_the_next_record(
    compacted: tuple[BrokerProcess, str],
) -> None:
    broker, topic = compacted
    surviving = [offset for offset, _, _ in read_confluent(broker.bootstrap, topic, 0)]
    removed = [offset for offset in range(MAIN) if offset not in surviving]
    assert removed[0] == 0
    for start in (removed[0], removed[len(removed) // 2], removed[-1]):
        following = [offset for offset in surviving if offset >= start]
        assert [r[0] for r in read_confluent(broker.bootstrap, topic, start)] == following
        assert [r[0] for r in read_kafka_python(broker.bootstrap, topic, start)] == following


def test_list_offsets_of_a_compacted_topic(compacted: tuple[BrokerProcess, str]) -> None:
    broker, topic = compacted
    surviving = [offset for offset, _, _ in read_confluent(broker.bootstrap, topic, 0)]
    with _confluent(broker.bootstrap) as consumer:
        low, high = consumer.get_watermark_offsets(ConfluentTopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, len(WRITES))
        for removed in (0, 7, MAIN - 10):
            wanted = ConfluentTopicPartition(topic, 0, BASE_TIMESTAMP_MS + removed)
            (found,) = consumer.offsets_for_times([wanted], timeout=10)
            assert found.offset == min(offset for offset in surviving if offset >= removed)


def test_the_topic_describes_its_compaction_configs(
    compacted: tuple[BrokerProcess, str],
) -> None:
    broker, topic = compacted
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=20)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["min.cleanable.dirty.ratio"].value == "0.01"
    assert configs["min.compaction.lag.ms"].value == "0"
    assert configs["max.compaction.lag.ms"].value == str((1 << 63) - 1)
    assert configs["delete.retention.ms"].value == "86400000"


def test_a_record_without_a_key_is_refused(compacted: tuple[BrokerProcess, str]) -> None:
    broker, topic = compacted
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    producer.produce(topic, value=b"keyless", on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(20) == 0
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD


def test_compacted_segments_are_on_disk_under_generation_names(
    compacted: tuple[BrokerProcess, str],
) -> None:
    broker, topic = compacted
    names = [path.name for path in (Path(broker.data_dir) / "logs" / f"{topic}-0").iterdir()]
    assert any(name.count(".") == 2 and name.endswith(".log") for name in names), names
    assert not [name for name in names if name.endswith(".cleaned")]
