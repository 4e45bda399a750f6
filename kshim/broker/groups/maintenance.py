"""The coordinator's offset retention pass over the broker's groups (a background job
runs it every ``offsets.retention.check.interval.ms``: kshim/broker/jobs/)."""

from __future__ import annotations

import logging

from kshim.broker.groups.admin import expire_offsets_once
from kshim.broker.groups.host import GroupsHost

log = logging.getLogger(__name__)


async def expire_broker_offsets_once(broker: GroupsHost) -> int:
    """One offset retention pass over the broker's groups; returns how many offsets went.

    Offsets stay while their name resolves to something consumers can read (a
    topic, or a full-data view): those of a name that no longer does go, as well
    as those of empty groups older than ``offsets.retention.minutes``.
    """
    resolver = broker.resolver
    return await expire_offsets_once(broker.groups, lambda name: resolver.resolve(name) is not None)


async def offset_retention_pass(broker: GroupsHost) -> None:
    """One pass, saying how many offsets went when any did."""
    removed = await expire_broker_offsets_once(broker)
    if removed:
        log.info("expired %d committed offsets", removed)
