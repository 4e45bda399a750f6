"""The tables of ``kshim groups`` (consumption status: committed offset, log end and lag per
group and partition, as Kafka's kafka-consumer-groups tool prints them) and ``kshim delays``
(the delay schedule per topic); unknown values print as ``-``."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from kshim.broker.delay.status import DelayStatus
from kshim.broker.groups.consumption_status import PartitionStatus
from kshim.cli.text_table import fixed_width_table
from kshim.storage.schedule.delay_records import LATENESS_BOUNDS_MS

CONSUMPTION_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBERS")
DELAY_COLUMNS = (
    "TOPIC", "PENDING", "NEXT-DUE (UTC)", "OVERDUE-MS",
    "DELIVERED", "LATE-P50-MS", "LATE-P99-MS", "LATE-MAX-MS",
)  # fmt: skip
UNKNOWN = "-"


def consumption_table(rows: Sequence[PartitionStatus]) -> str:
    """A fixed-width text table with a header line, numbers right-aligned."""
    cells = [_consumption_cells(row) for row in rows]
    return fixed_width_table(CONSUMPTION_COLUMNS, cells, left_aligned=(0, 1))


def _consumption_cells(row: PartitionStatus) -> tuple[str, ...]:
    return (
        row.group_id,
        row.topic,
        str(row.partition),
        _offset(row.committed),
        _offset(row.log_end),
        _offset(row.lag),
        str(row.members),
    )


def _offset(value: int | None) -> str:
    return UNKNOWN if value is None or value < 0 else str(value)


def delays_table(rows: Sequence[DelayStatus]) -> str:
    """A fixed-width table with a header line, numbers right-aligned."""
    cells = [_delay_cells(row) for row in rows]
    return fixed_width_table(DELAY_COLUMNS, cells, left_aligned=(0, 2))


def _delay_cells(row: DelayStatus) -> tuple[str, ...]:
    return (
        row.topic, str(row.pending), _time(row.next_due_ms), _number(row.overdue_ms),
        str(row.delivered), _bound(row.late_p50_ms), _bound(row.late_p99_ms),
        _bound(row.late_max_ms),
    )  # fmt: skip


def _time(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return UNKNOWN
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{epoch_ms % 1000:03d}"


def _number(value: int | None) -> str:
    return UNKNOWN if value is None else str(value)


def _bound(value: int | None) -> str:
    if value is None:
        return UNKNOWN
    return f"<={value}" if value >= 0 else f">{LATENESS_BOUNDS_MS[-1]}"
