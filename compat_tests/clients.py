"""What the client drivers share: one small synchronous API over each client library.

Every driver (``driver_*.py``, chosen by name in ``drivers.py``) produces, consumes
(assign + seek), reads watermarks and offsets by timestamp in the same shapes
(``SampleRecord`` in, ``ConsumedRecord`` out, from tests/e2e), so a scenario is written once
and parametrised by client; what differs between clients stays inside the driver. Admin and
group operations return plain normalised values too. Every wait is bounded.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest

from tests.e2e.client_helpers import SampleRecord, timestamp_of

CLIENT_NAMES = ("kafka-python", "aiokafka", "confluent", "kcat")
# librdkafka, kafka-python and aiokafka differ in how they spell "no compression".
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
REQUEST_TIMEOUT_MS = 10_000
WAIT_S = 20.0
SHORT_WAIT_S = 1.0  # how long "nothing arrives" is watched for (fetches long-poll 0.5 s)
LINGER_MS = 20

# (commit?, number of records) per transaction in the transactional scenarios. Markers take
# one offset each: data 0-2, COMMIT 3, aborted data 4-5, ABORT 6, data 7, COMMIT 8.
TRANSACTION_STEPS: tuple[tuple[bool, int], ...] = ((True, 3), (False, 2), (True, 1))
COMMITTED_OFFSETS = (0, 1, 2, 7)
ALL_DATA_OFFSETS = (0, 1, 2, 4, 5, 7)
TRANSACTIONAL_END_OFFSET = 9


@dataclass(frozen=True, slots=True)
class GroupView:
    """A consumer group as an admin client describes it, normalised across clients."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[tuple[str, tuple[tuple[str, tuple[int, ...]], ...]], ...]  # client id, tps


@dataclass
class GroupRun:
    """A group member running in its own thread until released (see Driver.join_group)."""

    client_id: str
    ready: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    records: list[Any] = field(default_factory=list)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def finish(self, timeout_s: float = WAIT_S) -> None:
        """Releases the member (it commits nothing more, then closes) and joins its thread."""
        self.release.set()
        if self.thread is not None:
            self.thread.join(timeout_s)
            assert not self.thread.is_alive(), f"{self.client_id} did not close in {timeout_s} s"


class Driver(Protocol):
    name: str

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
        """Sends each batch and flushes it; returns each record's offset."""
        ...

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
    ) -> list[Any]:
        """assign + seek (None: beginning); returns up to ``count`` ConsumedRecords."""
        ...

    def watermarks(self, bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
        """(earliest, latest) offsets as ListOffsets answers them."""
        ...

    def offset_for_time(
        self, bootstrap: str, topic: str, timestamp_ms: int, partition: int = 0
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp_ms``, or None."""
        ...


class AdminDriver(Driver, Protocol):
    """What the clients with an admin API (all but kcat) also do: transactions, group
    members and admin operations."""

    def produce_transactions(
        self, bootstrap: str, topic: str, records: Sequence[SampleRecord], transactional_id: str
    ) -> list[int]:
        """Runs TRANSACTION_STEPS over ``records``; returns every data record's offset."""
        ...

    def join_group(self, bootstrap: str, topic: str, group: str, count: int) -> GroupRun:
        """Starts a subscribed member that consumes ``count`` records, commits, and waits."""
        ...

    def create_topic(
        self,
        bootstrap: str,
        topic: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
    ) -> int:
        """CreateTopics; returns the topic's error code."""
        ...

    def delete_topic(self, bootstrap: str, topic: str) -> int:
        """DeleteTopics; returns the topic's error code."""
        ...

    def list_topics(self, bootstrap: str) -> set[str]: ...

    def partitions(self, bootstrap: str, topic: str) -> list[int]: ...

    def topic_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        """Every config of the topic: {name: value}."""
        ...

    def set_topic_config(self, bootstrap: str, topic: str, name: str, value: str) -> None: ...

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None: ...

    def delete_records(self, bootstrap: str, topic: str, before: int) -> int:
        """DeleteRecords on partition 0; returns the new low watermark."""
        ...

    def list_groups(self, bootstrap: str) -> dict[str, str]:
        """{group id: protocol type} of every group."""
        ...

    def describe_group(self, bootstrap: str, group: str) -> GroupView: ...

    def committed(self, bootstrap: str, group: str, topic: str) -> dict[int, int]:
        """{partition: committed offset} of ``group`` on ``topic``."""
        ...


def transaction_slices(records: Sequence[SampleRecord]) -> list[tuple[bool, list[SampleRecord]]]:
    """``records`` cut into TRANSACTION_STEPS: (commit?, the records of that transaction)."""
    slices, position = [], 0
    for commit, count in TRANSACTION_STEPS:
        slices.append((commit, list(records[position : position + count])))
        position += count
    assert position == len(records), f"need {position} records, got {len(records)}"
    return slices


def text_records(count: int, with_nulls: bool = True) -> list[SampleRecord]:
    """Printable records every client (kcat's line format included) can produce and print.

    All share the same headers, since kcat sets headers for a whole run; with ``with_nulls``
    record 1 has a null key and record 2 a null value (a tombstone).
    """
    headers = (("origin", b"compat"), ("trace", b"t-1"))
    records = []
    for index in range(count):
        key: bytes | None = f"key-{index}".encode()
        value: bytes | None = f"value-{index}".encode()
        if with_nulls and index == 1:
            key = None
        if with_nulls and index == 2:
            value = None
        records.append(SampleRecord(key, value, headers, timestamp_of(index)))
    return records


def client_params(*names: str) -> list[Any]:
    """pytest.param per client, each tagged with its ``client_*`` marker."""
    return [
        pytest.param(name, id=name, marks=getattr(pytest.mark, marker_of(name))) for name in names
    ]


def admin_client_params() -> list[Any]:
    """The clients with an admin API."""
    return client_params("kafka-python", "aiokafka", "confluent")


def marker_of(client: str) -> str:
    return "client_" + client.replace("-", "_")


def decode_assignment(data: bytes) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The (topic, partitions) pairs of a ConsumerProtocolAssignment (any version).

    Layout (Kafka's ConsumerProtocolAssignment.json): int16 version, int32 topic count,
    then per topic an int16-length name and an int32 count of int32 partitions; user data
    and, from v1, nothing else the suite needs follow.
    """
    if not data:
        return ()
    position = 2  # version
    (topic_count,) = struct.unpack_from(">i", data, position)
    position += 4
    topics = []
    for _ in range(topic_count):
        (name_length,) = struct.unpack_from(">h", data, position)
        position += 2
        name = data[position : position + name_length].decode()
        position += name_length
        (partition_count,) = struct.unpack_from(">i", data, position)
        position += 4
        partitions = struct.unpack_from(f">{partition_count}i", data, position)
        position += 4 * partition_count
        topics.append((name, tuple(sorted(partitions))))
    return tuple(sorted(topics))
