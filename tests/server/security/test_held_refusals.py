"""Refused connections held before they are closed (server/security/held_refusals.py)."""

from __future__ import annotations

import asyncio

from kshim.server.security.held_refusals import HeldRefusals


async def test_a_held_refusal_is_closed_when_its_time_comes() -> None:
    closed: list[str] = []
    refusals = HeldRefusals(limit=10)
    refusals.hold(lambda: closed.append("late"), 0.05)
    refusals.hold(lambda: closed.append("at once"), 0.0)
    assert closed == ["at once"]
    assert len(refusals) == 1
    await asyncio.sleep(0.02)
    assert closed == ["at once"]
    await asyncio.sleep(0.1)
    assert closed == ["at once", "late"]
    assert len(refusals) == 0


async def test_past_the_limit_refusals_close_at_once() -> None:
    closed: list[int] = []
    refusals = HeldRefusals(limit=3)
    for index in range(5):
        refusals.hold(lambda index=index: closed.append(index), 60.0)  # type: ignore[misc]
    assert closed == [3, 4]
    assert len(refusals) == 3


async def test_close_all_closes_every_held_one_once() -> None:
    closed: list[int] = []
    refusals = HeldRefusals(limit=10)
    for index in range(4):
        refusals.hold(lambda index=index: closed.append(index), 0.05)  # type: ignore[misc]
    refusals.close_all()
    assert sorted(closed) == [0, 1, 2, 3]
    await asyncio.sleep(0.1)  # the timers were cancelled: nothing is closed twice
    assert sorted(closed) == [0, 1, 2, 3]
    assert len(refusals) == 0
