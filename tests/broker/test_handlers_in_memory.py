"""Handlers as functions of (request, broker state): real handlers over the in-memory log
store, without a socket or a process (storage/log/memory_log.py; LMDB metadata in tmp_path).

Answers that handlers encode themselves (Produce, Fetch, Metadata) are decoded with kio, as a
client would read them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kshim.api.records import fetch, list_offsets, metadata, produce
from kshim.api.transactions import add_partitions_to_txn, end_txn, init_producer_id
from kshim.broker.broker import Broker
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kshim.protocol.messages.end_txn import EndTxnRequest
from kshim.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kshim.protocol.messages.init_producer_id import InitProducerIdRequest
from kshim.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kshim.protocol.metadata_request import MetadataRequest
from kshim.protocol.produce_request import PartitionData, ProduceRequest, TopicData
from kshim.protocol.record_batch import TRANSACTIONAL_FLAG_MASK
from kshim.protocol.records import BatchSpec, Record, build_batch, iter_records
from tests.broker.handler_calls import context, decoded, memory_broker

NOW_MS = 1_700_000_000_000
LATEST, EARLIEST = -1, -2
PRODUCE_VERSION, FETCH_VERSION = 9, 12
TOPIC = "orders"
PLAIN = BatchSpec()  # a producer without idempotence


def clock() -> int:
    return NOW_MS


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with memory_broker(tmp_path, TOPIC, 1, clock) as started:
        yield started


async def produce_values(
    broker: Broker,
    values: list[bytes],
    partition: int = 0,
    spec: BatchSpec = PLAIN,
    transactional_id: str | None = None,
) -> Any:
    records = [Record(index, NOW_MS + index, b"k", value) for index, value in enumerate(values)]
    batch = memoryview(build_batch(records, spec))
    topic_data = (TopicData(TOPIC, (PartitionData(partition, batch),)),)
    request = ProduceRequest(transactional_id, -1, 5000, topic_data)
    answer = await produce.handle(request, context(broker, 0, PRODUCE_VERSION))
    [topic] = decoded(0, PRODUCE_VERSION, answer).responses
    [result] = topic.partition_responses
    return result


async def fetch_values(broker: Broker, offset: int) -> tuple[Any, list[bytes | None]]:
    wanted = FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
    request = FetchRequest(max_bytes=1 << 20, topics=[FetchTopic(topic=TOPIC, partitions=[wanted])])
    answer = await fetch.handle(request, context(broker, 1, FETCH_VERSION))
    [topic] = decoded(1, FETCH_VERSION, answer).responses
    [partition] = topic.partitions
    values = [record.value for record in iter_records(partition.records or b"")]
    return partition, values


async def test_produce_then_fetch_reads_the_records_back(broker: Broker) -> None:
    first = await produce_values(broker, [b"a", b"b"])
    second = await produce_values(broker, [b"c"])
    assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.none, 2)
    partition, values = await fetch_values(broker, 1)
    assert partition.high_watermark == 3
    assert values == [b"a", b"b", b"c"]  # whole batches: the one holding offset 1 comes first


async def test_produce_to_a_partition_the_topic_lacks_is_refused(broker: Broker) -> None:
    result = await produce_values(broker, [b"x"], partition=3)
    assert result.error_code == ErrorCode.unknown_topic_or_partition
    partition, values = await fetch_values(broker, 0)
    assert (partition.high_watermark, values) == (0, [])


async def test_fetch_past_the_end_is_out_of_range(broker: Broker) -> None:
    await produce_values(broker, [b"a"])
    partition, values = await fetch_values(broker, 5)
    assert (partition.error_code, values) == (ErrorCode.offset_out_of_range, [])


async def test_list_offsets_earliest_latest_and_by_timestamp(broker: Broker) -> None:
    await produce_values(broker, [b"a", b"b", b"c"])  # stamped NOW_MS, +1, +2
    wanted = [
        ListOffsetsPartition(partition_index=0, timestamp=timestamp)
        for timestamp in (EARLIEST, LATEST, NOW_MS + 1, NOW_MS + 9)
    ]
    request = ListOffsetsRequest(topics=[ListOffsetsTopic(name=TOPIC, partitions=wanted)])
    response = await list_offsets.handle(request, context(broker, 2, 9))
    found = [(answer.offset, answer.timestamp) for answer in response.topics[0].partitions]
    assert found == [(0, -1), (3, -1), (1, NOW_MS + 1), (-1, -1)]


async def test_metadata_lists_the_topic_and_answers_its_view_by_name(broker: Broker) -> None:
    """The view is left out of the all-topics answer (pattern subscriptions match it) and
    answered when named."""
    parts = await metadata.handle(MetadataRequest(topics=None), context(broker, 3, 12))
    assert [(topic.name, topic.error_code) for topic in decoded(3, 12, parts).topics] == [
        (TOPIC, ErrorCode.none),
    ]
    named = MetadataRequest(topics=(TOPIC + ".full",), allow_auto_topic_creation=False)
    [view] = decoded(3, 12, await metadata.handle(named, context(broker, 3, 12))).topics
    assert (view.name, view.error_code) == (TOPIC + ".full", ErrorCode.none)
    unknown = MetadataRequest(topics=("nope",), allow_auto_topic_creation=False)
    [answer] = decoded(3, 12, await metadata.handle(unknown, context(broker, 3, 12))).topics
    assert answer.error_code == ErrorCode.unknown_topic_or_partition


async def latest(broker: Broker, read_committed: bool) -> int:
    request = ListOffsetsRequest(
        isolation_level=1 if read_committed else 0,
        topics=[ListOffsetsTopic(name=TOPIC, partitions=[ListOffsetsPartition(timestamp=LATEST)])],
    )
    response = await list_offsets.handle(request, context(broker, 2, 9))
    return response.topics[0].partitions[0].offset


async def test_end_txn_commits_a_half_message(broker: Broker) -> None:
    """InitProducerId, AddPartitionsToTxn, a transactional batch, EndTxn: the records stay
    below the last stable offset until the commit marker is written."""
    init = InitProducerIdRequest(transactional_id="sync-1", transaction_timeout_ms=60_000)
    producer = await init_producer_id.handle(init, context(broker, 22, 4))
    assert producer.error_code == ErrorCode.none
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="sync-1",
        v3_and_below_producer_id=producer.producer_id,
        v3_and_below_producer_epoch=producer.producer_epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])],
    )
    added = await add_partitions_to_txn.handle(add, context(broker, 24, 3))
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    spec = BatchSpec(
        attributes=TRANSACTIONAL_FLAG_MASK,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=0,
    )
    written = await produce_values(broker, [b"a", b"b"], spec=spec, transactional_id="sync-1")
    assert written.error_code == ErrorCode.none
    assert (await latest(broker, read_committed=False), await latest(broker, True)) == (2, 0)

    end = EndTxnRequest(
        transactional_id="sync-1",
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        committed=True,
    )
    assert (await end_txn.handle(end, context(broker, 26, 3))).error_code == ErrorCode.none
    assert (await latest(broker, read_committed=False), await latest(broker, True)) == (3, 3)
    retried = await end_txn.handle(end, context(broker, 26, 3))  # a retry of a completed commit
    assert retried.error_code == ErrorCode.none
    end.committed = False
    assert (await end_txn.handle(end, context(broker, 26, 3))).error_code == (
        ErrorCode.invalid_txn_state
    )
