"""``kshim produce``'s wire requests: Metadata v11 for a topic's partitions (creating the
topic when the broker auto-creates topics, as any producer's first Metadata does) and
Produce v9, through kshim's own blocking client. Both versions are served by kshim and
by Apache Kafka 3.x and 4.x. Everything goes to the bootstrap broker, the leader of every
partition in kshim and in a Kafka cluster of one broker.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.metadata.v11.response import MetadataResponse
from kio.schema.produce.v9.response import ProduceResponse

from kshim.client.admin_connection import ConnectionClient
from kshim.client.errors import error_name
from kshim.client.frames import encode_request
from kshim.client.partitioner import partition_for_key
from kshim.client.request_versions import METADATA, PRODUCE
from kshim.client.wire import WireConnection
from kshim.protocol.errors import ErrorCode
from kshim.protocol.records import Record, build_batch

NO_RESPONSE_ACKS = 0
PRODUCE_TIMEOUT_MS = 30_000
# A topic the Metadata request has just created has no leader for a moment in Kafka
# (LEADER_NOT_AVAILABLE); kshim's is ready at once. Asked again this often, this long.
METADATA_RETRY_S = 0.2
METADATA_WAIT_S = 10.0
# Records of one batch at most: a batch under the default max.message.bytes (1 MiB) for
# short lines; a longer one is refused by the broker with MESSAGE_TOO_LARGE, as Kafka does.
BATCH_BYTES = 512 * 1024
RETRIABLE_METADATA = {ErrorCode.leader_not_available, ErrorCode.unknown_topic_or_partition}


class WriteError(Exception):
    """The broker refused the topic or a batch, or answered something malformed."""


@dataclass(frozen=True, slots=True)
class Written:
    """Where a batch went: its partition and the offset of its first record (-1 when the
    producer asked for no answer, acks=0)."""

    partition: int
    base_offset: int
    count: int


class TopicWriter(ConnectionClient):
    """Writes records to one topic over one connection, batch by batch; a keyed record
    goes where Kafka's Java producer puts it, an unkeyed one to one partition per batch
    (Kafka's sticky partitioner, KIP-480), unless a partition is named."""

    error = WriteError

    def __init__(
        self,
        connection: WireConnection,
        topic: str,
        acks: int,
        partition: int | None = None,
        auto_create: bool = True,
    ) -> None:
        super().__init__(connection)
        self.topic = topic
        self._acks = acks
        self._partitions = self._wait_for_partitions(auto_create)
        if partition is not None and partition not in self._partitions:
            raise WriteError(f"topic {topic} has no partition {partition}")
        self._partition = partition

    def write(self, records: Sequence[Record]) -> list[Written]:
        """Sends ``records`` (in order within each partition), one Produce per batch;
        returns where each batch went. Raises WriteError when the broker refuses one
        (the ones before it are written)."""
        unkeyed = random.choice(self._partitions)
        by_partition: dict[int, list[Record]] = {}
        for record in records:
            by_partition.setdefault(self._place(record, unkeyed), []).append(record)
        written = []
        for partition, chosen in by_partition.items():
            for batch in _batches(chosen):
                written.append(self._produce(partition, batch))
        return written

    def _place(self, record: Record, unkeyed: int) -> int:
        if self._partition is not None:
            return self._partition
        if record.key is None:
            return unkeyed
        return self._partitions[partition_for_key(record.key, len(self._partitions))]

    def _produce(self, partition: int, records: list[Record]) -> Written:
        numbered = [
            Record(index, record.timestamp, record.key, record.value, record.headers)
            for index, record in enumerate(records)
        ]
        fields = {
            "transactional_id": None,
            "acks": self._acks,
            "timeout": PRODUCE_TIMEOUT_MS,
            "topic_data": [
                {
                    "name": self.topic,
                    "partition_data": [{"index": partition, "records": build_batch(numbered)}],
                }
            ],
        }
        if self._acks == NO_RESPONSE_ACKS:
            # No answer comes (Kafka's broker sends none for acks=0).
            api_key, version = PRODUCE
            correlation_id = self._connection.next_correlation_id()
            client_id = self._connection.client_id
            self._connection.send(
                encode_request(api_key, version, correlation_id, fields, client_id=client_id)
            )
            return Written(partition, -1, len(records))
        return self._answered(partition, len(records), self._call(ProduceResponse, PRODUCE, fields))

    def _answered(self, partition: int, count: int, response: ProduceResponse) -> Written:
        [topic] = response.responses
        [answer] = topic.partition_responses
        what = f"cannot produce to {self.topic}-{partition}"
        self._check(answer.error_code, what, answer.error_message)
        return Written(partition, int(answer.base_offset), count)

    def _wait_for_partitions(self, auto_create: bool) -> list[int]:
        deadline = time.monotonic() + METADATA_WAIT_S
        while True:
            request = {"topics": [{"name": self.topic}], "allow_auto_topic_creation": auto_create}
            [described] = self._call(MetadataResponse, METADATA, request).topics
            error = int(described.error_code)
            partitions = sorted(int(item.partition_index) for item in described.partitions)
            leaderless = any(int(item.leader_id) < 0 for item in described.partitions)
            if error == 0 and partitions and not leaderless:
                return partitions
            retriable = error in RETRIABLE_METADATA and auto_create
            if not (retriable or leaderless) or time.monotonic() >= deadline:
                name = error_name(error) if error else "no partition has a leader"
                raise WriteError(f"cannot write to topic {self.topic}: {name}")
            time.sleep(METADATA_RETRY_S)


def _batches(records: list[Record]) -> list[list[Record]]:
    """``records`` cut into runs of about BATCH_BYTES of keys and values each."""
    batches: list[list[Record]] = [[]]
    size = 0
    for record in records:
        length = len(record.key or b"") + len(record.value or b"")
        if batches[-1] and size + length > BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(record)
        size += length
    return batches
