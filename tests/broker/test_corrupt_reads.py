"""What clients get from a broker restarted on segment files damaged on disk: the damaged
partition answers CORRUPT_MESSAGE (or KAFKA_STORAGE_ERROR when its file cannot be read)
for the damaged range, the others their records; the damage is counted once in
``kshim_corrupt_batches``."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

from kshim.api.records import fetch, list_offsets
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kshim.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kshim.protocol.record_batch import RECORDS_OFFSET, validate_produced
from kshim.protocol.records import Record, build_batch, iter_records
from kshim.server.metrics.broker_collector import BrokerCollector
from kshim.storage.files.filesystem import FileSystem, OsFileSystem
from kshim.storage.interface import FileRegion, TopicPartition, chunk_bytes
from kshim.storage.log.log_store import DiskLogStore
from kshim.testing import FakeClock
from tests.broker.handler_calls import context, decoded

TOPIC = "t"
FETCH_VERSION, LIST_OFFSETS_VERSION = 12, 7
# One ~100-byte batch a segment; no full-data view holds anything back.
TOPIC_CONFIG = {"kshim.full.view": "false", "segment.bytes": "120"}
BATCHES = 3  # per partition, offsets 0, 1, 2: one batch of one record each


async def started(data_dir: Path, filesystem: FileSystem | None = None) -> Broker:
    config = BrokerConfig.load([{"log.dirs": str(data_dir)}])
    broker = Broker(config, clock=FakeClock(1_000_000), filesystem=filesystem)
    await broker.start()
    return broker


async def write_topic(data_dir: Path) -> list[Path]:
    """Two partitions of BATCHES single-record batches; returns partition 0's segments."""
    broker = await started(data_dir)
    await broker.topics.create(TOPIC, 2, TOPIC_CONFIG)
    for partition in (0, 1):
        log = broker.topics.log(TopicPartition(TOPIC, partition))
        assert log is not None
        for index in range(BATCHES):
            value = b"p%d-%d" % (partition, index)
            batch = bytearray(build_batch([Record(0, 1_000_000 + index, b"k", value)]))
            await log.wait_durable(log.append(batch, validate_produced(batch)))
    assert isinstance(broker.logs, DiskLogStore)
    directory = Path(broker.logs.directory_of(TopicPartition(TOPIC, 0)))
    await broker.close()
    segments = segment_paths(directory)
    assert len(segments) == BATCHES
    return segments


def segment_paths(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def flip_record_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[RECORDS_OFFSET + 3] ^= 0x10
    path.write_bytes(bytes(data))


async def fetch_both(broker: Broker, offset: int) -> dict[int, Any]:
    partitions = [
        FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=1 << 20)
        for index in (0, 1)
    ]
    request = FetchRequest(
        max_bytes=1 << 20, topics=[FetchTopic(topic=TOPIC, partitions=partitions)]
    )
    answer = await fetch.handle(request, context(broker, 1, FETCH_VERSION))
    # Ranges checked once are file regions from then on (zero-copy): read them here.
    parts = [chunk_bytes(part) if isinstance(part, FileRegion) else part for part in answer]
    [topic] = decoded(1, FETCH_VERSION, parts).responses
    return {partition.partition_index: partition for partition in topic.partitions}


def values(partition: Any) -> list[bytes | None]:
    return [record.value for record in iter_records(partition.records or b"")]


async def corrupt_batches_metric(broker: Broker) -> float:
    collector = BrokerCollector(broker, asyncio.get_running_loop(), dict)
    [family] = [f for f in await collector._families() if f.name == "kshim_corrupt_batches"]
    [sample] = [s for s in family.samples if s.name == "kshim_corrupt_batches_total"]
    return sample.value


async def test_a_corrupt_batch_answers_corrupt_message_and_others_are_served(
    tmp_path: Path,
) -> None:
    segments = await write_topic(tmp_path)
    flip_record_byte(segments[1])  # offset 1 of partition 0
    broker = await started(tmp_path)
    for _ in range(2):  # answered the same way again; counted once
        answers = await fetch_both(broker, 1)
        assert answers[0].error_code == ErrorCode.corrupt_message
        assert answers[0].high_watermark == -1
        assert not answers[0].records
        assert answers[1].error_code == ErrorCode.none
        assert values(answers[1]) == [b"p1-1"]
    answers = await fetch_both(broker, 2)  # past the damage, partition 0 reads on
    assert [values(answers[index]) for index in (0, 1)] == [[b"p0-2"], [b"p1-2"]]
    assert await corrupt_batches_metric(broker) == 1

    wanted = [ListOffsetsPartition(partition_index=0, timestamp=1_000_001)]
    request = ListOffsetsRequest(
        replica_id=-1, topics=[ListOffsetsTopic(name=TOPIC, partitions=wanted)]
    )
    answer = await list_offsets.handle(request, context(broker, 2, LIST_OFFSETS_VERSION))
    assert answer.topics[0].partitions[0].error_code == ErrorCode.corrupt_message
    await broker.close()


class FailingReads(OsFileSystem):
    """Reads of one file fail as a dying disk's do (EIO)."""

    def __init__(self, failing: str) -> None:
        super().__init__()
        self.failing = failing

    def pread(self, descriptor: int, length: int, position: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{descriptor}") == self.failing:
            raise OSError(errno.EIO, "Input/output error")
        return super().pread(descriptor, length, position)


async def test_an_unreadable_segment_answers_kafka_storage_error(tmp_path: Path) -> None:
    segments = await write_topic(tmp_path)
    broker = await started(tmp_path, FailingReads(str(segments[0])))
    answers = await fetch_both(broker, 0)
    assert answers[0].error_code == ErrorCode.kafka_storage_error
    assert values(answers[1]) == [b"p1-0"]
    answers = await fetch_both(broker, 1)
    assert [values(answers[index]) for index in (0, 1)] == [[b"p0-1"], [b"p1-1"]]
    await broker.close()
