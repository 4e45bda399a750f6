"""Transactions with kafka-python, aiokafka and confluent-kafka against a real ``kshim serve``.

Each client's transactional producer runs the same scenarios (docs/protocol-notes.md §5,
§6.4), on its own protocol versions: aiokafka speaks v0 of InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit; kafka-python and
librdkafka speak newer versions.

- committed transactions are visible to read_committed readers, aborted ones never, and
  read_uncommitted readers see both, at exact offsets with a gap for every marker; each
  producer's output is read back by all three clients' consumers;
- while a transaction is open, ListOffsets latest under read_committed is the last stable
  offset (the transaction's first offset), and read_committed readers stop there;
- consume-transform-produce: offsets sent with the transaction (AddOffsetsToTxn,
  TxnOffsetCommit) become the group's committed offsets only when it commits;
- a zombie producer is fenced by a newer instance with the same transactional.id;
- an open transaction survives a kill -9 of the broker and commits afterwards;
- Spark's connector (the Java client) reading with ``kafka.isolation.level=read_committed``
  returns the committed rows only, and stops before a transaction still open (skipped
  without the connector jars).

The offsets a reader must return are computed by ``layout`` from the transactions as
written, so every assertion is exact. Raw ListOffsets, OffsetFetch and
DescribeTransactions requests (kshim/client/wire.py) check the broker's side directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import aiokafka.errors
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaError as KafkaPythonError
from kafka.errors import ProducerFencedError

from kshim.client.wire import connect
from kshim.testing import BrokerProcess
from spark_examples.spark_session import connector_unavailable_reason, kafka_spark_session
from tests.e2e.client_helpers import Deadline, unique_topic

pytestmark = pytest.mark.timeout(90)

T = TypeVar("T")
CLIENTS = ("kafka-python", "aiokafka", "confluent")
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"
ISOLATION_CODES = {READ_UNCOMMITTED: 0, READ_COMMITTED: 1}
WAIT_S = 20.0
WAIT_MS = int(WAIT_S * 1000)
LINGER_MS = 5
# A reader learns it is at the end from a fetch that returns nothing, after this long poll.
READ_WAIT_MS = 50
LIST_OFFSETS, OFFSET_FETCH, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 2, 9, 65, 66
LATEST = -1
UNSTABLE_OFFSET_COMMIT = 88
NOTHING_COMMITTED = -1

Record = tuple[int, bytes]  # (offset, value) as a consumer returns it


# --------------------------------------------------------------------------------------
# What readers must see: offsets of records and markers, computed from what was written
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transaction:
    """Records written in one transaction, as (partition, value), and how it ended."""

    writes: tuple[tuple[int, bytes], ...]
    commit: bool


@dataclass(frozen=True, slots=True)
class Layout:
    committed: dict[int, list[Record]]  # what read_committed readers return, per partition
    everything: dict[int, list[Record]]  # what read_uncommitted readers return
    end_offsets: dict[int, int]  # the log end offset (marker included) per partition


def layout(transactions: Sequence[Transaction], partitions: int) -> Layout:
    """Offsets as the broker assigns them: records in order, then one marker per partition."""
    committed: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    everything: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    next_offset = dict.fromkeys(range(partitions), 0)
    for transaction in transactions:
        for partition, value in transaction.writes:
            record = (next_offset[partition], value)
            everything[partition].append(record)
            if transaction.commit:
                committed[partition].append(record)
            next_offset[partition] += 1
        for partition in {partition for partition, _ in transaction.writes}:
            next_offset[partition] += 1  # the COMMIT or ABORT marker
    return Layout(committed, everything, next_offset)


# --------------------------------------------------------------------------------------
# Raw requests: the broker's own answers, independent of any client
# --------------------------------------------------------------------------------------


def raw_latest_offset(broker: BrokerProcess, topic: str, partition: int, isolation: str) -> int:
    """ListOffsets v2 latest: the high watermark, or the last stable offset for read_committed."""
    with connect(broker.bootstrap) as connection:
        response = connection.call(LIST_OFFSETS, 2, {
            "replica_id": -1,
            "isolation_level": ISOLATION_CODES[isolation],
            "topics": [{"name": topic,
                        "partitions": [{"partition_index": partition, "timestamp": LATEST}]}],
        })  # fmt: skip
    (answer,) = response.topics[0].partitions
    assert answer.error_code == 0, answer
    return int(answer.offset)


def raw_committed_offset(
    broker: BrokerProcess, group: str, topic: str, require_stable: bool = False
) -> tuple[int, int]:
    """OffsetFetch v7 of partition 0: (committed offset, error code)."""
    with connect(broker.bootstrap) as connection:
        response = connection.call(OFFSET_FETCH, 7, {
            "group_id": group,
            "topics": [{"name": topic, "partition_indexes": [0]}],
            "require_stable": require_stable,
        })  # fmt: skip
    (answer,) = response.topics[0].partitions
    return int(answer.committed_offset), int(answer.error_code)


@dataclass(frozen=True, slots=True)
class TransactionView:
    state: str
    producer_id: int
    producer_epoch: int
    partitions: dict[str, list[int]]


def describe_transaction(broker: BrokerProcess, transactional_id: str) -> TransactionView:
    """DescribeTransactions v0 of one transactional id; fails if the broker does not know it."""
    with connect(broker.bootstrap) as connection:
        response = connection.call(
            DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]}
        )
    (state,) = response.transaction_states
    assert state.error_code == 0, state
    partitions = {topic.topic: sorted(topic.partitions) for topic in state.topics}
    return TransactionView(
        state.transaction_state, int(state.producer_id), int(state.producer_epoch), partitions
    )


# --------------------------------------------------------------------------------------
# Topics and plain records (confluent-kafka: not the client under test)
# --------------------------------------------------------------------------------------


def create_topic(bootstrap: str, label: str, partitions: int = 1) -> str:
    topic = unique_topic(label)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=WAIT_S)
    return topic


def produce_plain(bootstrap: str, topic: str, values: Sequence[bytes], partition: int = 0) -> None:
    """Non-transactional records, each acknowledged before this returns."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS})
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(WAIT_S) == 0


# --------------------------------------------------------------------------------------
# One face for the three clients' transactional producers and consumers
# --------------------------------------------------------------------------------------


class _LoopThread:
    """One asyncio loop in a daemon thread, so aiokafka can be driven from sync tests."""

    _loop: asyncio.AbstractEventLoop | None = None
    _lock = threading.Lock()

    @classmethod
    def run(cls, coroutine: Coroutine[Any, Any, T], timeout_s: float = WAIT_S * 2) -> T:
        with cls._lock:
            if cls._loop is None:
                cls._loop = asyncio.new_event_loop()
                threading.Thread(target=cls._loop.run_forever, daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coroutine, cls._loop).result(timeout_s)


class GroupConsumer(Protocol):
    def consume(self, count: int) -> list[Record]: ...
    def close(self) -> None: ...


class TransactionalProducer(Protocol):
    def begin(self) -> None: ...
    def send(self, topic: str, partition: int, value: bytes) -> None: ...
    def flush(self) -> None: ...
    def commit(self) -> None: ...
    def abort(self) -> None: ...
    def send_offsets(self, topic: str, offset: int, consumer: Any, group: str) -> None: ...
    def close(self) -> None: ...


class KafkaPythonProducer:
    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=transactional_id,
            linger_ms=LINGER_MS,
            max_block_ms=WAIT_MS,
            request_timeout_ms=WAIT_MS // 2,
            reconnect_backoff_max_ms=500,
        )
        self.producer.init_transactions()

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self.producer.send(topic, value, partition=partition)

    def flush(self) -> None:
        self.producer.flush(WAIT_S)

    def commit(self) -> None:
        self.producer.commit_transaction()

    def abort(self) -> None:
        self.producer.abort_transaction()

    def send_offsets(self, topic: str, offset: int, consumer: Any, group: str) -> None:
        offsets = {KafkaTopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)}
        self.producer.send_offsets_to_transaction(offsets, consumer.consumer.group_metadata())

    def close(self) -> None:
        self.producer.close(timeout=0)


class AiokafkaProducer:
    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.producer = _LoopThread.run(self._start(bootstrap, transactional_id))
        self._sent: list[asyncio.Future[Any]] = []

    @staticmethod
    async def _start(bootstrap: str, transactional_id: str) -> AIOKafkaProducer:
        # aiokafka objects must be made on the loop that runs them.
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=transactional_id,
            enable_idempotence=True,
            linger_ms=LINGER_MS,
            request_timeout_ms=WAIT_MS // 2,
        )
        await producer.start()
        return producer

    def begin(self) -> None:
        _LoopThread.run(self.producer.begin_transaction())

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self._sent.append(_LoopThread.run(self.producer.send(topic, value, partition=partition)))

    def flush(self) -> None:
        async def delivered() -> None:
            await asyncio.gather(*self._sent)

        _LoopThread.run(delivered())
        self._sent = []

    def commit(self) -> None:
        _LoopThread.run(self.producer.commit_transaction())

    def abort(self) -> None:
        _LoopThread.run(self.producer.abort_transaction())

    def send_offsets(self, topic: str, offset: int, consumer: Any, group: str) -> None:
        offsets = {AioTopicPartition(topic, 0): offset}
        _LoopThread.run(self.producer.send_offsets_to_transaction(offsets, group))

    def close(self) -> None:
        with contextlib.suppress(aiokafka.errors.KafkaError):  # a fenced producer
            _LoopThread.run(self.producer.stop())


class ConfluentProducer:
    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": LINGER_MS,
            "reconnect.backoff.max.ms": 500,
        })  # fmt: skip
        self.producer.init_transactions(WAIT_S)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self.producer.produce(topic, value=value, partition=partition)

    def flush(self) -> None:
        assert self.producer.flush(WAIT_S) == 0

    def commit(self) -> None:
        self.producer.commit_transaction(WAIT_S)

    def abort(self) -> None:
        self.producer.abort_transaction(WAIT_S)

    def send_offsets(self, topic: str, offset: int, consumer: Any, group: str) -> None:
        offsets = [ConfluentTopicPartition(topic, 0, offset)]
        metadata = consumer.consumer.consumer_group_metadata()
        self.producer.send_offsets_to_transaction(offsets, metadata, WAIT_S)

    def close(self) -> None:
        """Nothing to do: confluent-kafka destroys a producer when it is collected."""


def transactional_producer(
    client: str, bootstrap: str, transactional_id: str
) -> TransactionalProducer:
    """An initialised transactional producer of ``client`` (init_transactions done)."""
    if client == "kafka-python":
        return KafkaPythonProducer(bootstrap, transactional_id)
    if client == "aiokafka":
        return AiokafkaProducer(bootstrap, transactional_id)
    return ConfluentProducer(bootstrap, transactional_id)


@contextlib.contextmanager
def producing(client: str, bootstrap: str, transactional_id: str) -> Iterator[Any]:
    producer = transactional_producer(client, bootstrap, transactional_id)
    try:
        yield producer
    finally:
        producer.close()


# Group consumers (read_committed, manual commits) for consume-transform-produce.


class KafkaPythonGroupConsumer:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level=READ_COMMITTED,
        )

    def consume(self, count: int) -> list[Record]:
        consumed: list[Record] = []
        deadline = Deadline(WAIT_S)
        while len(consumed) < count and not deadline.expired():
            batches = self.consumer.poll(timeout_ms=200, max_records=count - len(consumed))
            for batch in batches.values():
                consumed += [(record.offset, record.value) for record in batch]
        return consumed

    def close(self) -> None:
        self.consumer.close(autocommit=False)


class AiokafkaGroupConsumer:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = _LoopThread.run(self._start(bootstrap, topic, group))

    @staticmethod
    async def _start(bootstrap: str, topic: str, group: str) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level=READ_COMMITTED,
        )
        await consumer.start()
        return consumer

    def consume(self, count: int) -> list[Record]:
        consumed: list[Record] = []
        deadline = Deadline(WAIT_S)
        while len(consumed) < count and not deadline.expired():
            batches = _LoopThread.run(
                self.consumer.getmany(timeout_ms=200, max_records=count - len(consumed))
            )
            for batch in batches.values():
                consumed += [(record.offset, record.value) for record in batch]
        return consumed

    def close(self) -> None:
        _LoopThread.run(self.consumer.stop())


class ConfluentGroupConsumer:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": READ_COMMITTED,
        })  # fmt: skip
        self.consumer.subscribe([topic])

    def consume(self, count: int) -> list[Record]:
        consumed: list[Record] = []
        deadline = Deadline(WAIT_S)
        while len(consumed) < count and not deadline.expired():
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                consumed.append((message.offset(), message.value()))
        return consumed

    def close(self) -> None:
        self.consumer.close()


def group_consumer(client: str, bootstrap: str, topic: str, group: str) -> Any:
    if client == "kafka-python":
        return KafkaPythonGroupConsumer(bootstrap, topic, group)
    if client == "aiokafka":
        return AiokafkaGroupConsumer(bootstrap, topic, group)
    return ConfluentGroupConsumer(bootstrap, topic, group)


# Assign-mode readers: everything from offset 0 to the end the client itself reports.


def read_partition(
    client: str, bootstrap: str, topic: str, partition: int, isolation: str
) -> tuple[list[Record], int]:
    """(records returned, end offset the client reported) reading from offset 0 to the end.

    The end is the client's own answer (ListOffsets latest with its isolation level), so
    under read_committed it is the last stable offset. Reading stops once the consumer's
    position reaches it (confluent: the end-of-partition event).
    """
    if client == "kafka-python":
        return _kafka_python_read(bootstrap, topic, partition, isolation)
    if client == "aiokafka":
        return _LoopThread.run(_aiokafka_read(bootstrap, topic, partition, isolation))
    return _confluent_read(bootstrap, topic, partition, isolation)


def _kafka_python_read(
    bootstrap: str, topic: str, partition: int, isolation: str
) -> tuple[list[Record], int]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, fetch_max_wait_ms=READ_WAIT_MS
    )
    try:
        tp = KafkaTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        end = consumer.end_offsets([tp])[tp]
        records: list[Record] = []
        deadline = Deadline(WAIT_S)
        while consumer.position(tp) < end and not deadline.expired():
            for batch in consumer.poll(timeout_ms=200).values():
                records += [(record.offset, record.value) for record in batch]
        assert consumer.position(tp) == end, f"stuck at {consumer.position(tp)} of {end}"
        return records, end
    finally:
        consumer.close()


async def _aiokafka_read(
    bootstrap: str, topic: str, partition: int, isolation: str
) -> tuple[list[Record], int]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, fetch_max_wait_ms=READ_WAIT_MS
    )
    await consumer.start()
    try:
        tp = AioTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        end = (await consumer.end_offsets([tp]))[tp]
        records: list[Record] = []
        deadline = Deadline(WAIT_S)
        while await consumer.position(tp) < end and not deadline.expired():
            for batch in (await consumer.getmany(tp, timeout_ms=200)).values():
                records += [(record.offset, record.value) for record in batch]
        position = await consumer.position(tp)
        assert position == end, f"stuck at {position} of {end}"
        return records, end
    finally:
        await consumer.stop()


def _confluent_read(
    bootstrap: str, topic: str, partition: int, isolation: str
) -> tuple[list[Record], int]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "transactions-reader",  # never joined: assign() only
        "isolation.level": isolation,
        "enable.partition.eof": True,
        "enable.auto.commit": False,
        "fetch.wait.max.ms": READ_WAIT_MS,
    })  # fmt: skip
    try:
        tp = ConfluentTopicPartition(topic, partition, 0)
        _, end = consumer.get_watermark_offsets(tp, timeout=WAIT_S, cached=False)
        consumer.assign([tp])
        records: list[Record] = []
        reached = -1
        deadline = Deadline(WAIT_S)
        while reached < end and not deadline.expired():
            message = consumer.poll(deadline.poll_timeout_s(0.2))
            if message is None:
                continue
            error = message.error()
            if error is None:
                records.append((message.offset(), message.value()))
            elif error.code() == KafkaError._PARTITION_EOF:
                reached = message.offset()
        assert reached == end, f"end of partition at {reached}, expected {end}"
        return records, end
    finally:
        consumer.close()


def assert_reads(
    bootstrap: str, topic: str, partition: int, committed: list[Record], everything: list[Record],
    committed_end: int, end: int, readers: Sequence[str] = CLIENTS,
) -> None:  # fmt: skip
    """Every reader returns exactly these records and reports exactly these end offsets."""
    for reader in readers:
        assert read_partition(reader, bootstrap, topic, partition, READ_COMMITTED) == (
            committed,
            committed_end,
        ), f"{reader} read_committed"
        assert read_partition(reader, bootstrap, topic, partition, READ_UNCOMMITTED) == (
            everything,
            end,
        ), f"{reader} read_uncommitted"


def play(producer: TransactionalProducer, topic: str, transactions: Sequence[Transaction]) -> None:
    """Writes each transaction, then commits or aborts it as it says."""
    for transaction in transactions:
        producer.begin()
        for partition, value in transaction.writes:
            producer.send(topic, partition, value)
        producer.flush()
        if transaction.commit:
            producer.commit()
        else:
            producer.abort()


def run_transactions(
    client: str, bootstrap: str, transactional_id: str, topic: str,
    transactions: Sequence[Transaction],
) -> None:  # fmt: skip
    with producing(client, bootstrap, transactional_id) as producer:
        play(producer, topic, transactions)


def fenced(client: str) -> tuple[type[BaseException], ...]:
    """What a fenced producer's commit raises in ``client``."""
    if client == "kafka-python":
        return (ProducerFencedError,)
    if client == "aiokafka":
        return (aiokafka.errors.ProducerFenced,)
    return (KafkaException,)


# --------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------

COMMIT_ABORT_COMMIT = (
    Transaction(((0, b"a0"), (0, b"a1"), (1, b"a2")), commit=True),
    Transaction(((0, b"b0"), (1, b"b1"), (1, b"b2")), commit=False),
    Transaction(((0, b"c0"), (1, b"c1")), commit=True),
)


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_visible_aborted_never(client: str, shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, f"txn-{client}", partitions=2)
    transactional_id = unique_topic(f"visibility-{client}")
    run_transactions(client, bootstrap, transactional_id, topic, COMMIT_ABORT_COMMIT)
    expected = layout(COMMIT_ABORT_COMMIT, partitions=2)
    # p0: a0 a1 C b0 A c0 C; p1: a2 C b1 b2 A c1 C
    assert expected.end_offsets == {0: 7, 1: 7}
    for partition in (0, 1):
        end = expected.end_offsets[partition]
        for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
            assert raw_latest_offset(shared_broker, topic, partition, isolation) == end
        assert_reads(bootstrap, topic, partition, expected.committed[partition],
                     expected.everything[partition], end, end)  # fmt: skip
    view = describe_transaction(shared_broker, transactional_id)
    assert (view.state, view.partitions) == ("CompleteCommit", {})


NOTHING_SENT_THEN_ONE_RECORD = (
    Transaction((), commit=True),
    Transaction((), commit=False),
    Transaction(((0, b"a0"),), commit=True),
)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_transaction_that_sends_nothing_ends_without_the_broker(
    client: str, shared_broker: BrokerProcess
) -> None:
    """kshim refuses EndTxn for a transaction with nothing added (INVALID_TXN_STATE), as
    Kafka's coordinator refuses it from state Empty; every client ends one on its own,
    as the Java client and librdkafka do, and goes on with the next."""
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, f"txn-empty-{client}", partitions=1)
    transactional_id = unique_topic(f"empty-{client}")
    run_transactions(client, bootstrap, transactional_id, topic, NOTHING_SENT_THEN_ONE_RECORD)
    expected = layout(NOTHING_SENT_THEN_ONE_RECORD, partitions=1)
    assert expected.end_offsets == {0: 2}  # a0, then its commit marker
    assert_reads(bootstrap, topic, 0, expected.committed[0], expected.everything[0], 2, 2,
                 readers=(client,))  # fmt: skip
    view = describe_transaction(shared_broker, transactional_id)
    assert (view.state, view.partitions) == ("CompleteCommit", {})


@pytest.mark.parametrize("client", CLIENTS)
def test_read_committed_stops_at_last_stable_offset(
    client: str, shared_broker: BrokerProcess
) -> None:
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, f"lso-{client}")
    transactional_id = unique_topic(f"lso-{client}")
    produce_plain(bootstrap, topic, [b"x0", b"x1"])  # offsets 0, 1
    with producing(client, bootstrap, transactional_id) as producer:
        producer.begin()
        for value in (b"t0", b"t1", b"t2"):  # offsets 2-4: the open transaction
            producer.send(topic, 0, value)
        producer.flush()
        produce_plain(bootstrap, topic, [b"x2"])  # offset 5, after the open transaction
        plain = [(0, b"x0"), (1, b"x1")]
        everything = [*plain, (2, b"t0"), (3, b"t1"), (4, b"t2"), (5, b"x2")]

        assert raw_latest_offset(shared_broker, topic, 0, READ_COMMITTED) == 2
        assert raw_latest_offset(shared_broker, topic, 0, READ_UNCOMMITTED) == 6
        # The client's own end offset and reads: nothing from the transaction's start on.
        assert_reads(bootstrap, topic, 0, plain, everything, 2, 6, readers=[client])
        view = describe_transaction(shared_broker, transactional_id)
        assert (view.state, view.partitions) == ("Ongoing", {topic: [0]})

        producer.commit()  # the COMMIT marker goes to offset 6
    assert raw_latest_offset(shared_broker, topic, 0, READ_COMMITTED) == 7
    assert_reads(bootstrap, topic, 0, everything, everything, 7, 7, readers=[client])


@pytest.mark.parametrize("client", CLIENTS)
def test_consume_transform_produce(client: str, shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    source = create_topic(bootstrap, f"ctp-in-{client}")
    sink = create_topic(bootstrap, f"ctp-out-{client}")
    group = unique_topic(f"ctp-{client}")
    inputs = [b"v0", b"v1", b"v2", b"v3"]
    produce_plain(bootstrap, source, inputs)

    with (
        contextlib.closing(group_consumer(client, bootstrap, source, group)) as consumer,
        producing(client, bootstrap, unique_topic(f"ctp-{client}")) as producer,
    ):
        # Round one commits: outputs visible, the group's offset moves to 4.
        consumed = consumer.consume(len(inputs))
        assert consumed == list(enumerate(inputs))
        producer.begin()
        for _, value in consumed:
            producer.send(sink, 0, value.upper())
        producer.send_offsets(source, len(inputs), consumer, group)
        producer.flush()
        assert raw_committed_offset(shared_broker, group, source) == (NOTHING_COMMITTED, 0)
        assert raw_committed_offset(shared_broker, group, source, require_stable=True) == (
            NOTHING_COMMITTED,
            UNSTABLE_OFFSET_COMMIT,
        )
        producer.commit()
        assert raw_committed_offset(shared_broker, group, source) == (4, 0)
        assert raw_committed_offset(shared_broker, group, source, require_stable=True) == (4, 0)

        # Round two aborts: outputs invisible, the group's offset stays at 4.
        produce_plain(bootstrap, source, [b"v4", b"v5"])
        assert consumer.consume(2) == [(4, b"v4"), (5, b"v5")]
        producer.begin()
        producer.send(sink, 0, b"V4")
        producer.send(sink, 0, b"V5")
        producer.send_offsets(source, 6, consumer, group)
        producer.flush()
        producer.abort()
        assert raw_committed_offset(shared_broker, group, source, require_stable=True) == (4, 0)

        # Round three sends no offsets: nothing of round two's may be pending during it
        # (require_stable) or committed by its commit.
        producer.begin()
        producer.send(sink, 0, b"X")
        producer.flush()
        during = raw_committed_offset(shared_broker, group, source, require_stable=True)
        producer.commit()
        after = raw_committed_offset(shared_broker, group, source)
        assert (during, after) == ((4, 0), (4, 0))

    outputs = [(offset, value.upper()) for offset, value in enumerate(inputs)]
    # sink: V0-V3 at 0-3, COMMIT at 4, V4 V5 at 5-6, ABORT at 7, X at 8, COMMIT at 9
    assert_reads(bootstrap, sink, 0, [*outputs, (8, b"X")],
                 [*outputs, (5, b"V4"), (6, b"V5"), (8, b"X")], 10, 10,
                 readers=[client])  # fmt: skip
    # A new member of the group resumes where the committed transaction left off.
    with contextlib.closing(group_consumer(client, bootstrap, source, group)) as restarted:
        assert restarted.consume(2) == [(4, b"v4"), (5, b"v5")]


def _recreate_topic(bootstrap: str, topic: str) -> None:
    """Deletes ``topic`` and creates it again under the same name, empty."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=WAIT_S)
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=WAIT_S)


def test_recreated_topic_forgets_the_deleted_topics_aborted_transactions(
    shared_broker: BrokerProcess,
) -> None:
    """The same transactional id keeps its producer id across sessions, so an aborted
    transaction left listed for a deleted topic would hide that producer's committed
    records at the same offsets of the topic recreated under the same name."""
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, "recreated")
    transactional_id = unique_topic("recreated")
    aborted = Transaction(((0, b"a0"), (0, b"a1")), commit=False)
    run_transactions("confluent", bootstrap, transactional_id, topic, [aborted])
    _recreate_topic(bootstrap, topic)
    committed = Transaction(((0, b"c0"), (0, b"c1")), commit=True)
    run_transactions("confluent", bootstrap, transactional_id, topic, [committed])
    expected = layout([committed], partitions=1)
    assert_reads(bootstrap, topic, 0, expected.committed[0], expected.everything[0], 3, 3)


@pytest.mark.parametrize("client", CLIENTS)
def test_zombie_producer_is_fenced(client: str, shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, f"zombie-{client}")
    transactional_id = unique_topic(f"zombie-{client}")
    zombie = transactional_producer(client, bootstrap, transactional_id)
    try:
        zombie.begin()
        zombie.send(topic, 0, b"old-0")
        zombie.send(topic, 0, b"old-1")
        zombie.flush()
        first = describe_transaction(shared_broker, transactional_id)
        assert first.state == "Ongoing"

        # The new instance's InitProducerId aborts the zombie's transaction (no review
        # hook on this broker): the abort bumps the epoch, and the new instance gets the
        # next one, as in Kafka (TransactionCoordinator.handleInitProducerId, Ongoing).
        with producing(client, bootstrap, transactional_id) as successor:
            second = describe_transaction(shared_broker, transactional_id)
            assert (second.producer_id, second.producer_epoch) == (
                first.producer_id,
                first.producer_epoch + 2,
            )
            with pytest.raises(fenced(client)) as raised:
                zombie.commit()
            if client == "confluent":
                error = raised.value.args[0]
                assert (error.code(), error.fatal()) == (KafkaError._FENCED, True)
            successor.begin()
            successor.send(topic, 0, b"new-0")
            successor.flush()
            successor.commit()
    finally:
        zombie.close()

    # old-0 old-1 at 0-1, ABORT at 2, new-0 at 3, COMMIT at 4
    everything = [(0, b"old-0"), (1, b"old-1"), (3, b"new-0")]
    assert_reads(bootstrap, topic, 0, [(3, b"new-0")], everything, 5, 5)


@pytest.mark.parametrize("client", CLIENTS)
def test_open_transaction_survives_kill_9(client: str, fresh_broker: BrokerProcess) -> None:
    bootstrap = fresh_broker.bootstrap
    topic = create_topic(bootstrap, f"restart-{client}")
    transactional_id = unique_topic(f"restart-{client}")
    with producing(client, bootstrap, transactional_id) as producer:
        producer.begin()
        producer.send(topic, 0, b"aborted-0")  # offsets 0-1, ABORT at 2
        producer.send(topic, 0, b"aborted-1")
        producer.flush()
        producer.abort()
        producer.begin()
        producer.send(topic, 0, b"open-0")  # offsets 3-4, open across the restart
        producer.send(topic, 0, b"open-1")
        producer.flush()
        before = describe_transaction(fresh_broker, transactional_id)

        fresh_broker.kill()
        fresh_broker.start()
        after = describe_transaction(fresh_broker, transactional_id)
        assert after == before
        assert before.state == "Ongoing"
        assert raw_latest_offset(fresh_broker, topic, 0, READ_COMMITTED) == 3
        assert raw_latest_offset(fresh_broker, topic, 0, READ_UNCOMMITTED) == 5

        producer.commit()  # the producer reconnects; its transaction is still there
    # The aborted-transaction index survived too: readers still skip offsets 0-1.
    committed = [(3, b"open-0"), (4, b"open-1")]
    everything = [(0, b"aborted-0"), (1, b"aborted-1"), *committed]
    assert_reads(bootstrap, topic, 0, committed, everything, 6, 6)
    assert describe_transaction(fresh_broker, transactional_id).state == "CompleteCommit"


MAX_TIMEOUT_MS = 5000


@pytest.fixture(scope="module")
def capped_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker allowing transactions of at most MAX_TIMEOUT_MS."""
    data = tmp_path_factory.mktemp("capped") / "data"
    broker = BrokerProcess(data, settings=[f"transaction.max.timeout.ms={MAX_TIMEOUT_MS}"])
    yield broker.start()
    broker.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_timeout_above_the_broker_maximum_is_refused(
    client: str, capped_broker: BrokerProcess
) -> None:
    bootstrap = capped_broker.bootstrap
    transactional_id = unique_topic(f"capped-{client}")
    too_long = MAX_TIMEOUT_MS + 1
    if client == "kafka-python":
        producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                 transaction_timeout_ms=too_long, max_block_ms=WAIT_MS)  # fmt: skip
        try:
            with pytest.raises(KafkaPythonError, match=r"\[Error 50\] InvalidTransactionTimeout"):
                producer.init_transactions()
        finally:
            producer.close(timeout=0)
    elif client == "aiokafka":

        async def start() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                        transactional_id=transactional_id,
                                        transaction_timeout_ms=too_long)  # fmt: skip
            try:
                await producer.start()
            finally:
                await producer.stop()

        with pytest.raises(aiokafka.errors.InvalidTransactionTimeout):
            _LoopThread.run(start())
    else:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                             "transaction.timeout.ms": too_long})  # fmt: skip
        with pytest.raises(KafkaException) as raised:
            producer.init_transactions(WAIT_S)
        assert raised.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT
    # InitProducerId refused it: the broker never registered the transactional id.
    with connect(capped_broker.bootstrap) as connection:
        listed = connection.call(LIST_TRANSACTIONS, 0, {}).transaction_states
    assert transactional_id not in {state.transactional_id for state in listed}


SPARK_UNAVAILABLE = connector_unavailable_reason()


@pytest.mark.spark
@pytest.mark.skipif(SPARK_UNAVAILABLE is not None, reason=SPARK_UNAVAILABLE or "")
@pytest.mark.timeout(300)
def test_spark_read_committed_returns_committed_rows_only(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, "txn-spark", partitions=2)
    with producing("confluent", bootstrap, unique_topic("spark")) as producer:
        play(producer, topic, COMMIT_ABORT_COMMIT)
        producer.begin()  # left open while Spark reads: offset 7 of partition 0 on
        producer.send(topic, 0, b"open")
        producer.flush()
        assert raw_latest_offset(shared_broker, topic, 0, READ_COMMITTED) == 7

        session = kafka_spark_session("kshim-e2e-transactions")
        try:
            rows = (
                session.read.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("kafka.isolation.level", READ_COMMITTED)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", "latest")
                .option("kafkaConsumer.pollTimeoutMs", "20000")
                .load()
                .collect()
            )
        finally:
            session.stop()
        producer.abort()

    expected = layout(COMMIT_ABORT_COMMIT, partitions=2).committed
    assert sorted((row["partition"], row["offset"], bytes(row["value"])) for row in rows) == [
        (partition, offset, value) for partition in (0, 1) for offset, value in expected[partition]
    ]
