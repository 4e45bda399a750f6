"""The coordinator's background work: its timers, and the offset retention pass.

Started by the server next to log retention; cancelling the task stops both.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kshim.broker.broker import Broker
from kshim.broker.groups.admin import expire_offsets_once

log = logging.getLogger(__name__)


async def run_group_coordinator(broker: Broker) -> None:
    """Fires group timers and expires offsets every ``offsets.retention.check.interval.ms``."""
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(broker.groups.timers.run())
        tasks.create_task(_expire_offsets_forever(broker))


async def _expire_offsets_forever(broker: Broker) -> None:
    interval_s = broker.groups.settings.retention_check_interval_ms / 1000
    while True:
        await asyncio.sleep(interval_s)
        try:
            removed = await expire_offsets_once(broker.groups, _topic_exists(broker))
        except Exception:
            log.exception("offset retention pass failed; retrying next interval")
            continue
        if removed:
            log.info("expired %d committed offsets", removed)


def _topic_exists(broker: Broker) -> Callable[[str], bool]:
    return lambda topic: broker.topic(topic) is not None
