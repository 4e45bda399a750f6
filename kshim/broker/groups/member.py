"""One member of a classic group, and what JoinGroup and SyncGroup answer it.

A member's JoinGroup and SyncGroup responses wait for the rebalance (the long
wait of the classic protocol): each pending request is a future on the member,
completed by the coordinator when the rebalance moves on, or failed when the
member is removed or sends the request again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kshim.protocol.errors import ErrorCode

NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), in the member's preference order
    require_known_member_id: bool  # JoinGroup v4+: answer MEMBER_ID_REQUIRED first


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()  # only for the leader

    @classmethod
    def failure(cls, error: ErrorCode, member_id: str = "") -> JoinResult:
        return cls(error, member_id)


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None  # SyncGroup v5+, else None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]  # (member id, assignment), from the leader


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    last_activity_ms: int  # on the monotonic clock: session expiry is a duration
    assignment: bytes = b""
    join_waiter: asyncio.Future[JoinResult] | None = field(default=None, repr=False)
    sync_waiter: asyncio.Future[SyncResult] | None = field(default=None, repr=False)

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        return b""

    def update(self, request: JoinRequest) -> None:
        self.protocols = request.protocols
        self.session_timeout_ms = request.session_timeout_ms
        self.rebalance_timeout_ms = request.rebalance_timeout_ms
        self.client_id = request.client_id
        self.client_host = request.client_host

    def awaiting_join(self) -> bool:
        return self.join_waiter is not None and not self.join_waiter.done()

    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None and not self.sync_waiter.done()

    def keepalive_deadline(self) -> int | None:
        """When the member expires without news; None while it waits in JoinGroup.

        A member blocked in SyncGroup does not heartbeat (the clients pause their
        heartbeat during a rebalance), so it gets the rebalance timeout, as in Kafka.
        """
        if self.awaiting_join():
            return None
        if self.awaiting_sync():
            return self.last_activity_ms + max(self.session_timeout_ms, self.rebalance_timeout_ms)
        return self.last_activity_ms + self.session_timeout_ms

    def wait_for_join(self) -> asyncio.Future[JoinResult]:
        """A new pending JoinGroup answer; a previous one still pending is told to rejoin."""
        self.fail_join(ErrorCode.rebalance_in_progress)
        self.join_waiter = asyncio.get_running_loop().create_future()
        return self.join_waiter

    def wait_for_sync(self) -> asyncio.Future[SyncResult]:
        self.fail_sync(ErrorCode.rebalance_in_progress)
        self.sync_waiter = asyncio.get_running_loop().create_future()
        return self.sync_waiter

    def answer_join(self, result: JoinResult) -> None:
        if self.join_waiter is not None and not self.join_waiter.done():
            self.join_waiter.set_result(result)

    def answer_sync(self, result: SyncResult) -> None:
        if self.sync_waiter is not None and not self.sync_waiter.done():
            self.sync_waiter.set_result(result)

    def fail_join(self, error: ErrorCode) -> None:
        self.answer_join(JoinResult.failure(error, self.member_id))

    def fail_sync(self, error: ErrorCode) -> None:
        self.answer_sync(SyncResult(error))
