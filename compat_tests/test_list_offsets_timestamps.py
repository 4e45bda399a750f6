"""ListOffsets by timestamp and MAX_TIMESTAMP (KIP-79, KIP-734) next to transactions.

The same raw requests on every broker; the answers are what Apache Kafka 3.9.2 gave:

- a transaction marker is a record like any other to these lookups: right after a
  commit or an abort its marker, stamped when it was written, is the record with the
  largest timestamp, and a lookup past the transaction's data finds the marker;
- read_committed answers only a record below the last stable offset: a hit inside an
  open transaction is no answer (offset -1), not the next best record, even when
  committed records before it would match;
- no answer is offset -1, timestamp -1, leader epoch -1.
"""

from __future__ import annotations

import time
import warnings

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.conformance_probe import Producer
from compat_tests.raw_transactions import (
    add_partition,
    end_transaction,
    init_producer,
    probe,
    wait_for_leader,
)
from compat_tests.support import create_topic, require_transactions

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

pytestmark = [pytest.mark.wire, pytest.mark.timeout(120)]

PRODUCE, LIST_OFFSETS = 0, 2
PRODUCE_V, LIST_OFFSETS_V = 9, 8
LATEST, MAX_TIMESTAMP = -1, -3
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
BASE_MS = 1_700_000_000_000
NO_ANSWER = (-1, -1, -1)  # offset, timestamp, leader epoch
SETTLE_TIMEOUT_S = 30.0
Answer = tuple[int, int, int]


def batch(
    count: int, first_timestamp: int, producer: Producer | None = None, sequence: int = 0
) -> bytes:
    """``count`` records 1 s apart from ``first_timestamp``; transactional with a producer."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=producer is not None,
        producer_id=producer.producer_id if producer else -1,
        producer_epoch=producer.epoch if producer else -1,
        base_sequence=sequence if producer else -1,
        batch_size=1 << 20,
    )
    for index in range(count):
        builder.append(index, timestamp=first_timestamp + index * 1000, key=b"k", value=b"v",
                       headers=[])  # fmt: skip
    return bytes(builder.build())


def produce(
    broker: BrokerUnderTest, topic: str, data: bytes, transactional_id: str | None = None
) -> None:
    request = {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": data}]}],
    }
    [answer] = probe(broker).call(PRODUCE, PRODUCE_V, request).responses
    [partition] = answer.partition_responses
    assert int(partition.error_code) == 0, partition


def list_offsets(broker: BrokerUnderTest, topic: str, timestamp: int, isolation: int) -> Answer:
    request = {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
    }
    [answer] = probe(broker).call(LIST_OFFSETS, LIST_OFFSETS_V, request).topics
    [partition] = answer.partitions
    assert int(partition.error_code) == 0, partition
    return partition.offset, partition.timestamp, partition.leader_epoch


def both_levels(broker: BrokerUnderTest, topic: str, timestamp: int) -> tuple[Answer, Answer]:
    return (
        list_offsets(broker, topic, timestamp, READ_UNCOMMITTED),
        list_offsets(broker, topic, timestamp, READ_COMMITTED),
    )


def open_transaction(
    broker: BrokerUnderTest, topic: str, count: int, first_timestamp: int
) -> tuple[str, Producer]:
    transactional_id = probe(broker).name("max-ts")
    producer = init_producer(broker, transactional_id)
    assert add_partition(broker, transactional_id, producer, topic) == 0
    produce(broker, topic, batch(count, first_timestamp, producer), transactional_id)
    return transactional_id, producer


def ended_transaction(broker: BrokerUnderTest, topic: str, commit: bool) -> tuple[int, int]:
    """Three records stamped BASE_MS.. in a transaction that ends; returns the wall-clock
    window (ms) the marker was written in, once it has been (the LSO passed it)."""
    transactional_id, producer = open_transaction(broker, topic, 3, BASE_MS)
    before = int(time.time() * 1000)
    assert end_transaction(broker, transactional_id, producer, commit) == 0
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while list_offsets(broker, topic, LATEST, READ_COMMITTED)[0] != 4:
        assert time.monotonic() < deadline, "the marker never landed"
        time.sleep(0.05)
    return before, int(time.time() * 1000)


@pytest.fixture
def topic(broker: BrokerUnderTest) -> str:
    require_transactions(broker)
    created = create_topic(broker, "timestamps")
    wait_for_leader(broker, created)
    return created


def test_an_empty_partition_has_no_max_timestamp(broker: BrokerUnderTest, topic: str) -> None:
    assert both_levels(broker, topic, MAX_TIMESTAMP) == (NO_ANSWER, NO_ANSWER)


def test_a_plain_topic_answers_its_newest_record(broker: BrokerUnderTest, topic: str) -> None:
    produce(broker, topic, batch(3, BASE_MS))
    newest = (2, BASE_MS + 2000, 0)
    assert both_levels(broker, topic, MAX_TIMESTAMP) == (newest, newest)
    assert both_levels(broker, topic, BASE_MS + 10**9) == (NO_ANSWER, NO_ANSWER)


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "aborted"])
def test_an_ended_transaction_answers_its_marker(
    broker: BrokerUnderTest, topic: str, commit: bool
) -> None:
    """Kafka's time index counts the marker, stamped after the records were."""
    written_from, written_until = ended_transaction(broker, topic, commit)
    produce(broker, topic, batch(1, BASE_MS + 20_000))  # older than the marker

    for answer in [
        *both_levels(broker, topic, MAX_TIMESTAMP),
        *both_levels(broker, topic, BASE_MS + 10_000),  # past the transaction's data
    ]:
        offset, timestamp, epoch = answer
        assert (offset, epoch) == (3, 0), answer
        assert written_from <= timestamp <= written_until, answer


def test_read_committed_answers_nothing_inside_an_open_transaction(
    broker: BrokerUnderTest, topic: str
) -> None:
    produce(broker, topic, batch(3, BASE_MS))  # offsets 0-2, committed
    open_transaction(broker, topic, 2, BASE_MS + 10_000)  # offsets 3-4, newer

    assert both_levels(broker, topic, MAX_TIMESTAMP) == ((4, BASE_MS + 11_000, 0), NO_ANSWER)
    assert both_levels(broker, topic, BASE_MS + 5000) == ((3, BASE_MS + 10_000, 0), NO_ANSWER)
    oldest = (0, BASE_MS, 0)
    assert both_levels(broker, topic, 0) == (oldest, oldest)


def test_an_open_transaction_alone(broker: BrokerUnderTest, topic: str) -> None:
    open_transaction(broker, topic, 3, BASE_MS)

    assert both_levels(broker, topic, MAX_TIMESTAMP) == ((2, BASE_MS + 2000, 0), NO_ANSWER)
    assert both_levels(broker, topic, 0) == ((0, BASE_MS, 0), NO_ANSWER)
