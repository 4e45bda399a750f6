"""Capture (VENUS's upper adapter): source changes -> one transactional Kafka topic.

    python -m spark_examples.capture --source URL --tables t1,t2 --bootstrap HOST:PORT \
        --topic T [--once]

installs the triggers and log table (capture_triggers.py), creates the single-partition
topic, then repeatedly ships the logged changes after the last captured sequence, up to
``batch_size`` per Kafka transaction (record format: change_format.py).

One batch (seq L+1 .. S), each step durable before the next:

1. source: ``pending = S, status open`` (capture_review.begin_pending);
2. Kafka: begin_transaction, produce every change (half messages), flush;
3. source, one transaction: ``last_seq = S, pending = NULL`` if still open;
4. Kafka: commit_transaction; then drop the log rows <= S.

Crash points (the broker reviews the open transaction when the next capture instance
calls init_transactions, or when it times out; the hook is capture_review.decide):

- before 1 or between 1 and 2: nothing was produced; the restart re-reads from L.
- during/after 2, before 3: the source shows ``open``; the review answers abort (and marks
  it aborted), the half messages are never visible to read_committed consumers; the
  restart re-captures L+1 .. from the log, so nothing is lost and nothing doubled.
- after 3, before 4: the source shows last_seq = S; the review answers commit; the restart
  continues from S: every change once.
- after 4: committed and recorded; the restart continues from S. Log rows <= S not yet
  dropped are dropped then (they are only read with seq > last_seq anyway).
- a timeout review racing a live capture between 2 and 3: the hook marks the batch
  aborted inside the same row lock step 3 needs, so step 3 fails, the capture abandons
  its producer and re-captures from L. If step 3 won, the hook answers commit.

After any Kafka error the capture never guesses: it drops the producer, builds a new one
(init_transactions makes the broker decide the old transaction by review, retrying while
the broker answers CONCURRENT_TRANSACTIONS) and continues from the recorded last_seq.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from spark_examples import capture_review, capture_triggers, change_format
from spark_examples.databases import Database, open_database

BATCH_SIZE = 1000
POLL_INTERVAL_S = 0.2
INIT_RETRY_S = 0.5
FLUSH_TIMEOUT_S = 60.0
SEQ_HEADER = "kshim.seq"  # decimal sequence number of the change
OP_HEADER = "kshim.op"  # insert | update | delete as logged

REVIEW_HOOK_SETTING = "kshim.review.hook"
REVIEW_HOOK = "spark_examples.capture_review:decide"

Record = tuple[bytes, bytes | None, list[tuple[str, str | bytes | None]]]


def _print_now(line: str) -> None:
    print(line, flush=True)  # flushed: a supervising process reads progress as it happens


class BatchLost(RuntimeError):
    """The batch was not recorded in the source (review aborted it or Kafka failed)."""


def ensure_topic(bootstrap: str, topic: str, timeout_s: float = 30.0) -> None:
    """Creates ``topic`` with one partition unless it exists."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=timeout_s)
    if topic in metadata.topics:
        return
    future = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def broker_review_hook(bootstrap: str, timeout_s: float = 30.0) -> str | None:
    """The broker's ``kshim.review.hook`` setting, or None if it does not report one."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    brokers = admin.list_topics(timeout=timeout_s).brokers
    resource = ConfigResource(ResourceType.BROKER, str(next(iter(brokers))))
    try:
        configs = admin.describe_configs([resource])[resource].result(timeout=timeout_s)
    except KafkaException:
        return None
    entry = configs.get(REVIEW_HOOK_SETTING)
    return entry.value if entry is not None and entry.value else None


def new_producer(
    bootstrap: str, topic: str, transaction_timeout_ms: int, stop: threading.Event
) -> Producer:
    """A transactional producer after init_transactions (which settles any open batch)."""
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": capture_review.transactional_id_for(topic),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "transaction.timeout.ms": transaction_timeout_ms,
        "socket.timeout.ms": min(60_000, transaction_timeout_ms),
    })  # fmt: skip
    while True:
        try:
            producer.init_transactions(30.0)
            return producer
        except KafkaException as error:
            # Undecided review (CONCURRENT_TRANSACTIONS) or broker down: ask again.
            if stop.is_set() or error.args[0].fatal():
                raise
            time.sleep(INIT_RETRY_S)


class Capture:
    """Ships one source database's changes to ``topic``; not thread-safe."""

    def __init__(
        self,
        db: Database,
        tables: list[str],
        bootstrap: str,
        topic: str,
        stop: threading.Event,
        batch_size: int = BATCH_SIZE,
        transaction_timeout_ms: int = 60_000,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.db, self.tables, self.topic, self.stop = db, tables, topic, stop
        self.bootstrap, self.batch_size = bootstrap, batch_size
        self.transaction_timeout_ms = transaction_timeout_ms
        self.progress = progress or _print_now
        self.producer: Producer | None = None
        self.captured = 0
        self.last_seq = 0  # valid while self.producer is not None

    def start(self) -> None:
        """Installs triggers, registers the review source, creates the topic."""
        capture_triggers.install_capture(self.db, self.tables)
        capture_review.read_state(self.db, self.topic)
        tid = capture_review.transactional_id_for(self.topic)
        capture_review.register(tid, self.db.url, self.topic)
        ensure_topic(self.bootstrap, self.topic)
        hook = broker_review_hook(self.bootstrap)
        if hook != REVIEW_HOOK:
            # Without it the broker aborts an open transaction by Kafka's rule, and a batch
            # recorded in the source just before a crash would be lost.
            self.progress(
                f"WARNING: the broker's {REVIEW_HOOK_SETTING} is {hook!r}, not {REVIEW_HOOK!r}:"
                " a capture crash between recording a batch and committing it loses the batch"
            )

    def _producer(self) -> Producer:
        if self.producer is None:
            self.producer = new_producer(
                self.bootstrap, self.topic, self.transaction_timeout_ms, self.stop
            )
            # init_transactions settled the previous batch: what is recorded is committed.
            self.last_seq = capture_review.read_state(self.db, self.topic).last_seq
            capture_triggers.delete_captured(self.db, self.last_seq, self.tables)
        return self.producer

    def step(self) -> int:
        """Ships one batch; returns how many changes (0: nothing to ship)."""
        producer = self._producer()
        last = self.last_seq
        changes = capture_triggers.read_changes(self.db, last, self.tables, self.batch_size)
        if not changes:
            return 0
        records = self._records(changes)
        target = changes[-1].seq
        capture_review.begin_pending(self.db, self.topic, last, target)
        try:
            self._produce(producer, records)
        except (KafkaException, BatchLost):
            self._abandon(abort=True)
            raise
        if not capture_review.record_captured(self.db, self.topic, target):
            self._abandon(abort=True)
            raise BatchLost(f"batch up to seq {target} was aborted by review")
        try:
            producer.commit_transaction(FLUSH_TIMEOUT_S)
        except KafkaException:
            self._abandon(abort=False)  # recorded: the review will commit it
            raise
        self.last_seq = target
        capture_triggers.delete_captured(self.db, target, self.tables)
        self.captured += len(changes)
        self.progress(f"captured {len(changes)} changes (total {self.captured}), last seq {target}")
        return len(changes)

    def _records(self, changes: list[capture_triggers.LoggedChange]) -> list[Record]:
        rows: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
        for table in {change.table for change in changes}:
            wanted = [c.pk for c in changes if c.table == table and c.op != "delete"]
            rows[table] = capture_triggers.current_rows(self.db, table, wanted)
        columns = {table: self.db.table_columns(table) for table in rows}
        records = []
        for change in changes:
            key = change_format.encode_key(change.table, change.pk)
            # Every record names its change in headers, since a tombstone has no value.
            headers: list[tuple[str, str | bytes | None]] = [
                (SEQ_HEADER, str(change.seq).encode()),
                (OP_HEADER, change.op.encode()),
            ]
            # A row absent now was deleted after this change; its delete follows in the log.
            row = rows[change.table].get(tuple(change.pk.values()))
            value = None
            if change.op != "delete" and row is not None:
                table_columns = columns[change.table]
                value = change_format.encode_value(
                    change.seq, change.op, change.table, table_columns, row
                )
            records.append((key, value, headers))
        return records

    def _produce(self, producer: Producer, records: list[Record]) -> None:
        failures: list[Any] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                failures.append(error)

        producer.begin_transaction()
        for key, value, headers in records:
            while True:
                try:
                    producer.produce(
                        self.topic,
                        value,
                        key,
                        partition=0,
                        on_delivery=delivered,
                        headers=headers,
                    )
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(0.1)
        if producer.flush(FLUSH_TIMEOUT_S) > 0 or failures:
            raise BatchLost(f"produce failed: {failures[:3] or 'flush timed out'}")

    def _abandon(self, abort: bool) -> None:
        # Never abort a recorded batch: the source says it is captured, so it must commit.
        if self.producer is not None and abort:
            # Fenced or broker down: then the review decides it (abort: not recorded).
            with contextlib.suppress(KafkaException):
                self.producer.abort_transaction(10.0)
        self.producer = None


def run_capture(
    source_url: str,
    tables: list[str],
    bootstrap: str,
    topic: str,
    once: bool,
    stop_event: threading.Event | None = None,
    batch_size: int = BATCH_SIZE,
    poll_interval_s: float = POLL_INTERVAL_S,
    transaction_timeout_ms: int = 60_000,
) -> int:
    """Captures until drained (``once``) or ``stop_event`` is set; returns changes captured."""
    stop = stop_event or threading.Event()
    db = open_database(source_url)
    capture = Capture(db, tables, bootstrap, topic, stop, batch_size, transaction_timeout_ms)
    try:
        capture.start()
        while not stop.is_set():
            try:
                shipped = capture.step()
            except (KafkaException, BatchLost) as error:
                capture.progress(f"batch not captured ({error}); retrying from last seq")
                stop.wait(poll_interval_s)
                continue
            if shipped == 0:
                if once:
                    break
                stop.wait(poll_interval_s)
    finally:
        db.close()
    capture.progress(f"capture stopped: {capture.captured} changes captured")
    return capture.captured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_examples.capture")
    parser.add_argument("--source", required=True, help="source database URL")
    parser.add_argument("--tables", required=True, help="comma-separated table names")
    parser.add_argument("--bootstrap", required=True, help="broker HOST:PORT")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--once", action="store_true", help="drain what is there, then exit")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--transaction-timeout-ms", type=int, default=60_000)
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda *_: stop.set())
    tables = [name.strip() for name in args.tables.split(",") if name.strip()]
    run_capture(
        args.source,
        tables,
        args.bootstrap,
        args.topic,
        args.once,
        stop,
        batch_size=args.batch_size,
        transaction_timeout_ms=args.transaction_timeout_ms,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
