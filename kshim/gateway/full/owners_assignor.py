"""The assignor of the group sharing the full-data views' partitions among the gateways
(ownership.py), and what its members tell each other.

As Kafka Streams' members learn where each other's state lives (KIP-67, "Queryable state for
Kafka Streams": each member's subscription carries its ``application.server``, and every
member's assignment the whole map), each gateway's subscription user data carries its
address, and every member's assignment user data the whole map partition -> owner address,
so that every gateway names the same owner for every ``T.full`` partition. The group runs
Kafka's consumer protocol (the Kafka protocol guide, "Group Membership API"), the leader
assigning with aiokafka's ``AbstractPartitionAssignor`` interface.
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.structs import TopicPartition

from kshim.broker.delay.naming import may_have_delay
from kshim.broker.full_view.naming import source_name

log = logging.getLogger(__name__)

ASSIGNOR_NAME = "kshim-full-owners"
# The user data's own version: a newer one only adds fields, which older members ignore; a
# change of meaning would take a new assignor name, listed beside the old in JoinGroup, so
# that the coordinator picks the one every member speaks (as KIP-429 moved to cooperative).
FORMAT_VERSION = 1
# Owner node ids: bit 30 set, so positive in Kafka's int32 and above every upstream broker's
# id a gateway can serve (broker n is at port base + n, below 65536); the low 30 bits are the
# address's CRC-32, two addresses sharing one once in 2**30 pairs.
NODE_ID_BASE = 0x40000000
NODE_ID_MASK = 0x3FFFFFFF


@dataclass(frozen=True, slots=True)
class ViewOwner:
    """A gateway owning view partitions: the node id its Metadata answers give it, and its
    advertised host and bootstrap port."""

    node_id: int
    host: str
    port: int


def owner_at(host: str, port: int) -> ViewOwner:
    """The owner at host:port. Its node id comes from the address alone, so every gateway
    names an owner with the same id, and an id a client cached keeps meaning the same
    gateway across rebalances: clients key connections and leaders by node id (Kafka's
    Metadata API), and an id numbered by position in the group would, after a rebalance,
    send a client's requests to another gateway's address until its next refresh."""
    if not isinstance(host, str) or not isinstance(port, int):
        raise TypeError(f"not an address: {host!r}:{port!r}")
    checksum = zlib.crc32(f"{host}:{port}".encode())
    return ViewOwner(NODE_ID_BASE | (checksum & NODE_ID_MASK), host, port)


def is_view_topic(name: str) -> bool:
    """True for a ``T.full`` that can be a view: not ``X.full.full``, ``X.delay.full`` or
    one of an internal topic (``_...``)."""
    source = source_name(name)
    return source is not None and not source.startswith("_") and may_have_delay(source)


@dataclass(frozen=True, slots=True)
class Member:
    """What a member's subscription says: its address, topics, partitions and start."""

    owner: ViewOwner
    topics: frozenset[str]
    owned: frozenset[TopicPartition]
    started_ms: int


def encode_member(owner: ViewOwner, owned: Iterable[TopicPartition], started_ms: int) -> bytes:
    """A member's user data: ``{"v": 1, "host": h, "port": p, "started": ms,
    "owned": {topic: [partition, ...]}}`` in compact JSON."""
    document = {"v": FORMAT_VERSION, "host": owner.host, "port": owner.port}
    return _json({**document, "started": started_ms, "owned": _by_topic(owned)})


def decode_member(metadata: ConsumerProtocolMemberMetadata) -> Member:
    """Raises ValueError, KeyError or TypeError when the user data is not one's."""
    document = json.loads(metadata.user_data)
    if document["v"] < 1:
        raise ValueError(f"user data version {document['v']}")
    owned = frozenset(_partitions(document.get("owned", {})))
    owner = owner_at(document["host"], document["port"])
    return Member(owner, frozenset(metadata.subscription), owned, int(document["started"]))


def encode_owners(owners: Mapping[TopicPartition, ViewOwner]) -> bytes:
    """Every member's assignment user data: ``{"v": 1, "owners": [[host, port,
    {topic: [partition, ...]}], ...]}``, each owner once, in compact JSON."""
    by_owner: dict[ViewOwner, list[TopicPartition]] = defaultdict(list)
    for tp, owner in owners.items():
        by_owner[owner].append(tp)
    listed = [[o.host, o.port, _by_topic(tps)] for o, tps in sorted(by_owner.items(), key=_key)]
    return _json({"v": FORMAT_VERSION, "owners": listed})


def decode_owners(user_data: bytes) -> dict[tuple[str, int], ViewOwner]:
    """Raises ValueError, KeyError or TypeError when ``user_data`` is not an owners map."""
    document = json.loads(user_data)
    if document["v"] < 1:
        raise ValueError(f"user data version {document['v']}")
    owners = {}
    for host, port, partitions in document["owners"]:
        owner = owner_at(host, port)
        for tp in _partitions(partitions):
            owners[(tp.topic, tp.partition)] = owner
    return owners


def _json(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def _key(item: tuple[ViewOwner, object]) -> tuple[str, int]:
    return item[0].host, item[0].port


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in sorted(partitions):
        by_topic[tp.topic].append(tp.partition)
    return dict(by_topic)


def _partitions(by_topic: dict[str, list[int]]) -> list[TopicPartition]:
    return [TopicPartition(str(topic), int(p)) for topic, ps in by_topic.items() for p in ps]


def spread(
    partitions: list[TopicPartition], members: Mapping[str, Member]
) -> dict[TopicPartition, str]:
    """Each of ``partitions`` (sorted) given to a member subscribed to its topic, evenly
    (counts within one when every member subscribes to every topic): first each member keeps
    the partitions it had, up to its fair share, then each partition left goes to the least
    loaded member, its last owner among those first. Returns partition -> member id."""
    fair = len(partitions) // max(1, len(members))
    claimed: dict[TopicPartition, str] = {}
    for member_id in sorted(members):
        for tp in members[member_id].owned:
            claimed.setdefault(tp, member_id)
    load = dict.fromkeys(members, 0)
    owner_of: dict[TopicPartition, str] = {}
    for tp in partitions:
        keeper = claimed.get(tp)
        if keeper is not None and tp.topic in members[keeper].topics and load[keeper] < fair:
            owner_of[tp] = keeper
            load[keeper] += 1
    for tp in partitions:
        able = [m for m in sorted(members) if tp.topic in members[m].topics]
        if tp in owner_of or not able:
            continue
        last = claimed.get(tp)

        def preference(member_id: str, last: str | None = last) -> tuple[int, bool]:
            return load[member_id], member_id != last

        chosen = min(able, key=preference)
        owner_of[tp] = chosen
        load[chosen] += 1
    return owner_of


def newest_per_address(members: Mapping[str, Member]) -> dict[str, Member]:
    """One member per address, the last started: a gateway restarted at once joins while
    the member of its last run, dead, stays in the group until its session times out, and
    that one's partitions would be named at this address yet served by no one."""
    newest: dict[ViewOwner, str] = {}
    for member_id, member in sorted(members.items()):
        kept = newest.get(member.owner)
        if kept is None or member.started_ms >= members[kept].started_ms:
            newest[member.owner] = member_id
    return {member_id: members[member_id] for member_id in newest.values()}


class OwnersAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """This gateway's assignor: aiokafka calls ``metadata`` at each join, ``assign`` on the
    group's leader and ``on_assignment`` on every member with what the leader gave it."""

    name = ASSIGNOR_NAME
    version = 0  # ConsumerProtocol's own version; the user data has FORMAT_VERSION

    def __init__(
        self, me: ViewOwner, learned: Callable[[ConsumerProtocolMemberAssignment], None]
    ) -> None:
        self.me = me
        self.owned: frozenset[TopicPartition] = frozenset()  # at the last assignment
        self.started_ms = time.time_ns() // 1_000_000
        self._learned = learned

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        user_data = encode_member(self.me, self.owned, self.started_ms)
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), user_data)

    def assign(
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        decoded = {}
        for member_id, metadata in members.items():
            try:
                decoded[member_id] = decode_member(metadata)
            except (ValueError, KeyError, TypeError):  # it gets the map, and no partition
                log.warning("member %s sent no address", member_id, exc_info=True)
        topics = sorted({t for m in members.values() for t in m.subscription if is_view_topic(t)})
        partitions = [
            TopicPartition(topic, partition)
            for topic in topics
            for partition in sorted(cluster.partitions_for_topic(topic) or ())
        ]
        eligible = newest_per_address(decoded)
        owner_of = spread(partitions, eligible)
        user_data = encode_owners({tp: eligible[m].owner for tp, m in owner_of.items()})
        assigned: dict[str, list[TopicPartition]] = defaultdict(list)
        for tp, member_id in owner_of.items():
            assigned[member_id].append(tp)
        return {
            member_id: ConsumerProtocolMemberAssignment(
                self.version, sorted(_by_topic(assigned[member_id]).items()), user_data
            )
            for member_id in members
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        try:  # aiokafka does not catch what this raises: its group work would stop
            self._learned(assignment)
        except Exception:
            log.exception("cannot take the assignment %s", assignment)
