"""What ``kshim delays`` shows: per topic, the records pending, the next due time, how
overdue the oldest pending record is, and how late deliveries were (percentiles from the
schedule's lateness buckets, so each is the bucket bound it falls under)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kshim.storage.schedule.delay_records import TopicSummary


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
