"""kcat (librdkafka) against a real ``kshim serve``, and kcat against kafka-python.

kcat is the librdkafka path: its producer compresses whole batches with the chosen codec, and
its consumer fetches with isolation read_committed (librdkafka's default,
docs/protocol-notes.md §0.5), so LastStableOffset is on the main path. The Debian kcat bundles
an old librdkafka (2.0.x), whose feature detection needs the low Produce versions advertised
(docs/protocol-notes.md §1.6). Records are produced and read back with kafka-python in
assign mode, never through consumer groups. Skips when kcat is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
import warnings
from dataclasses import dataclass
from typing import Any

import pytest

from kshim.client.wire import connect
from kshim.testing import BrokerProcess, fetch_fields

with warnings.catch_warnings():
    # kafka-python 3.0.12 loads its message schemas at import time with
    # importlib.resources.read_text, deprecated in Python 3.11; the warning is attributed
    # to importlib, so the project's "ignore kafka.*" filter misses it.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.record import MemoryRecords

KCAT = shutil.which("kcat")

pytestmark = pytest.mark.skipif(
    KCAT is None, reason="kcat is not installed (apt-get install kcat); these tests drive it"
)

KCAT_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_MS = 15_000
CLIENT_TIMEOUT_S = CLIENT_TIMEOUT_MS / 1000
# kcat -C line format: key | value | headers | partition | offset | key length | value length.
# The lengths tell null (-1) from empty (0), which %k and %s print the same way.
CONSUME_FORMAT = "%k|%s|%h|%p|%o|%K|%S\\n"
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

Header = tuple[str, bytes]


@dataclass(frozen=True, slots=True)
class Consumed:
    """One record as a consumer returned it, in the shape every test compares."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def run_kcat(arguments: list[str], stdin: bytes = b"") -> str:
    """Runs kcat to completion; returns its stdout, or fails the test with its stderr."""
    assert KCAT is not None
    completed = subprocess.run(
        [KCAT, *arguments], input=stdin, capture_output=True, timeout=KCAT_TIMEOUT_S, check=False
    )
    stderr = completed.stderr.decode(errors="replace")
    assert completed.returncode == 0, f"kcat {arguments} exited {completed.returncode}: {stderr}"
    return completed.stdout.decode()


def kcat_consume(bootstrap: str, topic: str, offset: str = "beginning") -> list[Consumed]:
    """kcat -C from ``offset`` to the end of every partition (-e), parsed and sorted."""
    output = run_kcat(
        ["-C", "-b", bootstrap, "-t", topic, "-o", offset, "-e", "-q", "-f", CONSUME_FORMAT]
    )
    return sorted(
        (parse_kcat_line(line) for line in output.splitlines()),
        key=lambda record: (record.partition, record.offset),
    )


def parse_kcat_line(line: str) -> Consumed:
    key, value, headers, partition, offset, key_length, value_length = line.split("|")
    return Consumed(
        int(partition),
        int(offset),
        None if key_length == "-1" else key.encode(),
        None if value_length == "-1" else value.encode(),
        tuple(parse_kcat_header(header) for header in headers.split(",") if header),
    )


def parse_kcat_header(text: str) -> Header:
    name, _, value = text.partition("=")
    return name, value.encode()


def kcat_produce(
    bootstrap: str, topic: str, lines: list[str], headers: list[str], codec: str
) -> None:
    """kcat -P with ``key:value`` lines; the same -H headers go on every record."""
    arguments = ["-P", "-b", bootstrap, "-t", topic, "-p", "0", "-K:", "-z", codec]
    for header in headers:
        arguments += ["-H", header]
    # One linger window for the whole input, so the records form one compressed batch.
    arguments += ["-X", "linger.ms=200"]
    run_kcat(arguments, stdin="".join(f"{line}\n" for line in lines).encode())


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS)
    try:
        response = admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=10_000)
    finally:
        admin.close()
    assert [topic["error_code"] for topic in response["topics"]] == [0]


def python_produce(
    bootstrap: str, topic: str, records: list[dict[str, Any]], compression: str | None = None
) -> list[tuple[int, int]]:
    """Sends ``producer.send`` keyword sets in order; returns (partition, offset) of each."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        compression_type=compression,
    )
    try:
        futures = [producer.send(topic, **record) for record in records]
        producer.flush(timeout=CLIENT_TIMEOUT_S)
        placed = [future.get(timeout=CLIENT_TIMEOUT_S) for future in futures]
    finally:
        producer.close(timeout=CLIENT_TIMEOUT_S)
    return [(metadata.partition, metadata.offset) for metadata in placed]


def python_consume(bootstrap: str, topic: str) -> list[Consumed]:
    """Reads every partition from start to end offset with kafka-python (assign, no group)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
    )
    try:
        assigned = [
            TopicPartition(topic, partition)
            for partition in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        end_offsets = consumer.end_offsets(assigned)
        records: list[Consumed] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while any(consumer.position(tp) < end_offsets[tp] for tp in assigned):
            assert time.monotonic() < deadline, f"read {len(records)} records, then stalled"
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(
                    Consumed(m.partition, m.offset, m.key, m.value, tuple(m.headers)) for m in batch
                )
    finally:
        consumer.close()
    return sorted(records, key=lambda record: (record.partition, record.offset))


# Fetch v4 (https://kafka.apache.org/protocol#The_Messages_Fetch) on a raw connection:
# clients decompress before handing records over, so only the raw batch shows which codec
# the broker stored.
FETCH_API_KEY = 1
FETCH_VERSION = 4


def stored_batches(bootstrap: str, topic: str, partition: int = 0) -> list[Any]:
    """Returns the record batches of one partition from offset 0, as the broker sends them."""
    request = fetch_fields(topic, partition, offset=0, max_wait_ms=0)
    with connect(bootstrap, CLIENT_TIMEOUT_S) as connection:
        response = connection.call(FETCH_API_KEY, FETCH_VERSION, request)
    [topic_answer] = response.responses
    [partition_answer] = topic_answer.partitions
    assert (topic_answer.topic, partition_answer.error_code) == (topic, 0)
    return list(MemoryRecords(bytes(partition_answer.records or b"")))


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_kcat_round_trip_with_each_codec(shared_broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"kcat-{codec}")
    create_topic(shared_broker.bootstrap, topic)
    # Repetitive values: librdkafka sends a batch uncompressed when compressing does not shrink it.
    values = [f"value-{index} " * 20 for index in range(6)]
    lines = [f"key-{index}:{value}" for index, value in enumerate(values)]
    lines += [":empty key", "empty-value:"]

    kcat_produce(shared_broker.bootstrap, topic, lines, ["h=v", "trace=abc"], codec)

    headers = (("h", b"v"), ("trace", b"abc"))
    expected = [
        Consumed(0, offset, key.encode(), value.encode(), headers)
        for offset, (key, value) in enumerate(line.split(":", 1) for line in lines)
    ]
    assert kcat_consume(shared_broker.bootstrap, topic) == expected
    assert python_consume(shared_broker.bootstrap, topic) == expected
    batches = stored_batches(shared_broker.bootstrap, topic)
    assert {batch.compression_type for batch in batches} == {CODEC_IDS[codec]}
    assert sum(batch.last_offset_delta + 1 for batch in batches) == len(lines)


def test_kcat_consumes_from_an_offset(shared_broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-offset")
    create_topic(shared_broker.bootstrap, topic)
    records = [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(8)]
    assert python_produce(shared_broker.bootstrap, topic, records) == [(0, i) for i in range(8)]

    consumed = kcat_consume(shared_broker.bootstrap, topic, offset="3")

    assert consumed == [Consumed(0, i, f"k{i}".encode(), f"v{i}".encode()) for i in range(3, 8)]


def test_kcat_metadata_lists_the_topic_and_its_partitions(shared_broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-metadata")
    create_topic(shared_broker.bootstrap, topic, partitions=3)

    listing = json.loads(run_kcat(["-L", "-J", "-b", shared_broker.bootstrap, "-t", topic]))

    [broker] = listing["brokers"]
    assert broker["name"] == shared_broker.bootstrap
    node = broker["id"]
    assert listing["topics"] == [
        {
            "topic": topic,
            "partitions": [
                {
                    "partition": index,
                    "leader": node,
                    "replicas": [{"id": node}],
                    "isrs": [{"id": node}],
                }
                for index in range(3)
            ],
        }
    ]


def test_kcat_reads_from_a_timestamp(shared_broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-timestamp")
    create_topic(shared_broker.bootstrap, topic)
    base_ms = (int(time.time()) - 3600) * 1000
    records = [
        {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "timestamp_ms": base_ms + i * 1000}
        for i in range(10)
    ]
    python_produce(shared_broker.bootstrap, topic, records)

    def offsets_from(timestamp_ms: int) -> list[int]:
        consumed = kcat_consume(shared_broker.bootstrap, topic, offset=f"s@{timestamp_ms}")
        return [record.offset for record in consumed]

    assert offsets_from(base_ms + 4000) == list(range(4, 10))  # exactly a record's timestamp
    assert offsets_from(base_ms + 6500) == list(range(7, 10))  # between two records
    assert offsets_from(base_ms - 1) == list(range(10))  # before everything


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kcat_reads_what_kafka_python_produced(
    shared_broker: BrokerProcess, compression: str | None
) -> None:
    topic = unique_topic("kcat-from-python")
    create_topic(shared_broker.bootstrap, topic, partitions=3)
    records: list[dict[str, Any]] = [
        {
            "partition": index % 3,
            "key": f"key-{index}".encode(),
            "value": f"value-{index} ".encode() * 10,
            "headers": [("index", str(index).encode()), ("empty", b"")],
        }
        for index in range(9)
    ]
    records.append({"partition": 1, "key": None, "value": b"no key"})
    records.append({"partition": 2, "key": b"tombstone", "value": None})
    placed = python_produce(shared_broker.bootstrap, topic, records, compression)

    expected = [
        Consumed(
            partition,
            offset,
            record["key"],
            record["value"],
            tuple(record.get("headers", ())),
        )
        for (partition, offset), record in zip(placed, records, strict=True)
    ]
    expected.sort(key=lambda record: (record.partition, record.offset))
    assert kcat_consume(shared_broker.bootstrap, topic) == expected
    assert [offset for partition, offset in placed if partition == 1] == [0, 1, 2, 3]


def test_kafka_python_reads_what_kcat_produced_to_an_auto_created_topic(
    shared_broker: BrokerProcess,
) -> None:
    topic = unique_topic("kcat-to-python")
    lines = [f"key-{index}:value-{index}" for index in range(5)]

    # No CreateTopics: kcat's Metadata request makes the broker create the topic.
    kcat_produce(shared_broker.bootstrap, topic, lines, ["origin=kcat"], "none")

    assert python_consume(shared_broker.bootstrap, topic) == [
        Consumed(
            0, index, f"key-{index}".encode(), f"value-{index}".encode(), (("origin", b"kcat"),)
        )
        for index in range(5)
    ]
