"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and rebalances.

Follows Kafka's GroupCoordinator (the pre-KIP-848 "classic" coordinator);
rebalances themselves are in ``rebalance``.
- JoinGroup v4+ from a new dynamic member is answered MEMBER_ID_REQUIRED
  with a fresh member id, and the member joins again with it (KIP-394).
- Static members (KIP-345, ``group.instance.id``) keep their assignment across
  restarts: a rejoin gets a new member id and fences the old one.
- Requests from the wrong generation or an unknown member get
  ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID; during a rebalance, heartbeats get
  REBALANCE_IN_PROGRESS, which tells the members to rejoin.

Everything here runs on the event loop thread; state changes are synchronous,
so no locks are needed. Only JoinGroup and SyncGroup await (their long wait).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from kshim.broker.clock import as_broker_clock
from kshim.broker.groups.group import Group
from kshim.broker.groups.group_states import GroupState
from kshim.broker.groups.member import (
    JoinRequest,
    JoinResult,
    Member,
    SyncRequest,
    SyncResult,
)
from kshim.broker.groups.offsets import OffsetManager
from kshim.broker.groups.rebalance import Rebalancer, current_generation
from kshim.broker.groups.settings import GroupSettings
from kshim.broker.groups.timers import Timers
from kshim.protocol.errors import ErrorCode
from kshim.storage.meta.committed_offsets import CommittedOffsetStore

log = logging.getLogger(__name__)

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE


class GroupCoordinator:
    def __init__(
        self, settings: GroupSettings, clock: Callable[[], int], store: CommittedOffsetStore
    ) -> None:
        self.settings = settings
        # Wall time for what is reported or compared with stored times (commit timestamps,
        # when a group became empty); the monotonic clock for sessions, rebalance timeouts
        # and timers, so that a wall-clock step neither expires every member at once nor
        # keeps a dead one (kshim/broker/clock.py).
        self.clock = as_broker_clock(clock)
        self.groups: dict[str, Group] = {}
        self.timers = Timers(self.clock.monotonic)
        self.rebalancer = Rebalancer(settings, self.clock, self.timers)
        self.offsets = OffsetManager(store)

    async def load(self) -> None:
        """Loads committed offsets; group membership starts empty (members rejoin)."""
        await self.offsets.load()

    # JoinGroup

    async def join(self, request: JoinRequest) -> JoinResult:
        """Adds or refreshes a member and waits until the rebalance answers it."""
        error = self._check_join(request)
        if error is not None:
            return JoinResult.failure(error, request.member_id)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return JoinResult.failure(ErrorCode.unknown_member_id, request.member_id)
            group = self.groups[request.group_id] = Group(request.group_id, self.clock())
        if group.state is GroupState.DEAD:
            return JoinResult.failure(ErrorCode.coordinator_not_available, request.member_id)
        names = [name for name, _ in request.protocols]
        if not group.supports(request.protocol_type, names, request.member_id):
            return JoinResult.failure(ErrorCode.inconsistent_group_protocol, request.member_id)
        if not request.member_id:
            return await self._join_new_member(group, request)
        return await self._join_known_member(group, request)

    def _check_join(self, request: JoinRequest) -> ErrorCode | None:
        if not valid_group_id(request.group_id):
            return ErrorCode.invalid_group_id
        settings = self.settings
        timeout = request.session_timeout_ms
        if not settings.min_session_timeout_ms <= timeout <= settings.max_session_timeout_ms:
            return ErrorCode.invalid_session_timeout
        return None

    async def _join_new_member(self, group: Group, request: JoinRequest) -> JoinResult:
        prefix = request.group_instance_id or request.client_id
        member_id = f"{prefix}-{uuid.uuid4()}"
        instance_id = request.group_instance_id
        if instance_id is not None and instance_id in group.static_members:
            existing = group.members[group.static_members[instance_id]]
            return await self._rejoin_static_member(group, existing, member_id, request)
        if instance_id is None and request.require_known_member_id:
            group.pending_members.add(member_id)
            self.timers.schedule(
                ("pending", group.group_id, member_id),
                self.clock.monotonic() + request.session_timeout_ms,
                lambda: self.rebalancer.pending_member_expired(group, member_id),
            )
            return JoinResult.failure(ErrorCode.member_id_required, member_id)
        return await self._add_member_and_rebalance(group, member_id, request)

    async def _join_known_member(self, group: Group, request: JoinRequest) -> JoinResult:
        member_id = request.member_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.timers.cancel(("pending", group.group_id, member_id))
            return await self._add_member_and_rebalance(group, member_id, request)
        error = group.check_member(member_id, request.group_instance_id)
        if error is not None:
            return JoinResult.failure(error, member_id)
        member = group.members[member_id]
        unchanged = member.protocols == request.protocols
        if group.state is COMPLETING and unchanged:
            return current_generation(group, member, with_members=True)
        is_leader = member_id == group.leader_id
        if group.state is GroupState.STABLE and unchanged and not is_leader:
            return current_generation(group, member, with_members=False)
        return await self._update_member_and_rebalance(group, member, request)

    async def _add_member_and_rebalance(
        self, group: Group, member_id: str, request: JoinRequest
    ) -> JoinResult:
        member = Member(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            request.protocols,
            self.clock.monotonic(),
        )
        group.add(member, request.protocol_type)
        self.rebalancer.schedule_session_check(group, member)
        waiter = member.wait_for_join()
        if group.state is PREPARING and group.in_initial_delay:
            group.new_member_added = True
        self.rebalancer.rebalance(group, f"member {member_id} joined")
        return await waiter

    async def _update_member_and_rebalance(
        self, group: Group, member: Member, request: JoinRequest
    ) -> JoinResult:
        member.update(request)
        member.last_activity_ms = self.clock.monotonic()
        waiter = member.wait_for_join()
        self.rebalancer.rebalance(group, f"member {member.member_id} rejoined")
        return await waiter

    async def _rejoin_static_member(
        self, group: Group, member: Member, new_member_id: str, request: JoinRequest
    ) -> JoinResult:
        """KIP-345: the instance's old member id is fenced; a stable group keeps its assignment."""
        old_leader = group.leader_id
        member.fail_join(ErrorCode.fenced_instance_id)
        member.fail_sync(ErrorCode.fenced_instance_id)
        self.timers.cancel(("member", group.group_id, member.member_id))
        group.replace_member_id(member, new_member_id)
        member.update(request)
        member.last_activity_ms = self.clock.monotonic()
        self.rebalancer.schedule_session_check(group, member)
        if group.state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
            # The old leader id makes even a former leader act as a follower: a
            # stable group would not pass on a new assignment from its SyncGroup.
            result = current_generation(group, member, with_members=False)
            return _with_leader(result, old_leader or "")
        waiter = member.wait_for_join()
        self.rebalancer.rebalance(group, f"static member {request.group_instance_id} rejoined")
        return await waiter

    # SyncGroup, Heartbeat, LeaveGroup

    async def sync(self, request: SyncRequest) -> SyncResult:
        """Returns the member's assignment, waiting for the leader's SyncGroup if needed."""
        group = self.groups.get(request.group_id)
        error = self._check_generation(group, request.member_id, request.group_instance_id,
                                       request.generation_id)  # fmt: skip
        if error is None and group is not None and not _same_protocol(group, request):
            error = ErrorCode.inconsistent_group_protocol
        if error is not None or group is None:
            return SyncResult(error or ErrorCode.unknown_member_id)
        member = group.members[request.member_id]
        member.last_activity_ms = self.clock.monotonic()
        if group.state is PREPARING:
            return SyncResult(ErrorCode.rebalance_in_progress)
        if group.state is GroupState.STABLE:
            return self._assignment_of(group, member)
        waiter = member.wait_for_sync()
        if request.member_id == group.leader_id:
            self._install_assignment(group, dict(request.assignments))
        return await waiter

    def _install_assignment(self, group: Group, assignments: dict[str, bytes]) -> None:
        for member_id, member in group.members.items():
            member.assignment = assignments.get(member_id, b"")
        group.transition(GroupState.STABLE, self.clock())
        for member in group.members.values():
            member.answer_sync(self._assignment_of(group, member))
        log.info("group %s generation %d is stable", group.group_id, group.generation_id)

    def _assignment_of(self, group: Group, member: Member) -> SyncResult:
        return SyncResult(
            ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
        )

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """NONE, or the error telling the member to rejoin (REBALANCE_IN_PROGRESS) or reset."""
        group = self.groups.get(group_id)
        error = self._check_generation(group, member_id, group_instance_id, generation_id)
        if error is not None or group is None:
            return error or ErrorCode.unknown_member_id
        group.members[member_id].last_activity_ms = self.clock.monotonic()
        if group.state is PREPARING:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def _check_generation(
        self, group: Group | None, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode | None:
        if group is None:
            return ErrorCode.unknown_member_id
        if group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        error = group.check_member(member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return None

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Removes one member (by member id, or by instance id alone, LeaveGroup v3+)."""
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.unknown_member_id
        if not member_id and group_instance_id is not None:
            member_id = group.static_members.get(group_instance_id, "")
        if member_id in group.pending_members:
            self.rebalancer.pending_member_expired(group, member_id)
            return ErrorCode.none
        error = group.check_member(member_id, group_instance_id)
        if error is not None:
            return error
        self.rebalancer.remove_member_and_rebalance(
            group, group.members[member_id], "left the group"
        )
        return ErrorCode.none


def valid_group_id(group_id: str | None) -> bool:
    """Group ids are any non-empty string without NUL (NUL ends the id in LMDB keys)."""
    return bool(group_id) and "\x00" not in (group_id or "")


def _same_protocol(group: Group, request: SyncRequest) -> bool:
    """SyncGroup v5+ names the protocol; it must be the group's (KIP-559)."""
    type_ok = request.protocol_type is None or request.protocol_type == group.protocol_type
    name_ok = request.protocol_name is None or request.protocol_name == group.protocol_name
    return type_ok and name_ok


def _with_leader(result: JoinResult, leader_id: str) -> JoinResult:
    return JoinResult(
        result.error,
        result.member_id,
        result.generation_id,
        result.protocol_type,
        result.protocol_name,
        leader_id,
        result.members,
    )
