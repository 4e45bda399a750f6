"""The node's partitions, one operation each: appending to a partition (Kafka's
ReplicaManager.appendRecords; docs/design.md, "A produce, step by step") and deleting a
topic with everything that goes with it.

``append`` takes one partition's raw batch and returns an AppendResult: refused with
Kafka's error code and a reason, answered from the idempotence state (a retried batch gets
its first offset again), or appended, its offsets stamped and its bytes stored as received.
The caller waits for ``wait_durable`` before answering acks=1 or -1. One partition's
refusal never touches another's.

``delete_topic`` deletes a stored topic and what belongs to it: its delay companion, the
transactions' state of both, every group's offsets under its names, its view's data and
its pending delayed records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kshim.broker.clock import BrokerClock
from kshim.broker.groups.admin import drop_topic_offsets
from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.partitions.batch_checks import (
    Refused,
    check_records,
    check_timestamps,
    checked_batch,
)
from kshim.broker.producer_state import Duplicate, PartitionProducerState
from kshim.broker.refusal_log import RefusalLog
from kshim.broker.topic_resolver import TopicResolver, WritablePartition
from kshim.broker.topics import TopicError, TopicManager
from kshim.broker.traffic import TopicTraffic
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.protocol.errors import ErrorCode
from kshim.protocol.produce_response import NO_TIMESTAMP
from kshim.protocol.record_batch import BatchHeader, set_log_append_time
from kshim.storage.interface import LogFailed, PartitionLog, TopicPartition


@dataclass(slots=True)
class AppendResult:
    """One partition's outcome, as the Produce answer carries it."""

    error_code: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time: int = NO_TIMESTAMP
    log_start_offset: int = -1
    error_message: str | None = None
    durable_offset: int = -1  # the last offset that must be on disk before answering
    log: PartitionLog | None = field(default=None, repr=False)

    def refuse(self, code: ErrorCode, message: str | None = None) -> AppendResult:
        self.error_code, self.error_message = code, message
        return self


@dataclass(eq=False)
class PartitionService:
    """Appends to the node's partitions; keeps each partition's idempotence state."""

    resolver: TopicResolver
    topics: TopicManager
    transactions: TransactionCoordinator
    groups: GroupCoordinator
    clock: BrokerClock
    traffic: TopicTraffic
    refusals: RefusalLog
    producer_states: dict[TopicPartition, PartitionProducerState] = field(default_factory=dict)

    def producer_state(self, topic_partition: TopicPartition) -> PartitionProducerState:
        """The partition's idempotent-producer state (created empty on first use)."""
        state = self.producer_states.get(topic_partition)
        if state is None:
            state = self.producer_states[topic_partition] = PartitionProducerState()
        return state

    def expire_idle_producers(self, cutoff_ms: int) -> int:
        """Forgets producers last seen before ``cutoff_ms`` (producer.id.expiration.ms),
        except those with a transaction open; returns how many."""
        return sum(
            state.expire(cutoff_ms, set(self.transactions.partition(topic_partition).open))
            for topic_partition, state in self.producer_states.items()
        )

    def append(
        self,
        topic_partition: TopicPartition,
        records: memoryview | None,
        transactional_id: str | None,
        client_id: str | None,
    ) -> AppendResult:
        """Appends the partition's one batch ``records`` or says why not; a reason given to
        the client is logged too (refusal_log.py)."""
        result = self._append_or_refuse(topic_partition, records, transactional_id)
        # A failed log is the broker's own failure, logged where the storage fails; the rest
        # with a message are the client's batch or topic refused, which librdkafka shows by
        # the code alone.
        if result.error_message is not None and result.error_code != ErrorCode.kafka_storage_error:
            self.refusals.refused(
                "Produce", topic_partition.topic, client_id, result.error_code, result.error_message
            )
        return result

    def _append_or_refuse(
        self,
        topic_partition: TopicPartition,
        records: memoryview | None,
        transactional_id: str | None,
    ) -> AppendResult:
        result = AppendResult()
        try:
            writable = self.resolver.writable_partition(topic_partition)
        except TopicError as error:  # a read-only topic, or T.delay of no T
            return result.refuse(ErrorCode(error.code), str(error))
        if writable is None:
            return result.refuse(ErrorCode.unknown_topic_or_partition)
        result.log_start_offset = writable.log.log_start_offset
        try:
            batch, header = self._checked(writable, records)
        except Refused as refused:
            return result.refuse(refused.code, refused.message)
        verdict = self._producer_verdict(topic_partition, header, transactional_id)
        if isinstance(verdict, Duplicate):  # a retry: answered with its original offsets
            result.base_offset = verdict.base_offset
            result.durable_offset = verdict.base_offset + header.last_offset_delta
            result.log = writable.log
            return result
        if verdict is not None:
            return result.refuse(verdict)
        return self._append(topic_partition, writable, batch, header, result)

    def _checked(
        self, writable: WritablePartition, records: memoryview | None
    ) -> tuple[memoryview, BatchHeader]:
        configs = writable.topic.configs
        batch, header = checked_batch(records, int(configs["max.message.bytes"]))
        now_ms = self.clock()
        check_timestamps(header, configs, now_ms)
        if writable.check is not None:
            check_records(writable.check, batch, now_ms)
        return batch, header

    def _producer_verdict(
        self, topic_partition: TopicPartition, header: BatchHeader, transactional_id: str | None
    ) -> ErrorCode | Duplicate | None:
        """The transaction's and the idempotence state's verdict on the batch: None to
        append it, an error to refuse it, Duplicate for a retry of a batch appended."""
        if header.is_transactional:
            code = self.transactions.check_produce(transactional_id, header, topic_partition)
            if code != ErrorCode.none:
                return code
        if not header.has_producer_id:  # a plain producer: no sequence, nothing to remember
            return None
        return self.producer_state(topic_partition).check(header)

    def _append(
        self,
        topic_partition: TopicPartition,
        writable: WritablePartition,
        records: memoryview,
        header: BatchHeader,
        result: AppendResult,
    ) -> AppendResult:
        batch: bytes | bytearray | memoryview = records
        if writable.topic.configs["message.timestamp.type"] == "LogAppendTime":
            result.log_append_time = self.clock()
            batch = bytearray(records)  # the CRC changes too
            set_log_append_time(batch, result.log_append_time)
        try:
            result.base_offset = writable.log.append(batch, header)
        except LogFailed as error:
            return result.refuse(ErrorCode.kafka_storage_error, str(error))
        if header.has_producer_id:
            self.producer_state(topic_partition).record(header, result.base_offset)
        if header.is_transactional:
            self.transactions.partition(topic_partition).on_append(header, result.base_offset)
        result.durable_offset = result.base_offset + header.last_offset_delta
        result.log = writable.log
        self.traffic.produced(topic_partition.topic, header.records_count, header.size)
        return result

    @staticmethod
    async def wait_durable(result: AppendResult) -> None:
        """Returns once what ``result`` appended is on disk (a failed log: the result
        becomes KAFKA_STORAGE_ERROR)."""
        if result.log is None or result.error_code != ErrorCode.none:
            return
        try:
            await result.log.wait_durable(result.durable_offset)
        except LogFailed as error:
            result.refuse(ErrorCode.kafka_storage_error, str(error))
        result.log_start_offset = result.log.log_start_offset

    async def delete_topic(self, name: str) -> None:
        """Deletes the stored topic ``name`` and what belongs to it (the module's
        docstring); raises TopicError."""
        for topic in (name, *self.resolver.stored_companions(name)):
            await self.topics.delete(topic)
            self.transactions.partition_states.forget_topic(topic)
        await drop_topic_offsets(self.groups, name, *self.resolver.derived_names(name))
        await self.resolver.forget_derived(name)
