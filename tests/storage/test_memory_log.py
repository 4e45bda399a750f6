"""What only the in-memory twin does; everything both stores do is in the conformance tests."""

from __future__ import annotations

import asyncio

import pytest

from kshim.storage.interface import LogConfig, LogFailed
from kshim.storage.log.memory_log import MemoryLogStore
from kshim.testing import FakeClock
from tests.storage.support import DEFAULT_CONFIG, TOPIC_PARTITION, append_durable, producer_batch


async def test_appends_of_one_loop_turn_become_durable_together() -> None:
    """One "flush round" per loop turn, as a group commit would make it."""
    log = await MemoryLogStore(FakeClock()).open(TOPIC_PARTITION, DEFAULT_CONFIG, 0)
    advances: list[int] = []
    log.listeners.append(lambda: advances.append(log.high_watermark))
    for _ in range(3):
        log.append(*producer_batch(2))
    assert log.high_watermark == 0
    await asyncio.sleep(0)
    assert advances == [6]


async def test_a_closed_log_refuses_appends() -> None:
    store = MemoryLogStore(FakeClock())
    log = await store.open(TOPIC_PARTITION, DEFAULT_CONFIG, 0)
    await append_durable(log, 1)
    await store.close()
    assert store.get(TOPIC_PARTITION) is None
    with pytest.raises(LogFailed, match="closed"):
        log.append(*producer_batch(1))


async def test_opening_an_open_partition_closes_its_log_first() -> None:
    store = MemoryLogStore(FakeClock())
    log = await store.open(TOPIC_PARTITION, DEFAULT_CONFIG, 0)
    log.append(*producer_batch(2))  # pending: made durable by the close
    reopened = await store.open(TOPIC_PARTITION, DEFAULT_CONFIG, 0)
    assert store.get(TOPIC_PARTITION) is reopened
    assert (reopened.high_watermark, reopened.log_end_offset) == (2, 2)
    with pytest.raises(LogFailed):
        log.append(*producer_batch(1))


async def test_reopening_restarts_the_active_segment_age() -> None:
    """As the disk store's recovery does: segment.ms counts from the restart."""
    clock = FakeClock()
    store = MemoryLogStore(clock)
    config = LogConfig(segment_ms=1000)
    log = await store.open(TOPIC_PARTITION, config, 0)
    await append_durable(log, 1)
    clock.now_ms += 5000
    await store.close()
    reopened = await store.open(TOPIC_PARTITION, config, 0)
    await append_durable(reopened, 1)
    assert len(reopened.segment_summaries()) == 1
