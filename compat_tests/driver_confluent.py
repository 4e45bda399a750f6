"""confluent-kafka 2.16 (librdkafka 2.16): ApiVersions v3, Produce v10, Fetch up to v16,
ListOffsets v7, and FindCoordinator even in assign mode (docs/protocol-notes.md §1.3).

librdkafka defaults to read_committed; the driver asks for the isolation explicitly.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka import Consumer as RawConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from compat_tests.clients import LINGER_MS, WAIT_S, GroupRun, GroupView, transaction_slices
from tests.e2e.client_helpers import ConsumedRecord, Deadline, SampleRecord, normalise_headers

NO_OFFSET = -1


def from_message(message: Message) -> ConsumedRecord:
    _, timestamp = message.timestamp()
    offset, headers = message.offset(), message.headers()
    assert offset is not None
    assert not isinstance(headers, dict)
    return ConsumedRecord(
        offset, message.key(), message.value(), normalise_headers(headers), timestamp
    )


def consumer_for(bootstrap: str, **config: Any) -> Any:
    return RawConsumer(
        {
            "bootstrap.servers": bootstrap,
            # librdkafka needs a group id even in assign mode.
            "group.id": f"compat-assign-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            **config,
        }
    )


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def produce_messages(
    producer: Producer, topic: str, records: Sequence[SampleRecord], partition: int
) -> list[Any]:
    """Produces and flushes; returns (error, offset) per record, in order."""
    reports: dict[int, tuple[Any, int | None]] = {}

    def on_delivery(index: int) -> Any:
        def report(error: Any, message: Message) -> None:
            reports[index] = (error, message.offset())

        return report

    for index, record in enumerate(records):
        producer.produce(
            topic,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
            partition=partition,
            timestamp=record.timestamp_ms,
            on_delivery=on_delivery(index),
        )
    assert producer.flush(WAIT_S) == 0, "messages still queued after the flush timeout"
    return [reports[index] for index in range(len(records))]


def result(future: Any) -> Any:
    return future.result(timeout=WAIT_S)


class ConfluentDriver:
    """librdkafka's AdminClient completes its futures only while it is alive, so the driver
    keeps one per bootstrap address for its own lifetime."""

    name = "confluent"

    def __init__(self) -> None:
        self._admins: dict[str, AdminClient] = {}

    def _admin(self, bootstrap: str) -> AdminClient:
        if bootstrap not in self._admins:
            self._admins[bootstrap] = admin_client(bootstrap)
        return self._admins[bootstrap]

    def produce(
        self,
        bootstrap: str,
        topic: str,
        batches: Sequence[Sequence[SampleRecord]],
        *,
        idempotent: bool = False,
        compression: str = "none",
        partition: int = 0,
        settings: Mapping[str, Any] | None = None,
    ) -> list[int | None]:
        """``settings`` are extra librdkafka producer properties."""
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": LINGER_MS,
                "enable.idempotence": idempotent,
                "compression.type": compression,
                "message.timeout.ms": int(WAIT_S * 1000),
                **dict(settings or {}),
            }
        )
        offsets: list[int | None] = []
        for batch in batches:
            reports = produce_messages(producer, topic, batch, partition)
            errors = [error for error, _ in reports if error is not None]
            if errors:
                raise KafkaException(errors[0])
            offsets += [offset for _, offset in reports]
        return offsets

    def consume(
        self,
        bootstrap: str,
        topic: str,
        count: int,
        *,
        start: int | None = None,
        read_committed: bool = False,
        partition: int = 0,
        wait_s: float = WAIT_S,
    ) -> list[ConsumedRecord]:
        isolation = "read_committed" if read_committed else "read_uncommitted"
        consumer = consumer_for(bootstrap, **{"isolation.level": isolation})
        received: list[ConsumedRecord] = []
        try:
            offset = OFFSET_BEGINNING if start is None else start
            consumer.assign([TopicPartition(topic, partition, offset)])
            deadline = Deadline(wait_s)
            while len(received) < count and not deadline.expired():
                message = consumer.poll(deadline.poll_timeout_s())
                if message is None:
                    continue
                if message.error() is not None:
                    raise KafkaException(message.error())
                received.append(from_message(message))
        finally:
            consumer.close()
        return received

    def watermarks(self, bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
        consumer = consumer_for(bootstrap)
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=WAIT_S, cached=False
            )
        finally:
            consumer.close()
        return low, high

    def offset_for_time(
        self, bootstrap: str, topic: str, timestamp_ms: int, partition: int = 0
    ) -> tuple[int, int] | None:
        """Through the admin ListOffsets, the one librdkafka API that returns the timestamp."""
        tp = TopicPartition(topic, partition)
        [future] = (
            self._admin(bootstrap)
            .list_offsets({tp: OffsetSpec.for_timestamp(timestamp_ms)}, request_timeout=WAIT_S)
            .values()
        )
        answer = result(future)
        return None if answer.offset == NO_OFFSET else (answer.offset, answer.timestamp)

    def produce_transactions(
        self, bootstrap: str, topic: str, records: Sequence[SampleRecord], transactional_id: str
    ) -> list[int]:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
        producer.init_transactions(WAIT_S)
        offsets: list[int] = []
        for commit, batch in transaction_slices(records):
            producer.begin_transaction()
            reports = produce_messages(producer, topic, batch, 0)
            assert [error for error, _ in reports] == [None] * len(batch), reports
            offsets += [offset for _, offset in reports if offset is not None]
            if commit:
                producer.commit_transaction(WAIT_S)
            else:
                producer.abort_transaction(WAIT_S)
        return offsets

    def join_group(self, bootstrap: str, topic: str, group: str, count: int) -> GroupRun:
        member = GroupRun(client_id=f"compat-ck-{uuid.uuid4().hex[:6]}")
        member.thread = threading.Thread(
            target=_group_member, args=(member, bootstrap, topic, group, count), daemon=True
        )
        member.thread.start()
        return member

    # Admin -------------------------------------------------------------------------------

    def create_topic(
        self,
        bootstrap: str,
        topic: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
    ) -> int:
        spec = NewTopic(topic, num_partitions=partitions, replication_factor=1)
        spec.config = dict(configs or {})
        futures = self._admin(bootstrap).create_topics([spec], request_timeout=WAIT_S)
        try:
            result(futures[topic])
        except KafkaException as error:
            return int(error.args[0].code())
        return 0

    def delete_topic(self, bootstrap: str, topic: str) -> int:
        futures = self._admin(bootstrap).delete_topics([topic], request_timeout=WAIT_S)
        try:
            result(futures[topic])
        except KafkaException as error:
            return int(error.args[0].code())
        return 0

    def list_topics(self, bootstrap: str) -> set[str]:
        return set(self._admin(bootstrap).list_topics(timeout=WAIT_S).topics)

    def partitions(self, bootstrap: str, topic: str) -> list[int]:
        topics = self._admin(bootstrap).list_topics(topic, timeout=WAIT_S).topics
        return sorted(topics[topic].partitions)

    def topic_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        [future] = self._admin(bootstrap).describe_configs([resource]).values()
        return {name: entry.value for name, entry in result(future).items()}

    def set_topic_config(self, bootstrap: str, topic: str, name: str, value: str) -> None:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
        [future] = self._admin(bootstrap).incremental_alter_configs([resource]).values()
        result(future)

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        [future] = (
            self._admin(bootstrap)
            .create_partitions([NewPartitions(topic, total)], request_timeout=WAIT_S)
            .values()
        )
        assert result(future) is None

    def delete_records(self, bootstrap: str, topic: str, before: int) -> int:
        [future] = (
            self._admin(bootstrap)
            .delete_records([TopicPartition(topic, 0, before)], request_timeout=WAIT_S)
            .values()
        )
        return int(result(future).low_watermark)

    def list_groups(self, bootstrap: str) -> dict[str, str]:
        """{group id: "consumer" or "" (librdkafka reports is_simple_consumer_group)}."""
        listing = result(self._admin(bootstrap).list_consumer_groups(request_timeout=WAIT_S))
        assert listing.errors == [], listing.errors
        return {
            group.group_id: "" if group.is_simple_consumer_group else "consumer"
            for group in listing.valid
        }

    def describe_group(self, bootstrap: str, group: str) -> GroupView:
        futures = self._admin(bootstrap).describe_consumer_groups([group], request_timeout=WAIT_S)
        described = result(futures[group])
        members = tuple(
            sorted(
                (
                    member.client_id,
                    _topic_partitions(member.assignment.topic_partitions),
                )
                for member in described.members
            )
        )
        state = described.state.name.title().replace("_", "")
        protocol_type = "" if described.is_simple_consumer_group else "consumer"
        return GroupView(state, protocol_type, described.partition_assignor, members)

    def committed(self, bootstrap: str, group: str, topic: str) -> dict[int, int]:
        request = ConsumerGroupTopicPartitions(group)
        futures = self._admin(bootstrap).list_consumer_group_offsets(
            [request], request_timeout=WAIT_S
        )
        answer = result(futures[group])
        return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.topic == topic}


def _topic_partitions(partitions: Sequence[Any]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple(sorted((topic, tuple(sorted(parts))) for topic, parts in by_topic.items()))


def _group_member(member: GroupRun, bootstrap: str, topic: str, group: str, count: int) -> None:
    consumer = None
    try:
        consumer = RawConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": member.client_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic])
        deadline = Deadline(3 * WAIT_S)
        while len(member.records) < count and not deadline.expired():
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                raise KafkaException(message.error())
            member.records.append(from_message(message))
        consumer.commit(asynchronous=False)
        member.ready.set()
        while not member.release.is_set():
            consumer.poll(0.1)
    except BaseException as error:
        member.error = error
    finally:
        if consumer is not None:
            consumer.close()
        member.ready.set()
