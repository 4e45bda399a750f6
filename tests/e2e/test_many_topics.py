"""Many freshly created single-partition topics, written round-robin by every Python client.

What a new user tried: N topics, records spread round-robin over all of them with acks=all,
then read back. Before the fix in 3d7e213, at 1,500 topics every record failed: librdkafka
asks Metadata for all the topics it produces to in one request (~36 KB of topic names),
and the broker answered that request by closing the connection.

One broker per N, its topics created once with librdkafka's admin client. Each client
family then produces its own records (values name the family, topic and sequence) and
reads every topic back from offset 0: each acknowledged record must be there, once, at
its acknowledged offset, in produce order. librdkafka is used as the user used it;
kafka-python and aiokafka first ask Metadata for all N topics in one request, since
left alone they ask again for every topic they know each time they meet a new one
(quadratic: at 1,500 topics 95 s for aiokafka and over 4 minutes for kafka-python).

Phase timings: ``pytest --durations=0``. Topic creation is the setup of each N's
test_topics_created, the produce phase is test_produce, reading back test_read_back.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.structs import RecordMetadata
from confluent_kafka import OFFSET_BEGINNING, Message, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import NewTopic
from kafka import KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.producer.future import FutureRecordMetadata

from kshim.testing import BrokerProcess, failure_lines, running_broker
from tests.e2e.client_helpers import Deadline, unique_topic
from tests.e2e.test_python_clients import (
    aiokafka_consumer,
    aiokafka_producer,
    confluent_admin,
    confluent_consumer,
    kafka_python_consumer,
    kafka_python_producer,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

RECORDS_PER_TOPIC = 2  # per client family
# The broker keeps about two descriptors open per partition (segment and index files),
# plus its LMDB environment, listening socket and connections: so N topics need ~2N + this,
# 11,000 for 5,000 topics (10,030 were open at the end of a run). ``ulimit -n`` is 20,000
# here; where the hard limit is lower, descriptors_for skips.
DESCRIPTOR_HEADROOM = 1_000
CREATE_BATCH = 500  # topics per CreateTopics request
# Bounds per topic, generous for a 2-core machine; a stuck phase fails, it does not hang.
CREATE_S_PER_TOPIC = 0.02
PRODUCE_S_PER_TOPIC = 0.04
READ_S_PER_TOPIC = 0.02
MIN_PHASE_S = 30.0
SHOWN_ERRORS = 5


@dataclass(frozen=True, slots=True)
class Produced:
    """What a producer reported: (offset, value) per topic for every acknowledged record,
    and a description of every failed delivery."""

    acknowledged: dict[str, list[tuple[int, bytes]]]
    failures: list[str]


@dataclass(frozen=True, slots=True)
class ManyTopics:
    """A broker with N topics, and what each client family has produced to them so far."""

    broker: BrokerProcess
    topics: list[str]
    produced: dict[str, Produced] = field(default_factory=dict)  # by client family


def phase_s(per_topic_s: float, topic_count: int) -> float:
    return max(MIN_PHASE_S, per_topic_s * topic_count)


def value_of(family: str, topic: str, sequence: int) -> bytes:
    return f"{family}|{topic}|{sequence}".encode()


def sequence_of(value: bytes) -> int:
    """The sequence number value_of put in ``value``: its place in the topic's produce order."""
    return int(value.rsplit(b"|", 1)[1])


def round_robin(topics: Sequence[str], family: str) -> Iterator[tuple[str, bytes]]:
    """(topic, value) in produce order: one record to every topic, then the next round."""
    for sequence in range(RECORDS_PER_TOPIC):
        for topic in topics:
            yield topic, value_of(family, topic, sequence)


# --------------------------------------------------------------------------------------
# The broker and its topics
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def descriptors_for(topic_count: int) -> Iterator[None]:
    """Raises this process's soft RLIMIT_NOFILE towards the hard limit while the block runs,
    if N needs it: the broker started inside inherits the limit. Skips the test when even
    the hard limit is too low."""
    needed = 2 * topic_count + DESCRIPTOR_HEADROOM
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        yield
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"{topic_count} topics need ~{needed} file descriptors; hard limit {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def create_topics(bootstrap: str, topics: Sequence[str]) -> None:
    """Creates every topic (one partition each) in batches, all batches in flight at once."""
    admin = confluent_admin(bootstrap)
    timeout_s = phase_s(CREATE_S_PER_TOPIC, len(topics))
    futures = {}
    for start in range(0, len(topics), CREATE_BATCH):
        batch = [
            NewTopic(topic, num_partitions=1) for topic in topics[start : start + CREATE_BATCH]
        ]
        futures |= admin.create_topics(
            batch, operation_timeout=timeout_s, request_timeout=timeout_s
        )
    deadline = Deadline(timeout_s)
    errors = {topic: future.exception(deadline.remaining_s()) for topic, future in futures.items()}
    failed = {topic: error for topic, error in errors.items() if error is not None}
    assert not failed, (
        f"{len(failed)} topics not created, e.g. {list(failed.items())[:SHOWN_ERRORS]}"
    )


@pytest.fixture(scope="module", params=[1_500, 5_000], ids=lambda count: f"{count}-topics")
def many_topics(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManyTopics]:
    """A broker of its own with N empty topics; on teardown, its log must show no error.

    The data directory is not a temporary one of running_broker's, so that the log
    (next to it) can still be read after the broker has shut down.
    """
    topic_count: int = request.param
    data_dir = tmp_path_factory.mktemp(f"many-{topic_count}") / "data"
    prefix = unique_topic("many")
    topics = [f"{prefix}-{index:05d}" for index in range(topic_count)]
    with descriptors_for(topic_count), running_broker(data_dir=str(data_dir)) as broker:
        create_topics(broker.bootstrap, topics)
        yield ManyTopics(broker, topics)
    problems = failure_lines(broker.log_text())
    assert not problems, "broker log:\n" + "\n".join(problems[:20])


# --------------------------------------------------------------------------------------
# Producing
# --------------------------------------------------------------------------------------


class ProducedLog:
    """Collects acknowledgements and failures as the delivery reports come in."""

    def __init__(self) -> None:
        self.acknowledged: dict[str, list[tuple[int, bytes]]] = defaultdict(list)
        self.failures: list[str] = []

    def ack(self, topic: str, offset: int, value: bytes) -> None:
        self.acknowledged[topic].append((offset, value))

    def fail(self, topic: str, value: bytes, error: object) -> None:
        self.failures.append(f"{value!r} to {topic}: {error!r}")

    def result(self, expected_count: int) -> Produced:
        """Counts every record with neither an acknowledgement nor an error as failed."""
        unreported = expected_count - sum(map(len, self.acknowledged.values())) - len(self.failures)
        failures = list(self.failures)
        if unreported > 0:
            failures.append(f"{unreported} records without a report")
        return Produced(dict(self.acknowledged), failures)


def confluent_produce(bootstrap: str, topics: Sequence[str]) -> Produced:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50})
    log = ProducedLog()

    def on_delivery(error: Any, message: Message) -> None:
        topic, value, offset = message.topic(), message.value(), message.offset()
        assert topic is not None and isinstance(value, bytes)
        if error is None and offset is not None:
            log.ack(topic, offset, value)
        else:
            log.fail(topic, value, error or "acknowledged without an offset")

    try:
        for topic, value in round_robin(topics, "confluent"):
            producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
            producer.poll(0)  # serve delivery reports so the local queue never fills
        producer.flush(phase_s(PRODUCE_S_PER_TOPIC, len(topics)))
    finally:
        producer.close()
    return log.result(RECORDS_PER_TOPIC * len(topics))


def kafka_python_learn_topics(
    producer: KafkaProducer, topics: Sequence[str], timeout_s: float
) -> None:
    """Asks Metadata for every topic in one request, as librdkafka does by itself.

    Left alone, send() meets each new topic with a Metadata request for every topic the
    producer knows, and waits for it, at least retry_backoff_ms (100 ms) after the last:
    quadratic in N, with 1,500 topics over 4 minutes. There is no public API for this,
    hence the private ``_metadata`` (kafka-python 3.0.12, pinned in pyproject.toml).
    """
    answered = threading.Event()
    producer._metadata.set_topics(topics).add_both(lambda _: answered.set())
    producer._sender.wakeup()
    assert answered.wait(timeout_s), f"no Metadata for {len(topics)} topics in {timeout_s} s"


def kafka_python_produce(bootstrap: str, topics: Sequence[str]) -> Produced:
    log = ProducedLog()
    deadline = Deadline(phase_s(PRODUCE_S_PER_TOPIC, len(topics)))
    with kafka_python_producer(bootstrap, acks="all") as producer:
        kafka_python_learn_topics(producer, topics, deadline.remaining_s())
        sent = []
        for topic, value in round_robin(topics, "kafka-python"):
            if deadline.expired():
                break  # the rest count as records without a report
            sent.append((topic, value, kafka_python_send(producer, topic, value, log)))
        # What is still unsent when flush gives up counts as failed below.
        with contextlib.suppress(KafkaTimeoutError):
            producer.flush(timeout=deadline.remaining_s())
    for topic, value, future in sent:
        if future is None:
            continue  # send() raised, already counted
        if future.succeeded():
            log.ack(topic, future.value.offset, value)
        else:
            log.fail(topic, value, future.exception if future.is_done else "no report")
    return log.result(RECORDS_PER_TOPIC * len(topics))


def kafka_python_send(
    producer: KafkaProducer, topic: str, value: bytes, log: ProducedLog
) -> FutureRecordMetadata | None:
    """send() raises instead of returning a failed future when, for one, Metadata fails."""
    try:
        return producer.send(topic, value=value, partition=0)
    except KafkaError as error:
        log.fail(topic, value, error)
        return None


async def aiokafka_produce(bootstrap: str, topics: Sequence[str]) -> Produced:
    log = ProducedLog()
    sent = []
    async with aiokafka_producer(bootstrap, acks="all") as producer:
        try:
            async with asyncio.timeout(phase_s(PRODUCE_S_PER_TOPIC, len(topics))):
                # One Metadata request for every topic first; else, as kafka-python,
                # one for all known topics per new topic (1,500 topics took 95 s).
                await producer.client.set_topics(topics)
                for topic, value in round_robin(topics, "aiokafka"):
                    sent.append((topic, value, await aiokafka_send(producer, topic, value, log)))
                await producer.flush()
        except TimeoutError:
            pass  # what has no report by now counts as failed below
    for topic, value, future in sent:
        if future is None:
            continue  # send() raised, already counted
        if future.done() and future.exception() is None:
            log.ack(topic, future.result().offset, value)
        else:
            log.fail(topic, value, future.exception() if future.done() else "no report")
    return log.result(RECORDS_PER_TOPIC * len(topics))


async def aiokafka_send(
    producer: AIOKafkaProducer, topic: str, value: bytes, log: ProducedLog
) -> asyncio.Future[RecordMetadata] | None:
    """send() raises instead of returning a failed future when, for one, Metadata fails."""
    try:
        return await producer.send(topic, value, partition=0)
    except AioKafkaError as error:
        log.fail(topic, value, error)
        return None


def assert_all_delivered(produced: Produced, topics: Sequence[str]) -> None:
    failures = produced.failures
    total = RECORDS_PER_TOPIC * len(topics)
    assert not failures, f"{len(failures)} of {total} deliveries failed: {failures[:SHOWN_ERRORS]}"


# --------------------------------------------------------------------------------------
# Reading back
# --------------------------------------------------------------------------------------


def end_offsets(produced: Produced) -> dict[str, int]:
    """Per topic, the offset after this family's last acknowledged record: the reader
    stops there (offsets are dense: no transactions, no compaction)."""
    return {
        topic: max(offset for offset, _ in acks) + 1
        for topic, acks in produced.acknowledged.items()
    }


class ReadBack:
    """(offset, value) per topic below its end offset, as a consumer returns them."""

    def __init__(self, ends: dict[str, int]) -> None:
        self.ends = ends
        self.records: dict[str, list[tuple[int, bytes]]] = defaultdict(list)
        self.unfinished = {topic for topic, end in ends.items() if end > 0}

    def add(self, topic: str, offset: int, value: bytes) -> None:
        if offset < self.ends.get(topic, 0):
            self.records[topic].append((offset, value))
        if offset + 1 >= self.ends.get(topic, 0):
            self.unfinished.discard(topic)

    def done(self) -> bool:
        return not self.unfinished


def assert_read_back(produced: Produced, read: ReadBack, family: str) -> None:
    """Every acknowledged record of ``family`` is there, exactly once, at its acknowledged
    offset, in produce order (offsets rising with the sequence number)."""
    prefix = f"{family}|".encode()
    mismatched = []
    for topic, acknowledged in produced.acknowledged.items():
        expected = sorted(acknowledged, key=lambda pair: sequence_of(pair[1]))
        ours = [
            (offset, value) for offset, value in read.records[topic] if value.startswith(prefix)
        ]
        if ours != expected:
            mismatched.append(f"{topic}: acknowledged {expected}, read {ours}")
    assert not mismatched, f"{len(mismatched)} topics differ: {mismatched[:SHOWN_ERRORS]}"


def confluent_read_back(bootstrap: str, produced: Produced) -> ReadBack:
    read = ReadBack(end_offsets(produced))
    deadline = Deadline(phase_s(READ_S_PER_TOPIC, len(read.ends)))
    with confluent_consumer(bootstrap) as consumer:
        consumer.assign(
            [ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING) for topic in read.ends]
        )
        while not read.done() and not deadline.expired():
            for message in consumer.consume(10_000, deadline.poll_timeout_s()):
                assert message.error() is None, message.error()
                topic, offset, value = message.topic(), message.offset(), message.value()
                assert topic is not None and offset is not None and isinstance(value, bytes)
                read.add(topic, offset, value)
    return read


def kafka_python_read_back(bootstrap: str, produced: Produced) -> ReadBack:
    read = ReadBack(end_offsets(produced))
    deadline = Deadline(phase_s(READ_S_PER_TOPIC, len(read.ends)))
    with kafka_python_consumer(bootstrap) as consumer:
        partitions = [KafkaTopicPartition(topic, 0) for topic in read.ends]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        while not read.done() and not deadline.expired():
            timeout_ms = int(deadline.poll_timeout_s() * 1000)
            for records in consumer.poll(timeout_ms=timeout_ms, max_records=10_000).values():
                for record in records:
                    read.add(record.topic, record.offset, record.value)
    return read


async def aiokafka_read_back(bootstrap: str, produced: Produced) -> ReadBack:
    read = ReadBack(end_offsets(produced))
    deadline = Deadline(phase_s(READ_S_PER_TOPIC, len(read.ends)))
    async with aiokafka_consumer(bootstrap) as consumer:
        partitions = [AioTopicPartition(topic, 0) for topic in read.ends]
        consumer.assign(partitions)
        async with asyncio.timeout(deadline.remaining_s()):
            await consumer.seek_to_beginning(*partitions)
        while not read.done() and not deadline.expired():
            timeout_ms = int(deadline.poll_timeout_s() * 1000)
            batches = await consumer.getmany(timeout_ms=timeout_ms, max_records=10_000)
            for records in batches.values():
                for record in records:
                    read.add(record.topic, record.offset, record.value)
    return read


# --------------------------------------------------------------------------------------
# The tests: topic creation, then per client family a produce phase and a read-back phase
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Family:
    """A client family's way to produce round-robin and to read the topics back."""

    produce: Callable[[str, Sequence[str]], Produced]
    read_back: Callable[[str, Produced], ReadBack]


FAMILIES = {
    "confluent": Family(confluent_produce, confluent_read_back),
    "kafka-python": Family(kafka_python_produce, kafka_python_read_back),
    # Synchronous like the others, so that the phases share one memo (produced_by).
    "aiokafka": Family(
        lambda bootstrap, topics: asyncio.run(aiokafka_produce(bootstrap, topics)),
        lambda bootstrap, produced: asyncio.run(aiokafka_read_back(bootstrap, produced)),
    ),
}


def produced_by(many_topics: ManyTopics, family: str) -> Produced:
    """The family's produce phase, run once per broker: test_produce times it, and
    test_read_back reuses it (or runs it, when selected alone)."""
    if family not in many_topics.produced:
        produce = FAMILIES[family].produce
        many_topics.produced[family] = produce(many_topics.broker.bootstrap, many_topics.topics)
    return many_topics.produced[family]


def test_topics_created(many_topics: ManyTopics) -> None:
    """Every topic is listed with one partition (a Metadata request for all topics)."""
    admin = confluent_admin(many_topics.broker.bootstrap)
    timeout_s = phase_s(READ_S_PER_TOPIC, len(many_topics.topics))
    listed = admin.list_topics(timeout=timeout_s).topics
    wrong = [
        topic
        for topic in many_topics.topics
        if topic not in listed or list(listed[topic].partitions) != [0]
    ]
    assert not wrong, f"{len(wrong)} topics missing or not of one partition: {wrong[:SHOWN_ERRORS]}"


@pytest.mark.parametrize("family", FAMILIES)
def test_produce(many_topics: ManyTopics, family: str) -> None:
    assert_all_delivered(produced_by(many_topics, family), many_topics.topics)


@pytest.mark.parametrize("family", FAMILIES)
def test_read_back(many_topics: ManyTopics, family: str) -> None:
    """Reads what was acknowledged even when deliveries failed, to show both."""
    produced = produced_by(many_topics, family)
    read = FAMILIES[family].read_back(many_topics.broker.bootstrap, produced)
    assert read.done(), f"{len(read.unfinished)} topics not read to their end in time"
    assert_read_back(produced, read, family)
