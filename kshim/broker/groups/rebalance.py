"""Rebalances: PreparingRebalance to CompletingRebalance, session expiry, member removal.

Kafka's GroupCoordinator.prepareRebalance / onCompleteJoin and its delayed
operations (DelayedJoin, InitialDelayedJoin, DelayedHeartbeat), on ``Timers``.
A rebalance completes when every member has rejoined, or when the longest
rebalance timeout passes (dynamic members that did not rejoin are dropped).
A new empty group first waits ``group.initial.rebalance.delay.ms``, extended
while members keep arriving (up to the rebalance timeout), so consumers started
together share one generation. Completing bumps the generation (the first is 1,
as in Kafka: aiokafka only sends LeaveGroup for a generation above 0).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kshim.broker.clock import BrokerClock
from kshim.broker.groups.group import Group
from kshim.broker.groups.group_states import GroupState
from kshim.broker.groups.member import JoinResult, Member
from kshim.broker.groups.settings import GroupSettings
from kshim.broker.groups.timers import Timers
from kshim.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE


class Rebalancer:
    def __init__(self, settings: GroupSettings, clock: BrokerClock, timers: Timers) -> None:
        self.settings = settings
        self.clock = clock
        self.timers = timers

    def rebalance(self, group: Group, reason: str) -> None:
        """Starts a rebalance unless one is under way, then completes it if it can."""
        if group.state is not PREPARING:
            self.prepare_rebalance(group, reason)
        self.try_complete_join(group)

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        log.info("group %s rebalancing (generation %d): %s", group.group_id,
                 group.generation_id, reason)  # fmt: skip
        if group.state is COMPLETING:
            for member in group.members.values():
                member.assignment = b""
                member.fail_sync(ErrorCode.rebalance_in_progress)
        was_empty = group.state is GroupState.EMPTY
        group.transition(PREPARING, self.clock())
        delay = self.settings.initial_rebalance_delay_ms
        timeout = group.rebalance_timeout_ms()
        if was_empty and delay > 0:
            group.in_initial_delay = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(timeout - delay, 0)
            self._schedule_join(group, min(delay, timeout), self._initial_delay_expired)
        else:
            self._schedule_join(group, timeout, self.complete_join)

    def _schedule_join(self, group: Group, delay_ms: int, action: Callable[[Group], None]) -> None:
        key = ("join", group.group_id)
        self.timers.schedule(key, self.clock.monotonic() + delay_ms, lambda: action(group))

    def _initial_delay_expired(self, group: Group) -> None:
        """Kafka's InitialDelayedJoin: wait again while new members keep arriving."""
        remaining = group.initial_delay_remaining_ms
        if group.new_member_added and remaining > 0:
            delay = min(self.settings.initial_rebalance_delay_ms, remaining)
            group.new_member_added = False
            group.initial_delay_remaining_ms = remaining - delay
            self._schedule_join(group, delay, self._initial_delay_expired)
            return
        group.in_initial_delay = False
        self.complete_join(group)

    def try_complete_join(self, group: Group) -> None:
        if group.state is PREPARING and not group.in_initial_delay and group.all_joined():
            self.complete_join(group)

    def complete_join(self, group: Group) -> None:
        """Ends PreparingRebalance: drops dynamic members that did not rejoin, answers the rest."""
        if group.state is not PREPARING:
            return
        self.timers.cancel(("join", group.group_id))
        group.in_initial_delay = False
        for member in list(group.members.values()):
            if not member.awaiting_join() and member.group_instance_id is None:
                self.remove_member(group, member, ErrorCode.unknown_member_id)
        group.generation_id += 1
        now = self.clock()
        if not group.members:
            group.protocol_name = None
            group.transition(GroupState.EMPTY, now)
            log.info("group %s is empty (generation %d)", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        group.elect_joined_leader()
        group.transition(COMPLETING, now)
        for member in group.members.values():
            member.last_activity_ms = self.clock.monotonic()
            member.answer_join(current_generation(group, member, with_members=True))
        log.info("group %s generation %d: %d members, protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name,
                 group.leader_id)  # fmt: skip

    def schedule_session_check(self, group: Group, member: Member) -> None:
        key = ("member", group.group_id, member.member_id)
        deadline = member.keepalive_deadline()
        if deadline is None:
            deadline = self.clock.monotonic() + member.session_timeout_ms
        member_id = member.member_id
        self.timers.schedule(key, deadline, lambda: self._session_check(group, member_id))

    def _session_check(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        deadline = member.keepalive_deadline()
        if deadline is None or deadline > self.clock.monotonic():
            self.schedule_session_check(group, member)
            return
        log.info("group %s: member %s expired (no heartbeat for %d ms)", group.group_id,
                 member_id, member.session_timeout_ms)  # fmt: skip
        self.remove_member_and_rebalance(group, member, "session timeout")

    def pending_member_expired(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.try_complete_join(group)

    def remove_member(self, group: Group, member: Member, error: ErrorCode) -> None:
        group.remove(member.member_id)
        self.timers.cancel(("member", group.group_id, member.member_id))
        member.fail_join(error)
        member.fail_sync(error)

    def remove_member_and_rebalance(self, group: Group, member: Member, reason: str) -> None:
        self.remove_member(group, member, ErrorCode.unknown_member_id)
        if group.state in (GroupState.STABLE, COMPLETING):
            self.prepare_rebalance(group, f"member {member.member_id} left: {reason}")
        self.try_complete_join(group)


def current_generation(group: Group, member: Member, with_members: bool) -> JoinResult:
    """The JoinGroup answer for ``member`` in the group's current generation."""
    is_leader = member.member_id == group.leader_id
    return JoinResult(
        ErrorCode.none,
        member.member_id,
        group.generation_id,
        group.protocol_type,
        group.protocol_name,
        group.leader_id or "",
        group.joined_members() if with_members and is_leader else (),
    )
