"""Wall-clock steps and the group coordinator (kshim/broker/clock.py): sessions run on the
monotonic clock, so a step forward of a day expires no member and a step back of an hour
keeps no dead one; committed offsets expire by age on the clock deletions go by, so a
step forward deletes none early. A real coordinator over LMDB, timers fired by the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.broker.groups import admin
from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.groups.group_states import GroupState
from kshim.broker.groups.settings import GroupSettings
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.committed_offsets import CommittedOffset
from kshim.storage.meta.metadata import MetadataStore
from tests.broker.stepped_clocks import DAY, HOUR, MINUTE, NOW, SteppedClocks
from tests.groups.support import GROUP, SESSION_MS, settle, stable_member

RETENTION_MS = 10 * MINUTE
TP0 = TopicPartition("t", 0)


@pytest.fixture
def clocks() -> SteppedClocks:
    return SteppedClocks()


@pytest.fixture
def metadata(tmp_path: Path) -> Iterator[MetadataStore]:
    store = MetadataStore(str(tmp_path / "meta"))
    yield store
    store.close()


@pytest.fixture
def coordinator(clocks: SteppedClocks, metadata: MetadataStore) -> GroupCoordinator:
    settings = GroupSettings(offsets_retention_ms=RETENTION_MS)
    return GroupCoordinator(settings, clocks.broker_clock(), metadata.committed_offsets)


async def fire_timers(coordinator: GroupCoordinator) -> None:
    """What the timers' background task does once it wakes: fire what is due."""
    coordinator.timers.run_due()
    await settle()


async def test_a_step_forward_a_day_expires_no_member(
    clocks: SteppedClocks, coordinator: GroupCoordinator
) -> None:
    joined = await stable_member(coordinator)
    clocks.step(DAY)
    await fire_timers(coordinator)
    assert coordinator.heartbeat(GROUP, 1, joined.member_id, None) == ErrorCode.none
    clocks.advance(SESSION_MS - 1)
    await fire_timers(coordinator)
    assert coordinator.groups[GROUP].state is GroupState.STABLE
    clocks.advance(1)  # a session since the heartbeat, by the monotonic clock
    await fire_timers(coordinator)
    assert coordinator.groups[GROUP].members == {}


async def test_a_step_back_an_hour_keeps_no_dead_member(
    clocks: SteppedClocks, coordinator: GroupCoordinator
) -> None:
    joined = await stable_member(coordinator)
    clocks.step(-HOUR)
    clocks.advance(SESSION_MS - 1)
    await fire_timers(coordinator)
    assert joined.member_id in coordinator.groups[GROUP].members
    clocks.advance(1)
    await fire_timers(coordinator)
    assert coordinator.groups[GROUP].members == {}


async def test_a_step_forward_a_day_expires_no_committed_offset_early(
    clocks: SteppedClocks, coordinator: GroupCoordinator
) -> None:
    committed = CommittedOffset(5, -1, "", commit_timestamp=NOW)
    await coordinator.offsets.commit("idle", {TP0: committed})
    clocks.step(DAY)
    assert await admin.expire_offsets_once(coordinator, lambda topic: True) == 0
    assert coordinator.offsets.committed("idle") == {TP0: committed}
    clocks.advance(RETENTION_MS + 1)  # the retention, as time passes
    assert await admin.expire_offsets_once(coordinator, lambda topic: True) == 1
