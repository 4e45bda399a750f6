"""A full-data view costs nothing until it is used (full_view/view.py).

With the broker's defaults every topic has a readable ``T.full``, but nothing is applied
and no child process runs until the view is read: the first read builds it from the log
start while it waits, and from then on the view is kept current, across restarts. A view
set on explicitly is kept from the start. What a late first reader gets after retention
is stated by the tests below: the latest record of every key still in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import pytest

from kshim.broker.broker import Broker
from kshim.broker.full_view import applier
from kshim.broker.full_view.worker import ProcessApplier
from kshim.broker.jobs.broker_jobs import full_data_views
from kshim.broker.partition_reads import ReadablePartition
from kshim.broker.retention import enforce_retention_once
from kshim.protocol.records import Record, decode_records
from kshim.storage.interface import TopicPartition
from kshim.testing import FakeClock
from tests.full_view.support import SOURCE, START_MS, TOPIC, append, as_dict, open_broker

VIEW = TopicPartition(f"{TOPIC}.full", 0)


def view_partition(broker: Broker) -> ReadablePartition:
    partition = broker.resolver.readable_partition(VIEW)
    assert partition is not None
    return partition


async def fetch_everything(broker: Broker) -> list[Record]:
    """``t.full`` read as a consumer's Fetch reads it: from its log start to its high
    watermark, through the topic resolver."""
    partition = view_partition(broker)
    offsets = await partition.offsets()
    position = offsets.log_start_offset
    records: list[Record] = []
    while position < offsets.high_watermark:
        read = await partition.read(position, 1 << 20, read_committed=True)
        for batch in read.chunks:
            assert isinstance(batch, bytes)
            _, found = decode_records(batch)
            records += found
        position = max(record.offset for record in records) + 1 if records else position
        if not read.chunks:
            break
    return records


async def run_applier_a_while(broker: Broker) -> None:
    """The background applier through its start and two periodic ticks."""
    applier = asyncio.create_task(full_data_views(broker).run())
    await asyncio.sleep(2.2)
    applier.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await applier


async def test_a_view_nobody_reads_costs_no_work_and_no_child_process(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, FakeClock(), in_process=False, eager=False)
    await broker.topics.create(TOPIC, 1, {})
    await append(broker, [(b"a", b"1"), (b"b", b"1")])
    await run_applier_a_while(broker)
    assert not broker.resolver.keeps_view(TOPIC)
    assert broker.full_view.store.applied_position(SOURCE) == 0
    assert broker.full_view.store.viewed_topics() == set()
    applier = broker.full_view.applier
    assert isinstance(applier, ProcessApplier) and not applier.started
    await broker.close()


async def test_the_first_read_builds_the_view_and_keeps_it(tmp_path: Path) -> None:
    clock = FakeClock()
    broker = await open_broker(tmp_path, clock, in_process=False, eager=False)
    await broker.topics.create(TOPIC, 1, {})
    await append(broker, [(b"a", b"1"), (b"b", b"1"), (None, b"keyless")])
    await append(broker, [(b"a", b"2")])
    # The first ListOffsets waits for the build: the view is complete when it answers.
    offsets = await view_partition(broker).offsets()
    assert (offsets.log_start_offset, offsets.high_watermark) == (0, 4)
    assert as_dict(await fetch_everything(broker)) == {b"b": (1, b"1"), b"a": (3, b"2")}
    assert broker.resolver.keeps_view(TOPIC)
    await append(broker, [(b"c", b"1")])
    await run_applier_a_while(broker)  # kept now: appends are applied without a read
    assert broker.full_view.store.applied_position(SOURCE) == 5
    await broker.close()
    reopened = await open_broker(tmp_path, clock, eager=False)  # still kept after a restart
    assert reopened.resolver.keeps_view(TOPIC)
    await reopened.close()


async def test_readers_arriving_together_all_wait_for_the_build(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, FakeClock(), eager=False)
    await broker.topics.create(TOPIC, 1, {})
    for index in range(20):
        await append(broker, [(b"k%d" % index, b"v")])
    answers = await asyncio.gather(*(view_partition(broker).offsets() for _ in range(5)))
    assert {answer.high_watermark for answer in answers} == {20}
    await broker.close()


async def test_a_view_set_on_explicitly_is_kept_from_the_start(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, FakeClock(), eager=False)
    await broker.topics.create(TOPIC, 1, {"kshim.full.view": "true"})
    await append(broker, [(b"a", b"1")])
    assert broker.resolver.keeps_view(TOPIC)
    await run_applier_a_while(broker)
    assert broker.full_view.store.applied_position(SOURCE) == 1
    await broker.close()


async def test_retention_does_not_wait_for_a_view_nobody_reads(tmp_path: Path) -> None:
    """What a late first reader gets: the view built from the log that is left. Keys whose
    every record retention removed first ("a", "c") are not in it; a key updated since
    ("b") has its latest value; the view starts at the log start."""
    clock = FakeClock()
    broker = await open_broker(tmp_path, clock, eager=False)
    configs = {"segment.bytes": "100", "retention.ms": "1000"}
    await broker.topics.create(TOPIC, 1, configs)
    for key in (b"a", b"b", b"c"):  # one batch per segment
        await append(broker, [(key, b"1")])
    clock.now_ms = START_MS + 10_000
    await append(broker, [(b"b", b"2")])  # offset 3, recent: kept by retention
    await append(broker, [(b"d", b"1")])  # offset 4
    await enforce_retention_once(broker)
    log = broker.topics.log(SOURCE)
    assert log is not None and log.log_start_offset == 3  # nothing held it back
    offsets = await view_partition(broker).offsets()
    assert (offsets.log_start_offset, offsets.high_watermark) == (3, 5)
    assert as_dict(await fetch_everything(broker)) == {b"b": (3, b"2"), b"d": (4, b"1")}
    await broker.close()


async def test_retention_waits_for_a_view_once_read(tmp_path: Path) -> None:
    clock = FakeClock()
    broker = await open_broker(tmp_path, clock, eager=False)
    configs = {"segment.bytes": "100", "retention.ms": "1000"}
    await broker.topics.create(TOPIC, 1, configs)
    await append(broker, [(b"a", b"1")])
    await view_partition(broker).offsets()  # read once: kept from now on
    for key in (b"b", b"c"):
        await append(broker, [(key, b"1")])  # the view has not applied these
    clock.now_ms = START_MS + 10_000
    await append(broker, [(b"d", b"1")])
    await enforce_retention_once(broker)
    log = broker.topics.log(SOURCE)
    assert log is not None and log.log_start_offset == 1  # held at what the view applied
    await run_applier_a_while(broker)
    assert as_dict(await fetch_everything(broker)) == {
        key: (offset, b"1") for offset, key in enumerate([b"a", b"b", b"c", b"d"])
    }
    await broker.close()


async def test_a_long_build_says_how_far_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(applier, "CHUNK_BYTES", 1)  # a batch a chunk: a line each
    monkeypatch.setattr(applier, "BUILD_PROGRESS_INTERVAL_S", 0.0)
    broker = await open_broker(tmp_path, FakeClock(), eager=False)
    await broker.topics.create(TOPIC, 1, {})
    for index in range(4):
        await append(broker, [(b"k%d" % index, b"v")])
    with caplog.at_level(logging.INFO, applier.__name__):
        assert (await view_partition(broker).offsets()).high_watermark == 4
    lines = [record.getMessage() for record in caplog.records if "building" in record.message]
    assert [line.split(" records,")[0] for line in lines[:4]] == [
        f"building {TOPIC}.full partition 0: {share}% ({done} of 4"
        for share, done in ((25, 1), (50, 2), (75, 3), (100, 4))
    ]
    assert lines[4].startswith(f"building {TOPIC}.full partition 0: done, 4 records in ")
    await broker.close()
