"""The coordinator's timers: order, replacement, cancellation, and the background loop."""

from __future__ import annotations

import asyncio
import time

from kshim.broker.groups.timers import Timers
from kshim.testing import FakeClock


def test_timers_fire_in_deadline_order_once_due() -> None:
    clock = FakeClock(0)
    timers = Timers(clock)
    fired: list[str] = []
    timers.schedule("late", 20, lambda: fired.append("late"))
    timers.schedule("early", 10, lambda: fired.append("early"))
    assert timers.run_due() == 0
    clock.advance(15)
    assert timers.run_due() == 1
    clock.advance(5)
    timers.run_due()
    assert fired == ["early", "late"]
    assert timers.next_deadline() is None


def test_rescheduling_replaces_and_cancel_removes() -> None:
    clock = FakeClock(0)
    timers = Timers(clock)
    fired: list[str] = []
    timers.schedule("key", 10, lambda: fired.append("first"))
    timers.schedule("key", 30, lambda: fired.append("second"))
    timers.schedule("gone", 5, lambda: fired.append("gone"))
    timers.cancel("gone")
    assert timers.deadline("key") == 30
    assert timers.next_deadline() == 30
    clock.advance(30)
    timers.run_due()
    assert fired == ["second"]


def test_a_failing_callback_does_not_stop_the_others() -> None:
    clock = FakeClock(0)
    timers = Timers(clock)
    fired: list[str] = []

    def fail() -> None:
        raise RuntimeError("boom")

    timers.schedule("bad", 1, fail)
    timers.schedule("good", 2, lambda: fired.append("good"))
    clock.advance(2)
    assert timers.run_due() == 2
    assert fired == ["good"]


def test_callbacks_may_schedule_timers_that_are_already_due() -> None:
    clock = FakeClock(0)
    timers = Timers(clock)
    fired: list[int] = []
    timers.schedule("a", 1, lambda: timers.schedule("b", 0, lambda: fired.append(2)))
    clock.advance(1)
    assert timers.run_due() == 2
    assert fired == [2]


async def test_background_loop_wakes_for_an_earlier_deadline() -> None:
    timers = Timers(lambda: time.monotonic_ns() // 1_000_000)
    now = time.monotonic_ns() // 1_000_000
    fired = asyncio.Event()
    timers.schedule("far", now + 60_000, lambda: None)
    runner = asyncio.create_task(timers.run())
    try:
        await asyncio.sleep(0.01)  # the loop now sleeps towards the far deadline
        timers.schedule("near", now + 50, fired.set)
        await asyncio.wait_for(fired.wait(), 5)
    finally:
        runner.cancel()
    assert timers.deadline("far") is not None
