"""Bookkeeping of one classic group: members, leader, generation, protocol, static members.

Pure state, no timers and no I/O: the coordinator decides when a rebalance
starts and ends, this module answers questions about the group and keeps its
maps consistent (KIP-345 static members map ``group.instance.id`` to the
current member id).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from kshim.broker.groups.group_states import GroupState, check_transition
from kshim.broker.groups.member import JoinedMember, Member
from kshim.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    assigned_partitions,
    subscribed_topics,
)
from kshim.protocol.errors import ErrorCode


@dataclass(slots=True)
class Group:
    group_id: str
    state_since_ms: int
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0  # the first completed rebalance makes it 1 (clients treat 0 as none)
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # in join order
    pending_members: set[str] = field(default_factory=set)  # told MEMBER_ID_REQUIRED
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    in_initial_delay: bool = False
    new_member_added: bool = False
    initial_delay_remaining_ms: int = 0

    def transition(self, target: GroupState, now_ms: int) -> None:
        """Moves to ``target``; raises IllegalStateTransition if the table forbids it."""
        check_transition(self.state, target)
        self.state = target
        self.state_since_ms = now_ms

    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    def add(self, member: Member, protocol_type: str) -> None:
        if not self.members:
            self.protocol_type = protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_member_id(self, member: Member, new_member_id: str) -> None:
        """Gives a rejoining static member its new id (KIP-345); the old id is fenced."""
        old_member_id = member.member_id
        self.members = {
            (new_member_id if member_id == old_member_id else member_id): existing
            for member_id, existing in self.members.items()
        }
        member.member_id = new_member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id

    def check_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """FENCED_INSTANCE_ID or UNKNOWN_MEMBER_ID for a request from a non-member, else None."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is not None and current != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return None

    def supports(self, protocol_type: str, names: list[str], member_id: str = "") -> bool:
        """True if a member offering ``names`` can join (Kafka's supportsProtocols)."""
        if not protocol_type or not names:
            return False
        others = [m for m in self.members.values() if m.member_id != member_id]
        if not others:
            return True
        if protocol_type != self.protocol_type:
            return False
        common = set.intersection(*(set(m.protocol_names()) for m in others))
        return any(name in common for name in names)

    def select_protocol(self) -> str | None:
        """The protocol every member supports that most members prefer (Kafka's selectProtocol)."""
        members = list(self.members.values())
        if not members:
            return None
        common = set.intersection(*(set(m.protocol_names()) for m in members))
        if not common:
            return None
        votes: Counter[str] = Counter()
        for member in members:
            votes[next(name for name in member.protocol_names() if name in common)] += 1
        preference = [name for name in members[0].protocol_names() if name in common]
        return max(preference, key=lambda name: votes[name])

    def all_joined(self) -> bool:
        """Every member is waiting in JoinGroup and no MEMBER_ID_REQUIRED rejoin is outstanding."""
        return not self.pending_members and all(m.awaiting_join() for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> None:
        """Keeps the leader if it rejoined, else picks the first member that did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join():
            return
        joined = [m.member_id for m in self.members.values() if m.awaiting_join()]
        self.leader_id = joined[0] if joined else next(iter(self.members), None)

    def joined_members(self) -> tuple[JoinedMember, ...]:
        """What the leader gets to compute the assignment: every member's chosen metadata."""
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
            for m in self.members.values()
        )

    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def subscribed_topics(self) -> frozenset[str] | None:
        """Topics any member subscribes to; None when they cannot be known."""
        if not self.is_consumer_group():
            return None
        topics: set[str] = set()
        for member in self.members.values():
            subscribed = subscribed_topics(member.metadata_for(self.protocol_name))
            if subscribed is None:
                return None
            topics |= subscribed
        return frozenset(topics)

    def partition_owners(self) -> dict[tuple[str, int], str]:
        """(topic, partition) -> member id, from the consumer assignments of a stable group."""
        owners: dict[tuple[str, int], str] = {}
        if not self.is_consumer_group() or self.state is not GroupState.STABLE:
            return owners
        for member in self.members.values():
            for topic_partition in assigned_partitions(member.assignment) or ():
                owners[topic_partition] = member.member_id
        return owners
