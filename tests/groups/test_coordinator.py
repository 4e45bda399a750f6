"""Group protocol over a fake clock: joins, rebalances, expiry, fencing, static members."""

from __future__ import annotations

from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.groups.group_states import GroupState
from kshim.broker.groups.settings import GroupSettings
from kshim.protocol.errors import ErrorCode
from kshim.storage.meta.metadata import MetadataStore
from kshim.testing import FakeClock
from tests.groups.support import (
    GROUP,
    REBALANCE_MS,
    SESSION_MS,
    advance,
    join_new_member,
    join_request,
    settle,
    stable_member,
    start,
    subscription,
    sync_request,
)


async def test_new_member_is_told_its_id_then_joins_generation_one(
    coordinator: GroupCoordinator,
) -> None:
    first = await coordinator.join(join_request(client_id="app"))
    assert first.error == ErrorCode.member_id_required
    assert first.member_id.startswith("app-")
    assert coordinator.groups[GROUP].state is GroupState.EMPTY

    joined = await coordinator.join(join_request(first.member_id))

    assert joined.error == ErrorCode.none
    assert joined.generation_id == 1  # Kafka starts at 1; aiokafka only leaves for > 0
    assert joined.leader_id == joined.member_id == first.member_id
    assert joined.protocol_type == "consumer"
    assert joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [joined.member_id]
    assert joined.members[0].metadata == subscription("t")
    assert coordinator.groups[GROUP].state is GroupState.COMPLETING_REBALANCE


async def test_old_versions_join_in_one_step(coordinator: GroupCoordinator) -> None:
    joined = await coordinator.join(join_request(two_step=False))
    assert joined.error == ErrorCode.none
    assert joined.generation_id == 1


async def test_leader_sync_makes_the_group_stable(coordinator: GroupCoordinator) -> None:
    joined = await stable_member(coordinator, data=b"mine")
    group = coordinator.groups[GROUP]
    assert group.state is GroupState.STABLE
    again = await coordinator.sync(sync_request(joined.member_id, 1))
    assert again.assignment == b"mine"
    assert coordinator.heartbeat(GROUP, 1, joined.member_id, None) == ErrorCode.none


async def test_initial_delay_gathers_members_into_one_generation(
    clock: FakeClock, metadata: MetadataStore
) -> None:
    settings = GroupSettings(initial_rebalance_delay_ms=300)
    coordinator = GroupCoordinator(settings, clock, metadata.committed_offsets)
    first = await join_new_member(coordinator)
    await advance(clock, coordinator, 200)
    second = await join_new_member(coordinator)
    # At 300 ms the delay ends, but a member arrived meanwhile: wait another 300 ms.
    await advance(clock, coordinator, 100)
    await advance(clock, coordinator, 299)
    assert not first.done() and not second.done()

    await advance(clock, coordinator, 1)

    results = [first.result(), second.result()]
    assert [r.generation_id for r in results] == [1, 1]
    leader = next(r for r in results if r.members)
    assert {m.member_id for m in leader.members} == {r.member_id for r in results}


async def test_initial_delay_is_bounded_by_the_rebalance_timeout(
    clock: FakeClock, metadata: MetadataStore
) -> None:
    settings = GroupSettings(initial_rebalance_delay_ms=3000)
    coordinator = GroupCoordinator(settings, clock, metadata.committed_offsets)
    pending = await join_new_member(coordinator, rebalance_ms=1000)
    await advance(clock, coordinator, 999)
    assert not pending.done()
    await advance(clock, coordinator, 1)
    assert pending.result().generation_id == 1


async def test_new_member_triggers_rebalance_and_follower_waits_for_leader(
    clock: FakeClock, coordinator: GroupCoordinator
) -> None:
    leader = await stable_member(coordinator)
    newcomer = await join_new_member(coordinator)
    assert coordinator.groups[GROUP].state is GroupState.PREPARING_REBALANCE
    assert not newcomer.done()
    heartbeat = coordinator.heartbeat(GROUP, 1, leader.member_id, None)
    assert heartbeat == ErrorCode.rebalance_in_progress

    rejoined = await coordinator.join(join_request(leader.member_id))
    follower = await newcomer

    assert rejoined.generation_id == follower.generation_id == 2
    assert rejoined.leader_id == follower.leader_id == leader.member_id
    assert len(rejoined.members) == 2 and follower.members == ()
    follower_sync = await start(coordinator.sync(sync_request(follower.member_id, 2)))
    assert not follower_sync.done()
    plan = [(leader.member_id, b"p0"), (follower.member_id, b"p1")]
    leader_sync = await coordinator.sync(sync_request(leader.member_id, 2, plan))
    assert leader_sync.assignment == b"p0"
    assert (await follower_sync).assignment == b"p1"
    assert coordinator.groups[GROUP].state is GroupState.STABLE


async def test_member_that_does_not_rejoin_is_dropped_at_rebalance_timeout(
    clock: FakeClock, coordinator: GroupCoordinator
) -> None:
    silent = await stable_member(coordinator, session_ms=2 * REBALANCE_MS)
    newcomer = await join_new_member(coordinator, rebalance_ms=REBALANCE_MS)
    await advance(clock, coordinator, REBALANCE_MS - 1)
    assert not newcomer.done()
    await advance(clock, coordinator, 1)

    result = newcomer.result()
    assert result.generation_id == 2
    assert result.leader_id == result.member_id
    assert silent.member_id not in coordinator.groups[GROUP].members
    assert coordinator.heartbeat(GROUP, 2, silent.member_id, None) == ErrorCode.unknown_member_id


async def test_member_without_heartbeats_expires_after_session_timeout(
    clock: FakeClock, coordinator: GroupCoordinator
) -> None:
    joined = await stable_member(coordinator)
    await advance(clock, coordinator, SESSION_MS - 1)
    assert joined.member_id in coordinator.groups[GROUP].members
    await advance(clock, coordinator, 1)
    group = coordinator.groups[GROUP]
    assert group.members == {}
    assert group.state is GroupState.EMPTY
    assert group.generation_id == 2


async def test_heartbeats_keep_a_member_alive(
    clock: FakeClock, coordinator: GroupCoordinator
) -> None:
    joined = await stable_member(coordinator)
    for _ in range(5):
        await advance(clock, coordinator, SESSION_MS // 2)
        assert coordinator.heartbeat(GROUP, 1, joined.member_id, None) == ErrorCode.none
    assert coordinator.groups[GROUP].state is GroupState.STABLE


async def test_expired_member_partitions_go_to_the_survivor(
    clock: FakeClock, coordinator: GroupCoordinator
) -> None:
    first = await stable_member(coordinator)
    newcomer = await join_new_member(coordinator)
    await coordinator.join(join_request(first.member_id))
    second = await newcomer
    plan = [(first.member_id, b"p0"), (second.member_id, b"p1")]
    sync_second = await start(coordinator.sync(sync_request(second.member_id, 2)))
    await coordinator.sync(sync_request(first.member_id, 2, plan))
    await sync_second
    for _ in range(3):  # the second member keeps heartbeating, the first goes silent
        await advance(clock, coordinator, SESSION_MS // 2)
        coordinator.heartbeat(GROUP, 2, second.member_id, None)

    assert coordinator.heartbeat(GROUP, 2, second.member_id, None) == (
        ErrorCode.rebalance_in_progress
    )
    survivor = await coordinator.join(join_request(second.member_id))
    assert survivor.generation_id == 3
    assert survivor.leader_id == second.member_id
    assert [m.member_id for m in survivor.members] == [second.member_id]


async def test_generation_and_member_fencing(coordinator: GroupCoordinator) -> None:
    joined = await stable_member(coordinator)
    member = joined.member_id
    assert coordinator.heartbeat(GROUP, 0, member, None) == ErrorCode.illegal_generation
    assert coordinator.heartbeat(GROUP, 1, "stranger", None) == ErrorCode.unknown_member_id
    assert coordinator.heartbeat("no-group", 1, member, None) == ErrorCode.unknown_member_id
    stale = await coordinator.sync(sync_request(member, 7))
    assert stale.error == ErrorCode.illegal_generation
    unknown = await coordinator.join(join_request("stranger"))
    assert unknown.error == ErrorCode.unknown_member_id


async def test_join_is_refused_for_bad_input(coordinator: GroupCoordinator) -> None:
    short = await coordinator.join(join_request(session_ms=10))
    assert short.error == ErrorCode.invalid_session_timeout
    nameless = await coordinator.join(join_request(group_id=""))
    assert nameless.error == ErrorCode.invalid_group_id
    no_protocols = await coordinator.join(join_request(protocols=()))
    assert no_protocols.error == ErrorCode.inconsistent_group_protocol


async def test_incompatible_protocols_are_refused(coordinator: GroupCoordinator) -> None:
    await stable_member(coordinator)
    other_type = await coordinator.join(join_request(protocol_type="connect", two_step=False))
    assert other_type.error == ErrorCode.inconsistent_group_protocol
    other_assignor = await coordinator.join(
        join_request(protocols=[("sticky", b"")], two_step=False)
    )
    assert other_assignor.error == ErrorCode.inconsistent_group_protocol


async def test_protocol_chosen_by_vote_among_common_ones(coordinator: GroupCoordinator) -> None:
    first = await start(
        coordinator.join(
            join_request(protocols=[("range", b"a"), ("roundrobin", b"b")], two_step=False)
        )
    )
    first_result = await first
    newcomer = await start(
        coordinator.join(join_request(protocols=[("roundrobin", b"c")], two_step=False))
    )
    await coordinator.join(
        join_request(first_result.member_id, protocols=[("range", b"a"), ("roundrobin", b"b")])
    )
    result = await newcomer
    assert result.protocol_name == "roundrobin"  # the only protocol both members support


async def test_leave_empties_the_group_and_bumps_generation(
    coordinator: GroupCoordinator,
) -> None:
    joined = await stable_member(coordinator)
    assert coordinator.leave(GROUP, "stranger", None) == ErrorCode.unknown_member_id
    assert coordinator.leave(GROUP, joined.member_id, None) == ErrorCode.none
    group = coordinator.groups[GROUP]
    assert group.state is GroupState.EMPTY
    assert group.generation_id == 2
    assert coordinator.leave("no-group", joined.member_id, None) == ErrorCode.unknown_member_id


async def test_leave_of_a_member_lets_the_rebalance_complete(
    coordinator: GroupCoordinator,
) -> None:
    first = await stable_member(coordinator)
    newcomer = await join_new_member(coordinator)
    assert coordinator.leave(GROUP, first.member_id, None) == ErrorCode.none
    result = await newcomer
    assert result.generation_id == 2
    assert [m.member_id for m in result.members] == [result.member_id]


async def test_pending_sync_is_told_to_rejoin_when_a_member_arrives(
    coordinator: GroupCoordinator,
) -> None:
    first = await stable_member(coordinator)
    newcomer = await join_new_member(coordinator)
    await coordinator.join(join_request(first.member_id))
    second = await newcomer
    waiting = await start(coordinator.sync(sync_request(second.member_id, 2)))
    third = await join_new_member(coordinator)
    assert (await waiting).error == ErrorCode.rebalance_in_progress
    third.cancel()


async def test_member_id_required_member_that_never_returns_does_not_block(
    clock: FakeClock, coordinator: GroupCoordinator
) -> None:
    first = await stable_member(coordinator)
    vanished = await coordinator.join(join_request())
    assert vanished.error == ErrorCode.member_id_required
    newcomer = await join_new_member(coordinator)
    rejoin = await start(coordinator.join(join_request(first.member_id)))
    assert not rejoin.done()  # still waiting for the member told MEMBER_ID_REQUIRED
    await advance(clock, coordinator, SESSION_MS)
    assert rejoin.result().generation_id == (await newcomer).generation_id == 2


async def test_static_member_rejoins_with_its_assignment_and_fences_the_old_id(
    coordinator: GroupCoordinator,
) -> None:
    first = await coordinator.join(join_request(instance_id="node-1"))
    assert first.error == ErrorCode.none  # static members skip MEMBER_ID_REQUIRED
    await coordinator.sync(
        sync_request(first.member_id, 1, [(first.member_id, b"kept")], instance_id="node-1")
    )

    again = await coordinator.join(join_request(instance_id="node-1"))

    assert again.error == ErrorCode.none
    assert again.member_id != first.member_id
    assert again.generation_id == 1  # no rebalance
    assert again.leader_id == first.member_id and again.members == ()
    synced = await coordinator.sync(sync_request(again.member_id, 1, instance_id="node-1"))
    assert synced.assignment == b"kept"
    fenced = coordinator.heartbeat(GROUP, 1, first.member_id, "node-1")
    assert fenced == ErrorCode.fenced_instance_id
    assert coordinator.leave(GROUP, "", "node-1") == ErrorCode.none
    assert coordinator.groups[GROUP].state is GroupState.EMPTY


async def test_static_member_survives_until_its_session_expires(
    clock: FakeClock, coordinator: GroupCoordinator
) -> None:
    long_session = 2 * REBALANCE_MS
    static = await coordinator.join(
        join_request(instance_id="node-1", two_step=False, session_ms=long_session)
    )
    await coordinator.sync(sync_request(static.member_id, 1, instance_id="node-1"))
    newcomer = await join_new_member(coordinator)
    await advance(clock, coordinator, REBALANCE_MS)
    # A static member that did not rejoin is kept (it may be restarting) ...
    assert static.member_id in coordinator.groups[GROUP].members
    assert newcomer.result().generation_id == 2
    # ... until its session runs out.
    await advance(clock, coordinator, long_session)
    assert static.member_id not in coordinator.groups[GROUP].members


async def test_retried_join_answers_the_superseded_request(coordinator: GroupCoordinator) -> None:
    first = await stable_member(coordinator)
    second_join = await join_new_member(coordinator)
    await coordinator.join(join_request(first.member_id))
    second = await second_join
    third = await join_new_member(coordinator)  # generation 2 -> rebalance
    waiting = await start(coordinator.join(join_request(first.member_id)))
    retried = await start(coordinator.join(join_request(first.member_id)))

    assert waiting.result().error == ErrorCode.rebalance_in_progress
    assert not retried.done()
    await coordinator.join(join_request(second.member_id))
    await settle()
    assert retried.result().generation_id == third.result().generation_id == 3
