"""Benchmark workloads driven by confluent-kafka (librdkafka), shared by the scripts.

Each function runs one workload against a running broker and returns plain
numbers; the scripts decide what to compare and how to report it.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.brokers import RunningBroker
from benchmarks.client_threads import ThreadUsage
from kshim.client.wire import connect
from kshim.protocol.record_batch import iter_batches
from kshim.testing import fetch_fields

TIMEOUT_S = 120
WARM_UP_VALUE = b"warm-up"  # not a send time: the latency reader skips it


@dataclass
class Throughput:
    records: int
    seconds: float
    record_bytes: int
    broker_cpu_seconds: float
    client_cpu_seconds: float = float("nan")  # this process: the client's threads included
    # The busiest thread of this process (the client's), as a share of one core: near 1,
    # that thread set the rate, whatever the broker could do (client_threads.py).
    busiest_client_thread_cores: float = float("nan")

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds

    @property
    def megabytes_per_second(self) -> float:
        return self.records * self.record_bytes / self.seconds / 1e6

    @property
    def broker_cpu_microseconds_per_record(self) -> float:
        return self.broker_cpu_seconds / self.records * 1e6

    @property
    def client_cores(self) -> float:
        """The client's CPU time over the elapsed time: near 1 when the client's own
        Python thread is what sets the rate."""
        return self.client_cpu_seconds / self.seconds


def create_topic(
    broker: RunningBroker, topic: str, partitions: int = 1, full_view: bool = False
) -> None:
    """Creates the topic; on kshim its full-data view is off unless asked for, so the
    throughput workloads measure the log itself (the view's cost is measured on its own)."""
    is_kshim = broker.name.startswith("kshim")  # kshim, or kshim from a baseline checkout
    configs = {"kshim.full.view": str(full_view).lower()} if is_kshim else {}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(TIMEOUT_S)


Headers = list[tuple[str, str | bytes | None]]


def send(
    producer: Producer,
    topic: str,
    value: bytes,
    key: bytes | None = None,
    headers: Headers | None = None,
) -> None:
    """Queues one record, serving delivery callbacks while librdkafka's queue is full."""
    while True:
        try:
            producer.produce(topic, value=value, key=key, headers=headers)
            break
        except BufferError:
            producer.poll(0.001)
    producer.poll(0)


def produce(
    broker: RunningBroker, topic: str, count: int, record_bytes: int, **config: object
) -> Throughput:
    """Produces ``count`` records (acks=all, idempotent) as fast as the client can. The
    clock starts once the first one is acknowledged: before that librdkafka connects,
    reads the metadata and acquires a producer id, which took it 0.5 s on kshim and on
    Kafka alike (its idempotence state machine retries on a 500 ms timer while its
    connection to the partition's leader is not yet up), a third of a 500,000-record run."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True, **config}
    )
    payload = b"x" * record_bytes
    send(producer, topic, payload)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("the first record was not acknowledged")
    cpu_before, threads = broker.cpu_seconds(), ThreadUsage()
    threads.start()
    started = time.perf_counter()
    for _ in range(count - 1):
        send(producer, topic, payload)
    remaining = producer.flush(TIMEOUT_S)
    elapsed = time.perf_counter() - started
    threads.stop()
    if remaining:
        raise RuntimeError(f"{remaining} records not acknowledged")
    return Throughput(
        count - 1, elapsed, record_bytes, broker.cpu_seconds() - cpu_before,
        threads.total_cores() * elapsed, threads.busiest()[1],
    )  # fmt: skip


def consume(
    broker: RunningBroker, topic: str, count: int, record_bytes: int, **config: object
) -> Throughput:
    """Reads ``count`` records from offset 0 of partition 0 (client defaults plus
    ``config``); the clock starts once the first one is read (the client connected and
    found the partition's leader), and counts the rest."""
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "bench", "enable.auto.commit": False,
         "isolation.level": "read_uncommitted", **config}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.perf_counter() + TIMEOUT_S
    first: Sequence[object] = []
    while not first and time.perf_counter() < deadline:
        first = consumer.consume(1, 1.0)
    received = 0
    cpu_before, client_before = broker.cpu_seconds(), time.process_time()
    threads = ThreadUsage()
    threads.start()
    started = time.perf_counter()
    while received < count - 1 and time.perf_counter() < deadline:
        # No more than remain: consume() waits its whole timeout for a batch not yet full.
        received += len(consumer.consume(min(10_000, count - 1 - received), 1.0))
    elapsed = time.perf_counter() - started
    threads.stop()
    client_cpu = time.process_time() - client_before
    consumer.close()
    if not first or received < count - 1:
        raise RuntimeError(f"read {len(first) + received} of {count} records")
    return Throughput(
        count - 1, elapsed, record_bytes, broker.cpu_seconds() - cpu_before, client_cpu,
        threads.busiest()[1],
    )  # fmt: skip


FETCH_KEY, FETCH_VERSION = 1, 12


def consume_raw(broker: RunningBroker, topic: str, count: int, record_bytes: int) -> Throughput:
    """Reads ``count`` records from offset 0 of partition 0 with Fetch v12 requests on the
    wire, one at a time, each of up to 1 MiB (the Java consumer's max.partition.fetch.bytes),
    finding the next offset from the batch headers without decoding a record: the broker's
    side of consuming. A real client's own work per record (librdkafka's and Python's)
    sets its rate near a million 100-byte records/s on kshim and Kafka alike here."""
    offset = 0
    with connect(broker.bootstrap, TIMEOUT_S) as connection:
        cpu_before, client_before = broker.cpu_seconds(), time.thread_time()
        started = time.perf_counter()
        deadline = started + TIMEOUT_S
        while offset < count and time.perf_counter() < deadline:
            answer = connection.call(FETCH_KEY, FETCH_VERSION, fetch_fields(topic, 0, offset, 500))
            offset = _next_offset(answer.responses[0].partitions[0].records, offset)
        elapsed = time.perf_counter() - started
        cpu = broker.cpu_seconds() - cpu_before
        client_cpu = time.thread_time() - client_before  # the one thread that fetches
    if offset < count:
        raise RuntimeError(f"read {offset} of {count} records")
    return Throughput(count, elapsed, record_bytes, cpu, client_cpu, client_cpu / elapsed)


def _next_offset(records: bytes | None, offset: int) -> int:
    """The offset after the last whole batch in a partition's fetched ``records`` (a fetch
    may end in part of a batch), or ``offset`` when there is none."""
    for _, header in iter_batches(records or b""):
        offset = header.next_offset
    return offset


def end_to_end_latency(
    broker: RunningBroker,
    topic: str,
    rate: int,
    seconds: float,
    warm_up_s: float = 0.0,
    producer_config: Mapping[str, object] | None = None,
    consumer_config: Mapping[str, object] | None = None,
) -> dict[str, float]:
    """Sends ``rate`` records/s for ``warm_up_s`` untimed, then ``seconds`` timed, with the
    clients' default settings and ``producer_config``/``consumer_config`` over them; returns
    latency percentiles (ms) of the timed records, end to end and to each acknowledgement."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "latency",
                         "enable.auto.commit": False, **(consumer_config or {})})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.consume(1, 1.0)  # connected and positioned before the clock starts
    producer = Producer({"bootstrap.servers": broker.bootstrap, **(producer_config or {})})
    return paced_latency(producer, consumer, [topic], rate, seconds, int(rate * warm_up_s))


def paced_latency(
    producer: Producer,
    consumer: Consumer,
    topics: Sequence[str],
    rate: int,
    seconds: float,
    warm_up_records: int = 0,
) -> dict[str, float]:
    """Sends ``rate`` records/s round-robin over ``topics``: first ``warm_up_records``
    untimed ones (so that a JVM broker has compiled its produce and fetch paths, and every
    broker has made its first-use allocations, before the clock starts), then ``seconds``
    of records carrying their send time, while ``consumer``, already assigned and
    positioned, receives them (records whose value is not a send time are skipped); closes
    the consumer. Returns the count received and latency percentiles (ms): end to end
    (``p50_ms`` ...), and from each timed record's send to its acknowledgement's delivery
    report (``ack_p50_ms`` ...)."""
    latencies: list[float] = []
    acknowledged: list[float] = []
    total = int(rate * seconds)
    reader = threading.Thread(target=_collect_latencies, args=(consumer, total, latencies))
    reader.start()
    started = time.perf_counter()
    for index in range(warm_up_records + total):
        target = started + index / rate
        while (now := time.perf_counter()) < target:
            producer.poll(min(target - now, 0.0005))  # serves delivery reports meanwhile
        timed = index >= warm_up_records
        value = str(time.time_ns()).encode() if timed else WARM_UP_VALUE
        on_delivery = _acknowledgement_timer(acknowledged) if timed else None
        producer.produce(topics[index % len(topics)], value=value, on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(TIMEOUT_S)
    reader.join(TIMEOUT_S)
    consumer.close()
    return (
        {"records": len(latencies)} | _percentiles(latencies) | _percentiles(acknowledged, "ack_")
    )


def _acknowledgement_timer(acknowledged: list[float]) -> Callable[[object, object], None]:
    """A delivery callback adding the time from now to its call (ms) to ``acknowledged``
    (the producer's polls between sends run it, a fraction of a millisecond after
    librdkafka has the acknowledgement)."""
    sent = time.perf_counter()

    def delivered(error: object, _message: object) -> None:
        if error is None:
            acknowledged.append((time.perf_counter() - sent) * 1000)

    return delivered


def _percentiles(values: list[float], prefix: str = "") -> dict[str, float]:
    ordered = sorted(values)
    return {
        f"{prefix}p50_ms": percentile(ordered, 0.50),
        f"{prefix}p99_ms": percentile(ordered, 0.99),
        f"{prefix}p999_ms": percentile(ordered, 0.999),
        f"{prefix}mean_ms": statistics.fmean(ordered) if ordered else float("nan"),
    }


def _collect_latencies(consumer: Consumer, total: int, latencies: list[float]) -> None:
    deadline = time.perf_counter() + TIMEOUT_S
    while len(latencies) < total and time.perf_counter() < deadline:
        message = consumer.poll(0.1)  # one at a time: consume(n) would wait for n records
        if message is None or message.error() is not None:
            continue
        sent_ns = message.value()
        if sent_ns is None or not sent_ns.isdigit():
            continue  # not a timed record
        latencies.append((time.time_ns() - int(sent_ns)) / 1e6)


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """The value at ``fraction`` (0.99 for p99) of ``ordered``, a sorted sequence; NaN when
    empty."""
    if not ordered:
        return float("nan")
    return ordered[min(int(len(ordered) * fraction), len(ordered) - 1)]


@dataclass
class TransactionalThroughput(Throughput):
    """A transactional produce's rate, and how long each ``commit_transaction`` took: the
    client's flush of the transaction's last records, then EndTxn until its markers are
    written (KIP-98)."""

    commit_ms: list[float] = field(default_factory=list)


def produce_transactional(
    broker: RunningBroker, topic: str, count: int, record_bytes: int, per_transaction: int
) -> TransactionalThroughput:
    """Produces ``count`` records in transactions of ``per_transaction`` records each."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "transactional.id": f"bench-{time.time_ns()}"})  # fmt: skip
    producer.init_transactions(TIMEOUT_S)
    payload = b"x" * record_bytes
    cpu_before = broker.cpu_seconds()
    started = time.perf_counter()
    commit_ms = []
    for first in range(0, count, per_transaction):
        producer.begin_transaction()
        for _ in range(min(per_transaction, count - first)):
            send(producer, topic, payload)
        committing = time.perf_counter()
        producer.commit_transaction(TIMEOUT_S)
        commit_ms.append((time.perf_counter() - committing) * 1000)
    elapsed = time.perf_counter() - started
    cpu = broker.cpu_seconds() - cpu_before
    return TransactionalThroughput(count, elapsed, record_bytes, cpu, commit_ms=commit_ms)


def warm_up(broker: RunningBroker, seconds: float, per_transaction: int = 0) -> None:
    """Untimed traffic on a topic of its own, for before a workload's clock starts and its
    broker's CPU and memory are sampled: 100-byte records produced as fast as the client
    can for ``seconds`` (in transactions of ``per_transaction`` records when given), then
    read back. A JVM broker interprets its code until each method has run some thousands of
    times, and compiles it after (HotSpot's tiered compilation); every broker makes its
    first-use allocations. Steady state is what a long-running broker serves."""
    topic = broker.topic("warm-up")
    create_topic(broker, topic)
    producer_settings: dict[str, object] = {"bootstrap.servers": broker.bootstrap, "linger.ms": 5}
    if per_transaction:
        producer_settings["transactional.id"] = f"warm-up-{time.time_ns()}"
    else:
        producer_settings |= {"acks": "all", "enable.idempotence": True}
    producer = Producer(producer_settings)
    if per_transaction:
        producer.init_transactions(TIMEOUT_S)
    payload = b"x" * 100
    count = 0
    deadline = time.perf_counter() + seconds
    while count == 0 or time.perf_counter() < deadline:
        if per_transaction:
            producer.begin_transaction()
        for _ in range(per_transaction or 1000):
            send(producer, topic, payload)
        count += per_transaction or 1000
        if per_transaction:
            producer.commit_transaction(TIMEOUT_S)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("warm-up records not acknowledged")
    consume(broker, topic, count, 100)
