"""Which gateway owns each partition of the full-data views on Apache Kafka: the placeholder
``T.full`` is created with ``T``'s partitions (and never ``T`` itself for asking); two
gateways in one group share a view's partitions, each told the whole map with the owners'
addresses and node ids; one that stops hands its partitions over at once; a view created
later is picked up while names that are no view are not, an on_owned that failed called
again; and the assignor's own rules
(keeping partitions, one member per address, the user data) without a cluster."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from aiokafka.structs import TopicPartition

from kshim.client.frames import encode_request
from kshim.client.wire import parse_bootstrap
from kshim.gateway.delay.upstream import Upstream
from kshim.gateway.full.index import ViewIndex
from kshim.gateway.full.owners_assignor import (
    Member,
    decode_member,
    decode_owners,
    encode_member,
    encode_owners,
    newest_per_address,
    owner_at,
    spread,
)
from kshim.gateway.full.ownership import ViewOwner, ViewOwnership, ViewSettings
from kshim.gateway.full.requests import decoded
from kshim.gateway.full.service import GatewayViews
from kshim.testing import KafkaProcess
from tests.gateway.delay_clients import unique

pytestmark = pytest.mark.timeout(60)

WAIT_S = 15.0
# A session longer than the wait for a handover below: a member that merely died would keep
# its partitions this long, so a handover within the wait is the LeaveGroup's doing.
SESSION_MS = 8_000
HANDOVER_S = 5.0


@dataclass
class Calls:
    """What on_owned and on_released were called with, in order; on_owned fails once for
    each of ``failing``."""

    log: list[tuple[str, str, int]] = field(default_factory=list)
    failing: set[tuple[str, int]] = field(default_factory=set)

    async def owned(self, topic: str, partition: int) -> None:
        if (topic, partition) in self.failing:
            self.failing.discard((topic, partition))
            raise RuntimeError(f"cannot serve {topic}-{partition} yet")
        self.log.append(("owned", topic, partition))

    async def released(self, topic: str, partition: int) -> None:
        self.log.append(("released", topic, partition))

    def current(self) -> set[tuple[str, int]]:
        held: set[tuple[str, int]] = set()
        for change, topic, partition in self.log:
            (held.add if change == "owned" else held.discard)((topic, partition))
        return held


def member(
    bootstrap: str,
    address: tuple[str, int],
    calls: Calls,
    topics: tuple[str, ...] = (),
    group: str = "",
) -> ViewOwnership:
    settings = ViewSettings(
        group_id=group or unique("full-group"),
        topics=topics,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=200,
        metadata_max_age_ms=500,  # a new T.full seen within half a second
        stop_timeout_s=5.0,
        retry_s=0.2,
    )
    return ViewOwnership(Upstream(bootstrap), address, calls.owned, calls.released, settings)


async def until(condition: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        await asyncio.sleep(0.05)


@pytest.fixture
async def admin(kafka_upstream: KafkaProcess) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=kafka_upstream.bootstrap)
    await client.start()
    yield client
    await client.close()


async def partition_count(admin: AIOKafkaAdminClient, topic: str) -> int:
    (described,) = await admin.describe_topics([topic])
    assert described["error_code"] == 0
    return len(described["partitions"])


async def test_the_placeholder_gets_the_sources_partitions_and_nothing_is_created_for_asking(
    kafka_upstream: KafkaProcess, admin: AIOKafkaAdminClient
) -> None:
    topic, missing = unique("full-ensure"), unique("full-missing")
    await admin.create_topics([NewTopic(topic, 3, 1)])
    ownership = member(kafka_upstream.bootstrap, ("gw.test", 19092), Calls(), ("none",))
    await ownership.start()
    try:
        assert await ownership.ensure_view_topic(topic)
        assert await partition_count(admin, f"{topic}.full") == 3
        assert await ownership.ensure_view_topic(topic)  # already there
        await admin.create_partitions({topic: NewPartitions(5)})
        for _ in range(100):  # the brokers learn of them a moment after the controller
            if await partition_count(admin, topic) == 5:
                break
            await asyncio.sleep(0.05)
        assert await ownership.ensure_view_topic(topic)
        assert await partition_count(admin, f"{topic}.full") == 5
        assert not await ownership.ensure_view_topic(missing)
        assert not await ownership.ensure_view_topic(f"{topic}.full")  # no X.full.full
    finally:
        await ownership.stop()
    listed = set(await admin.list_topics())
    assert {missing, f"{missing}.full", f"{topic}.full.full"}.isdisjoint(listed)


def expected_node_id(host: str, port: int) -> int:
    return 0x40000000 | (zlib.crc32(f"{host}:{port}".encode()) & 0x3FFFFFFF)


async def test_two_gateways_share_a_view_and_both_know_every_owner(
    kafka_upstream: KafkaProcess,
) -> None:
    bootstrap, topic, group = kafka_upstream.bootstrap, unique("full-two"), unique("full-group")
    view = f"{topic}.full"
    calls_a, calls_b = Calls(), Calls()
    a = member(bootstrap, ("gw-a.test", 19092), calls_a, (view,), group)
    b = member(bootstrap, ("gw-b.test", 29092), calls_b, (view,), group)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 4, 1)])
        await a.start()
        assert await a.ensure_view_topic(topic)
        every = {(topic, p) for p in range(4)}
        await until(lambda: calls_a.current() == every)
        await b.start()
        await until(lambda: len(calls_a.current()) == len(calls_b.current()) == 2)
        await until(lambda: dict(a.owners()) == dict(b.owners()) and len(a.owners()) == 4)
        assert calls_a.current() | calls_b.current() == every
        assert len(calls_a.log) == 4 + 2  # it kept two of its four: released two, no more
        owners = a.owners()
        for held, gateway in ((calls_a.current(), a.me), (calls_b.current(), b.me)):
            assert {owners[(view, p)] for _, p in held} == {gateway}
        assert a.me == ViewOwner(expected_node_id("gw-a.test", 19092), "gw-a.test", 19092)
        assert b.me == ViewOwner(expected_node_id("gw-b.test", 29092), "gw-b.test", 29092)
        assert b.owner(view, 9) is None and b.owner(topic, 0) is None
        await b.stop()
        await until(lambda: calls_a.current() == every, HANDOVER_S)
        await until(lambda: set(a.owners().values()) == {a.me}, HANDOVER_S)
        assert len(a.owners()) == 4 and calls_b.current() == set()
    finally:
        await asyncio.gather(a.stop(), b.stop())
        await admin.close()


async def test_a_view_created_later_is_picked_up_and_other_names_are_not(
    kafka_upstream: KafkaProcess, admin: AIOKafkaAdminClient
) -> None:
    first, later = unique("full-first"), unique("full-later")
    not_views = [f"{first}.full.full", f"{first}.delay.full", f"_{first}.full"]
    await admin.create_topics([NewTopic(first, 2, 1), NewTopic(later, 3, 1)])
    calls = Calls(failing={(later, 1)})  # its on_owned is called again
    ownership = member(kafka_upstream.bootstrap, ("gw.test", 19092), calls)  # every T.full
    await ownership.start()
    try:
        assert await ownership.ensure_view_topic(first)
        await until(lambda: {(first, 0), (first, 1)} <= calls.current())
        await admin.create_topics([NewTopic(name, 1, 1) for name in not_views])
        assert await ownership.ensure_view_topic(later)
        await until(lambda: {(later, p) for p in range(3)} <= calls.current())
        assert ownership.owner(f"{later}.full", 2) == ownership.me
        assert not any(ownership.owner(name, 0) for name in not_views)
        sources = {topic for topic, _ in calls.current()}
        assert not any(s.startswith((f"{first}.", "_")) for s in sources), sources
    finally:
        await ownership.stop()
    assert calls.current() == set()


async def test_a_metadata_request_naming_a_new_view_waits_until_it_has_owners(
    kafka_upstream: KafkaProcess, admin: AIOKafkaAdminClient, tmp_path: Path
) -> None:
    """Its answer then names a leader for every partition (service.py's ``prepare``)."""
    topic = unique("full-prepare")
    await admin.create_topics([NewTopic(topic, 2, 1)])
    ownership = member(kafka_upstream.bootstrap, ("gw.test", 19092), Calls())  # every T.full
    upstream = [parse_bootstrap(kafka_upstream.bootstrap)]
    views = GatewayViews(ViewIndex(str(tmp_path / "views"), upstream), ownership)
    await views.start()
    try:
        fields = {"topics": [{"name": f"{topic}.full"}], "allow_auto_topic_creation": True}
        await views.prepare(decoded(encode_request(3, 12, 1, fields)[4:]))
        me = (ownership.me.node_id, "gw.test", 19092)
        assert [views.owner_of(f"{topic}.full", p) for p in range(2)] == [me, me]
    finally:
        await views.stop()


def tps(topic: str, *partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in partitions)


def a_member(port: int, owned: frozenset[TopicPartition] = frozenset(), started: int = 0) -> Member:
    return Member(owner_at("gw.test", port), frozenset({"v.full", "w.full"}), owned, started)


def moved(owner_of: dict[TopicPartition, str], members: dict[str, Member]) -> int:
    return sum(tp not in members[member_id].owned for tp, member_id in owner_of.items())


def test_members_keep_their_partitions_and_a_newcomer_gets_its_share() -> None:
    v = sorted(tps("v.full", 0, 1, 2, 3))
    balanced = {"m1": a_member(1, tps("v.full", 2, 3)), "m2": a_member(2, tps("v.full", 0, 1))}
    assert moved(spread(v, balanced), balanced) == 0
    joined = {"m0": a_member(0), "m1": a_member(1, tps("v.full", 0, 1, 2))}
    owner_of = spread(v[:3], joined)
    assert sorted(owner_of.values()) == ["m0", "m1", "m1"] and moved(owner_of, joined) == 1
    third = {**balanced, "m3": a_member(3)}
    owner_of = spread([*v, TopicPartition("w.full", 0)], third)
    assert sorted(list(owner_of.values()).count(m) for m in third) == [1, 2, 2]
    assert moved(owner_of, third) == 2  # to the newcomer: one of v, and w's new partition


def test_a_partition_goes_only_to_a_member_subscribed_to_its_topic() -> None:
    only_v = Member(owner_at("gw.test", 1), frozenset({"v.full"}), frozenset(), 0)
    owner_of = spread(sorted(tps("w.full", 0, 1)), {"m1": only_v, "m2": a_member(2)})
    assert set(owner_of.values()) == {"m2"}


def test_of_two_members_at_one_address_the_last_started_gets_partitions() -> None:
    members = {"old": a_member(1, started=100), "new": a_member(1, started=200)}
    assert list(newest_per_address(members)) == ["new"]


def test_the_user_data_round_trips() -> None:
    me = owner_at("gw.test", 19092)
    data = encode_member(me, tps("v.full", 0, 2), 123)
    decoded = decode_member(ConsumerProtocolMemberMetadata(0, ["v.full"], data))
    assert (decoded.owner, decoded.owned, decoded.started_ms) == (me, tps("v.full", 0, 2), 123)
    other = owner_at("gw2.test", 19092)
    owners = {TopicPartition("v.full", 0): me, TopicPartition("v.full", 1): other}
    assert decode_owners(encode_owners(owners)) == {("v.full", 0): me, ("v.full", 1): other}
    assert me.node_id == expected_node_id("gw.test", 19092)
    with pytest.raises((ValueError, KeyError, TypeError)):
        decode_owners(b'{"v":1,"owners":[["gw",null,{}]]}')
