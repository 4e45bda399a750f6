"""Writing a transaction's COMMIT or ABORT markers to every partition it wrote to.

Kafka's TransactionMarkerChannelManager sends WriteTxnMarkers to each partition's leader;
a single broker appends the control batches itself. An ABORT marker's aborted-index entry
is persisted in LMDB before the marker is appended, so a marker on disk is never without
its entry; the markers are durable before this returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kshim.broker.transactions.markers import marker_batch
from kshim.broker.transactions.partition_state import PartitionTransactions
from kshim.protocol.record_batch import read_header
from kshim.storage.interface import LogFailed, PartitionLog, TopicPartition
from kshim.storage.meta.transaction_store import (
    AbortedTransaction,
    TransactionRecord,
    TransactionStore,
)

log = logging.getLogger(__name__)

PartitionLookup = Callable[[TopicPartition], PartitionLog | None]


async def write_markers(
    record: TransactionRecord,
    commit: bool,
    logs: PartitionLookup,
    partition_state: Callable[[TopicPartition], PartitionTransactions],
    store: TransactionStore,
    clock: Callable[[], int],
) -> None:
    """Appends the marker to each of the record's partitions holding its data, then waits
    until every marker is durable; raises LogFailed when one cannot be. Event loop only."""
    written: list[tuple[PartitionLog, int]] = []
    for topic, index in record.partitions:
        topic_partition = TopicPartition(topic, index)
        partition_log = logs(topic_partition)
        state = partition_state(topic_partition)
        open_transaction = state.open.get(record.producer_id)
        if partition_log is None or open_transaction is None:
            continue  # no data written there, marker already written, or topic deleted
        if not commit:
            planned = AbortedTransaction(
                record.producer_id, open_transaction.first_offset, partition_log.log_end_offset
            )
            await asyncio.to_thread(store.add_aborted, topic_partition, planned)
        batch = marker_batch(record.producer_id, record.producer_epoch, commit, clock())
        header = read_header(batch)
        base_offset = partition_log.append(batch, header)
        if not commit:
            state.record_abort(
                AbortedTransaction(record.producer_id, open_transaction.first_offset, base_offset)
            )
        state.on_append(header, base_offset)
        written.append((partition_log, base_offset))
    for partition_log, base_offset in written:
        try:
            await partition_log.wait_durable(base_offset)
        except LogFailed:
            log.exception("marker for %s not durable", record.transactional_id)
            raise
