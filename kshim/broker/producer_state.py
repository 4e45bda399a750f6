"""Idempotent-producer state per partition: epochs and the last five batches.

Follows Kafka's ProducerStateManager (docs/protocol-notes.md §6.1): per (producer id,
partition) the broker keeps the epoch and the metadata of the last five
batches, so a retried batch is answered with its original offset instead of
being written twice, and a gap in sequence numbers is refused. The state is
rebuilt on restart from the batch headers in the log.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kshim.protocol.record_batch import BatchHeader

BATCHES_TO_RETAIN = 5
SEQUENCE_WRAP = 1 << 31


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))

    last_timestamp: int = -1  # max timestamp of its last batch (Kafka expires on this)

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retried batch already in the log at ``base_offset``."""

    base_offset: int


class PartitionProducerState:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> ErrorCode | Duplicate | None:
        """Returns None to append, a Duplicate to answer without appending, or an error."""
        if not header.has_producer_id:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            # Unknown producer (new, or its state expired): accept any sequence (Kafka's rule).
            return None
        if header.producer_epoch < entry.epoch:
            return ErrorCode.invalid_producer_epoch
        if header.producer_epoch > entry.epoch:
            return None if header.base_sequence == 0 else ErrorCode.out_of_order_sequence_number
        for batch in entry.batches:
            if (batch.first_sequence, batch.last_sequence) == (
                header.base_sequence,
                header.last_sequence,
            ):
                return Duplicate(batch.first_offset)
        if header.base_sequence != (entry.last_sequence + 1) % SEQUENCE_WRAP:
            return ErrorCode.out_of_order_sequence_number
        return None

    def record(self, header: BatchHeader, base_offset: int) -> None:
        """Remembers an appended batch of an idempotent producer."""
        if not header.has_producer_id:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = ProducerEntry(header.producer_epoch)
            self.producers[header.producer_id] = entry
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                base_offset,
                base_offset + header.last_offset_delta,
            )
        )

    def expire(self, cutoff_ms: int, keep: set[int]) -> int:
        """Forgets producers silent since before ``cutoff_ms`` (producer.id.expiration.ms),
        except those in ``keep`` (open transactions); returns how many went."""
        expired = [
            producer_id
            for producer_id, entry in self.producers.items()
            if entry.last_timestamp < cutoff_ms and producer_id not in keep
        ]
        for producer_id in expired:
            del self.producers[producer_id]
        return len(expired)

    def recover(self, header: BatchHeader) -> None:
        """Replays a batch read back from the log during recovery."""
        if header.has_producer_id and not header.is_control:
            self.record(header, header.base_offset)
