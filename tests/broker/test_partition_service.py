"""The partition service (broker/partitions/service.py) and the Produce handler on it
alone: the handler is given the in-memory partition service and nothing else of the
broker, so everything Produce does to a partition (checks, idempotence, the append, the
refusal logged) is the service's."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kshim.api.context import RequestContext
from kshim.api.records import produce
from kshim.broker.broker import Broker
from kshim.broker.partitions.service import PartitionService
from kshim.protocol.errors import ErrorCode
from kshim.protocol.headers import RequestHeader
from kshim.protocol.produce_request import PartitionData, ProduceRequest, TopicData
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.committed_offsets import CommittedOffset
from tests.broker.handler_calls import NOW_MS, decoded, memory_broker

TOPIC = "orders"
PRODUCE_KEY, PRODUCE_VERSION = 0, 9
PLAIN = BatchSpec()  # a producer without idempotence
IDEMPOTENT = BatchSpec(producer_id=42, producer_epoch=0, base_sequence=0)


@dataclass(frozen=True)
class PartitionsOnly:
    """A handler's services: the partition service, nothing else."""

    partitions: PartitionService


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with memory_broker(tmp_path, TOPIC, 2) as started:
        yield started


def batch(values: list[bytes], spec: BatchSpec = PLAIN) -> memoryview:
    records = [Record(index, NOW_MS + index, b"k", value) for index, value in enumerate(values)]
    return memoryview(build_batch(records, spec))


async def produce_to(service: PartitionService, *partitions: tuple[int, memoryview]) -> Any:
    """Produce v9 of ``partitions`` of TOPIC through the handler given ``service`` alone."""
    topic_data = (TopicData(TOPIC, tuple(PartitionData(index, records)
                                         for index, records in partitions)),)  # fmt: skip
    request = ProduceRequest(None, -1, 5000, topic_data)
    header = RequestHeader(PRODUCE_KEY, PRODUCE_VERSION, 7, "unit-test")
    answer = await produce.handle(request, RequestContext(header, PartitionsOnly(service)))
    [topic] = decoded(PRODUCE_KEY, PRODUCE_VERSION, answer).responses
    return {result.index: result for result in topic.partition_responses}


async def test_produce_appends_through_the_partition_service_alone(broker: Broker) -> None:
    answers = await produce_to(broker.partitions, (0, batch([b"a", b"b"])), (1, batch([b"c"])))
    assert [(answers[i].error_code, answers[i].base_offset) for i in (0, 1)] == [
        (ErrorCode.none, 0),
        (ErrorCode.none, 0),
    ]
    again = await produce_to(broker.partitions, (0, batch([b"d"])))
    assert again[0].base_offset == 2
    log = broker.topics.log(TopicPartition(TOPIC, 0))
    assert log is not None and log.high_watermark == 3
    assert broker.traffic.produced_records[TOPIC] == 4


async def test_a_retried_idempotent_batch_gets_its_first_offset_again(broker: Broker) -> None:
    first = await produce_to(broker.partitions, (0, batch([b"a", b"b"], IDEMPOTENT)))
    retried = await produce_to(broker.partitions, (0, batch([b"a", b"b"], IDEMPOTENT)))
    assert first[0].base_offset == retried[0].base_offset == 0
    log = broker.topics.log(TopicPartition(TOPIC, 0))
    assert log is not None and log.high_watermark == 2  # written once
    gap = await produce_to(broker.partitions, (0, batch([b"c"], IDEMPOTENT)))
    assert gap[0].error_code == ErrorCode.out_of_order_sequence_number


async def test_a_bad_batch_is_refused_with_its_reason_and_logged(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    damaged = bytearray(batch([b"a"]))
    damaged[-1] ^= 0xFF  # the CRC no longer matches
    with caplog.at_level(logging.WARNING, logger="kshim.broker.refusal_log"):
        answers = await produce_to(broker.partitions, (0, memoryview(damaged)), (1, batch([b"b"])))
    assert answers[0].error_code == ErrorCode.corrupt_message
    assert answers[0].error_message and "CRC" in answers[0].error_message
    assert (answers[1].error_code, answers[1].base_offset) == (ErrorCode.none, 0)
    assert any(TOPIC in line and "unit-test" in line for line in caplog.messages)


async def test_delete_topic_takes_its_companion_and_its_offsets(broker: Broker) -> None:
    companion = TOPIC + ".delay"
    assert await broker.resolver.create_companion(companion) is not None
    offsets = {TopicPartition(name, 0): CommittedOffset(5, -1, "", NOW_MS)
               for name in (TOPIC, companion)}  # fmt: skip
    await broker.groups.offsets.commit("readers", offsets)
    await broker.partitions.delete_topic(TOPIC)
    assert broker.topics.get(TOPIC) is None
    assert broker.topics.get(companion) is None
    assert broker.groups.offsets.committed("readers") == {}
