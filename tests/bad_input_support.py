"""Helpers for the bad-input tests: data written before, health checks, raw requests.

Every bad-input test writes some records with kafka-python first, sends its bad
input, then checks with fresh kafka-python clients (assign and seek; kshim has no
consumer groups) that producing and consuming still work and that every record
is where it was. The raw requests here are well-formed; the tests break them.
"""

from __future__ import annotations

import contextlib
import ssl
import struct
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crc32c

from kshim.client.wire import WireConnection, connect
from kshim.protocol.headers import CORRELATION_ID
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.testing import FAILURE_MARKERS, BrokerProcess

with warnings.catch_warnings():
    # kafka-python 3.0.12 reads its schemas with importlib.resources.read_text, deprecated in
    # Python 3.11; the warning is attributed to importlib, so pyproject's kafka.* filter misses
    # it and warnings-as-errors would fail collection (same fix as tests/e2e/__init__.py).
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

# Wire constants (docs/protocol-notes.md §3.1 and §4.1; Errors.java).
PRODUCE, FETCH, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 3, 18, 19
NONE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 2, 3
MESSAGE_TOO_LARGE, INVALID_RECORD = 10, 87
DEFAULT_MAX_FRAME = 104_857_600  # socket.request.max.bytes
DEFAULT_MAX_MESSAGE = 1_048_588  # message.max.bytes

# Record batch v2 header offsets (DefaultRecordBatch.java), spelled out here so the
# test does not share the broker's own constants.
LENGTH_OFFSET = 8
MAGIC_OFFSET = 16
CRC_OFFSET = MAGIC_OFFSET + 1
ATTRIBUTES_OFFSET = CRC_OFFSET + 4
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + 2
RECORDS_COUNT_OFFSET = 57
BATCH_HEADER_SIZE = 61
CONTROL_FLAG = 0x20
TRANSACTIONAL_FLAG = 0x10

PROMPT_S = 2.0  # how soon a broken connection must be closed
WAIT_S = 10.0  # bound on anything a healthy broker does quickly
MEMORY_SLACK_BYTES = 32 << 20  # RSS growth allowed while refusing a huge frame
PARTITIONS = 2
LIMITED_MAX_FRAME = 4096
LIMITED_MAX_MESSAGE = 2000

RecordTuple = tuple[int, bytes | None, bytes | None]  # offset, key, value
# kafka-python settings for a client other than PLAINTEXT on the broker's port: its
# bootstrap_servers, security_protocol, ssl_* and sasl_* keyword arguments.
ClientSettings = Mapping[str, Any]


def resident_bytes(broker: BrokerProcess) -> int:
    """Returns the broker process's resident set size (Linux /proc)."""
    assert broker.process is not None
    status = Path(f"/proc/{broker.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def crash_report(broker: BrokerProcess) -> str:
    """Returns the broker log from its first crash marker on, else its tail."""
    log = broker.log_text()
    found = [log.index(marker) for marker in FAILURE_MARKERS if marker in log]
    return log[min(found) : min(found) + 2000] if found else log[-2000:]


# --- data written before the bad input, and the health check every test ends with ----


@dataclass
class Baseline:
    """A topic and every record it must hold, per partition, in offset order."""

    topic: str
    expected: dict[int, list[RecordTuple]] = field(default_factory=dict)

    def next_offset(self, partition: int) -> int:
        return len(self.expected[partition])


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str]) -> None:
    with connect(bootstrap) as conn:
        response = conn.call(
            CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "configs": [{"name": k, "value": v} for k, v in configs.items()],
                    }
                ],
                "timeout": 5000,
            },
        )
    assert [(t.name, t.error_code) for t in response.topics] == [(name, NONE)]


def make_baseline(broker: BrokerProcess, configs: dict[str, str] | None = None) -> Baseline:
    """Creates a topic and produces 3 records to partition 0 and 2 to partition 1."""
    baseline = Baseline(f"bad-input-{uuid.uuid4().hex[:12]}")
    create_topic(broker.bootstrap, baseline.topic, PARTITIONS, configs or {})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0)
    try:
        for partition, count in ((0, 3), (1, 2)):
            baseline.expected[partition] = []
            for index in range(count):
                key, value = f"key-{index}".encode(), f"before-{partition}-{index}".encode()
                sent = producer.send(baseline.topic, value, key, partition=partition)
                metadata = sent.get(timeout=WAIT_S)
                baseline.expected[partition].append((metadata.offset, key, value))
    finally:
        producer.close(timeout=5)
    for records in baseline.expected.values():
        assert [offset for offset, _, _ in records] == list(range(len(records)))
    return baseline


def consume_all(
    bootstrap: str, topic: str, counts: dict[int, int], client: ClientSettings | None = None
) -> dict[int, list[RecordTuple]]:
    """Reads each partition from offset 0 until ``counts`` records (or the deadline), over
    PLAINTEXT at ``bootstrap`` unless ``client`` says otherwise."""
    consumer = KafkaConsumer(
        **{"bootstrap_servers": bootstrap, **(client or {})},
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    partitions = [TopicPartition(topic, partition) for partition in counts]
    received: dict[int, list[RecordTuple]] = {partition: [] for partition in counts}
    try:
        consumer.assign(partitions)
        for topic_partition in partitions:
            consumer.seek(topic_partition, 0)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and any(
            len(received[p]) < count for p, count in counts.items()
        ):
            for topic_partition, records in consumer.poll(timeout_ms=200).items():
                received[topic_partition.partition] += [(r.offset, r.key, r.value) for r in records]
        end_offsets = consumer.end_offsets(partitions)
    finally:
        consumer.close()
    assert {tp.partition: offset for tp, offset in end_offsets.items()} == counts
    return received


def assert_healthy(
    broker: BrokerProcess, baseline: Baseline, client: ClientSettings | None = None
) -> None:
    """A fresh kafka-python producer and consumer work, and every expected record is intact.

    They connect over PLAINTEXT to the broker's port unless ``client`` says otherwise (a
    SASL_SSL listener's address and credentials, say)."""
    assert broker.is_running(), crash_report(broker)
    value = f"after-{uuid.uuid4().hex}".encode()
    producer = KafkaProducer(
        **{"bootstrap_servers": broker.bootstrap, **(client or {})}, acks="all", linger_ms=0
    )
    try:
        metadata = producer.send(baseline.topic, value, b"after", partition=0).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=5)
    assert metadata.offset == baseline.next_offset(0)
    baseline.expected[0].append((metadata.offset, b"after", value))
    counts = {partition: len(records) for partition, records in baseline.expected.items()}
    assert consume_all(broker.bootstrap, baseline.topic, counts, client) == baseline.expected


# --- raw requests ----------------------------------------------------------------------


PLAIN = BatchSpec()


def make_batch(values: Sequence[bytes], spec: BatchSpec = PLAIN) -> bytes:
    now_ms = time.time_ns() // 1_000_000
    return build_batch([Record(i, now_ms, b"raw", v) for i, v in enumerate(values)], spec)


def with_crc(batch: bytes | bytearray) -> bytes:
    """Returns the batch with its CRC-32C recomputed over attributes..end
    (docs/protocol-notes.md §4.1)."""
    fixed = bytearray(batch)
    struct.pack_into(">I", fixed, CRC_OFFSET, crc32c.crc32c(bytes(fixed[ATTRIBUTES_OFFSET:])))
    return bytes(fixed)


def patched(batch: bytes, offset: int, fmt: str, value: int, *, fix_crc: bool = False) -> bytes:
    result = bytearray(batch)
    struct.pack_into(fmt, result, offset, value)
    return with_crc(result) if fix_crc else bytes(result)


def produce_fields(partitions: dict[tuple[str, int], bytes], acks: int = -1) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), records in partitions.items():
        by_topic.setdefault(topic, []).append({"index": index, "records": records})
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 5000,
        "topic_data": [{"name": t, "partition_data": data} for t, data in by_topic.items()],
    }


def produce(
    bootstrap: str, partitions: dict[tuple[str, int], bytes], version: int = 9
) -> dict[tuple[str, int], tuple[int, int]]:
    """Sends one Produce; returns {(topic, partition): (error code, base offset)}."""
    with connect(bootstrap) as conn:
        response = conn.call(PRODUCE, version, produce_fields(partitions))
    return {
        (topic.name, partition.index): (partition.error_code, partition.base_offset)
        for topic in response.responses
        for partition in topic.partition_responses
    }


def api_versions_fallback(correlation_id: int) -> bytes:
    """The KIP-511 answer to an ApiVersions version above 4 (docs/protocol-notes.md §3.1)."""
    return (
        bytes.fromhex("00000010")
        + CORRELATION_ID.pack(correlation_id)
        + bytes.fromhex("0023 00000001 0012 0000 0004")  # error 35, [{18, 0, 4}]
    )


def answers_api_versions(bootstrap: str) -> bool:
    """True when a new connection gets an ApiVersions answer (the broker is alive)."""
    try:
        with connect(bootstrap, WAIT_S) as conn:
            return bool(conn.call(API_VERSIONS, 0).error_code == NONE)
    except OSError:  # refused, reset, closed (ConnectionClosedError) or timed out
        return False


def send_to_a_closing_broker(conn: WireConnection, data: bytes) -> None:
    """Sends ``data`` to a broker that may close the connection part way through it.

    A broker closes as soon as it reads a frame size over its limit, without reading the
    rest (Kafka's NetworkReceive does the same). Closing a socket with unread bytes sends
    RST (RFC 2525 §2.17), so a large write can fail part way; that failure is the close
    under test, which assert_closed_without_answer then checks.
    """
    with contextlib.suppress(ConnectionResetError, BrokenPipeError, ssl.SSLEOFError):
        conn.send(data)


def assert_closed_without_answer(conn: WireConnection) -> float:
    """Asserts the broker closes ``conn`` promptly and sends nothing; returns the wait."""
    start = time.monotonic()
    assert conn.wait_closed(PROMPT_S) == b""
    return time.monotonic() - start


def flip_last_byte(batch: bytes) -> bytes:
    return batch[:-1] + bytes([batch[-1] ^ 0xFF])


def batch_of_size(size: int) -> tuple[bytes, bytes]:
    """Returns a one-record batch exactly ``size`` bytes long, and its record's value."""
    overhead = len(make_batch([b""]))
    for value_length in range(size - overhead - 8, size - overhead + 1):
        value = b"x" * value_length
        batch = make_batch([value])
        if len(batch) == size:
            return batch, value
    raise AssertionError(f"no one-record batch of exactly {size} bytes")
