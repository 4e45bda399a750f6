"""The capture loop (VENUS's upper adapter): logged source changes -> one transactional topic.

``run_capture`` installs the triggers and log table (triggers.py), creates the
single-partition topic, then repeatedly ships the logged changes after the last captured
sequence, up to ``batch_size`` per Kafka transaction (record format: change_format.py).

One batch (seq L+1 .. S), each step durable before the next:

1. source: ``pending = S, status open`` (review.begin_pending);
2. Kafka: begin_transaction, produce every change (half messages), flush;
3. source, one transaction: ``last_seq = S, pending = NULL`` if still open;
4. Kafka: commit_transaction; then drop the log rows <= S.

Crash points (the broker reviews the open transaction when the next capture instance
calls init_transactions, or when it times out; the hook is review.decide):

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

Schema changes and new tables (capture/schemas.py): each batch first ships the schema of
every captured table whose schema differs from the one last shipped (the first batch ships
them all), then its changes; the shipped schemas are recorded with step 3.

After any Kafka error the capture never guesses: it drops the producer, builds a new one
(init_transactions makes the broker decide the old transaction by review, retrying while
the broker answers CONCURRENT_TRANSACTIONS) and continues from the recorded last_seq.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import TypeAlias

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from spark_examples import change_format

# review and triggers are used through their modules, so a test can replace one function.
from spark_examples.capture import review, schemas, triggers
from spark_examples.capture.broker import NONE, broker_review_hook, ensure_topic, new_producer
from spark_examples.databases import Columns, Database, Row, open_database
from spark_examples.databases.schema import TableSchema

BATCH_SIZE = 1000
POLL_INTERVAL_S = 0.2
FLUSH_TIMEOUT_S = 60.0
SEQ_HEADER = "kshim.seq"  # decimal sequence number of the change
OP_HEADER = "kshim.op"  # insert | update | delete as logged, or schema
SCHEMA_READS = 5  # reads of a batch while DDL keeps changing its tables, then a retry later

Headers: TypeAlias = list[tuple[str, str | bytes | None]]
# One record to produce: key, value (None for a tombstone), headers.
Record: TypeAlias = tuple[bytes, bytes | None, Headers]


def _print_now(line: str) -> None:
    print(line, flush=True)  # flushed: a supervising process reads progress as it happens


class BatchLost(RuntimeError):
    """The batch was not recorded in the source (review aborted it or Kafka failed)."""


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
        kafka_security: Mapping[str, str] = NONE,
    ) -> None:
        self.db, self.tables, self.topic, self.stop = db, tables, topic, stop
        self.bootstrap, self.batch_size = bootstrap, batch_size
        self.kafka_security = kafka_security  # librdkafka's TLS and SASL settings
        self.transaction_timeout_ms = transaction_timeout_ms
        self.progress = progress or _print_now
        self.producer: Producer | None = None
        self.captured = 0
        self.last_seq = 0  # valid while self.producer is not None
        self.every_table = schemas.ALL_TABLES in tables
        self.shipped: dict[str, str] = {}  # table -> schema text, valid with last_seq

    def start(self) -> None:
        """Installs triggers, registers the review source, creates the topic."""
        schemas.ensure_schema_table(self.db)
        if self.every_table:
            self.tables = schemas.source_tables(self.db)
        shipped = schemas.shipped_schemas(self.db, self.topic)
        # Tables new since an earlier run of this capture: rows written meanwhile count.
        new = [table for table in self.tables if shipped and table not in shipped]
        _check_triggers(self.db, [table for table in self.tables if table in shipped])
        triggers.install_capture(self.db, [t for t in self.tables if t not in new])
        for table in new:
            schemas.take_in_new_table(self.db, table)
        review.read_state(self.db, self.topic)
        tid = review.transactional_id_for(self.topic)
        review.register(tid, self.db.url, self.topic)
        ensure_topic(self.bootstrap, self.topic, security=self.kafka_security)
        hook = broker_review_hook(self.bootstrap, security=self.kafka_security)
        if hook != review.REVIEW_HOOK:
            # Without it the broker aborts an open transaction by Kafka's rule, and a batch
            # recorded in the source just before a crash would be lost.
            self.progress(
                f"WARNING: the broker's {review.REVIEW_HOOK_SETTING} is {hook!r}, not"
                f" {review.REVIEW_HOOK!r}: a capture crash between recording a batch and"
                " committing it loses the batch"
            )

    def _producer(self) -> Producer:
        if self.producer is None:
            self.producer = new_producer(
                self.bootstrap,
                self.topic,
                self.transaction_timeout_ms,
                self.stop,
                self.kafka_security,
            )
            # init_transactions settled the previous batch: what is recorded is committed.
            self.last_seq = review.read_state(self.db, self.topic).last_seq
            self.shipped = schemas.shipped_schemas(self.db, self.topic)
            triggers.delete_captured(self.db, self.last_seq, self.tables)
        return self.producer

    def _take_in_new_tables(self) -> None:
        if self.every_table:
            for table in schemas.source_tables(self.db):
                if table not in self.tables:
                    schemas.take_in_new_table(self.db, table)
                    self.tables.append(table)
                    self.progress(f"capturing new table {table}")

    def _read_batch(self, last: int) -> tuple[list[TableSchema], list[Record], int]:
        """(changed schemas, change records, their last seq) after ``last``, all read under
        one schema per table (see schemas.py); raises BatchLost while DDL keeps running."""
        for _ in range(SCHEMA_READS):
            self.db.forget_schema()
            before = schemas.current_schemas(self.db, self.tables)
            changes = triggers.read_changes(self.db, last, self.tables, self.batch_size)
            records = self._records(changes)
            if schemas.current_schemas(self.db, self.tables) == before:
                _check_triggers(self.db, self.tables)
                target = changes[-1].seq if changes else last
                return schemas.changed(before, self.shipped), records, target
        raise BatchLost(f"the schemas of {self.tables} changed during {SCHEMA_READS} reads")

    def step(self) -> int:
        """Ships one batch; returns how many changes (0: nothing to ship).

        Raises KafkaException or BatchLost when the batch was not captured (the next step
        starts a new producer and ships it again from the recorded last_seq).
        """
        producer = self._producer()
        last = self.last_seq
        self._take_in_new_tables()
        changed, records, target = self._read_batch(last)
        if not records and not changed:
            return 0
        review.begin_pending(self.db, self.topic, last, target)
        schema_records = [_schema_record(schema, last) for schema in changed]
        self._produce_and_record(producer, schema_records + records, target, changed)
        try:
            producer.commit_transaction(FLUSH_TIMEOUT_S)
        except KafkaException:
            self._abandon(abort=False)  # recorded: the review will commit it
            raise
        self.last_seq = target
        self.shipped.update((schema.table, schemas.schema_text(schema)) for schema in changed)
        triggers.delete_captured(self.db, target, self.tables)
        self.captured += len(records)
        shipped = "".join(f"; the schema of {schema.table}" for schema in changed)
        self.progress(
            f"captured {len(records)} changes (total {self.captured}), last seq {target}{shipped}"
        )
        return len(records) + len(changed)

    def _produce_and_record(
        self,
        producer: Producer,
        records: list[Record],
        target: int,
        changed: list[TableSchema],
    ) -> None:
        # Steps 2 and 3 of the module docstring; the transaction is aborted if either fails.
        try:
            self._produce(producer, records)
        except (KafkaException, BatchLost):
            self._abandon(abort=True)
            raise
        if not review.record_captured(self.db, self.topic, target, changed):
            self._abandon(abort=True)
            raise BatchLost(f"batch up to seq {target} was aborted by review")

    def _records(self, changes: list[triggers.LoggedChange]) -> list[Record]:
        rows: dict[str, dict[triggers.KeyValues, Row]] = {}
        for table in {change.table for change in changes}:
            wanted = [c.pk for c in changes if c.table == table and c.op != "delete"]
            rows[table] = triggers.current_rows(self.db, table, wanted)
        columns = {table: self.db.table_columns(table) for table in rows}
        # A row absent now was deleted after this change; its delete follows in the log.
        return [
            _record(change, columns[change.table], rows[change.table].get(_key_values(change)))
            for change in changes
        ]

    def _produce(self, producer: Producer, records: list[Record]) -> None:
        failures: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
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


def _key_values(change: triggers.LoggedChange) -> triggers.KeyValues:
    return tuple(change.pk.values())


def _record(change: triggers.LoggedChange, columns: Columns, row: Row | None) -> Record:
    """The record of one logged change: a tombstone for a delete or a row gone since."""
    key = change_format.encode_key(change.table, change.pk)
    # Every record names its change in headers, since a tombstone has no value.
    headers: Headers = [(SEQ_HEADER, str(change.seq).encode()), (OP_HEADER, change.op.encode())]
    if change.op == "delete" or row is None:
        return key, None, headers
    value = change_format.encode_value(change.seq, change.op, change.table, columns, row)
    return key, value, headers


class TriggersGone(RuntimeError):
    """A captured table lost its triggers: its changes since were not logged."""


def _check_triggers(db: Database, tables: list[str]) -> None:
    # Reinstalling them quietly would leave the changes made meanwhile (deletes above all)
    # missing at every destination: the operator must know.
    gone = triggers.tables_without_triggers(db, tables)
    if gone:
        raise TriggersGone(
            f"the capture triggers of {gone} are gone (a table rebuilt?): changes since are "
            "not captured. Rebuild a table with install_capture in the same transaction; "
            "now reinstall them and bring the destinations' copies back in line"
        )


def _schema_record(schema: TableSchema, after_seq: int) -> Record:
    """The record of a table's schema, shipped after the change of sequence ``after_seq``."""
    key = change_format.encode_schema_key(schema.table, after_seq)
    value = change_format.encode_schema_value(after_seq, schema)
    headers: Headers = [
        (SEQ_HEADER, str(after_seq).encode()),
        (OP_HEADER, change_format.SCHEMA_OPERATION.encode()),
    ]
    return key, value, headers


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
    kafka_security: Mapping[str, str] = NONE,
) -> int:
    """Captures until drained (``once``) or ``stop_event`` is set; returns changes captured.
    ``kafka_security`` is librdkafka's TLS and SASL settings (none: PLAINTEXT)."""
    stop = stop_event or threading.Event()
    db = open_database(source_url)
    capture = Capture(
        db,
        tables,
        bootstrap,
        topic,
        stop,
        batch_size,
        transaction_timeout_ms,
        kafka_security=kafka_security,
    )
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
