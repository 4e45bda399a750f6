"""``kshim produce`` as a user runs it: the real command (``python -m kshim produce``) in a
child process, lines on its standard input, against a real ``kshim serve``; what it wrote
is read back with confluent-kafka, and where a keyed record goes is compared with
librdkafka's Java-compatible partitioner. Every wait is bounded."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kshim.client.partitioner import murmur2, partition_for_key
from kshim.testing import BrokerProcess, failure_lines

pytestmark = pytest.mark.timeout(180)

COMMAND_TIMEOUT_S = 60.0
WAIT_S = 30.0
PROGRAM = "kshim produce"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for this module; each test uses topics of its own names."""
    process = BrokerProcess(tmp_path_factory.mktemp("produce") / "data").start()
    yield process
    process.stop()
    assert failure_lines(process.log_text()) == []


def kshim_produce(stdin: bytes, *arguments: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "kshim", "produce", *arguments],
        input=stdin,
        capture_output=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    topic = f"produced-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=WAIT_S)
    return topic


def read_back(bootstrap: str, topic: str, count: int) -> list[tuple[Any, ...]]:
    """(partition, offset, key, value, headers) of the first ``count`` records, by
    partition and offset."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    records: list[tuple[Any, ...]] = []
    try:
        for _ in range(int(WAIT_S / 0.2)):
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            records.append(
                (
                    message.partition(),
                    message.offset(),
                    message.key(),
                    message.value(),
                    list(message.headers() or []),
                )
            )
            if len(records) == count:
                break
    finally:
        consumer.close()
    return sorted(records)


def test_lines_become_records_with_keys_and_headers(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap)
    lines = b"k1:v1\nk2:a:b\r\nno key here\n\nlast:unfinished"
    result = kshim_produce(
        lines, topic, "--bootstrap", broker.bootstrap, "-K", ":", "-H", "source=cli",
        "-H", "run=7", "--json",
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, ""), result
    written = [json.loads(line) for line in result.stdout.splitlines()]
    assert written == [{"partition": 0, "offset": offset} for offset in range(5)]

    headers = [("source", b"cli"), ("run", b"7")]
    assert read_back(broker.bootstrap, topic, 5) == [
        (0, 0, b"k1", b"v1", headers),
        (0, 1, b"k2", b"a:b", headers),
        (0, 2, None, b"no key here", headers),
        (0, 3, None, b"", headers),
        (0, 4, b"last", b"unfinished", headers),
    ]


def test_a_key_goes_where_a_java_compatible_producer_puts_it(broker: BrokerProcess) -> None:
    """librdkafka's murmur2_random partitioner is the Java producer's for keyed records;
    each key must land in the same partition from both."""
    ours, theirs = new_topic(broker.bootstrap, 5), new_topic(broker.bootstrap, 5)
    keys = [f"customer-{number}" for number in range(40)]
    lines = "".join(f"{key}\t{number}\n" for number, key in enumerate(keys)).encode()
    result = kshim_produce(lines, ours, "--bootstrap", broker.bootstrap, "-K", "\t")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), result
    producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    for number, key in enumerate(keys):
        producer.produce(theirs, key=key, value=str(number))
    assert producer.flush(WAIT_S) == 0

    placed = {key: partition for partition, _, key, _, _ in read_back(broker.bootstrap, ours, 40)}
    expected = {
        key: partition for partition, _, key, _, _ in read_back(broker.bootstrap, theirs, 40)
    }
    assert placed == expected
    assert len(set(placed.values())) > 1  # the keys spread: the partitioner was used


def test_a_refused_batch_is_one_error_line_with_the_brokers_reason(
    broker: BrokerProcess,
) -> None:
    topic = new_topic(broker.bootstrap)
    result = kshim_produce(b"x\n", f"{topic}.full", "--bootstrap", broker.bootstrap)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{PROGRAM}: error: cannot produce to {topic}.full-0: INVALID_REQUEST ({topic}.full is "
        "a read-only full-data view; produce to its topic instead)"
    ]
    missing = kshim_produce(b"x\n", topic, "--bootstrap", broker.bootstrap, "--partition", "3")
    assert missing.returncode == 1
    assert missing.stderr == f"{PROGRAM}: error: topic {topic} has no partition 3\n"


def test_acks_zero_writes_without_answers(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap)
    result = kshim_produce(
        b"a\nb\n", topic, "--bootstrap", broker.bootstrap, "--acks", "0", "--json"
    )
    assert (result.returncode, result.stderr) == (0, ""), result
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"partition": 0, "offset": None},
        {"partition": 0, "offset": None},
    ]
    assert [value for _, _, _, value, _ in read_back(broker.bootstrap, topic, 2)] == [b"a", b"b"]


@pytest.mark.parametrize(
    ("key", "hashed"),
    [
        # Kafka's own vectors (UtilsTest.testMurmur2 in Apache Kafka's clients module).
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_is_kafkas(key: bytes, hashed: int) -> None:
    assert murmur2(key) == hashed
    assert partition_for_key(key, 7) == (hashed & 0x7FFFFFFF) % 7
