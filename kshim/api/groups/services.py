"""What the group handlers read of the broker beyond the group coordinator, as Protocols
the Broker satisfies (api/services.py names each service; JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, the listings and DeleteGroups read the group coordinator alone)."""

from __future__ import annotations

from typing import Protocol

from kshim.api.services import (
    WithConfig,
    WithEndpoints,
    WithGroups,
    WithResolver,
    WithTransactions,
)


class GroupsAndTopics(WithGroups, WithResolver, Protocol):
    """OffsetCommit's and OffsetDelete's: the group coordinator and the topics named."""


class GroupsAndTransactions(WithGroups, WithTransactions, Protocol):
    """OffsetFetch's: the group coordinator and the transaction coordinator (KIP-447's
    pending transactional offsets)."""


class Listeners(WithEndpoints, WithConfig, Protocol):
    """FindCoordinator's: the advertised listeners and the configuration (this broker is
    every group's and transaction's coordinator)."""
