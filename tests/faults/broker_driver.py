"""The whole-broker driver: real clients against a ``kshim serve`` process killed with
kill -9 at random moments, then restarted on the same data directory, and the history
checked after the last restart.

A whole broker cannot lose power in-process: its LMDB environments (metadata, transaction
records, committed offsets, ``T.full``, the delay schedule's index) write through LMDB's
own files, not the FileSystem seam, so the simulated disk cannot drop their unsynced
pages. kill -9 faults all of them together, the way a crash does.

Per round: an idempotent producer writes plain records, keyed records (read back through
``T.full``) and delayed records (``kshim-delay-ms``), a transactional producer commits or
aborts small transactions, all until a timer kills the broker; after the restart a
consumer in a group reads read_committed and commits what it read.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import TopicPartition as Partition
from confluent_kafka.admin import AdminClient, NewTopic

from kshim.testing import BrokerProcess
from tests.faults.checker import (
    Delivery,
    Violation,
    check_appends,
    check_committed_offsets,
    check_delayed,
    check_full_view,
    check_transactions,
)
from tests.faults.history import History, Kind, Observed, Op, Stored, Write

TOPIC, TABLE, DELAYED = "faults", "faults-table", "faults-delayed"
PARTITIONS = 2
GROUP = "faults-group"
TRANSACTIONAL_ID = "faults-txn"
KEYS = 5
# Small spills, checkpoints and write-ahead log files: kills land inside them too.
BUSY_STORE = [
    "kshim.memtable.total.bytes=65536",
    "kshim.memtable.bytes=4096",
    "kshim.wal.segment.bytes=65536",
    "kshim.wal.checkpoint.bytes=100000",
    "kshim.wal.checkpoint.interval.ms=20",
]
CLIENT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 30.0
DELIVERY_SLACK_S = 6.0  # the delay scheduler looks at least every second; a busy machine
VIEW_CATCH_UP_S = 10.0  # T.full is applied in the background after a restart


class BrokerRun:
    def __init__(self, data_dir: Path, seed: int, kills: int) -> None:
        self.seed = seed
        self.kills = kills
        self.rng = random.Random(f"broker-{seed}")
        self.history = History()
        self.broker = BrokerProcess(data_dir, BUSY_STORE)
        self.written = 0
        self.consumed: dict[str, int] = {}  # next offset read, by partition
        self.acknowledged_commits: dict[str, int] = {}
        self.seen_ms: dict[str, int] = {}  # each record's timestamp, by value

    def run(self) -> list[Violation]:
        """Runs the rounds and returns the violations found after the last restart."""
        self.broker.start()
        try:
            self._create_topics()
            for _ in range(self.kills):
                self._load_until_killed()
                self.broker.start()
                self._consume_and_commit()
            return self._check()
        finally:
            self.broker.stop()

    def _create_topics(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap})
        topics = [
            NewTopic(TOPIC, PARTITIONS, 1),
            NewTopic(TABLE, 1, 1),
            NewTopic(DELAYED, 1, 1, config={"message.timestamp.type": "LogAppendTime"}),
        ]
        for future in admin.create_topics(topics).values():
            future.result(timeout=20)

    # -- load, and the kill ------------------------------------------------------------

    def _load_until_killed(self) -> None:
        killed = threading.Event()
        timer = threading.Timer(self.rng.uniform(0.3, 2.0), self._kill, (killed,))
        producer = Producer(
            {"bootstrap.servers": self.broker.bootstrap, "enable.idempotence": True,
             "linger.ms": 2, "message.timeout.ms": 8000}
        )  # fmt: skip
        transactional = self._transactional_producer()
        timer.start()
        try:
            while not killed.is_set():
                self._produce_some(producer)
                if self.rng.random() < 0.2:
                    self._transaction(transactional)
        finally:
            timer.join()
            producer.purge()
            producer.flush(0)

    def _kill(self, killed: threading.Event) -> None:
        self.broker.kill()
        killed.set()

    def _produce_some(self, producer: Producer) -> None:
        for _ in range(self.rng.randint(1, 20)):
            choice = self.rng.random()
            if choice < 0.6:
                partition = self.rng.randrange(PARTITIONS)
                self._send(producer, TOPIC, partition, None, "append", None)
            elif choice < 0.9:
                self._send(producer, TABLE, 0, f"k{self.rng.randrange(KEYS)}", "append", None)
            else:
                self._send(
                    producer, DELAYED + ".delay", 0, None, "delay", self.rng.randint(200, 2500)
                )
        producer.poll(0.005)

    def _send(
        self,
        producer: Producer,
        topic: str,
        partition: int,
        key: str | None,
        f: str,
        delay_ms: int | None,
    ) -> None:
        self.written += 1
        value = f"v{self.written}"
        now_ms = int(time.time() * 1000)
        due_ms = None if delay_ms is None else now_ms + delay_ms
        op = self.history.invoke(
            "idempotent", f, (Write(f"{topic}-{partition}", value, key),), due_ms
        )

        def delivered(error: KafkaError | None, message: Message) -> None:
            self._delivered(op, error, message)

        headers: list[tuple[str, str | bytes | None]] = (
            [] if delay_ms is None else [("kshim-delay-ms", str(delay_ms).encode())]
        )
        producer.produce(
            topic,
            value.encode(),
            None if key is None else key.encode(),
            partition=partition,
            on_delivery=delivered,
            timestamp=now_ms,
            headers=headers,
        )

    def _delivered(self, op: Op, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.history.complete(op, Kind.OK, message.offset())
        else:
            self.history.complete(op, Kind.INFO)

    def _transactional_producer(self) -> Producer | None:
        """A new producer for the transactional id: InitProducerId fences the previous one
        and aborts what it left open (KIP-98)."""
        producer = Producer(
            {"bootstrap.servers": self.broker.bootstrap, "transactional.id": TRANSACTIONAL_ID,
             "transaction.timeout.ms": 10_000, "message.timeout.ms": 8000}
        )  # fmt: skip
        try:
            producer.init_transactions(CLIENT_TIMEOUT_S)
        except KafkaException:
            return None
        return producer

    def _transaction(self, producer: Producer | None) -> None:
        if producer is None:
            return
        writes = []
        for _ in range(self.rng.randint(1, 4)):
            self.written += 1
            writes.append(Write(f"{TOPIC}-{self.rng.randrange(PARTITIONS)}", f"v{self.written}"))
        op = self.history.invoke("transactional", "txn", tuple(writes))
        commit = self.rng.random() < 0.7
        try:
            producer.begin_transaction()
            for write in writes:
                partition = int(write.partition.rsplit("-", 1)[1])
                producer.produce(TOPIC, write.value.encode(), partition=partition)
            if commit:
                producer.commit_transaction(CLIENT_TIMEOUT_S)
            else:
                producer.abort_transaction(CLIENT_TIMEOUT_S)
        except KafkaException:
            self.history.complete(op, Kind.INFO)
            return
        self.history.complete(op, Kind.OK, committed=commit)

    # -- after each restart: a consumer in a group ---------------------------------------

    def _consumer(self, group: str, offset: int | None, topic: str = TOPIC) -> Consumer:
        consumer = Consumer(
            {"bootstrap.servers": self.broker.bootstrap, "group.id": group,
             "enable.auto.commit": False, "isolation.level": "read_committed",
             "auto.offset.reset": "earliest", "enable.partition.eof": True,
             "fetch.wait.max.ms": 100}
        )  # fmt: skip
        partitions = PARTITIONS if topic == TOPIC else 1
        if offset is None:
            consumer.assign([Partition(topic, index) for index in range(partitions)])
        else:
            consumer.assign([Partition(topic, index, offset) for index in range(partitions)])
        return consumer

    def _consume_and_commit(self) -> None:
        """Reads some records from the group's committed offsets and commits what it read."""
        consumer = self._consumer(GROUP, None)
        try:
            deadline = time.monotonic() + self.rng.uniform(0.3, 1.5)
            while time.monotonic() < deadline:
                message = consumer.poll(0.1)
                if message is None or message.error() is not None:
                    continue
                name = f"{TOPIC}-{message.partition()}"
                offset = message.offset()
                assert offset is not None
                self.consumed[name] = max(self.consumed.get(name, 0), offset + 1)
                if self.rng.random() < 0.2:
                    self._commit(consumer, name)
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer, name: str) -> None:
        offset = self.consumed[name]
        partition = Partition(TOPIC, int(name.rsplit("-", 1)[1]), offset)
        try:
            consumer.commit(offsets=[partition], asynchronous=False)
        except KafkaException:
            return
        self.acknowledged_commits[name] = offset

    # -- the check after the last restart ----------------------------------------------

    def _check(self) -> list[Violation]:
        fencer = self._transactional_producer()  # ends what the last round left open
        assert fencer is not None, "InitProducerId failed after the restart"
        observed = self._read_all(TOPIC, PARTITIONS)
        violations = check_appends(self.history, observed, dense=False)
        violations += check_transactions(self.history, observed)
        violations += self._check_offsets()
        violations += self._check_view()
        return violations + self._check_delayed()

    def _read_all(self, topic: str, partitions: int) -> Observed:
        """Every record read_committed from the start, by partition."""
        observed: Observed = {f"{topic}-{index}": [] for index in range(partitions)}
        consumer = self._consumer(f"reader-{time.monotonic_ns()}", OFFSET_BEGINNING, topic)
        try:
            ends = {
                index: consumer.get_watermark_offsets(Partition(topic, index), CLIENT_TIMEOUT_S)[1]
                for index in range(partitions)
            }
            unfinished = {index for index, end in ends.items() if end > 0}
            deadline = time.monotonic() + READ_TIMEOUT_S
            while unfinished:
                assert time.monotonic() < deadline, f"{topic}: no end reached"
                message = consumer.poll(0.2)
                if message is None:
                    continue
                index, offset = message.partition(), message.offset()
                assert index is not None and offset is not None
                if message.error() is not None:
                    if offset >= ends[index]:
                        unfinished.discard(index)
                    continue
                key, value = message.key(), message.value()
                observed[f"{topic}-{index}"].append(
                    Stored(
                        offset,
                        None if value is None else value.decode(),
                        None if key is None else key.decode(),
                    )
                )
                self.seen_ms[(value or b"").decode()] = message.timestamp()[1]
        finally:
            consumer.close()
        return observed

    def _check_offsets(self) -> list[Violation]:
        consumer = self._consumer(GROUP, None)
        try:
            partitions = [Partition(TOPIC, index) for index in range(PARTITIONS)]
            committed = {
                f"{TOPIC}-{p.partition}": p.offset
                for p in consumer.committed(partitions, CLIENT_TIMEOUT_S)
                if p.offset >= 0
            }
        finally:
            consumer.close()
        violations = check_committed_offsets(self.consumed, committed)
        violations += [
            Violation("commit lost", f"{name}: committed {offset}, now {committed.get(name)}")
            for name, offset in self.acknowledged_commits.items()
            if committed.get(name) != offset
        ]
        return violations

    def _check_view(self) -> list[Violation]:
        """``T.full`` against the model; the view is applied in the background, so it is
        read again (a bounded number of times) until it has caught up."""
        deadline = time.monotonic() + VIEW_CATCH_UP_S
        while True:
            records = self._read_all(TABLE + ".full", 1)[f"{TABLE}.full-0"]
            view = {(f"{TABLE}-0", r.key): r.value for r in records if r.key is not None}
            violations = check_full_view(self.history, view, {f"{TABLE}-0"})
            if not violations or time.monotonic() > deadline:
                return violations
            time.sleep(0.5)

    def _check_delayed(self) -> list[Violation]:
        """Waits until every delayed record is due (plus slack), then reads them with the
        time the broker appended each (LogAppendTime: the moment of delivery)."""
        due = [op.due_ms for op in self.history.ops if op.f == "delay" and op.due_ms]
        if due:
            time.sleep(max(0.0, max(due) / 1000 + DELIVERY_SLACK_S - time.time()))
        self.seen_ms.clear()
        records = self._read_all(DELAYED, 1)[f"{DELAYED}-0"]
        deliveries = [
            Delivery(r.value, self.seen_ms[r.value]) for r in records if r.value is not None
        ]
        return check_delayed(self.history, deliveries)
