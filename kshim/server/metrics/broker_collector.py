"""The broker's state as Prometheus metric families, read when Prometheus scrapes.

A scrape runs in the metrics server's thread (endpoint.py); the broker's state belongs to
the event loop's thread, so the families are built there (``run_coroutine_threadsafe``)
and handed back whole. Nothing is computed between scrapes. Reading the delay schedule
opens its LMDB environment, so it is read in a worker thread, and only once the schedule
exists.

Names follow Prometheus' conventions (a ``kshim_`` prefix, base units, ``_total`` on
counters, added by prometheus_client); labels are topic, partition, group, API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kshim.broker.broker import Broker
from kshim.broker.groups.lag_age import unread_since_ms
from kshim.broker.transactions.transaction_states import TransactionState
from kshim.storage.interface import TopicPartition
from kshim.storage.log.log_store import DiskLogStore
from kshim.storage.schedule.delay_records import LATENESS_BOUNDS_MS

SCRAPE_TIMEOUT_S = 10.0

Families = list[Metric]


class BrokerCollector(Collector):
    def __init__(
        self,
        broker: Broker,
        loop: asyncio.AbstractEventLoop,
        connections: Callable[[], dict[str, int]],  # open connections by listener
        counted: Callable[[], Families] = list,  # what was counted on the loop (requests)
    ) -> None:
        self._broker = broker
        self._loop = loop
        self._connections = connections
        self._counted = counted

    def collect(self) -> Iterator[Metric]:
        """Runs in the scraping thread; raises TimeoutError when the event loop does not
        answer within SCRAPE_TIMEOUT_S (the scrape fails, as it should)."""
        future = asyncio.run_coroutine_threadsafe(self._families(), self._loop)
        yield from future.result(SCRAPE_TIMEOUT_S)

    async def _families(self) -> Families:
        broker = self._broker
        families: Families = self._counted()
        families += _logs(broker)
        families += _traffic(broker)
        families += await _groups(broker)
        families += _transactions(broker)
        families += _alarms(broker)
        families += await _views(broker)
        families += await _delays(broker)
        families += _storage(broker)
        families.append(
            _per_label(GaugeMetricFamily, "kshim_connections",
                       "Open client connections, by listener", "listener", self._connections())
        )  # fmt: skip
        return families


def _per_label(
    kind: type[CounterMetricFamily | GaugeMetricFamily],
    name: str,
    documentation: str,
    label: str,
    values: Mapping[str, float],
) -> Metric:
    """A family of ``kind`` with one sample per key of ``values``, labelled ``label``."""
    family = kind(name, documentation, labels=[label])
    for key, value in values.items():
        family.add_metric([key], value)
    return family


def _partition_gauge(name: str, documentation: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=["topic", "partition"])


def _logs(broker: Broker) -> Families:
    start = _partition_gauge("kshim_log_start_offset", "The first offset a fetch may ask for")
    high = _partition_gauge(
        "kshim_log_high_watermark", "The offset after the last record on disk (what consumers see)"
    )
    end = _partition_gauge("kshim_log_end_offset", "The offset the next append gets")
    size = _partition_gauge("kshim_log_size_bytes", "Bytes of the partition's segments")
    segments = _partition_gauge("kshim_log_segments", "Segments of the partition's log")
    for name, topic in broker.topics.by_name.items():
        for index, log in enumerate(topic.logs):
            labels = [name, str(index)]
            start.add_metric(labels, log.log_start_offset)
            high.add_metric(labels, log.high_watermark)
            end.add_metric(labels, log.log_end_offset)
            stored = getattr(log, "segments", ())  # both log stores keep their segments
            size.add_metric(labels, sum(segment.size for segment in stored))
            segments.add_metric(labels, len(stored))
    return [start, high, end, size, segments]


def _traffic(broker: Broker) -> Families:
    traffic = broker.traffic
    return [
        _per_label(CounterMetricFamily, name, documentation, "topic", counts)
        for name, documentation, counts in (
            (
                "kshim_produced_records",
                "Records appended by Produce, by topic",
                traffic.produced_records,
            ),
            (
                "kshim_produced_bytes",
                "Bytes of record batches appended by Produce, by topic",
                traffic.produced_bytes,
            ),
            (
                "kshim_fetched_bytes",
                "Bytes of record batches answered to Fetch, by topic",
                traffic.fetched_bytes,
            ),
            (
                "kshim_fetched_records",
                "Records answered to Fetch, by topic, counted by offsets (a transaction's marker "
                "counts as one; full-data views are not counted)",
                traffic.fetched_offsets,
            ),
        )
    ]


async def _groups(broker: Broker) -> Families:
    groups = broker.groups
    members = GaugeMetricFamily(
        "kshim_group_members",
        "Members of a consumer group, by group and state",
        labels=["group", "state"],
    )
    for group_id, group in groups.groups.items():
        members.add_metric([group_id, group.state.value], len(group.members))
    committed = GaugeMetricFamily(
        "kshim_group_committed_offset",
        "The offset a group committed",
        labels=["group", "topic", "partition"],
    )
    lag = GaugeMetricFamily(
        "kshim_group_lag",
        "Records between a group's committed offset and the high watermark",
        labels=["group", "topic", "partition"],
    )
    waited = GaugeMetricFamily(
        "kshim_group_lag_seconds",
        "How long the oldest record a group has not committed past has waited (its batch's "
        "first timestamp to now; 0 when caught up)",
        labels=["group", "topic", "partition"],
    )
    now_ms = broker.clock()
    for group_id in groups.offsets.group_ids():
        for topic_partition, offset in list(groups.offsets.committed(group_id).items()):
            labels = [group_id, topic_partition.topic, str(topic_partition.partition)]
            committed.add_metric(labels, offset.offset)
            log = broker.topics.log(topic_partition)
            if log is not None:
                lag.add_metric(labels, max(log.high_watermark - offset.offset, 0))
                since_ms = await unread_since_ms(log, offset.offset)
                age_ms = 0 if since_ms is None else max(now_ms - since_ms, 0)
                waited.add_metric(labels, age_ms / 1000)
    return [members, committed, lag, waited]


def _transactions(broker: Broker) -> Families:
    now_ms = broker.clock()
    open_ = GaugeMetricFamily(
        "kshim_transaction_open_seconds",
        "How long each open transaction has been open, by transactional id",
        labels=["transactional_id"],
    )
    due = 0
    for transactional_id, record in broker.transactions.records.items():
        if record.state != TransactionState.ONGOING:
            continue
        open_.add_metric([transactional_id], max(now_ms - record.started_ms, 0) / 1000)
        due += broker.transactions.reviews.due(record)  # the reviewer's own test
    count = GaugeMetricFamily(
        "kshim_transactions_open", "Open transactions", value=len(open_.samples)
    )
    reviews = GaugeMetricFamily(
        "kshim_transactions_review_due",
        "Open transactions past their time, to be reviewed",
        value=due,
    )
    outcomes = _per_label(
        CounterMetricFamily,
        "kshim_transaction_reviews",
        "Reviews of overdue transactions, by outcome (unknown: asked again later)",
        "outcome",
        broker.reviewer.outcomes,
    )
    return [count, open_, reviews, outcomes]


def _alarms(broker: Broker) -> Families:
    raised = _per_label(
        CounterMetricFamily,
        "kshim_alarms_raised",
        "Alarms raised (or, for events, said) since the broker started",
        "kind",
        broker.alarms.raised,
    )
    active = GaugeMetricFamily(
        "kshim_alarms_active", "Alarms raised and not cleared: 1 each", labels=["kind", "subject"]
    )
    for kind, subject in broker.alarms.active:
        active.add_metric([kind, subject], 1)
    return [raised, active]


async def _views(broker: Broker) -> Families:
    lag = _partition_gauge(
        "kshim_full_view_lag_records",
        "Decided records of a topic not yet applied to its full-data view (T.full)",
    )
    behind = _partition_gauge(
        "kshim_full_view_lag_seconds",
        "How long a full-data view has been behind its topic (0 when it holds every "
        "decided record); counted from its last catch-up, or from the first scrape that "
        "saw it behind",
    )
    view = broker.full_view
    now_ms = broker.clock()
    for name, topic in list(broker.topics.by_name.items()):
        if not view.keeps(topic):
            continue
        for index, log in enumerate(topic.logs):
            topic_partition = TopicPartition(name, index)
            stable = broker.transactions.partition(topic_partition).last_stable_offset(
                log.high_watermark
            )
            records = max(stable - await view.applied_position(topic_partition), 0)
            lag.add_metric([name, str(index)], records)
            if not records:
                view.caught_up_ms[topic_partition] = now_ms
            since = view.caught_up_ms.setdefault(topic_partition, now_ms)
            behind.add_metric([name, str(index)], (now_ms - since) / 1000)
    return [lag, behind]


async def _delays(broker: Broker) -> Families:
    store = broker.delays.store
    if not store.exists:
        return []
    summaries = await asyncio.to_thread(store.summary)
    pending = GaugeMetricFamily(
        "kshim_delayed_pending",
        "Delayed records waiting for their due time, by topic",
        labels=["topic"],
    )
    next_due = GaugeMetricFamily(
        "kshim_delayed_next_due_timestamp_seconds",
        "When the next delayed record of a topic is due (Unix time)",
        labels=["topic"],
    )
    lateness = HistogramMetricFamily(
        "kshim_delayed_lateness_seconds",
        "How late delayed records were appended to their topic after their due time",
        labels=["topic"],
    )
    for topic, summary in summaries.items():
        pending.add_metric([topic], summary.pending)
        if summary.next_due_ms is not None:
            next_due.add_metric([topic], summary.next_due_ms / 1000)
        # The store keeps no sum.
        lateness.add_metric([topic], lateness_buckets(summary.lateness_counts), sum_value=None)
    return [pending, next_due, lateness]


def lateness_buckets(counts: Sequence[int]) -> list[tuple[str, float]]:
    """Counts per LATENESS_BOUNDS_MS bucket (the last: later than every bound) as
    Prometheus' cumulative buckets, bounds in seconds."""
    buckets, total = [], 0
    for bound_ms, count in zip(LATENESS_BOUNDS_MS, counts, strict=False):
        total += count
        buckets.append((repr(bound_ms / 1000), float(total)))
    buckets.append(("+Inf", float(sum(counts))))
    return buckets


def _storage(broker: Broker) -> Families:
    logs = broker.logs
    if not isinstance(logs, DiskLogStore):
        return []
    return [
        CounterMetricFamily("kshim_fsyncs", "fsyncs of files and directories", logs.sync_count),
        CounterMetricFamily(
            "kshim_wal_written_bytes",
            "Bytes written to the write-ahead log",
            logs.wal_bytes_written,
        ),
        CounterMetricFamily(
            "kshim_corrupt_batches",
            "Stored record batches reads found damaged on disk (each counted once)",
            logs.corrupt_batches,
        ),
    ]
