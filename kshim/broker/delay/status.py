"""What ``kshim delays`` shows: per topic, the records pending, the next due time, how
overdue the oldest pending record is, and how late deliveries were (percentiles from the
schedule's lateness buckets, so each is the bucket bound it falls under)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from kshim.broker.text_table import fixed_width_table
from kshim.storage.schedule.delay_records import LATENESS_BOUNDS_MS, TopicSummary

COLUMNS = (
    "TOPIC", "PENDING", "NEXT-DUE (UTC)", "OVERDUE-MS",
    "DELIVERED", "LATE-P50-MS", "LATE-P99-MS", "LATE-MAX-MS",
)  # fmt: skip
UNKNOWN = "-"


@dataclass(frozen=True, slots=True)
class DelayStatus:
    topic: str
    pending: int
    next_due_ms: int | None
    overdue_ms: int | None  # how long the first pending record is past its due time
    delivered: int
    late_p50_ms: int | None  # bucket bounds; -1: beyond the largest bucket
    late_p99_ms: int | None
    late_max_ms: int | None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def delay_status(summaries: dict[str, TopicSummary], now_ms: int) -> list[DelayStatus]:
    rows = []
    for topic, summary in summaries.items():
        next_due = summary.next_due_ms
        overdue = None if next_due is None or next_due > now_ms else now_ms - next_due
        rows.append(
            DelayStatus(
                topic, summary.pending, next_due, overdue, summary.delivered,
                summary.lateness_percentile_ms(0.5), summary.lateness_percentile_ms(0.99),
                summary.lateness_percentile_ms(1.0),
            )
        )  # fmt: skip
    return rows


def format_delays(rows: Sequence[DelayStatus]) -> str:
    """A fixed-width table with a header line, numbers right-aligned."""
    return fixed_width_table(COLUMNS, [_cells(row) for row in rows], left_aligned=(0, 2))


def _cells(row: DelayStatus) -> tuple[str, ...]:
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
