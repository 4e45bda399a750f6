"""Helpers for the group coordinator's unit tests: a fake clock and request builders.

Time only moves when a test says so (``advance``), and the coordinator's timers
fire only then, so every rebalance step is deterministic.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.groups.member import JoinRequest, JoinResult, SyncRequest, SyncResult
from kshim.protocol.errors import ErrorCode
from kshim.testing import FakeClock

T = TypeVar("T")
SESSION_MS = 10_000
REBALANCE_MS = 30_000
GROUP = "group-a"
TOPIC = "orders"  # the topic of the ``broker`` fixture (conftest.py), two partitions


async def settle() -> None:
    """Lets every runnable task run until it blocks again."""
    for _ in range(10):
        await asyncio.sleep(0)


async def advance(clock: FakeClock, coordinator: GroupCoordinator, milliseconds: int) -> None:
    """Moves time on, fires the timers now due, and lets woken requests finish."""
    clock.advance(milliseconds)
    coordinator.timers.run_due()
    await settle()


async def start(coroutine: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Starts a request in the background and runs it until it waits (or finishes)."""
    task = asyncio.ensure_future(coroutine)
    await settle()
    return task


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: int16 version, topics, null user data."""
    body = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic)) + topic.encode()
    return body + struct.pack(">i", -1)


def assignment(topic: str, partitions: Sequence[int]) -> bytes:
    """A ConsumerProtocolAssignment v0 with one topic."""
    body = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    body += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return body + struct.pack(">i", -1)


def join_request(
    member_id: str = "",
    *,
    group_id: str = GROUP,
    instance_id: str | None = None,
    protocols: Sequence[tuple[str, bytes]] = (("range", subscription("t")),),
    protocol_type: str = "consumer",
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
    two_step: bool = True,
    client_id: str = "client",
) -> JoinRequest:
    return JoinRequest(
        group_id=group_id,
        member_id=member_id,
        group_instance_id=instance_id,
        client_id=client_id,
        client_host="",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=protocol_type,
        protocols=tuple(protocols),
        require_known_member_id=two_step,
    )


def sync_request(
    member_id: str,
    generation_id: int,
    assignments: Sequence[tuple[str, bytes]] = (),
    *,
    group_id: str = GROUP,
    instance_id: str | None = None,
) -> SyncRequest:
    return SyncRequest(
        group_id, generation_id, member_id, instance_id, None, None, tuple(assignments)
    )


async def join_new_member(
    coordinator: GroupCoordinator, **options: Any
) -> asyncio.Task[JoinResult]:
    """The join of a new member (two steps when dynamic); returns the pending JoinGroup."""
    if options.get("instance_id") is not None:
        return await start(coordinator.join(join_request(**options)))
    first = await coordinator.join(join_request(**options))
    assert first.error == ErrorCode.member_id_required
    return await start(coordinator.join(join_request(first.member_id, **options)))


async def stable_member(
    coordinator: GroupCoordinator, data: bytes = b"assignment", **options: Any
) -> JoinResult:
    """A lone member joined and synced: the group is Stable with it as leader."""
    joined = await (await join_new_member(coordinator, **options))
    assert joined.error == ErrorCode.none
    synced: SyncResult = await coordinator.sync(
        sync_request(
            joined.member_id,
            joined.generation_id,
            [(joined.member_id, data)],
            group_id=options.get("group_id", GROUP),
            instance_id=options.get("instance_id"),
        )
    )
    assert synced.error == ErrorCode.none
    return joined
