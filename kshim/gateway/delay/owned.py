"""One ``T.delay`` partition a gateway owns: filing its records into the schedule, and
delivering them to ``T`` when due, each step one Kafka transaction of the partition's own
transactional producer.

Filing commits the schedule entries (and tombstones, for cancel and replace) with the
group offset past the records filed (KIP-98's consume-transform-produce); delivery commits
the records appended to ``T``-p with their entries' tombstones. So at every commit the
pending set is exactly the schedule's live entries plus ``T.delay`` after the group offset,
and a new owner, whose InitProducerId fences this producer (a zombie's next commit fails
with PRODUCER_FENCED), starts from exactly that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition

from kshim.broker.delay.naming import DELAYED_FROM_HEADER, delayed_from, target_of
from kshim.broker.delay.requests import InvalidDelay, read_request
from kshim.gateway.delay.entries import PendingRecord, encode_entry, entry_key
from kshim.gateway.delay.figures import DeliveryFigures
from kshim.gateway.delay.schedule import PartitionSchedule
from kshim.gateway.delay.upstream import DelaySettings
from kshim.protocol.records import RecordView

log = logging.getLogger(__name__)
MAX_WAIT_S = 1.0  # a wall-clock jump makes a record at most this late


class OwnedPartition:
    """``source`` (T.delay-p) while this gateway owns it; ``on_broken`` is called once a
    transaction fails, and the dispatcher then takes the partition over again."""

    def __init__(
        self,
        source: TopicPartition,
        producer: AIOKafkaProducer,
        schedule_partition: int,
        settings: DelaySettings,
        on_broken: Callable[[TopicPartition], None],
        figures: DeliveryFigures,
    ) -> None:
        self.source = source
        self.figures = figures  # the dispatcher's, shared by its partitions
        self.target = target_of(source.topic) or source.topic
        self.producer = producer
        self.schedule = PartitionSchedule()
        self.next_offset = 0  # the group offset: records before it are filed
        self.schedule_partition = schedule_partition
        self._settings = settings
        self._on_broken = on_broken
        self._lock = asyncio.Lock()  # one transaction at a time
        self._wake = asyncio.Event()
        self._delivering: asyncio.Task[None] | None = None
        self._target_partition: int | None = None
        self.closed = False

    def start(self) -> None:
        self._delivering = asyncio.get_running_loop().create_task(self._deliver_loop())

    async def close(self) -> None:
        """Stops delivering and the producer; a transaction under way ends first."""
        self.closed = True
        if self._delivering is not None:
            self._delivering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._delivering
        async with self._lock:
            await self.producer.stop()

    async def file(self, records: Sequence[RecordView]) -> None:
        """Files ``records`` (aiokafka ConsumerRecords of the source, in offset order) and
        commits the group offset past them, in one transaction."""
        async with self._lock:
            fresh = [record for record in records if record.offset >= self.next_offset]
            if self.closed or not fresh:
                return
            writes: list[tuple[bytes, bytes | None]] = []
            for record in fresh:
                self._file_one(record, writes)
            offsets = {self.source: fresh[-1].offset + 1}
            try:
                async with self.producer.transaction():
                    for key, value in writes:
                        await self._send_entry(key, value)
                    await self.producer.send_offsets_to_transaction(
                        offsets, self._settings.group_id
                    )
            except Exception:
                self._broken("filing records")
                return
            self.next_offset = fresh[-1].offset + 1
            self._wake.set()

    def _file_one(self, record: RecordView, writes: list[tuple[bytes, bytes | None]]) -> None:
        headers = tuple(record.headers)
        try:
            request = read_request(record)
        except InvalidDelay as error:
            log.warning("%s offset %d not scheduled: %s", self.source, record.offset, error)
            return
        if request.cancels and record.key is not None:  # a cancel, or a replace
            for offset in self.schedule.offsets_with_key(record.key):
                self.schedule.remove(offset)
                writes.append((self._key(offset), None))
        if request.due_ms is None:
            return
        pending = PendingRecord(
            record.offset, request.due_ms, record.timestamp, record.key, record.value, headers
        )
        self.schedule.add(pending)
        writes.append((self._key(record.offset), encode_entry(pending)))

    def _key(self, offset: int) -> bytes:
        return entry_key(self.source.topic, self.source.partition, offset)

    async def _send_entry(self, key: bytes, value: bytes | None) -> None:
        topic, partition = self._settings.schedule_topic, self.schedule_partition
        await self.producer.send(topic, value, key=key, partition=partition)

    async def _deliver_loop(self) -> None:
        clock = self._settings.clock_ms
        while not self.closed:
            self._wake.clear()
            async with self._lock:
                if self.closed:
                    return
                due = self.schedule.take_due(clock(), self._settings.delivery_records)
                if due:
                    await self._deliver(due)
                    continue
                next_due = self.schedule.next_due_ms()
            wait_s = MAX_WAIT_S if next_due is None else (next_due - clock()) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(max(wait_s, 0.0), MAX_WAIT_S))

    async def _deliver(self, due: list[PendingRecord]) -> None:
        """Appends ``due`` to ``T``-p and tombstones their entries, in one transaction."""
        clock = self._settings.clock_ms
        try:
            partition = await self._target()
            began = time.monotonic()  # a duration: immune to wall-clock steps
            async with self.producer.transaction():
                for record in due:
                    await self._send_delivery(record, partition)
                for record in due:
                    await self._send_entry(self._key(record.offset), None)
        except Exception:
            for record in due:  # for a look before the takeover rebuilds it
                self.schedule.add(record)
            self._broken("delivering due records")
            return
        took_ms = round((time.monotonic() - began) * 1000)
        committed = clock()
        lateness = [committed - record.due_ms for record in due]
        self.figures.delivered(self.target, lateness, took_ms)
        log.debug("%s: %d records delivered, the first %d ms late", self.source, len(due),
                  lateness[0])  # fmt: skip

    async def _send_delivery(self, record: PendingRecord, partition: int) -> None:
        header = (DELAYED_FROM_HEADER, delayed_from(self.source.partition, record.offset))
        await self.producer.send(
            self.target,
            record.value,
            key=record.key,
            partition=partition,
            # as produced: a record without a timestamp (-1) stays without one, as on kshim's
            # broker, rather than stamped with its delivery time (aiokafka's None)
            timestamp_ms=record.timestamp,
            headers=[*record.headers, header],
        )

    async def _target(self) -> int:
        """``T``'s partition p, as on kshim's broker; where ``T`` has fewer partitions than
        ``T.delay``, p modulo their number, rather than no delivery at all."""
        if self._target_partition is None:
            partitions = sorted(await self.producer.partitions_for(self.target))
            partition = self.source.partition
            self._target_partition = partition if partition in partitions else (
                partitions[partition % len(partitions)])  # fmt: skip
        return self._target_partition

    def _broken(self, doing: str) -> None:
        log.warning("%s: %s failed; taking the partition over again", self.source, doing,
                    exc_info=True)  # fmt: skip
        self.closed = True
        self._on_broken(self.source)
