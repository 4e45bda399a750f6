"""Committed offsets: durable layout, OffsetCommit and OffsetFetch rules, retention,
DeleteGroups, OffsetDelete, and the views behind ListGroups and DescribeGroups."""

from __future__ import annotations

from pathlib import Path

from kshim.broker.groups import admin, offset_commits
from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.groups.group_states import GroupState
from kshim.broker.groups.settings import MINUTE_MS, GroupSettings
from kshim.protocol.errors import ErrorCode
from kshim.storage.interface import TopicPartition
from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.committed_offsets import CommittedOffset
from kshim.storage.meta.metadata import MetadataStore
from kshim.testing import FakeClock
from tests.groups.support import (
    GROUP,
    join_new_member,
    join_request,
    stable_member,
    start,
    subscription,
)

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
OTHER = TopicPartition("other", 0)


def offset(value: int, at: int = 0, expires: int = -1) -> CommittedOffset:
    return CommittedOffset(
        value, leader_epoch=3, metadata=f"m{value}", commit_timestamp=at, expire_timestamp=expires
    )


def test_key_layout_sorts_by_group_then_topic_then_partition() -> None:
    key = keys.committed_offset_key("g", TopicPartition("t", 258))
    assert key == b"g\x00t\x00\x00\x00\x01\x02"
    assert keys.split_committed_offset_key(key) == ("g", TopicPartition("t", 258))
    ordered = [
        keys.committed_offset_key(group, TopicPartition(topic, partition))
        for group, topic, partition in [
            ("g", "a", 2),
            ("g", "a", 10),
            ("g", "b", 0),
            ("g2", "a", 0),
        ]
    ]
    assert ordered == sorted(ordered)


def test_offsets_survive_reopening_the_store(tmp_path: Path) -> None:
    store = MetadataStore(str(tmp_path / "meta"))
    store.committed_offsets.commit("g", {TP0: offset(5), TP1: offset(7)})
    store.committed_offsets.commit("g2", {TP0: offset(1)})
    store.committed_offsets.commit("g", {TP0: offset(6)})
    store.close()

    reopened = MetadataStore(str(tmp_path / "meta"))
    try:
        loaded = reopened.committed_offsets.load_all()
    finally:
        reopened.close()
    assert loaded == {"g": {TP0: offset(6), TP1: offset(7)}, "g2": {TP0: offset(1)}}


def test_deleting_one_group_leaves_a_group_whose_name_extends_it(
    metadata: MetadataStore,
) -> None:
    store = metadata.committed_offsets
    store.commit("g", {TP0: offset(1)})
    store.commit("g2", {TP0: offset(2)})
    store.delete_group("g")
    store.delete("g2", [TP1])  # nothing there: a no-op
    assert store.load_all() == {"g2": {TP0: offset(2)}}


def test_metadata_and_null_expiry_round_trip() -> None:
    committed = CommittedOffset(9, -1, "ünïcode", 123, -1)
    assert CommittedOffset.from_bytes(committed.to_bytes()) == committed


async def test_commit_is_visible_only_after_it_is_durable(
    coordinator: GroupCoordinator, metadata: MetadataStore
) -> None:
    await coordinator.offsets.commit("g", {TP0: offset(4)})
    assert coordinator.offsets.committed("g") == {TP0: offset(4)}
    assert metadata.committed_offsets.load_all() == {"g": {TP0: offset(4)}}


async def test_commit_fencing_follows_kafka(
    clock: FakeClock, coordinator: GroupCoordinator
) -> None:
    def check(generation: int, member: str, instance: str | None = None) -> ErrorCode:
        return offset_commits.check_commit(coordinator, GROUP, generation, member, instance)

    assert check(-1, "") == ErrorCode.none  # standalone consumer, no group yet
    assert check(1, "ghost") == ErrorCode.illegal_generation
    assert offset_commits.check_commit(coordinator, "", -1, "", None) == ErrorCode.invalid_group_id
    joined = await stable_member(coordinator)
    member = joined.member_id
    assert check(1, member) == ErrorCode.none
    assert check(0, member) == ErrorCode.illegal_generation
    assert check(1, "ghost") == ErrorCode.unknown_member_id
    assert check(-1, "") == ErrorCode.unknown_member_id  # the group has members
    newcomer = await join_new_member(coordinator)
    # PreparingRebalance: members commit what they consumed before giving partitions up.
    assert check(1, member) == ErrorCode.none
    await coordinator.join(join_request(member))
    assert coordinator.groups[GROUP].state is GroupState.COMPLETING_REBALANCE
    assert check(2, member) == ErrorCode.rebalance_in_progress
    newcomer.cancel()


async def test_static_member_commit_with_a_stale_id_is_fenced(
    coordinator: GroupCoordinator,
) -> None:
    old = await stable_member(coordinator, instance_id="node-1")
    new = await coordinator.join(join_request(instance_id="node-1"))
    assert new.generation_id == 1
    assert offset_commits.check_commit(coordinator, GROUP, 1, old.member_id, "node-1") == (
        ErrorCode.fenced_instance_id
    )
    assert (
        offset_commits.check_commit(coordinator, GROUP, 1, new.member_id, "node-1")
        == ErrorCode.none
    )


async def test_offsets_of_an_empty_group_expire_after_retention(
    clock: FakeClock, metadata: MetadataStore
) -> None:
    settings = GroupSettings(offsets_retention_ms=10 * MINUTE_MS)
    coordinator = GroupCoordinator(settings, clock, metadata.committed_offsets)
    await coordinator.offsets.commit("idle", {TP0: offset(1, at=clock())})
    clock.advance(5 * MINUTE_MS)
    await coordinator.offsets.commit("idle", {TP1: offset(2, at=clock())})
    await coordinator.offsets.commit("short", {TP0: offset(3, at=clock(), expires=clock() + 1)})
    clock.advance(5 * MINUTE_MS)

    removed = await admin.expire_offsets_once(coordinator, lambda topic: True)

    assert removed == 2
    assert coordinator.offsets.committed("idle") == {TP1: offset(2, at=clock() - 5 * MINUTE_MS)}
    assert "short" not in coordinator.offsets.group_ids()
    assert metadata.committed_offsets.load_all() == {
        "idle": {TP1: offset(2, at=clock() - 5 * MINUTE_MS)}
    }


async def test_offsets_of_an_active_group_do_not_expire(
    clock: FakeClock, metadata: MetadataStore
) -> None:
    settings = GroupSettings(offsets_retention_ms=MINUTE_MS)
    coordinator = GroupCoordinator(settings, clock, metadata.committed_offsets)
    joined = await stable_member(coordinator, session_ms=1_800_000)
    await coordinator.offsets.commit(GROUP, {TP0: offset(1, at=clock())})
    clock.advance(10 * MINUTE_MS)
    assert await admin.expire_offsets_once(coordinator, lambda topic: True) == 0
    # Once the group empties, retention counts from that moment (KIP-211).
    coordinator.leave(GROUP, joined.member_id, None)
    clock.advance(MINUTE_MS - 1)
    assert await admin.expire_offsets_once(coordinator, lambda topic: True) == 0
    clock.advance(1)
    assert await admin.expire_offsets_once(coordinator, lambda topic: True) == 1
    assert GROUP not in coordinator.groups  # an empty group with no offsets is forgotten


async def test_offsets_of_deleted_topics_are_dropped(coordinator: GroupCoordinator) -> None:
    await coordinator.offsets.commit("g", {TP0: offset(1), OTHER: offset(2)})
    assert await admin.expire_offsets_once(coordinator, lambda topic: topic == "t") == 1
    assert set(coordinator.offsets.committed("g")) == {TP0}


async def test_deleting_a_topic_drops_its_offsets_at_once(coordinator: GroupCoordinator) -> None:
    await coordinator.offsets.commit("g", {TP0: offset(1), TP1: offset(3), OTHER: offset(2)})
    await coordinator.offsets.commit("g2", {TP0: offset(4)})
    assert await admin.drop_topic_offsets(coordinator, "t") == 3
    assert set(coordinator.offsets.committed("g")) == {OTHER}
    assert "g2" not in coordinator.offsets.group_ids()
    view = TopicPartition("other.full", 0)
    await coordinator.offsets.commit("g", {view: offset(5), TopicPartition("kept", 0): offset(6)})
    assert await admin.drop_topic_offsets(coordinator, "other", "other.full") == 2
    assert set(coordinator.offsets.committed("g")) == {TopicPartition("kept", 0)}


async def test_delete_groups_rules(coordinator: GroupCoordinator) -> None:
    assert await admin.delete_group(coordinator, "nothing") == ErrorCode.group_id_not_found
    assert await admin.delete_group(coordinator, "") == ErrorCode.invalid_group_id
    joined = await stable_member(coordinator)
    await coordinator.offsets.commit(GROUP, {TP0: offset(1)})
    assert await admin.delete_group(coordinator, GROUP) == ErrorCode.non_empty_group
    coordinator.leave(GROUP, joined.member_id, None)
    assert await admin.delete_group(coordinator, GROUP) == ErrorCode.none
    assert GROUP not in coordinator.groups
    assert coordinator.offsets.committed(GROUP) == {}
    await coordinator.offsets.commit("standalone", {TP0: offset(1)})
    assert await admin.delete_group(coordinator, "standalone") == ErrorCode.none


async def test_offset_delete_refuses_subscribed_topics(coordinator: GroupCoordinator) -> None:
    await stable_member(coordinator, protocols=[("range", subscription("t"))])
    await coordinator.offsets.commit(GROUP, {TP0: offset(1), OTHER: offset(2)})
    group_error, errors = await offset_commits.delete_offsets(coordinator, GROUP, [TP0, OTHER])
    assert group_error == ErrorCode.none
    assert errors == {TP0: ErrorCode.group_subscribed_to_topic, OTHER: ErrorCode.none}
    assert set(coordinator.offsets.committed(GROUP)) == {TP0}
    missing, _ = await offset_commits.delete_offsets(coordinator, "nothing", [TP0])
    assert missing == ErrorCode.group_id_not_found


async def test_offset_delete_needs_readable_subscriptions(coordinator: GroupCoordinator) -> None:
    await stable_member(coordinator, protocol_type="connect", protocols=[("default", b"?")])
    await coordinator.offsets.commit(GROUP, {TP0: offset(1)})
    group_error, _ = await offset_commits.delete_offsets(coordinator, GROUP, [TP0])
    assert group_error == ErrorCode.non_empty_group


async def test_list_and_describe_include_groups_known_only_by_offsets(
    coordinator: GroupCoordinator,
) -> None:
    await stable_member(coordinator)
    await coordinator.offsets.commit("restarted", {TP0: offset(1)})
    overviews = admin.list_groups(coordinator)
    assert [(o.group_id, o.state, o.protocol_type) for o in overviews] == [
        (GROUP, GroupState.STABLE, "consumer"),
        ("restarted", GroupState.EMPTY, ""),
    ]
    assert admin.describe_group(coordinator, "restarted").state is GroupState.EMPTY
    assert admin.describe_group(coordinator, "unknown").state is GroupState.DEAD
    described = admin.describe_group(coordinator, GROUP)
    assert described.protocol_name == "range"
    assert len(described.members) == 1


async def test_describe_hides_protocol_while_rebalancing(coordinator: GroupCoordinator) -> None:
    await stable_member(coordinator)
    newcomer = await start(coordinator.join(join_request(two_step=False)))
    described = admin.describe_group(coordinator, GROUP)
    assert described.state is GroupState.PREPARING_REBALANCE
    assert described.protocol_name == ""
    newcomer.cancel()


def commit_request(
    offsets: dict[TopicPartition, offset_commits.PartitionCommit],
    *,
    generation: int = -1,
    member: str = "",
    retention_ms: int = offset_commits.DEFAULT_RETENTION,
) -> offset_commits.CommitRequest:
    return offset_commits.CommitRequest(GROUP, generation, member, None, retention_ms, offsets)


async def test_commit_stores_what_may_be_committed(
    clock: FakeClock, coordinator: GroupCoordinator
) -> None:
    settings = coordinator.settings
    fits = offset_commits.PartitionCommit(5, 2, "m" * settings.max_metadata_bytes)
    too_long = offset_commits.PartitionCommit(6, 2, "é" * settings.max_metadata_bytes)
    errors = await offset_commits.commit_offsets(
        coordinator, commit_request({TP0: fits, TP1: too_long}, retention_ms=500)
    )
    assert errors == {TP0: ErrorCode.none, TP1: ErrorCode.offset_metadata_too_large}
    assert coordinator.offsets.committed(GROUP) == {
        TP0: CommittedOffset(5, 2, fits.metadata, clock(), expire_timestamp=clock() + 500)
    }
    fenced = await offset_commits.commit_offsets(
        coordinator, commit_request({TP0: fits, TP1: fits}, generation=3, member="ghost")
    )
    assert fenced == {TP0: ErrorCode.illegal_generation, TP1: ErrorCode.illegal_generation}
    assert set(coordinator.offsets.committed(GROUP)) == {TP0}


async def test_fetch_answers_each_partition_or_everything_committed(
    coordinator: GroupCoordinator,
) -> None:
    await coordinator.offsets.commit(GROUP, {TP1: offset(7), OTHER: offset(2)})
    error, fetched = offset_commits.fetch_offsets(coordinator, GROUP, [TP1, TP0], {TP1})
    assert error == ErrorCode.none
    assert [(f.topic_partition, f.committed, f.error) for f in fetched] == [
        (TP1, offset(7), ErrorCode.unstable_offset_commit),  # an open transaction holds it
        (TP0, offset_commits.NOTHING_COMMITTED, ErrorCode.none),
    ]
    _, everything = offset_commits.fetch_offsets(coordinator, GROUP, None)
    assert [f.topic_partition for f in everything] == [OTHER, TP1]
    assert offset_commits.fetch_offsets(coordinator, "", None) == (ErrorCode.invalid_group_id, [])


async def test_list_filters_by_state_and_type(coordinator: GroupCoordinator) -> None:
    await stable_member(coordinator)
    await coordinator.offsets.commit("restarted", {TP0: offset(1)})
    assert [o.group_id for o in admin.list_groups(coordinator, states=["EMPTY"])] == ["restarted"]
    assert [o.group_id for o in admin.list_groups(coordinator, states=["stable", "empty"])] == [
        GROUP,
        "restarted",
    ]
    assert len(admin.list_groups(coordinator, types=["Classic"])) == 2
    assert admin.list_groups(coordinator, types=["consumer"]) == []


async def test_describe_shows_metadata_and_assignment_only_when_stable(
    coordinator: GroupCoordinator,
) -> None:
    joined = await stable_member(coordinator, data=b"mine")
    (member,) = admin.describe_group(coordinator, GROUP).members
    assert (member.member_id, member.metadata, member.assignment) == (
        joined.member_id,
        subscription("t"),
        b"mine",
    )
    newcomer = await start(coordinator.join(join_request(two_step=False)))
    rebalancing = admin.describe_group(coordinator, GROUP)
    assert {(m.metadata, m.assignment) for m in rebalancing.members} == {(b"", b"")}
    newcomer.cancel()
    invalid = admin.describe_group(coordinator, "")
    assert (invalid.error, invalid.state, invalid.state_name) == (
        ErrorCode.invalid_group_id,
        None,
        "",
    )
