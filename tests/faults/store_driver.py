"""The store-level driver: producers write to a DiskLogStore over a simulated disk while a
fault schedule (schedule.py) fills the disk, fails writes or syncs and cuts the power;
after each fault the store is recovered from what survived and the history is checked.

What runs here is the store with the broker's idempotence and transaction rules over it:
PartitionProducerState decides duplicates and sequence gaps and is rebuilt from the log
on recovery (as the broker's partition service does), transactional batches end with the
broker's COMMIT/ABORT markers, and keyed partitions are compacted while written. The
broker's LMDB stores (metadata, transaction records, the aborted-transaction index, the
delay schedule's LMDB half, ``T.full``) bypass the FileSystem seam, so they are not here:
the transaction coordinator is played by the driver (its decisions survive every fault, as
LMDB's synced commits do), and read_committed is worked out from the markers in the log.
The whole broker is faulted by kill -9 in broker_driver.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from dataclasses import dataclass, field

from kshim.broker.producer_state import Duplicate, PartitionProducerState
from kshim.broker.transactions.markers import marker_batch
from kshim.protocol.record_batch import TRANSACTIONAL_FLAG_MASK, read_header, validate_produced
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.files.faulty_filesystem import FaultyFileSystem
from kshim.storage.files.simulated_filesystem import SimulatedFileSystem
from kshim.storage.interface import LogFailed, PartitionLog, PartitionToOpen, TopicPartition
from kshim.storage.log.log_store import DiskLogStore
from tests.faults.checker import Violation, check_appends, check_compacted, check_transactions
from tests.faults.history import History, Kind, Op, Write
from tests.faults.observed import read_observed
from tests.faults.schedule import Fault, FaultKind, StoreSchedule, store_schedule
from tests.storage.compaction_support import request

DATA_DIR = "/data"
NOW_MS = 1_700_000_000_000
PLAIN_TOPIC, COMPACTED_TOPIC = "events", "table"
KEYS = 8  # per compacted partition: few keys, so compaction has much to remove
CLOSE_TIMEOUT_S = 10.0
FAILURE_TIMEOUT_S = 2.0
COMMIT_RATIO = 0.7


class Refused(Exception):
    """The partition's producer state refused the batch (a sequence gap, an old epoch)."""


def name(partition: TopicPartition) -> str:
    return f"{partition.topic}-{partition.partition}"


@dataclass
class Boot:
    """One life of the store, between two faults."""

    store: DiskLogStore
    logs: dict[TopicPartition, PartitionLog]
    states: dict[TopicPartition, PartitionProducerState]
    crashed: bool = False  # the power went: answers from now on reached nobody

    def complete(
        self, history: History, op: Op, offset: int | None = None, committed: bool | None = None
    ) -> None:
        history.complete(op, Kind.INFO if self.crashed else Kind.OK, offset, committed)

    async def produce(self, partition: TopicPartition, batch: bytearray) -> int:
        """The partition service's append (kshim/api/records/produce.py): a retried
        batch answers its first offset; returns once durable; raises Refused, LogFailed."""
        header = validate_produced(batch)
        state = self.states[partition]
        verdict = state.check(header)
        if isinstance(verdict, Duplicate):
            base_offset = verdict.base_offset
        elif verdict is not None:
            raise Refused(verdict.name)
        else:
            base_offset = self.logs[partition].append(batch, header)
            state.record(header, base_offset)
        await self.logs[partition].wait_durable(base_offset + header.last_offset_delta)
        return base_offset

    async def end_transaction(self, producer: Producer, transaction: OpenTransaction) -> None:
        """Writes the coordinator's markers to every partition of the transaction."""
        assert transaction.committed is not None
        for partition in transaction.partitions:
            batch = marker_batch(
                producer.producer_id, producer.epoch, transaction.committed, NOW_MS
            )
            offset = self.logs[partition].append(batch, read_header(batch))
            await self.logs[partition].wait_durable(offset)


@dataclass
class OpenTransaction:
    op: Op
    partitions: list[TopicPartition]
    committed: bool | None = None  # the coordinator's decision, once made (durable)


@dataclass
class Producer:
    """A client that outlives the store's boots: its id, epoch and sequences, and the batch
    or transaction it had under way when the store went."""

    name: str
    producer_id: int
    epoch: int = 0
    sequences: Counter[TopicPartition] = field(default_factory=Counter)
    written: int = 0
    pending: tuple[TopicPartition, tuple[Write, ...], bytearray] | None = None
    transaction: OpenTransaction | None = None

    def batch(
        self, partition: TopicPartition, writes: tuple[Write, ...], transactional: bool
    ) -> bytearray:
        records = [
            Record(index, NOW_MS, None, write.value.encode()) for index, write in enumerate(writes)
        ]
        spec = BatchSpec(
            attributes=TRANSACTIONAL_FLAG_MASK if transactional else 0,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=self.sequences[partition],
        )
        self.sequences[partition] += len(writes)
        return bytearray(build_batch(records, spec))

    def writes(self, partition: TopicPartition, count: int) -> tuple[Write, ...]:
        self.written += 1
        return tuple(
            Write(name(partition), f"{self.name}.{self.written}.{index}") for index in range(count)
        )

    def new_epoch(self) -> None:
        """InitProducerId again (KIP-360): a higher epoch, sequences from 0."""
        self.epoch += 1
        self.sequences.clear()


@dataclass
class Outcome:
    schedule: StoreSchedule
    faults: Counter[str] = field(default_factory=Counter)  # scheduled, by kind
    injected: Counter[str] = field(default_factory=Counter)  # failed calls, by kind
    acknowledged: int = 0
    violations: list[Violation] = field(default_factory=list)


class StoreRun:
    def __init__(self, schedule: StoreSchedule) -> None:
        self.schedule = schedule
        self.rng = random.Random(f"driver-{schedule.seed}")
        self.history = History()
        self.plain = [TopicPartition(PLAIN_TOPIC, index) for index in range(schedule.partitions)]
        self.compacted = [
            TopicPartition(COMPACTED_TOPIC, index) for index in range(schedule.compacted_partitions)
        ]
        self.idempotent = [
            Producer(f"i{index}", 1_000 + index) for index in range(schedule.idempotent_producers)
        ]
        self.transactional = [
            Producer(f"t{index}", 2_000 + index)
            for index in range(schedule.transactional_producers)
        ]
        self.keyed_written = 0
        self.outcome = Outcome(schedule)

    async def run(self) -> Outcome:
        filesystem = SimulatedFileSystem()
        for fault in self.schedule.faults:
            filesystem = await self._boot_until(filesystem, fault)
            self.outcome.faults[fault.kind.value] += 1
        boot = await self._boot(FaultyFileSystem(filesystem))
        await self._check(boot)
        await boot.store.close()
        self.outcome.acknowledged = sum(op.kind is Kind.OK for op in self.history.ops)
        return self.outcome

    async def _boot(self, filesystem: FaultyFileSystem) -> Boot:
        store = DiskLogStore(DATA_DIR, lambda: NOW_MS, filesystem, self.schedule.settings)
        states = {partition: PartitionProducerState() for partition in self.plain + self.compacted}
        specs = [
            PartitionToOpen(partition, self.schedule.config, 0, states[partition].recover)
            for partition in self.plain + self.compacted
        ]
        recovered = await store.recover(specs)
        logs: dict[TopicPartition, PartitionLog] = {log.topic_partition: log for log in recovered}
        boot = Boot(store, logs, states)
        for producer in self.transactional:
            await self._finish_transaction(boot, producer)
        return boot

    async def _finish_transaction(self, boot: Boot, producer: Producer) -> None:
        """The coordinator after a restart (KIP-98): a decided transaction gets its markers
        again, an undecided one is aborted; the producer then starts a new epoch."""
        transaction = producer.transaction
        if transaction is not None:
            if transaction.committed is None:
                transaction.committed = False
            await boot.end_transaction(producer, transaction)
            producer.transaction = None
        producer.new_epoch()

    async def _boot_until(
        self, filesystem: SimulatedFileSystem, fault: Fault
    ) -> SimulatedFileSystem:
        faulty = FaultyFileSystem(filesystem)
        boot = await self._boot(faulty)
        await self._check(boot)
        tasks = [asyncio.create_task(self._idempotent(boot, p)) for p in self.idempotent]
        tasks += [asyncio.create_task(self._transactions(boot, p)) for p in self.transactional]
        tasks += [asyncio.create_task(self._keyed(boot, p)) for p in self.compacted]
        if self.compacted:
            tasks.append(asyncio.create_task(self._compactor(boot)))
        await _turns(fault.steps_before)
        if fault.kind in (FaultKind.DISK_FULL, FaultKind.WRITE_ERROR):
            faulty.fail_writes(fault.error_number)
        elif fault.kind is FaultKind.FSYNC_FAILURE:
            faulty.fail_syncs(fault.error_number)
        if fault.kind is not FaultKind.POWER_CUT:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(boot.store.write_failed(), FAILURE_TIMEOUT_S)
            await _turns(fault.steps_during)
        survivor = filesystem.after_power_loss(self.rng if fault.torn else None)
        boot.crashed = True
        await self._stop(boot, faulty, tasks)
        return survivor

    async def _stop(
        self, boot: Boot, faulty: FaultyFileSystem, tasks: list[asyncio.Task[None]]
    ) -> None:
        for task in tasks:
            task.cancel()
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(result, Exception):
                self.outcome.violations.append(Violation("driver error", repr(result)))
        self.outcome.injected.update(faulty.injected)
        faulty.heal()  # the old store's last writes go to a disk nobody reads again
        with contextlib.suppress(Exception):
            await asyncio.wait_for(boot.store.close(), CLOSE_TIMEOUT_S)

    async def _check(self, boot: Boot) -> None:
        observed = await read_observed(boot.logs)
        plain = {name(partition): observed[name(partition)] for partition in self.plain}
        violations = check_appends(self.history, plain)
        violations += check_transactions(self.history, plain)
        compacted = {name(partition) for partition in self.compacted}
        violations += check_compacted(self.history, observed, compacted)
        self.outcome.violations += violations

    # -- the clients -------------------------------------------------------------------

    async def _idempotent(self, boot: Boot, producer: Producer) -> None:
        """One batch in flight at a time (max.in.flight=1); a batch the store went down
        under is sent again, same sequence, on the next boot, as a client retries it."""
        while True:
            if producer.pending is None:
                partition = self.rng.choice(self.plain)
                writes = producer.writes(partition, self.rng.randint(1, 4))
                producer.pending = (partition, writes, producer.batch(partition, writes, False))
            partition, writes, batch = producer.pending
            op = self.history.invoke(producer.name, "append", writes)
            try:
                offset = await boot.produce(partition, batch)
            except LogFailed:  # the disk failed: this store takes nothing more
                self.history.complete(op, Kind.INFO)
                return
            except asyncio.CancelledError:
                self.history.complete(op, Kind.INFO)
                raise
            except Refused:
                self.history.complete(op, Kind.FAIL)
                producer.pending = None
                producer.new_epoch()
                continue
            boot.complete(self.history, op, offset)
            if not boot.crashed:
                producer.pending = None
            await self._maybe_yield()

    async def _transactions(self, boot: Boot, producer: Producer) -> None:
        while True:
            partitions = self.rng.sample(self.plain, min(len(self.plain), self.rng.randint(1, 3)))
            batches = [(p, producer.writes(p, self.rng.randint(1, 3))) for p in partitions]
            op = self.history.invoke(
                producer.name, "txn", tuple(write for _, writes in batches for write in writes)
            )
            transaction = producer.transaction = OpenTransaction(op, partitions)
            try:
                for partition, writes in batches:
                    await boot.produce(partition, producer.batch(partition, writes, True))
                transaction.committed = self.rng.random() < COMMIT_RATIO
                await boot.end_transaction(producer, transaction)
            except LogFailed:  # the disk failed: this store takes nothing more
                self.history.complete(op, Kind.INFO)
                return
            except asyncio.CancelledError:
                self.history.complete(op, Kind.INFO)
                raise
            producer.transaction = None
            boot.complete(self.history, op, committed=transaction.committed)
            await self._maybe_yield()

    async def _keyed(self, boot: Boot, partition: TopicPartition) -> None:
        """The one writer of a compacted partition: plain keyed batches, never retried."""
        while True:
            self.keyed_written += 1
            key = f"k{self.rng.randrange(KEYS)}"
            write = Write(name(partition), f"c.{self.keyed_written}", key)
            op = self.history.invoke(f"c{partition.partition}", "append", (write,))
            batch = bytearray(build_batch([Record(0, NOW_MS, key.encode(), write.value.encode())]))
            try:
                offset = await boot.produce(partition, batch)
            except LogFailed:  # the disk failed: this store takes nothing more
                self.history.complete(op, Kind.INFO)
                return
            except asyncio.CancelledError:
                self.history.complete(op, Kind.INFO)
                raise
            boot.complete(self.history, op, offset)
            await self._maybe_yield()

    async def _compactor(self, boot: Boot) -> None:
        """Compacts the keyed partitions over and over while they are written."""
        while True:
            try:
                await boot.store.checkpoint()
                for partition in self.compacted:
                    await boot.logs[partition].compact(request(NOW_MS))
            except (OSError, LogFailed):
                return
            await asyncio.sleep(0)

    async def _maybe_yield(self) -> None:
        if self.rng.random() < 0.3:
            await asyncio.sleep(0)


async def _turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def run_store_schedule(seed: int) -> Outcome:
    """Runs the store-level schedule of ``seed``; returns what it did and found."""
    return await StoreRun(store_schedule(seed)).run()
