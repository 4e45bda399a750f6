"""aiokafka 0.14: old non-flexible versions only (ApiVersions v0, Produce v7, Fetch v11,
ListOffsets v3, InitProducerId v0, JoinGroup v5; docs/protocol-notes.md §0.2).

Each call runs its own event loop (``asyncio.run``), so scenarios stay synchronous.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from compat_tests.clients import (
    LINGER_MS,
    REQUEST_TIMEOUT_MS,
    WAIT_S,
    GroupRun,
    GroupView,
    decode_assignment,
    transaction_slices,
)
from tests.e2e.client_helpers import (
    ConsumedRecord,
    Deadline,
    SampleRecord,
    normalise_headers,
    to_bytes,
)

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T], timeout_s: float = 3 * WAIT_S) -> T:
    """Runs ``coroutine`` on a fresh event loop, bounded by ``timeout_s``."""

    async def bounded() -> T:
        async with asyncio.timeout(timeout_s):
            return await coroutine

    return asyncio.run(bounded())


def from_record(record: Any) -> ConsumedRecord:
    return ConsumedRecord(
        record.offset,
        to_bytes(record.key),
        to_bytes(record.value),
        normalise_headers(record.headers),
        record.timestamp,
    )


@contextlib.asynccontextmanager
async def admin_client(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def consumer_for(bootstrap: str, *topics: str, **config: Any) -> AsyncIterator[Any]:
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        **{"group_id": None, **config},
    )
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.stop()


async def send_all(
    producer: AIOKafkaProducer, topic: str, records: Sequence[SampleRecord], partition: int
) -> list[int | None]:
    futures = [
        await producer.send(
            topic,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
            partition=partition,
            timestamp_ms=record.timestamp_ms,
        )
        for record in records
    ]
    await producer.flush()
    results = await asyncio.gather(*futures)
    return [None if metadata is None else metadata.offset for metadata in results]


class AiokafkaDriver:
    name = "aiokafka"

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
        async def main() -> list[int | None]:
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                enable_idempotence=idempotent,
                compression_type=None if compression == "none" else compression,
                linger_ms=LINGER_MS,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
            )
            await producer.start()
            try:
                offsets: list[int | None] = []
                for batch in batches:
                    offsets += await send_all(producer, topic, batch, partition)
                return offsets
            finally:
                await producer.stop()

        return run(main())

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

        async def main() -> list[ConsumedRecord]:
            tp = TopicPartition(topic, partition)
            received: list[ConsumedRecord] = []
            async with consumer_for(bootstrap, isolation_level=isolation) as consumer:
                consumer.assign([tp])
                if start is None:
                    await consumer.seek_to_beginning(tp)
                else:
                    consumer.seek(tp, start)
                deadline = Deadline(wait_s)
                while len(received) < count and not deadline.expired():
                    batches = await consumer.getmany(
                        tp,
                        timeout_ms=int(deadline.poll_timeout_s() * 1000),
                        max_records=count - len(received),
                    )
                    received += [from_record(record) for record in batches.get(tp, [])]
            return received

        return run(main(), wait_s + WAIT_S)

    def watermarks(self, bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
        async def main() -> tuple[int, int]:
            tp = TopicPartition(topic, partition)
            async with consumer_for(bootstrap) as consumer:
                earliest = await consumer.beginning_offsets([tp])
                latest = await consumer.end_offsets([tp])
            return earliest[tp], latest[tp]

        return run(main())

    def offset_for_time(
        self, bootstrap: str, topic: str, timestamp_ms: int, partition: int = 0
    ) -> tuple[int, int] | None:
        async def main() -> tuple[int, int] | None:
            tp = TopicPartition(topic, partition)
            async with consumer_for(bootstrap) as consumer:
                answer = (await consumer.offsets_for_times({tp: timestamp_ms}))[tp]
            return None if answer is None else (answer.offset, answer.timestamp)

        return run(main())

    def produce_transactions(
        self, bootstrap: str, topic: str, records: Sequence[SampleRecord], transactional_id: str
    ) -> list[int]:
        async def main() -> list[int]:
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                transactional_id=transactional_id,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
            )
            await producer.start()
            offsets: list[int] = []
            try:
                for commit, batch in transaction_slices(records):
                    await producer.begin_transaction()
                    sent = await send_all(producer, topic, batch, 0)
                    offsets += [offset for offset in sent if offset is not None]
                    if commit:
                        await producer.commit_transaction()
                    else:
                        await producer.abort_transaction()
            finally:
                await producer.stop()
            return offsets

        return run(main())

    def join_group(self, bootstrap: str, topic: str, group: str, count: int) -> GroupRun:
        member = GroupRun(client_id=f"compat-aio-{uuid.uuid4().hex[:6]}")
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
        async def main() -> int:
            async with admin_client(bootstrap) as admin:
                spec = NewTopic(topic, partitions, 1, topic_configs=dict(configs or {}))
                response = await admin.create_topics([spec])
            [answer] = response.to_object()["topic_errors"]
            assert answer["topic"] == topic
            return int(answer["error_code"])

        return run(main())

    def delete_topic(self, bootstrap: str, topic: str) -> int:
        async def main() -> int:
            async with admin_client(bootstrap) as admin:
                response = await admin.delete_topics([topic])
            [answer] = response.to_object()["topic_error_codes"]
            return int(answer["error_code"])

        return run(main())

    def list_topics(self, bootstrap: str) -> set[str]:
        async def main() -> set[str]:
            async with admin_client(bootstrap) as admin:
                return set(await admin.list_topics())

        return run(main())

    def partitions(self, bootstrap: str, topic: str) -> list[int]:
        async def main() -> list[int]:
            async with admin_client(bootstrap) as admin:
                [description] = await admin.describe_topics([topic])
            return sorted(p["partition"] for p in description["partitions"])

        return run(main())

    def topic_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        async def main() -> dict[str, str]:
            resource = ConfigResource(ConfigResourceType.TOPIC, topic)
            async with admin_client(bootstrap) as admin:
                [response] = await admin.describe_configs([resource])
            [described] = response.to_object()["resources"]
            assert (described["error_code"], described["resource_name"]) == (0, topic)
            return {
                entry["config_names"]: entry["config_value"]
                for entry in described["config_entries"]
            }

        return run(main())

    def set_topic_config(self, bootstrap: str, topic: str, name: str, value: str) -> None:
        """Legacy AlterConfigs, the only kind aiokafka has: it replaces all overrides."""

        async def main() -> None:
            resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={name: value})
            async with admin_client(bootstrap) as admin:
                [response] = await admin.alter_configs([resource])
            answers = [
                (answer["error_code"], answer["resource_name"])
                for answer in response.to_object()["resources"]
            ]
            assert answers == [(0, topic)], answers

        run(main())

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        async def main() -> None:
            async with admin_client(bootstrap) as admin:
                response = await admin.create_partitions({topic: NewPartitions(total)})
            errors = [answer[1] for answer in response.topic_errors]
            assert errors == [0], response

        run(main())

    def delete_records(self, bootstrap: str, topic: str, before: int) -> int:
        async def main() -> int:
            tp = TopicPartition(topic, 0)
            async with admin_client(bootstrap) as admin:
                answer = await admin.delete_records({tp: RecordsToDelete(before)})
            return int(answer[tp])

        return run(main())

    def list_groups(self, bootstrap: str) -> dict[str, str]:
        async def main() -> dict[str, str]:
            async with admin_client(bootstrap) as admin:
                groups = await admin.list_consumer_groups()
            return {group[0]: group[1] for group in groups}

        return run(main())

    def describe_group(self, bootstrap: str, group: str) -> GroupView:
        async def main() -> GroupView:
            async with admin_client(bootstrap) as admin:
                [response] = await admin.describe_consumer_groups([group])
            [described] = response.to_object()["groups"]
            assert described["error_code"] == 0, described
            members = tuple(
                sorted(
                    (member["client_id"], decode_assignment(member["member_assignment"]))
                    for member in described["members"]
                )
            )
            return GroupView(
                described["state"], described["protocol_type"], described["protocol"], members
            )

        return run(main())

    def committed(self, bootstrap: str, group: str, topic: str) -> dict[int, int]:
        async def main() -> dict[int, int]:
            async with admin_client(bootstrap) as admin:
                offsets = await admin.list_consumer_group_offsets(group)
            return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}

        return run(main())


def _group_member(member: GroupRun, bootstrap: str, topic: str, group: str, count: int) -> None:
    async def main() -> None:
        async with consumer_for(
            bootstrap, topic, group_id=group, client_id=member.client_id
        ) as consumer:
            deadline = Deadline(3 * WAIT_S)
            while len(member.records) < count and not deadline.expired():
                batches = await consumer.getmany(timeout_ms=500)
                for batch in batches.values():
                    member.records += [from_record(record) for record in batch]
            await consumer.commit()
            member.ready.set()
            # Heartbeats keep running on this loop while a worker thread waits for release.
            await asyncio.get_running_loop().run_in_executor(None, member.release.wait)

    try:
        run(main(), 15 * WAIT_S)
    except BaseException as error:
        member.error = error
    finally:
        member.ready.set()
