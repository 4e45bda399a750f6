"""Record-moving steps of benchmarks.scale, with confluent-kafka (librdkafka) as a user
would run it: produce round-robin over N single-partition topics keeping every
acknowledged (topic, offset, value), read all of it back, and time records end to end at
a fixed rate spread over all N topics.

librdkafka copes with many topics as it is: it asks Metadata for the topics it produces
to in batches, and fetches all assigned partitions of a broker in one Fetch request.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from benchmarks.client_threads import ThreadUsage
from benchmarks.scale_requests import log_end_offsets
from benchmarks.workloads import paced_latency, send

RECORD_BYTES = 100
# Identical for every broker and N, and stated in the report. Idempotence off (librdkafka's
# default): on, librdkafka keeps at most 5 requests in flight and sends one partition's
# batch per Produce request, so with 10,000 topics it, not the broker, set the rate (100
# records/s against Tansu, 2,000 with it off). message.timeout.ms is librdkafka's default
# of 300 s, written out because a stuck broker's records fail after it.
PRODUCER_CONFIG: dict[str, str | int | bool] = {
    "acks": "all",
    "linger.ms": 5,
    "enable.idempotence": False,
    "message.timeout.ms": 300_000,
}
FLUSH_TIMEOUT_S = 330.0  # past message.timeout.ms, so every record has its report by then
PURGE_WAIT_S = 10.0
READ_BATCH = 10_000
POLL_S = 0.5
WARM_UP_S = 30.0
WARM_UP_S_PER_TOPIC = 0.01  # a consumer of 10,000 partitions took over 30 s to start on Tansu
Acknowledged = dict[str, dict[int, bytes]]  # topic -> offset -> value


def value_of(topic_index: int, sequence: int) -> bytes:
    """A RECORD_BYTES value naming its topic and place, so a record read back at the
    acknowledged offset can be told apart from any other."""
    return f"{topic_index}:{sequence}:".encode().ljust(RECORD_BYTES, b"x")


@dataclass
class Produced:
    """What the producer reported: each acknowledged record, and the failed deliveries."""

    written: int = 0
    acknowledged: Acknowledged = field(default_factory=dict)
    failures: int = 0
    first_failure: str = ""
    seconds: float = float("nan")
    client_cpu_seconds: float = float("nan")
    busiest_client_thread_cores: float = float("nan")  # its share of one core

    @property
    def acknowledged_count(self) -> int:
        return sum(map(len, self.acknowledged.values()))

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        topic, offset = message.topic(), message.offset()
        if error is None and topic is not None and offset is not None and offset >= 0:
            self.acknowledged.setdefault(topic, {})[offset] = message.value() or b""
            return
        self.failures += 1
        self.first_failure = self.first_failure or f"{topic}: {error}"


def produce_round_robin(
    bootstrap: str, topics: Sequence[str], count: int, config: Mapping[str, object]
) -> Produced:
    """Produces ``count`` RECORD_BYTES records, one to each topic in turn, as fast as the
    client goes with librdkafka settings ``config`` (PRODUCER_CONFIG unless overridden);
    records nobody reported on by the flush deadline are purged and count as failed."""
    produced = Produced()
    producer = Producer(
        {"bootstrap.servers": bootstrap, **config, "on_delivery": produced.on_delivery}
    )
    client_before = time.process_time()
    threads = ThreadUsage()
    threads.start()
    started = time.perf_counter()
    for index in range(count):
        topic_index, sequence = index % len(topics), index // len(topics)
        send(producer, topics[topic_index], value_of(topic_index, sequence))
        produced.written += 1
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    produced.seconds = time.perf_counter() - started
    produced.client_cpu_seconds = time.process_time() - client_before
    threads.stop()
    produced.busiest_client_thread_cores = threads.busiest()[1]
    if remaining:
        producer.purge()  # each purged record's delivery report is a failure
        producer.flush(PURGE_WAIT_S)
    return produced


@dataclass
class ReadBack:
    """How many acknowledged records were found intact (same offset, same value)."""

    expected: int
    intact: int
    seconds: float
    finished: bool  # every partition read to its end before the deadline

    @property
    def lost(self) -> int:
        return self.expected - self.intact


def read_back(
    bootstrap: str, acknowledged: Acknowledged, deadline_s: float, absent: Sequence[str] = ()
) -> ReadBack:
    """Reads every partition holding acknowledged records from its beginning until each
    has been read to its end (librdkafka's partition EOF) or to its last acknowledged
    offset, or ``deadline_s`` passes. Topics in ``absent`` (known gone) are not read:
    their records count as lost."""
    expected = {
        topic: dict(offsets)
        for topic, offsets in acknowledged.items()
        if offsets and topic not in absent
    }
    total = sum(map(len, acknowledged.values()))
    ends = {topic: max(offsets) + 1 for topic, offsets in expected.items()}
    unfinished = set(ends)
    intact = 0
    started = time.perf_counter()
    consumer = Consumer(_consumer_config(bootstrap, "scale-read-back", **{
        "enable.partition.eof": True}))  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING) for topic in ends])
        while unfinished and time.perf_counter() - started < deadline_s:
            for message in consumer.consume(READ_BATCH, POLL_S):
                topic, offset = message.topic(), message.offset()
                if topic is None or offset is None:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        unfinished.discard(topic)  # the log ends here
                    continue
                if expected[topic].pop(offset, None) == message.value():
                    intact += 1
                if offset + 1 >= ends[topic]:
                    unfinished.discard(topic)
    finally:
        consumer.close()
    return ReadBack(total, intact, time.perf_counter() - started, not unfinished)


def latency_over(
    bootstrap: str, topics: Sequence[str], rate: int, seconds: float
) -> dict[str, float]:
    """End-to-end latency at ``rate`` records/s spread round-robin over ``topics``, default
    client settings: one consumer assigned to all of them at their log end offsets. Both
    clients are warmed first (the producer's Metadata for every topic, one record through
    both), so the clock measures records in flight, not clients starting."""
    ends = log_end_offsets(bootstrap, topics)
    consumer = Consumer(_consumer_config(bootstrap, "scale-latency"))
    consumer.assign([TopicPartition(topic, 0, ends.get(topic, OFFSET_END)) for topic in topics])
    producer = Producer({"bootstrap.servers": bootstrap})
    warm_up_s = max(WARM_UP_S, WARM_UP_S_PER_TOPIC * len(topics))
    producer.list_topics(timeout=warm_up_s)  # every topic's leader, before the first send
    producer.produce(topics[0], value=b"warm-up")
    producer.flush(warm_up_s)
    _wait_for_a_record(consumer, warm_up_s)
    result = paced_latency(producer, consumer, topics, rate, seconds)
    result["sent"] = int(rate * seconds)
    return result


def _wait_for_a_record(consumer: Consumer, timeout_s: float) -> None:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        message = consumer.poll(POLL_S)
        if message is not None and message.error() is None:
            return
    raise TimeoutError(f"the consumer received no warm-up record in {timeout_s:g} s")


def _consumer_config(bootstrap: str, group: str, **extra: object) -> dict[str, Any]:
    """Assign-mode consumer: librdkafka wants a group id even so (it never joins)."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"{group}-{time.time_ns()}",
        "enable.auto.commit": False,
        **extra,
    }
