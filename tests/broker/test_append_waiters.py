"""AppendWaiters: the long poll of Fetch, woken by appends or by its own timer."""

from __future__ import annotations

import asyncio
import time

import pytest

from kshim.broker.append_waiters import AppendWaiters
from kshim.storage.interface import TopicPartition

ORDERS, PAYMENTS = TopicPartition("orders", 0), TopicPartition("payments", 0)


async def test_a_notify_wakes_a_waiter_of_that_partition() -> None:
    waiters = AppendWaiters()
    waiting = asyncio.ensure_future(waiters.wait_any([ORDERS, PAYMENTS], 30))
    await asyncio.sleep(0)
    waiters.notify(TopicPartition("other", 0))
    await asyncio.sleep(0)
    assert not waiting.done()
    waiters.notify(PAYMENTS)
    await asyncio.wait_for(waiting, 1)
    assert waiters._waiting == {}  # nothing left registered under either partition


async def test_the_wait_ends_at_its_timeout() -> None:
    waiters = AppendWaiters()
    started = time.monotonic()
    await asyncio.wait_for(waiters.wait_any([ORDERS], 0.05), 5)
    assert 0.04 <= time.monotonic() - started < 2
    assert waiters._waiting == {}


async def test_a_cancelled_wait_leaves_nothing_behind() -> None:
    waiters = AppendWaiters()
    waiting = asyncio.ensure_future(waiters.wait_any([ORDERS], 30))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert waiters._waiting == {}
    waiters.notify(ORDERS)  # a notify after the cancel finds nobody and does not fail


async def test_one_notify_wakes_every_waiter_of_the_partition() -> None:
    waiters = AppendWaiters()
    waiting = [asyncio.ensure_future(waiters.wait_any([ORDERS], 30)) for _ in range(3)]
    await asyncio.sleep(0)
    waiters.notify(ORDERS)
    waiters.notify(ORDERS)  # a second finds nobody left waiting
    await asyncio.wait_for(asyncio.gather(*waiting), 1)
    assert waiters._waiting == {}
