"""The log cleaner through the broker, on real segment files: what it compacts and when.

- a topic shaped like Kafka Connect's offsets topic (a few keys, committed over and over)
  shrinks after 100,000 commits to about one record per key;
- only topics whose cleanup.policy includes compact are compacted; where a pass stopped is
  durable, so a restart does not redo it; compact,delete topics are compacted and expire;
- a topic's full-data view holds the cleaner back to what it has applied;
- the compaction configs are Kafka's, with their broker defaults.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.log_cleaner import clean_once, compact_partition
from kshim.broker.retention import enforce_retention_once
from kshim.broker.topics import TopicError, validate_topic_configs
from kshim.protocol.record_batch import validate_produced
from kshim.protocol.records import Record, build_batch, decode_records
from kshim.storage.interface import PartitionLog, TopicPartition
from kshim.storage.log.log_store import DiskLogStore
from kshim.testing import FakeClock
from tests.storage.compaction_support import read_records

NO_VIEW = {"kshim.full.view": "false"}
START_MS = 1_000_000_000
CONNECT_KEYS = 10
COMMITS = 100_000


async def _broker(data_dir: Path, clock: FakeClock) -> Broker:
    broker = Broker(BrokerConfig.load([{"log.dirs": str(data_dir)}]), clock=clock)
    await broker.start()
    return broker


def _log(broker: Broker, topic: str) -> PartitionLog:
    partition = broker.resolver.deletable_partition(TopicPartition(topic, 0))
    assert partition is not None
    return partition.log


def _batch(key: bytes, value: bytes | None, timestamp: int) -> bytearray:
    return bytearray(build_batch([Record(0, timestamp, key, value)]))


async def _append_many(log: PartitionLog, batches: list[bytearray]) -> None:
    last = 0
    for batch in batches:
        last = log.append(batch, validate_produced(batch))
    await log.wait_durable(last)


async def _size(broker: Broker, log: PartitionLog) -> int:
    assert isinstance(broker.logs, DiskLogStore)
    await broker.logs.checkpoint()
    return sum(summary.size for summary in log.segment_summaries())


def _connect_commit(commit: int) -> tuple[bytes, bytes]:
    """One source partition's offset, as Kafka Connect's offset writer stores it."""
    task = commit % CONNECT_KEYS
    key = json.dumps(["file-source", {"filename": f"/data/input-{task}.txt"}])
    value = json.dumps({"position": commit * 17})
    return key.encode(), value.encode()


async def test_a_connect_offsets_topic_shrinks_to_about_its_keys(tmp_path: Path) -> None:
    clock = FakeClock(START_MS)
    broker = await _broker(tmp_path, clock)
    configs = {**NO_VIEW, "cleanup.policy": "compact", "segment.bytes": str(1 << 20)}
    await broker.topics.create("connect-offsets", 1, configs)
    log = _log(broker, "connect-offsets")
    batches = [_batch(*_connect_commit(commit), START_MS) for commit in range(COMMITS)]
    await _append_many(log, batches)
    clock.advance(int(broker.topics.by_name["connect-offsets"].configs["segment.ms"]))
    await _append_many(log, [_batch(*_connect_commit(COMMITS), clock())])  # a new segment
    before = await _size(broker, log)
    started = time.perf_counter()
    assert await clean_once(broker) == 1
    elapsed = time.perf_counter() - started
    after = await _size(broker, log)
    records = await read_records(log)
    assert len(records) == CONNECT_KEYS + 1
    latest = dict(_connect_commit(commit) for commit in range(COMMITS - CONNECT_KEYS, COMMITS))
    assert {record.key: record.value for record in records[:-1]} == latest
    assert before > 10_000_000 and after < 5_000, (before, after)
    print(f"\n{COMMITS} commits of {CONNECT_KEYS} keys: {before} bytes -> {after} bytes, "
          f"{len(log.segment_summaries())} segments, pass {elapsed:.2f} s")  # fmt: skip
    assert await clean_once(broker) == 0  # nothing dirty any more
    await broker.close()


async def test_only_compacted_topics_are_cleaned_and_a_pass_is_remembered(
    tmp_path: Path,
) -> None:
    clock = FakeClock(START_MS)
    broker = await _broker(tmp_path, clock)
    small = {**NO_VIEW, "segment.bytes": "100"}  # one record per segment
    await broker.topics.create("plain", 1, small)
    await broker.topics.create("compacted", 1, {**small, "cleanup.policy": "compact"})
    for topic in ("plain", "compacted"):
        batches = [_batch(b"k", b"%d" % index, START_MS) for index in range(8)]
        await _append_many(_log(broker, topic), batches)
    await _size(broker, _log(broker, "compacted"))
    assert await clean_once(broker) == 1
    assert len(await read_records(_log(broker, "plain"))) == 8
    assert [record.offset for record in await read_records(_log(broker, "compacted"))] == [6, 7]
    checkpoint = broker.metadata.cleaner_checkpoint(TopicPartition("compacted", 0))
    assert checkpoint == 7
    await broker.close()

    broker = await _broker(tmp_path, clock)
    assert await clean_once(broker) == 0  # the restart remembers where the pass stopped
    assert [record.offset for record in await read_records(_log(broker, "compacted"))] == [6, 7]
    await broker.close()


async def test_compact_delete_topics_are_compacted_and_expire(tmp_path: Path) -> None:
    clock = FakeClock(START_MS)
    broker = await _broker(tmp_path, clock)
    configs = {**NO_VIEW, "segment.bytes": "100", "cleanup.policy": "compact,delete",
               "retention.ms": "60000"}  # fmt: skip
    await broker.topics.create("both", 1, configs)
    log = _log(broker, "both")
    await _append_many(log, [_batch(b"k%d" % (i % 2), b"v", START_MS) for i in range(6)])
    await _append_many(log, [_batch(b"late", b"v", START_MS + 120_000)])
    await _size(broker, log)
    assert await clean_once(broker) == 1
    assert [record.offset for record in await read_records(log)] == [4, 5, 6]
    clock.advance(100_000)
    assert await enforce_retention_once(broker) > 0
    assert [record.offset for record in await read_records(log)] == [6]
    await broker.close()


async def test_the_full_view_holds_the_cleaner_back(tmp_path: Path) -> None:
    clock = FakeClock(START_MS)
    broker = await _broker(tmp_path, clock)
    configs = {"kshim.full.view": "true", "segment.bytes": "100", "cleanup.policy": "compact"}
    await broker.topics.create("viewed", 1, configs)
    log = _log(broker, "viewed")
    await _append_many(log, [_batch(b"k", b"%d" % i, START_MS) for i in range(6)])
    await _size(broker, log)
    partition = broker.resolver.deletable_partition(TopicPartition("viewed", 0))
    assert partition is not None and partition.view is not None
    partition.view.set_position(TopicPartition("viewed", 0), 3)  # applied up to offset 3
    result = await compact_partition(broker, partition, force=True)
    assert result is not None and result.first_dirty_offset == 3
    assert [record.offset for record in await read_records(log)] == [2, 3, 4, 5]
    await broker.close()


async def test_a_view_first_read_after_compaction_matches_the_log(tmp_path: Path) -> None:
    config = BrokerConfig.load([{"log.dirs": str(tmp_path), "kshim.full.view.process": "false"}])
    broker = Broker(config, clock=FakeClock(START_MS))
    await broker.start()
    configs = {"cleanup.policy": "compact", "segment.bytes": "100"}  # a view kept once read
    await broker.topics.create("lazy", 1, configs)
    log = _log(broker, "lazy")
    writes = [(b"k%d" % (i % 3), None if i == 7 else b"%d" % i) for i in range(12)]
    await _append_many(log, [_batch(key, value, START_MS) for key, value in writes])
    await _size(broker, log)
    assert await clean_once(broker) == 1
    latest = {record.key: (record.offset, record.value) for record in await read_records(log)}
    await broker.full_view.ensure_kept("lazy")
    viewed = {}
    for stored in broker.full_view.store.live_records(TopicPartition("lazy", 0)):
        (record,) = decode_records(stored.batch)[1]
        viewed[record.key] = (stored.offset, record.value)
    assert viewed == latest
    await broker.close()


async def test_a_compacted_topic_refuses_records_without_a_key(tmp_path: Path) -> None:
    broker = await _broker(tmp_path, FakeClock(START_MS))
    await broker.topics.create("compacted", 1, {**NO_VIEW, "cleanup.policy": "compact"})
    writable = broker.resolver.writable_partition(TopicPartition("compacted", 0))
    assert writable is not None and writable.check is not None
    keyless = build_batch([Record(0, START_MS, b"k", b"v"), Record(1, START_MS, None, b"v")])
    assert "without key" in (writable.check(memoryview(keyless), START_MS) or "")
    keyed = build_batch([Record(0, START_MS, b"k", b"v"), Record(1, START_MS, b"j", None)])
    assert writable.check(memoryview(keyed), START_MS) is None
    await broker.topics.create("plain", 1, NO_VIEW)
    plain = broker.resolver.writable_partition(TopicPartition("plain", 0))
    assert plain is not None and plain.check is None
    await broker.close()


def test_compaction_configs_are_kafkas() -> None:
    defaults = BrokerConfig.load([]).topic_defaults()
    assert defaults["min.cleanable.dirty.ratio"] == "0.5"
    assert defaults["min.compaction.lag.ms"] == "0"
    assert defaults["max.compaction.lag.ms"] == str((1 << 63) - 1)
    assert defaults["delete.retention.ms"] == "86400000"
    config = BrokerConfig.load([{"log.cleaner.min.cleanable.ratio": "0.1"}])
    assert config.topic_defaults()["min.cleanable.dirty.ratio"] == "0.1"
    assert config.get_bool("log.cleaner.enable")
    assert config.get_int("log.cleaner.backoff.ms") == 15_000
    assert validate_topic_configs({"min.cleanable.dirty.ratio": "0.25"}) == {
        "min.cleanable.dirty.ratio": "0.25"
    }
    for name, value in (("min.cleanable.dirty.ratio", "1.5"), ("max.compaction.lag.ms", "0")):
        with pytest.raises(TopicError):
            validate_topic_configs({name: value})
