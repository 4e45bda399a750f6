"""Consumption status: per group and partition, committed offset, log end offset and lag.

``group_status`` builds the rows from plain facts (what is committed, where
each log ends, who owns which partition), so the same code serves the
broker's own view (``broker_status``) and a client that gathered the facts
over the wire (``kshim groups``). Lag is the log end offset (the high
watermark: what consumers can read) minus the committed offset, as in
Kafka's kafka-consumer-groups tool; unknown values print as ``-``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from kshim.broker.groups.admin import list_groups
from kshim.broker.groups.host import GroupsHost
from kshim.broker.groups.offsets import OffsetManager
from kshim.storage.interface import TopicPartition


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    group_id: str
    topic: str
    partition: int
    committed: int | None  # None: the group committed nothing for this partition
    log_end: int | None  # None: the partition does not exist (any more)
    members: int  # members of the group right now

    @property
    def lag(self) -> int | None:
        """Records not yet consumed, or None when either end is unknown."""
        if self.committed is None or self.log_end is None or self.committed < 0:
            return None
        return max(self.log_end - self.committed, 0)

    def to_json(self) -> dict[str, object]:
        """The row as ``kshim groups --json`` prints it: the table's columns, null for
        what is unknown."""
        return {
            "group": self.group_id,
            "topic": self.topic,
            "partition": self.partition,
            "committed": self.committed,
            "log_end": self.log_end,
            "lag": self.lag,
            "members": self.members,
        }


def group_status(
    group_id: str,
    committed: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
    assigned: Iterable[TopicPartition],
    members: int,
) -> list[PartitionStatus]:
    """One row per partition the group committed for or is assigned, sorted."""
    partitions = sorted(set(committed) | set(assigned))
    return [
        PartitionStatus(
            group_id,
            topic_partition.topic,
            topic_partition.partition,
            committed.get(topic_partition),
            log_ends.get(topic_partition),
            members,
        )
        for topic_partition in partitions
    ]


async def broker_status(broker: GroupsHost, group_id: str | None = None) -> list[PartitionStatus]:
    """The status of one group, or of every group, from the broker's own state (on the
    event loop: a full-data view's log end is read through its partition)."""
    coordinator = broker.groups
    group_ids = [group_id] if group_id else [o.group_id for o in list_groups(coordinator)]
    rows: list[PartitionStatus] = []
    for name in group_ids:
        committed = {tp: c.offset for tp, c in coordinator.offsets.committed(name).items()}
        group = coordinator.groups.get(name)
        owners = group.partition_owners() if group is not None else {}
        assigned = [TopicPartition(topic, partition) for topic, partition in owners]
        members = len(group.members) if group is not None else 0
        log_ends = await _log_ends(broker, set(committed) | set(assigned))
        rows += group_status(name, committed, log_ends, assigned, members)
    return rows


async def _log_ends(
    broker: GroupsHost, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """The high watermark of each partition that exists (a topic's or a full-data view's)."""
    ends = {}
    for topic_partition in partitions:
        partition = broker.resolver.readable_partition(topic_partition)
        if partition is not None:
            ends[topic_partition] = (await partition.offsets()).high_watermark
    return ends


def committed_lags(
    offsets: OffsetManager, high_watermark: Callable[[TopicPartition], int | None]
) -> Iterator[tuple[str, TopicPartition, int]]:
    """Each group's committed partitions with the records after its commit, up to the
    ``high_watermark`` of each partition that has one (the alarm on group lag reads it)."""
    for group in offsets.group_ids():
        for topic_partition, committed in offsets.committed(group).items():
            end = high_watermark(topic_partition)
            if end is not None:
                yield group, topic_partition, max(end - committed.offset, 0)
