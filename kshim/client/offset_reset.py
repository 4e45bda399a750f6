"""What ``kshim groups reset-offsets`` sets, worked out as Kafka's kafka-consumer-groups.sh
does it (GroupOffsetsResetter in Kafka's tools):

- the group must be inactive, Empty or Dead (no such group yet), even for a dry run:
  members would overwrite the new offsets with their own next commit;
- ``--to-earliest`` and ``--to-latest`` take the log start and the high watermark;
- ``--to-datetime`` takes the first offset whose timestamp is at or after it
  (ListOffsets by timestamp), or the high watermark of a partition with no such record;
- ``--shift-by N`` moves the committed offset by N, kept within [log start, high
  watermark]; a partition the group never committed is refused, as Kafka refuses it
  ("Cannot shift offset ... since there is no current committed offset").

A partition the group never committed starts from the chosen target for the ``--to-*``
options, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kshim.client.group_admin import GroupAdmin
from kshim.client.json_rows import JsonRow
from kshim.client.list_offsets import EARLIEST, LATEST, UNKNOWN_OFFSET

# DescribeGroups' states in which Kafka lets the offsets of a group be reset.
INACTIVE_STATES = frozenset({"Empty", "Dead"})


class ResetRefused(Exception):
    """The reset cannot be done: the group is active, a partition does not exist, or a
    shift has no committed offset to start from."""


class TargetKind(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    DATETIME = "datetime"
    SHIFT = "shift"


@dataclass(frozen=True, slots=True)
class ResetTarget:
    kind: TargetKind
    amount: int = 0  # epoch milliseconds for DATETIME, the shift for SHIFT


@dataclass(frozen=True, slots=True)
class PlannedOffset(JsonRow):
    """One row of the plan: a partition, its committed offset (None: none) and the new one."""

    group: str
    topic: str
    partition: int
    committed: int | None
    new_offset: int


def plan_reset(
    admin: GroupAdmin, group: str, topic: str, partitions: list[int] | None, target: ResetTarget
) -> list[PlannedOffset]:
    """The new offset of each partition of ``topic`` (or of those named), by partition;
    raises ResetRefused, and GroupAdminError for an error answer."""
    check_inactive(admin, group)
    wanted = _partitions(admin, topic, partitions)
    committed = admin.committed(group, topic, wanted)
    new_offsets = _new_offsets(admin, topic, wanted, committed, target)
    return [
        PlannedOffset(group, topic, index, committed.get(index), new_offsets[index])
        for index in wanted
    ]


def execute(admin: GroupAdmin, plan: list[PlannedOffset]) -> None:
    """Commits the plan's new offsets, once more checking that the group is inactive (a
    consumer may have joined since the plan was made; the broker refuses it then too)."""
    if not plan:
        return
    check_inactive(admin, plan[0].group)
    offsets = {row.partition: row.new_offset for row in plan}
    admin.commit(plan[0].group, plan[0].topic, offsets)


def check_inactive(admin: GroupAdmin, group: str) -> None:
    described = admin.describe(group)
    if described.state not in INACTIVE_STATES:
        members = f"{described.members} member" + ("" if described.members == 1 else "s")
        raise ResetRefused(
            f"cannot reset offsets of group {group} while it is active (state "
            f"{described.state}, {members}); stop its consumers first"
        )


def _partitions(admin: GroupAdmin, topic: str, named: list[int] | None) -> list[int]:
    existing = admin.partitions(topic)
    if named is None:
        return existing
    missing = sorted(set(named) - set(existing))
    if missing:
        listed = ", ".join(f"{topic}-{index}" for index in missing)
        raise ResetRefused(f"no such partition: {listed}")
    return sorted(set(named))


def _new_offsets(
    admin: GroupAdmin,
    topic: str,
    partitions: list[int],
    committed: dict[int, int],
    target: ResetTarget,
) -> dict[int, int]:
    if target.kind is TargetKind.EARLIEST:
        return admin.log_offsets(topic, partitions, EARLIEST)
    if target.kind is TargetKind.LATEST:
        return admin.log_offsets(topic, partitions, LATEST)
    if target.kind is TargetKind.DATETIME:
        return _offsets_at(admin, topic, partitions, target.amount)
    return _shifted(admin, topic, partitions, committed, target.amount)


def _offsets_at(
    admin: GroupAdmin, topic: str, partitions: list[int], timestamp_ms: int
) -> dict[int, int]:
    """The first offset at or after ``timestamp_ms``; the high watermark where every record
    is older (Kafka's tool falls back to the latest offset there)."""
    found = admin.log_offsets(topic, partitions, timestamp_ms)
    later = [index for index in partitions if found.get(index, UNKNOWN_OFFSET) == UNKNOWN_OFFSET]
    if later:
        found.update(admin.log_offsets(topic, later, LATEST))
    return found


def _shifted(
    admin: GroupAdmin, topic: str, partitions: list[int], committed: dict[int, int], shift: int
) -> dict[int, int]:
    uncommitted = [index for index in partitions if index not in committed]
    if uncommitted:
        listed = ", ".join(f"{topic}-{index}" for index in uncommitted)
        raise ResetRefused(f"cannot shift the offset of {listed}: the group committed none")
    earliest = admin.log_offsets(topic, partitions, EARLIEST)
    latest = admin.log_offsets(topic, partitions, LATEST)
    return {
        index: min(max(committed[index] + shift, earliest[index]), latest[index])
        for index in partitions
    }
