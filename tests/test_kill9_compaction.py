"""kill -9 of a real ``kshim serve`` while its log cleaner compacts, restarted on the same data.

A producer writes twenty keys over and over (every tenth write of a key a tombstone) to a
topic with small segments, compacted as soon as a segment is sealed and with tombstones
removed at the second pass, and the broker is killed mid-stream, so the kill lands in
passes too. After each restart, a reader from offset 0 must find offsets strictly
increasing, every record as it was produced at its offset, and for each key its latest
acknowledged write or something later: never a value older than an acknowledged one,
and no value of a key whose acknowledged tombstone the cleaner removed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kshim.testing import BrokerProcess

TOPIC = "kill9-compacted"
ROUNDS = 3
KEYS = 20
SETTINGS = [
    "log.cleaner.backoff.ms=20",
    "kshim.wal.checkpoint.interval.ms=20",
    "kshim.memtable.bytes=4096",
    "kshim.memtable.total.bytes=65536",
]
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "2048",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
}
Acknowledged = dict[int, tuple[bytes, bytes | None]]  # offset -> key, value


def _write(sequence: int) -> tuple[bytes, bytes | None]:
    key = b"k%d" % (sequence % KEYS)
    tombstone = (sequence // KEYS) % 10 == 9
    return key, None if tombstone else key + b"|%d" % sequence


def _produce_until_killed(broker: BrokerProcess, first: int, kill_after: int) -> Acknowledged:
    acknowledged: Acknowledged = {}

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        offset, key = message.offset(), message.key()
        if error is None and offset is not None and key is not None:
            acknowledged[offset] = (key, message.value())

    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
         "linger.ms": 1, "message.timeout.ms": 5000}
    )  # fmt: skip
    deadline = time.monotonic() + 60
    sequence = first
    while len(acknowledged) < kill_after and time.monotonic() < deadline:
        key, value = _write(sequence)
        producer.produce(TOPIC, key=key, value=value, on_delivery=on_delivery)
        sequence += 1
        producer.poll(0)
        if sequence % 100 == 0:
            producer.poll(0.01)
    broker.kill()
    producer.purge()
    producer.flush(0)
    return acknowledged


def _read_everything(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "kill9-compacted-reader",
         "enable.auto.commit": False, "enable.partition.eof": True}
    )  # fmt: skip
    try:
        partition = ConfluentTopicPartition(TOPIC, 0)
        _, high_watermark = consumer.get_watermark_offsets(partition, timeout=10)
        consumer.assign([ConfluentTopicPartition(TOPIC, 0, 0)])
        records: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            offset, key, error = message.offset(), message.key(), message.error()
            assert offset is not None
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                if offset >= high_watermark:
                    return records
                continue
            assert key is not None
            records.append((offset, key, message.value()))
        raise AssertionError(f"no end of partition at {high_watermark}")
    finally:
        consumer.close()


def _check(records: list[tuple[int, bytes, bytes | None]], acknowledged: Acknowledged) -> None:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    for offset, key, value in records:
        if offset in acknowledged:
            assert acknowledged[offset] == (key, value), f"record at {offset} changed"
        assert value is None or value.startswith(key + b"|"), f"{offset}: {key!r}={value!r}"
    by_key: dict[bytes, list[int]] = {}
    for offset, key, _ in records:
        by_key.setdefault(key, []).append(offset)
    latest: dict[bytes, int] = {}
    for offset, (key, _) in sorted(acknowledged.items()):
        latest[key] = offset
    for key, offset in latest.items():
        found = by_key.get(key, [])
        if found and found[-1] >= offset:
            continue  # the acknowledged write, or a later one
        assert acknowledged[offset][1] is None, f"{key!r}: acknowledged value at {offset} lost"
        assert not found, f"{key!r}: values older than its acknowledged tombstone came back"


@pytest.mark.slow
def test_compaction_survives_kill_9(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", SETTINGS).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=TOPIC_CONFIGS)])[TOPIC].result(20)
        everything: Acknowledged = {}
        sequence = 0
        for round_number in range(ROUNDS):
            acknowledged = _produce_until_killed(broker, sequence, 3000 + 1000 * round_number)
            assert len(acknowledged) >= 3000
            sequence += 10 * (3000 + 1000 * round_number)  # past anything sent this round
            everything.update(acknowledged)
            broker.start()
            _check(_read_everything(broker.bootstrap), everything)
        assert broker.log_text().count("compacted") >= ROUNDS
    finally:
        broker.stop()
