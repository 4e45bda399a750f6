"""kafka-python 3.0.12: ApiVersions v4, Produce v9, Fetch v12, ListOffsets v9 (against kshim).

Its producer is idempotent by default; the driver turns that off unless asked, so that
"plain" and "idempotent" are different scenarios.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from compat_tests.clients import (
    LINGER_MS,
    REQUEST_TIMEOUT_MS,
    WAIT_S,
    GroupRun,
    GroupView,
    transaction_slices,
)
from tests.e2e.client_helpers import (
    ConsumedRecord,
    Deadline,
    SampleRecord,
    normalise_headers,
    to_bytes,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, NewPartitions, NewTopic


def from_record(record: Any) -> ConsumedRecord:
    return ConsumedRecord(
        record.offset,
        to_bytes(record.key),
        to_bytes(record.value),
        normalise_headers(record.headers),
        record.timestamp,
    )


@contextlib.contextmanager
def admin_client(bootstrap: str) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    try:
        yield admin
    finally:
        admin.close()


@contextlib.contextmanager
def consumer_for(bootstrap: str, **config: Any) -> Iterator[KafkaConsumer]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS + 1000,
        reconnect_backoff_max_ms=500,
        **{"group_id": None, **config},
    )
    try:
        yield consumer
    finally:
        consumer.close()


def send_all(
    producer: KafkaProducer, topic: str, records: Sequence[SampleRecord], partition: int
) -> list[Any]:
    return [
        producer.send(
            topic,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
            partition=partition,
            timestamp_ms=record.timestamp_ms,
        )
        for record in records
    ]


class KafkaPythonDriver:
    name = "kafka-python"

    def produce(
        self,
        bootstrap: str,
        topic: str,
        batches: Sequence[Sequence[SampleRecord]],
        *,
        idempotent: bool = False,
        compression: str = "none",
        partition: int = 0,
    ) -> list[int | None]:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            enable_idempotence=idempotent,
            compression_type=None if compression == "none" else compression,
            linger_ms=LINGER_MS,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            max_block_ms=REQUEST_TIMEOUT_MS,
            delivery_timeout_ms=int(WAIT_S * 1000),
            reconnect_backoff_max_ms=500,
        )
        offsets: list[int | None] = []
        try:
            for batch in batches:
                futures = send_all(producer, topic, batch, partition)
                producer.flush(timeout=WAIT_S)
                offsets += [future.get(timeout=WAIT_S).offset for future in futures]
        finally:
            producer.close(timeout=5)
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
        tp = TopicPartition(topic, partition)
        received: list[ConsumedRecord] = []
        with consumer_for(bootstrap, isolation_level=isolation) as consumer:
            consumer.assign([tp])
            if start is None:
                consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, start)
            deadline = Deadline(wait_s)
            while len(received) < count and not deadline.expired():
                batches = consumer.poll(
                    timeout_ms=int(deadline.poll_timeout_s() * 1000),
                    max_records=count - len(received),
                )
                received += [from_record(record) for record in batches.get(tp, [])]
        return received

    def watermarks(self, bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
        tp = TopicPartition(topic, partition)
        with consumer_for(bootstrap) as consumer:
            return consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]

    def offset_for_time(
        self, bootstrap: str, topic: str, timestamp_ms: int, partition: int = 0
    ) -> tuple[int, int] | None:
        tp = TopicPartition(topic, partition)
        with consumer_for(bootstrap) as consumer:
            answer = consumer.offsets_for_times({tp: timestamp_ms})[tp]
        return None if answer is None else (answer.offset, answer.timestamp)

    def produce_transactions(
        self, bootstrap: str, topic: str, records: Sequence[SampleRecord], transactional_id: str
    ) -> list[int]:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=transactional_id,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            max_block_ms=REQUEST_TIMEOUT_MS,
        )
        offsets: list[int] = []
        try:
            producer.init_transactions()
            for commit, batch in transaction_slices(records):
                producer.begin_transaction()
                futures = send_all(producer, topic, batch, 0)
                producer.flush(timeout=WAIT_S)
                offsets += [future.get(timeout=WAIT_S).offset for future in futures]
                if commit:
                    producer.commit_transaction()
                else:
                    producer.abort_transaction()
        finally:
            producer.close(timeout=5)
        return offsets

    def join_group(self, bootstrap: str, topic: str, group: str, count: int) -> GroupRun:
        run = GroupRun(client_id=f"compat-kp-{uuid.uuid4().hex[:6]}")
        run.thread = threading.Thread(
            target=_group_member, args=(run, bootstrap, topic, group, count), daemon=True
        )
        run.thread.start()
        return run

    # Admin -------------------------------------------------------------------------------

    def create_topic(
        self,
        bootstrap: str,
        topic: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
    ) -> int:
        """CreateTopics; returns the topic's error code."""
        with admin_client(bootstrap) as admin:
            spec = NewTopic(topic, partitions, 1, topic_configs=dict(configs or {}))
            result = admin.create_topics([spec], raise_errors=False)
        [answer] = result["topics"]
        assert answer["name"] == topic
        return int(answer["error_code"])

    def delete_topic(self, bootstrap: str, topic: str) -> int:
        with admin_client(bootstrap) as admin:
            result = admin.delete_topics([topic], raise_errors=False)
        [answer] = result["topics"]
        return int(answer["error_code"])

    def delete_topics(self, bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
        """One DeleteTopics for them all; returns each topic's error code."""
        with admin_client(bootstrap) as admin:
            result = admin.delete_topics(list(topics), raise_errors=False)
        return {answer["name"]: int(answer["error_code"]) for answer in result["topics"]}

    def list_topics(self, bootstrap: str) -> set[str]:
        with admin_client(bootstrap) as admin:
            return set(admin.list_topics())

    def partitions(self, bootstrap: str, topic: str) -> list[int]:
        with admin_client(bootstrap) as admin:
            [description] = admin.describe_topics([topic])
        return sorted(p["partition_index"] for p in description["partitions"])

    def topic_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        """Every config of the topic: {name: value}."""
        with admin_client(bootstrap) as admin:
            described = admin.describe_configs(
                [ConfigResource("TOPIC", topic)], config_filter="all"
            )
        return {name: entry["value"] for name, entry in described["topic"][topic].items()}

    def set_topic_config(self, bootstrap: str, topic: str, name: str, value: str) -> None:
        """IncrementalAlterConfigs SET of one key."""
        with admin_client(bootstrap) as admin:
            change = ConfigResource("TOPIC", topic, {name: value})
            result = admin.alter_configs([change], incremental=True)
        assert result == {"topic": {topic: "OK"}}, result

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        with admin_client(bootstrap) as admin:
            admin.create_partitions({topic: NewPartitions(total)})

    def delete_records(self, bootstrap: str, topic: str, before: int) -> int:
        """DeleteRecords on partition 0; returns the new low watermark."""
        tp = TopicPartition(topic, 0)
        with admin_client(bootstrap) as admin:
            answer = admin.delete_records({tp: before})
        return int(answer[tp]["low_watermark"])

    def list_groups(self, bootstrap: str) -> dict[str, str]:
        """{group id: protocol type} of every group."""
        with admin_client(bootstrap) as admin:
            return {group["group_id"]: group["protocol_type"] for group in admin.list_groups()}

    def describe_group(self, bootstrap: str, group: str) -> GroupView:
        with admin_client(bootstrap) as admin:
            described = admin.describe_groups([group])[group]
        members = []
        for member in described["members"]:
            assignment = member["member_assignment"]
            partitions = tuple(
                (entry["topic"], tuple(sorted(entry["partitions"])))
                for entry in assignment["assigned_partitions"]
            )
            members.append((member["client_id"], partitions))
        return GroupView(
            described["group_state"],
            described["protocol_type"],
            described["protocol_data"],
            tuple(sorted(members)),
        )

    def committed(self, bootstrap: str, group: str, topic: str) -> dict[int, int]:
        with admin_client(bootstrap) as admin:
            offsets = admin.list_group_offsets({group: None})[group]
        return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}


def _group_member(run: GroupRun, bootstrap: str, topic: str, group: str, count: int) -> None:
    try:
        with consumer_for(bootstrap, group_id=group, client_id=run.client_id) as consumer:
            consumer.subscribe([topic])
            deadline = Deadline(3 * WAIT_S)
            while len(run.records) < count and not deadline.expired():
                for batch in consumer.poll(timeout_ms=500).values():
                    run.records += [from_record(record) for record in batch]
            consumer.commit()
            run.ready.set()
            while not run.release.wait(0.2):
                consumer.poll(timeout_ms=100)
    except BaseException as error:
        run.error = error
    finally:
        run.ready.set()
