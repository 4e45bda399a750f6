"""A transaction coordinator built as kshim/broker/broker.py builds it, without a broker.

LMDB metadata in a temporary directory; partition logs from the in-memory log store
(kshim/storage/log/memory_log.py), looked up as the broker looks them up. ``restart`` builds a
new coordinator on the same metadata and logs, as a broker restart does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from kshim.broker.transactions.answers import ProducerIdAndEpoch
from kshim.broker.transactions.coordinator import TransactionCoordinator, TransactionSettings
from kshim.broker.transactions.fencing import NO_EPOCH, NO_PRODUCER
from kshim.broker.transactions.markers import marker_type
from kshim.protocol.errors import ErrorCode
from kshim.protocol.record_batch import TRANSACTIONAL_FLAG_MASK, iter_batches
from kshim.protocol.records import BatchSpec, decode_records
from kshim.storage.interface import LogConfig, TopicPartition
from kshim.storage.log.memory_log import MemoryLogStore, MemoryPartitionLog
from kshim.storage.meta.metadata import MetadataStore
from kshim.storage.meta.transaction_store import TransactionRecord
from kshim.testing import FakeClock
from tests.storage.support import producer_batch, read_everything

START_MS = 1_000_000
TIMEOUT_MS = 60_000
TRANSACTIONAL_ID = "txn"
GROUP = "group"
FIRST = TopicPartition("t", 0)
SECOND = TopicPartition("t", 1)
UNKNOWN_PARTITION = TopicPartition("missing", 0)
PARTITIONS = (FIRST, SECOND)


class SteppedSleep:
    """The background retries' sleep, moved on by the test: each call records its pause and
    waits until ``step`` ends it, so no test sleeps for real."""

    STEP_TIMEOUT_S = 5.0

    def __init__(self) -> None:
        self.pauses_s: list[float] = []
        self._asleep = asyncio.Event()
        self._wake = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.pauses_s.append(seconds)
        self._wake.clear()
        self._asleep.set()
        await self._wake.wait()

    async def step(self, idle: asyncio.Event) -> None:
        """Waits for the sleeper, ends its pause, and returns once the retry that follows
        is over: the sleeper is back asleep, or ``idle`` says nothing is left to retry."""
        await asyncio.wait_for(self._asleep.wait(), self.STEP_TIMEOUT_S)
        self._asleep.clear()
        self._wake.set()
        waits = [asyncio.ensure_future(event.wait()) for event in (self._asleep, idle)]
        done, pending = await asyncio.wait(
            waits, timeout=self.STEP_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
        )
        for waiting in pending:
            waiting.cancel()
        assert done, "the retry did not finish"


async def never_decided(_record: TransactionRecord, _reason: str) -> bool:
    """A review that cannot decide (the hook keeps answering unknown)."""
    return False


class Transactions:
    """The coordinator under test, its logs and what its completion callback saw."""

    def __init__(self, directory: Path, clock: FakeClock, settings: TransactionSettings) -> None:
        self.clock = clock
        self.settings = settings
        self.metadata = MetadataStore(str(directory / "meta"))
        self.logs = MemoryLogStore(clock)
        self.completed: list[tuple[bool, list[list[object]]]] = []
        # Logs whose writes fail (closed ones refuse appends, as a failed disk log does).
        self.failed: dict[TopicPartition, MemoryPartitionLog] = {}
        self.sleep = SteppedSleep()  # the marker retries' pauses
        self.coordinator = self._coordinator()

    def _coordinator(self) -> TransactionCoordinator:
        coordinator = TransactionCoordinator(
            self.metadata, self._partition_log, self.clock, self.settings, self.sleep
        )
        coordinator.on_complete.append(self._on_complete)
        return coordinator

    def _partition_log(self, topic_partition: TopicPartition) -> MemoryPartitionLog | None:
        return self.failed.get(topic_partition) or self.logs.get(topic_partition)

    def _on_complete(self, record: TransactionRecord, committed: bool) -> None:
        self.completed.append((committed, [list(entry) for entry in record.pending_offsets]))

    async def open_logs(self) -> None:
        """Opens (or, after a restart, recovers) every partition's log."""
        for topic_partition in PARTITIONS:
            replay = self.coordinator.partition_states.recovery_callback(topic_partition)
            await self.logs.open(topic_partition, LogConfig(), 0, replay)

    async def fail_writes(self, topic_partition: TopicPartition) -> None:
        """Every later append to the partition raises LogFailed, until a restart."""
        log = self.log(topic_partition)
        await log.close()
        self.failed[topic_partition] = log

    async def retry_markers(self) -> None:
        """Lets the marker retries' next pause end and waits for that retry to finish."""
        await self.sleep.step(self.coordinator.marker_retries.idle)

    async def restore_writes(self, topic_partition: TopicPartition) -> None:
        """The partition's log takes writes again, without a broker restart: it is opened
        anew over its stored batches (the in-memory twin's reopen), which replays them to
        the coordinator's partition state as a log directory coming back would."""
        del self.failed[topic_partition]
        replay = self.coordinator.partition_states.recovery_callback(topic_partition)
        await self.logs.open(topic_partition, LogConfig(), 0, replay)

    async def restart(
        self, first_callback: Callable[[TransactionRecord, bool], object] | None = None
    ) -> None:
        """A new coordinator on the same metadata and logs, loaded as a broker starts;
        ``first_callback`` runs before the others when a transaction completes."""
        self.failed.clear()
        self.coordinator = self._coordinator()
        if first_callback is not None:
            self.coordinator.on_complete.insert(0, first_callback)
        await self.open_logs()
        await self.coordinator.load()

    async def close(self) -> None:
        await self.logs.close()
        self.metadata.close()

    def log(self, topic_partition: TopicPartition) -> MemoryPartitionLog:
        log = self.logs.get(topic_partition)
        assert log is not None
        return log

    def writable(self, topic_partition: TopicPartition) -> bool:
        return self.logs.get(topic_partition) is not None

    def record(self) -> TransactionRecord:
        return self.coordinator.records[TRANSACTIONAL_ID]

    async def init(
        self,
        producer: ProducerIdAndEpoch | None = None,
        review: Callable[[TransactionRecord, str], Awaitable[bool]] = never_decided,
    ) -> ProducerIdAndEpoch:
        """InitProducerId for TRANSACTIONAL_ID, as the producer ``producer`` (KIP-360)
        or as a new instance."""
        producer_id = NO_PRODUCER if producer is None else producer.producer_id
        epoch = NO_EPOCH if producer is None else producer.producer_epoch
        return await self.coordinator.init_producer(
            TRANSACTIONAL_ID, TIMEOUT_MS, producer_id, epoch, review, fenced_code=True
        )

    async def add(
        self, producer: ProducerIdAndEpoch, *partitions: TopicPartition
    ) -> dict[TopicPartition, ErrorCode]:
        return await self.coordinator.add_partitions(
            TRANSACTIONAL_ID,
            producer.producer_id,
            producer.producer_epoch,
            list(partitions),
            self.writable,
            fenced_code=True,
        )

    async def end(self, producer: ProducerIdAndEpoch, commit: bool) -> ErrorCode:
        return await self.coordinator.end_transaction(
            TRANSACTIONAL_ID, producer.producer_id, producer.producer_epoch, commit,
            fenced_code=True,
        )  # fmt: skip

    async def produce(self, producer: ProducerIdAndEpoch, topic_partition: TopicPartition) -> int:
        """Appends a transactional batch as Produce does (checked, then tracked); returns
        its base offset once durable."""
        spec = BatchSpec(
            attributes=TRANSACTIONAL_FLAG_MASK,
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            base_sequence=0,
        )
        batch, header = producer_batch(1, self.clock(), spec=spec)
        code = self.coordinator.check_produce(TRANSACTIONAL_ID, header, topic_partition)
        assert code == ErrorCode.none
        log = self.log(topic_partition)
        offset = log.append(batch, header)
        self.coordinator.partition(topic_partition).on_append(header, offset)
        await log.wait_durable(offset)
        return offset

    async def begin(self, *partitions: TopicPartition) -> ProducerIdAndEpoch:
        """A new producer instance with an open transaction holding one batch on each of
        ``partitions``."""
        producer = await self.init()
        assert producer.error == ErrorCode.none
        assert set((await self.add(producer, *partitions)).values()) <= {ErrorCode.none}
        for topic_partition in partitions:
            await self.produce(producer, topic_partition)
        return producer

    async def markers(self, topic_partition: TopicPartition) -> list[tuple[int, int]]:
        """(offset, COMMIT or ABORT) of every marker in the partition's log."""
        data = await read_everything(self.log(topic_partition))
        found = []
        for start, header in iter_batches(data):
            if header.is_control:
                _, records = decode_records(data[start : start + header.size])
                kind = marker_type(records[0].key)
                assert kind is not None
                found.append((header.base_offset, kind))
        return found
