"""Taking ``T.delay`` partitions over: fencing their last owner, then reading their pending
records back from the schedule topic.

Order matters. First each partition's transactional producer starts: its InitProducerId
fences the last owner and completes (aborts) what that one left open, so nothing of it
commits later. Then the schedule partition is read read_committed up to the high watermark
taken after that: every entry the last owner committed is below it, and a read_committed
reader gets there once every transaction begun below it has ended (KIP-98's last stable
offset), other gateways' included, which the transaction timeout bounds. Only then is the
group offset read, and the partition's consumption starts there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from kshim.gateway.delay.entries import BadEntry, decode_entry, parse_entry_key
from kshim.gateway.delay.owned import OwnedPartition

log = logging.getLogger(__name__)
POLL_MS = 200


class TakeoverTimeout(Exception):
    """The schedule could not be read to its end in time."""


async def read_schedule(
    reader: AIOKafkaConsumer,
    watermarks: AIOKafkaConsumer,
    partitions: Iterable[TopicPartition],
    owned: Mapping[tuple[str, int], OwnedPartition],
    timeout_s: float,
) -> None:
    """Files the live entries of the schedule ``partitions`` into the ``owned`` partitions
    they belong to, keyed by (T.delay, p). ``reader`` is read_committed, ``watermarks``
    read_uncommitted; neither is in a group. Raises TakeoverTimeout."""
    partitions = list(partitions)
    if not partitions:
        return
    ends = await watermarks.end_offsets(partitions)  # high watermarks
    reader.assign(partitions)
    await reader.seek_to_beginning(*partitions)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while await _behind(reader, ends):
        if loop.time() > deadline:
            raise TakeoverTimeout(f"the schedule {partitions} not read to its end in time")
        batches = await reader.getmany(*partitions, timeout_ms=POLL_MS)
        for records in batches.values():
            for record in records:
                _apply(record, owned)
    reader.unsubscribe()


async def _behind(reader: AIOKafkaConsumer, ends: Mapping[TopicPartition, int]) -> bool:
    for tp, end in ends.items():
        if await reader.position(tp) < end:
            return True
    return False


def _apply(record: object, owned: Mapping[tuple[str, int], OwnedPartition]) -> None:
    key = getattr(record, "key", None)
    value = getattr(record, "value", None)
    try:
        topic, partition, offset = parse_entry_key(key or b"")
        target = owned.get((topic, partition))
        if target is None:
            return
        if value is None:
            target.schedule.remove(offset)
        else:
            target.schedule.add(decode_entry(offset, value))
    except BadEntry as error:
        log.warning("schedule record ignored: %s", error)
