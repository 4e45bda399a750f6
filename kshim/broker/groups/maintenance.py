"""The coordinator's background work: its timers, and the offset retention pass.

Started with the broker's other background jobs; cancelling the task stops both.
"""

from __future__ import annotations

import asyncio
import logging

from kshim.broker.broker import Broker
from kshim.broker.groups.admin import expire_offsets_once

log = logging.getLogger(__name__)


async def run_group_coordinator(broker: Broker) -> None:
    """Fires group timers and expires offsets every ``offsets.retention.check.interval.ms``."""
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(broker.groups.timers.run())
        tasks.create_task(_expire_offsets_forever(broker))


async def expire_broker_offsets_once(broker: Broker) -> int:
    """One offset retention pass over the broker's groups; returns how many offsets went.

    Offsets stay while their name resolves to something consumers can read (a
    topic, or a full-data view): those of a name that no longer does go, as well
    as those of empty groups older than ``offsets.retention.minutes``.
    """
    resolver = broker.resolver
    return await expire_offsets_once(broker.groups, lambda name: resolver.resolve(name) is not None)


async def _expire_offsets_forever(broker: Broker) -> None:
    interval_s = broker.groups.settings.retention_check_interval_ms / 1000
    while True:
        await asyncio.sleep(interval_s)
        try:
            removed = await expire_broker_offsets_once(broker)
        except Exception:
            log.exception("offset retention pass failed; retrying next interval")
            continue
        if removed:
            log.info("expired %d committed offsets", removed)
