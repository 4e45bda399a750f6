"""Records produced to ``T.delay`` through ``kshim gateway`` in front of Apache Kafka: checked
by the broker's rules (broker/delay/requests.py) before the cluster sees them, the valid
ones stored in the upstream topic ``T.delay`` byte for byte, each refused partition answered
INVALID_RECORD with the broker's message in its place among the connection's answers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest

from kshim.broker.delay.naming import DELIVER_AT_HEADER
from kshim.client.frames import encode_request
from kshim.client.wire import WireConnection
from kshim.protocol.errors import ErrorCode
from kshim.protocol.records import Header, Record, build_batch
from kshim.testing import KafkaProcess
from tests.gateway.running_gateway import TIMEOUT_S, RunningGateway

PARTITIONS = 3
TWO_YEARS_MS = 2 * 365 * 24 * 3600 * 1000  # kshim.delay.max.ms's default
PRODUCE_VERSION = 9  # the newest the gateway offers
FETCH_VERSION = 11
# From the magic byte on, a stored batch is the produced one (the offset and the leader
# epoch before it are the broker's to set; the CRC covers from the attributes on).
MAGIC_OFFSET = 16
LENGTH_FIELD = slice(8, 12)


@pytest.fixture(scope="module")
def gateway(kafka_upstream: KafkaProcess) -> Iterator[RunningGateway]:
    running = RunningGateway(kafka_upstream.bootstrap)
    yield running
    running.stop()


@pytest.fixture
def topic(kafka_upstream: KafkaProcess) -> str:
    """A new topic ``T`` and its ``T.delay``, created upstream with the same partitions."""
    name = f"gw-delay-{uuid.uuid4().hex[:8]}"
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": kafka_upstream.bootstrap})
    new = [confluent_kafka.admin.NewTopic(n, PARTITIONS, 1) for n in (name, name + ".delay")]
    for future in admin.create_topics(new, operation_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)
    _wait_led(kafka_upstream.bootstrap, [name, name + ".delay"])
    return name


def _wait_led(bootstrap: str, topics: Sequence[str]) -> None:
    """Returns once every partition of ``topics`` answers ListOffsets at its leader: Kafka
    answers CreateTopics before its replica manager leads the new partitions."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    deadline = time.monotonic() + TIMEOUT_S
    try:
        for name in topics:
            for partition in range(PARTITIONS):
                while True:
                    try:
                        consumer.get_watermark_offsets(
                            confluent_kafka.TopicPartition(name, partition), 1.0
                        )
                        break
                    except confluent_kafka.KafkaException:
                        assert time.monotonic() < deadline, f"{name} has no leader"
                        time.sleep(0.05)
    finally:
        consumer.close()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _batch(*headers: Sequence[Header]) -> bytes:
    now = _now_ms()
    return build_batch([Record(i, now, b"k", b"v%d" % i, tuple(h)) for i, h in enumerate(headers)])


def _due(delay_ms: int) -> list[Header]:
    return [(DELIVER_AT_HEADER, str(_now_ms() + delay_ms).encode())]


def _produce(
    correlation_id: int, topics: Mapping[str, Mapping[int, bytes]], acks: int = -1
) -> bytes:
    topic_data = [
        {"name": name, "partition_data": [{"index": i, "records": b} for i, b in parts.items()]}
        for name, parts in topics.items()
    ]
    body = {"transactional_id": None, "acks": acks, "timeout": 10_000, "topic_data": topic_data}
    return encode_request(0, PRODUCE_VERSION, correlation_id, body)


def _answers(answer: Any) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {
        (topic.name, part.index): (part.error_code, part.error_message)
        for topic in answer.responses
        for part in topic.partition_responses
    }


def _stored(bootstrap: str, topic: str, partition: int) -> bytes:
    """The record batches of ``topic``-``partition`` as the cluster holds them."""
    host, port = bootstrap.rsplit(":", 1)
    with WireConnection(host, int(port), TIMEOUT_S) as connection:
        fetched = connection.call(1, FETCH_VERSION, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20,
            }]}],
            "forgotten_topics_data": [],
        })  # fmt: skip
    data = fetched.responses[0].partitions[0]
    assert data.error_code == 0
    return bytes(data.records or b"")


def test_a_valid_delayed_record_lands_unchanged_upstream(
    gateway: RunningGateway, kafka_upstream: KafkaProcess, topic: str
) -> None:
    due = str(_now_ms() + 60_000).encode()
    errors: list[confluent_kafka.KafkaError | None] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": gateway.bootstrap})
    producer.produce(
        topic + ".delay", b"later", b"k", partition=1, headers=[(DELIVER_AT_HEADER, due)],
        on_delivery=lambda error, _: errors.append(error),
    )  # fmt: skip
    producer.produce(
        topic + ".delay", b"never", b"k", partition=2,
        on_delivery=lambda error, _: errors.append(error),
    )  # fmt: skip
    assert producer.flush(TIMEOUT_S) == 0
    codes = sorted(error.code() if error is not None else 0 for error in errors)
    assert codes == [0, confluent_kafka.KafkaError.INVALID_RECORD]
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": kafka_upstream.bootstrap, "group.id": topic}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic + ".delay", 1, 0)])
        message = consumer.poll(TIMEOUT_S)
        refused = confluent_kafka.TopicPartition(topic + ".delay", 2)
        assert consumer.get_watermark_offsets(refused, TIMEOUT_S) == (0, 0)
    finally:
        consumer.close()
    assert message is not None and message.error() is None
    assert (message.key(), message.value()) == (b"k", b"later")
    assert message.headers() == [(DELIVER_AT_HEADER, due)]


def test_refused_partitions_are_answered_and_the_valid_ones_stored(
    gateway: RunningGateway, kafka_upstream: KafkaProcess, topic: str
) -> None:
    valid, headerless = _batch(_due(5_000)), _batch(_due(5_000), [])
    too_far = _batch(_due(TWO_YEARS_MS + 3_600_000))
    # T takes any record; 300 KiB of them put T.delay's name past what one read brings, so
    # the request is gathered whole before it is checked.
    plain = build_batch([Record(i, _now_ms(), None, b"x" * 100) for i in range(3_000)])
    assert len(plain) > 300_000
    delay = topic + ".delay"
    request = {topic: {0: plain}, delay: {0: valid, 1: headerless, 2: too_far}}
    with WireConnection("127.0.0.1", gateway.port, TIMEOUT_S) as connection:
        connection.send(_produce(5, request))
        answers = _answers(connection.read_response(0, PRODUCE_VERSION, 5))
    assert {key: code for key, (code, _) in answers.items()} == {
        (delay, 0): 0,
        (delay, 1): ErrorCode.invalid_record,
        (delay, 2): ErrorCode.invalid_record,
        (topic, 0): 0,
    }
    assert "record at offset delta 1: a record on a delay topic needs a kshim-deliver-at" in str(
        answers[(delay, 1)][1]
    )
    assert f"more than kshim.delay.max.ms={TWO_YEARS_MS} ms after now" in str(
        answers[(delay, 2)][1]
    )
    stored = _stored(kafka_upstream.bootstrap, delay, 0)
    assert (
        stored[LENGTH_FIELD] == valid[LENGTH_FIELD]
        and stored[MAGIC_OFFSET:] == valid[MAGIC_OFFSET:]
    )
    assert _stored(kafka_upstream.bootstrap, delay, 1) == b""
    assert _stored(kafka_upstream.bootstrap, delay, 2) == b""
    assert _stored(kafka_upstream.bootstrap, topic, 0)[MAGIC_OFFSET:] == plain[MAGIC_OFFSET:]


def test_a_refused_produce_is_answered_in_its_place_among_pipelined_requests(
    gateway: RunningGateway, kafka_upstream: KafkaProcess, topic: str
) -> None:
    """Kafka answers a connection's requests in order: an answer the gateway makes for a
    refused request comes after those of the requests before it, and before the next."""
    delay = topic + ".delay"
    refused = {delay: {0: _batch([])}}
    with WireConnection("127.0.0.1", gateway.port, TIMEOUT_S) as connection:
        connection.send(
            _produce(1, {topic: {0: _batch([])}})
            + _produce(2, refused)
            + _produce(3, refused, acks=0)  # answered by no one
            + _produce(4, {delay: {1: _batch(_due(1_000))}})
            + encode_request(3, 9, 5, {"topics": [{"name": delay}]})
            + _produce(6, refused)
        )
        first = _answers(connection.read_response(0, PRODUCE_VERSION, 1))
        second = _answers(connection.read_response(0, PRODUCE_VERSION, 2))
        fourth = _answers(connection.read_response(0, PRODUCE_VERSION, 4))
        metadata = connection.read_response(3, 9, 5)
        sixth = _answers(connection.read_response(0, PRODUCE_VERSION, 6))
    assert first[(topic, 0)][0] == 0 and fourth[(delay, 1)][0] == 0
    assert [code for code, _ in second.values()] == [ErrorCode.invalid_record]
    assert [code for code, _ in sixth.values()] == [ErrorCode.invalid_record]
    assert len(metadata.topics[0].partitions) == PARTITIONS
    assert _stored(kafka_upstream.bootstrap, delay, 0) == b""


def test_a_plain_topics_produce_is_relayed_as_before(
    gateway: RunningGateway, kafka_upstream: KafkaProcess, topic: str
) -> None:
    """No delay header needed outside ``T.delay``, nor on ``T.delay.delay`` (no companion)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 5})
    for index in range(50):
        producer.produce(topic, b"%d" % index, partition=index % PARTITIONS)
    producer.produce(topic + ".delay.delay", b"x")
    assert producer.flush(TIMEOUT_S) == 0
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": kafka_upstream.bootstrap, "group.id": topic}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values: list[int] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < 50 and time.monotonic() < deadline:
            values += [int(m.value() or b"-1") for m in consumer.consume(100, 0.5) if not m.error()]
    finally:
        consumer.close()
    assert sorted(values) == list(range(50))
