"""The full-data view over a real Broker: content, offsets, tombstones, transactions,
restarts, retention and deletion."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from kshim.broker.broker import Broker
from kshim.broker.full_view.applier import catch_up, purge_tombstones_once
from kshim.broker.full_view.reader import read_view, view_offsets
from kshim.broker.jobs.broker_jobs import full_data_views
from kshim.broker.retention import enforce_retention_once
from kshim.protocol.record_batch import crc_of, read_header
from kshim.protocol.records import Record, decode_records
from kshim.testing import FakeClock
from tests.full_view.support import (
    SOURCE,
    START_MS,
    TOPIC,
    append,
    as_dict,
    end_transaction,
    open_broker,
    read_all,
    transactional,
)


async def test_latest_value_per_key_at_original_offsets(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, FakeClock())
    await broker.topics.create(TOPIC, 1, {})
    await append(broker, [(b"a", b"1"), (b"b", b"1"), (None, b"keyless")])
    await append(broker, [(b"a", b"2"), (b"c", b"1")])
    records = await read_all(broker)
    assert as_dict(records) == {b"b": (1, b"1"), b"a": (3, b"2"), b"c": (4, b"1")}
    assert [record.offset for record in records] == [1, 3, 4]
    offsets = await view_offsets(broker.full_view, SOURCE)
    assert (offsets.log_start_offset, offsets.high_watermark) == (0, 5)  # as after cleaning
    await broker.close()


async def test_batches_are_valid_and_span_gaps_to_the_high_watermark(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, FakeClock())
    await broker.topics.create(TOPIC, 1, {})
    await append(broker, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", b"2"), (b"x", None)])
    await append(broker, [(b"b", b"3")])  # the view's tail: b at 5; x's tombstone at 4
    await catch_up(broker, SOURCE)
    result = await read_view(broker.full_view, SOURCE, 0, 1 << 20)
    spans = []
    for batch in result.batches:
        header = read_header(batch)
        assert crc_of(batch) == header.crc and header.records_count == 1
        spans.append((header.base_offset, header.last_offset))
    assert spans == [(2, 3), (4, 4), (5, 5)]
    # Past the last live record but below the high watermark: an empty batch moves readers on.
    await append(broker, [(b"b", b"4")])
    await catch_up(broker, SOURCE)
    tail = await read_view(broker.full_view, SOURCE, 6, 1 << 20)
    assert [(read_header(b).records_count, read_header(b).last_offset) for b in tail.batches] == [
        (1, 6)
    ]
    behind = await read_view(broker.full_view, SOURCE, 5, 1 << 20)  # b moved from 5 to 6
    assert [read_header(b).base_offset for b in behind.batches] == [6]
    assert (await read_view(broker.full_view, SOURCE, 8, 1 << 20)).out_of_range
    await broker.close()


async def test_max_bytes_returns_at_least_one_batch(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, FakeClock())
    await broker.topics.create(TOPIC, 1, {})
    await append(broker, [(b"k%d" % i, b"v" * 100) for i in range(10)])
    records = await read_all(broker, max_bytes=1)
    assert [record.offset for record in records] == list(range(10))
    await broker.close()


async def test_tombstone_visible_then_gone_after_delete_retention(tmp_path: Path) -> None:
    clock = FakeClock()
    broker = await open_broker(tmp_path, clock)
    await broker.topics.create(TOPIC, 1, {"delete.retention.ms": "1000"})
    await append(broker, [(b"a", b"1"), (b"b", b"1"), (b"a", None)])
    assert as_dict(await read_all(broker)) == {b"b": (1, b"1"), b"a": (2, None)}
    clock.now_ms = START_MS + 999
    await purge_tombstones_once(broker)
    assert as_dict(await read_all(broker)) == {b"b": (1, b"1"), b"a": (2, None)}
    clock.now_ms = START_MS + 1000
    await purge_tombstones_once(broker)
    assert as_dict(await read_all(broker)) == {b"b": (1, b"1")}
    await append(broker, [(b"a", b"again")])  # the key comes back, at its new offset
    assert as_dict(await read_all(broker)) == {b"b": (1, b"1"), b"a": (3, b"again")}
    await broker.close()


async def test_only_committed_transactions_appear(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, FakeClock())
    await broker.topics.create(TOPIC, 1, {})
    await append(broker, [(b"a", b"plain")])
    await append(broker, [(b"a", b"aborted"), (b"z", b"aborted")], transactional(7))
    await append(broker, [(b"b", b"committed")], transactional(8))
    await append(broker, [(b"c", b"plain")])  # after the open transactions: not stable yet
    assert as_dict(await read_all(broker)) == {b"a": (0, b"plain")}
    assert (await view_offsets(broker.full_view, SOURCE)).high_watermark == 1
    await end_transaction(broker, 7, commit=False)
    assert as_dict(await read_all(broker)) == {b"a": (0, b"plain")}
    await end_transaction(broker, 8, commit=True)
    view = as_dict(await read_all(broker))
    assert view == {b"a": (0, b"plain"), b"b": (3, b"committed"), b"c": (4, b"plain")}
    await broker.close()


async def test_restart_resumes_without_duplicates_or_losses(tmp_path: Path) -> None:
    clock = FakeClock()
    broker = await open_broker(tmp_path, clock)
    await broker.topics.create(TOPIC, 1, {})
    await append(broker, [(b"a", b"1"), (b"b", b"1")])
    await catch_up(broker, SOURCE)
    await append(broker, [(b"a", b"2")])
    await broker.close()  # a's update not applied yet

    broker = await open_broker(tmp_path, clock)
    assert (await view_offsets(broker.full_view, SOURCE)).high_watermark == 2
    assert as_dict(await read_all(broker)) == {b"b": (1, b"1"), b"a": (2, b"2")}
    # A replay of an applied chunk (crash after commit, before anything else) changes nothing.
    store = broker.full_view.store
    before = store.live_records(SOURCE)
    store.apply(SOURCE, [], 0)
    assert store.live_records(SOURCE) == before
    assert store.applied_position(SOURCE) == 3
    await broker.close()


async def test_retention_keeps_what_the_view_has_not_applied(tmp_path: Path) -> None:
    clock = FakeClock()
    broker = await open_broker(tmp_path, clock)
    await broker.topics.create(TOPIC, 1, {"segment.bytes": "100", "retention.ms": "1000"})
    for index in range(4):  # one batch per segment
        await append(broker, [(b"k%d" % (index % 2), b"v%d" % index)])
    await catch_up(broker, SOURCE)
    for index in range(4, 6):  # not applied yet
        await append(broker, [(b"k%d" % (index % 2), b"v%d" % index)])
    clock.now_ms = START_MS + 10_000
    await enforce_retention_once(broker)
    log = broker.topics.log(SOURCE)
    assert log is not None
    assert log.log_start_offset == 4  # segments 0..3 applied and expired; 4 and 5 kept
    assert as_dict(await read_all(broker)) == {b"k0": (4, b"v4"), b"k1": (5, b"v5")}
    await broker.close()


async def test_disabled_view_and_deleted_topic(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, FakeClock())
    await broker.topics.create(TOPIC, 1, {})
    await broker.topics.create("plain", 1, {"kshim.full.view": "false"})
    await append(broker, [(b"a", b"1")])
    await catch_up(broker, SOURCE)
    assert broker.full_view.store.live_records(SOURCE)
    await broker.topics.delete(TOPIC)
    await broker.full_view.forget_topic(TOPIC)
    assert broker.full_view.store.live_records(SOURCE) == []
    assert broker.full_view.store.applied_position(SOURCE) == 0
    await broker.close()


async def test_view_turned_back_on_after_retention_is_rebuilt_from_the_log(
    tmp_path: Path,
) -> None:
    """While the view is off, retention is not held back; turned on again, the view drops
    what it held (it may be stale) and compacts the log that is left."""
    clock = FakeClock()
    broker = await open_broker(tmp_path, clock)
    configs = {"segment.bytes": "100", "retention.ms": "1000"}
    await broker.topics.create(TOPIC, 1, configs)
    for key, value in [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")]:  # one batch per segment
        await append(broker, [(key, value)])
    await catch_up(broker, SOURCE)
    await broker.topics.set_configs(TOPIC, {**configs, "kshim.full.view": "false"})
    await append(broker, [(b"a", b"2")])  # offset 3
    await append(broker, [(b"b", None)])  # offset 4: the view never saw this delete
    clock.now_ms = START_MS + 10_000
    await append(broker, [(b"d", b"1")])  # offset 5, recent: kept by retention
    await enforce_retention_once(broker)
    log = broker.topics.log(SOURCE)
    assert log is not None and log.log_start_offset == 5  # all but the active segment dropped
    await broker.topics.set_configs(TOPIC, configs)  # the view is on again
    # Stale "a"=1, "b"=1 and "c"=1 are gone: only what the retained log says remains.
    assert as_dict(await read_all(broker)) == {b"d": (5, b"1")}
    offsets = await view_offsets(broker.full_view, SOURCE)
    assert (offsets.log_start_offset, offsets.high_watermark) == (5, 6)
    await broker.close()
    reopened = await open_broker(tmp_path, clock)  # the rebuilt view survives a restart
    assert as_dict(await read_all(reopened)) == {b"d": (5, b"1")}
    await reopened.close()


async def test_view_applied_in_a_child_process_survives_restarts(tmp_path: Path) -> None:
    """The default: a spawned child writes the view, the broker reads the same LMDB files."""
    clock = FakeClock()
    broker = await open_broker(tmp_path, clock, in_process=False)
    await broker.topics.create(TOPIC, 1, {})
    await append(broker, [(b"a", b"1"), (b"b", b"1"), (None, b"keyless")])
    await append(broker, [(b"a", b"2"), (b"b", None)])
    expected = {b"a": (3, b"2"), b"b": (4, None)}
    assert as_dict(await read_all(broker)) == expected
    await broker.close()
    broker = await open_broker(tmp_path, clock, in_process=False)
    await append(broker, [(b"c", b"1")])
    assert as_dict(await read_all(broker)) == {**expected, b"c": (5, b"1")}
    await broker.close()


async def test_a_view_turned_on_is_built_without_a_further_write(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, FakeClock())
    await broker.topics.create(TOPIC, 1, {"kshim.full.view": "false"})
    await append(broker, [(b"a", b"1"), (b"b", b"1")])
    applier = asyncio.create_task(full_data_views(broker).run())
    try:
        await broker.topics.set_configs(TOPIC, {"kshim.full.view": "true"})
        for _ in range(100):  # the applier looks at every view once a second
            if await broker.full_view.applied_position(SOURCE) == 2:
                break
            await asyncio.sleep(0.05)
        assert as_dict(broker_records(broker)) == {b"a": (0, b"1"), b"b": (1, b"1")}
    finally:
        applier.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await applier
        await broker.close()


def broker_records(broker: Broker) -> list[Record]:
    """The view's live records as stored, without applying anything."""
    return [
        record
        for stored in broker.full_view.store.live_records(SOURCE)
        for record in decode_records(stored.batch)[1]
    ]
