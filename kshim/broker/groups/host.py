"""What the broker-wide group work (status, offset retention) needs of the broker."""

from __future__ import annotations

from typing import Protocol

from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.topic_resolver import TopicResolver


class GroupsHost(Protocol):
    """The group coordinator, and what topic names mean (kshim.broker.broker.Broker)."""

    groups: GroupCoordinator
    resolver: TopicResolver
