"""The exactly-once sink of the apply job, without Spark: ordered records in, one transaction out.

A micro-batch is applied to the destination in ONE destination transaction that also stores,
per (topic, partition), the next offset to apply in ``kshim_apply_state``. Records below that
offset were applied by an earlier run (Spark replays a micro-batch whose commit it did not
record, and a lost checkpoint replays from earliest), so they are skipped: replays are
idempotent. A record that cannot be applied is never skipped, since later changes to the same
row would then diverge from the source (the ordering hazard of retrying table-driven sync);
the batch is rolled back and retried a bounded number of times, then ``ApplyError`` names the
record.

Records are read by a ``RecordDecoder`` per input format (``FORMATS``): kshim's own
(change_format.py, the capture's) or Debezium's (debezium_format.py, Kafka Connect's
JsonConverter).

A schema-change record (kshim's format) brings its table to the shipped schema
(schema_changes.py) in the same transaction as the records around it, in offset order:
DDL is transactional on all three engines. One it cannot take stops the job like any
record that cannot be applied, with an alarm; the apply state is per partition, not per
table, so the other tables stop with it (skipping that table's records would let later
ones of the same rows apply out of order).

Two ways to apply the same records, with the same committed result: the fast path keeps
the last change per row and writes the survivors with multi-row statements (bulk.py),
applying what it gathered before each schema change; the
sequential path applies record after record in offset order. The first attempt tries the fast
path and, if it fails, the sequential one at once, which finds the failing record to name;
retries are sequential. Thread use: one call at a time per ``Database``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from spark_examples import debezium_format
from spark_examples.apply.bulk import delete_keys, upsert_rows
from spark_examples.apply.collector import collection_paused
from spark_examples.apply.schema_changes import SchemaRejected, apply_schema, raise_alarm
from spark_examples.change_format import (
    Change,
    JsonRow,
    decode_any_key,
    decode_row,
    decode_schema_value,
    decode_value,
)
from spark_examples.databases import Columns, Database, PortableValue, Row
from spark_examples.databases.schema import TableSchema
from spark_examples.debezium_format import ColumnLookup

STATE_TABLE = "kshim_apply_state"

# Plain SQL accepted by SQLite, PostgreSQL and DuckDB alike.
CREATE_STATE_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (topic TEXT NOT NULL, "
    "partition_id INTEGER NOT NULL, next_offset BIGINT NOT NULL, "
    "PRIMARY KEY (topic, partition_id))"
)
SELECT_NEXT_OFFSET = f"SELECT next_offset FROM {STATE_TABLE} WHERE topic = ? AND partition_id = ?"
STORE_NEXT_OFFSET = (
    f"INSERT INTO {STATE_TABLE} (topic, partition_id, next_offset) VALUES (?, ?, ?) "
    "ON CONFLICT (topic, partition_id) DO UPDATE SET next_offset = excluded.next_offset"
)

# A decoded record: (table, primary key as JSON values, the change or None for a delete);
# a schema change is (table, {}, the table's new schema).
DecodedRecord: TypeAlias = tuple[str, JsonRow, Change | TableSchema | None]
# A decoded record of a row: (table, primary key, the change or None for a delete).
_RowChange: TypeAlias = tuple[str, JsonRow, Change | None]
# Reads one record, given the destination's columns of a table (None: no such table).
RecordDecoder: TypeAlias = Callable[["SourceRecord", ColumnLookup], DecodedRecord]

DEFAULT_MAX_RETRIES = 3
DEFAULT_BACKOFF_S = 0.2
MAX_BACKOFF_S = 5.0


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """One Kafka record as the connector hands it over (key and value are raw bytes)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

    def describe(self) -> str:
        key = self.key.decode("utf-8", errors="replace") if self.key is not None else None
        return f"topic {self.topic} partition {self.partition} offset {self.offset} key {key}"


@dataclass(frozen=True, slots=True)
class BatchResult:
    applied: int  # records at or above the stored next offset (each upsert or delete)
    skipped: int  # records below it: applied by an earlier run
    attempts: int  # 1 when the first transaction committed


class ApplyError(RuntimeError):
    """A record could not be applied after the bounded retries; the job must stop."""

    def __init__(self, record: SourceRecord | None, attempts: int, cause: BaseException) -> None:
        where = record.describe() if record is not None else "the batch's apply state"
        super().__init__(f"cannot apply {where} after {attempts} attempt(s): {cause!r}")
        self.record = record
        self.attempts = attempts


class _RecordFailure(Exception):
    """Carries the record that failed out of the transaction, so the error can name it."""

    def __init__(self, record: SourceRecord, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.record = record
        self.cause = cause


def ensure_state_table(database: Database) -> None:
    """Creates ``kshim_apply_state`` if absent, in a transaction of its own."""
    with database.transaction():
        database.execute(CREATE_STATE_TABLE)


def next_offset(database: Database, topic: str, partition: int) -> int:
    """Returns the next offset to apply for the partition (0 when nothing was applied yet)."""
    rows = database.execute(SELECT_NEXT_OFFSET, (topic, partition))
    return int(rows[0][0]) if rows else 0


def stored_offsets(database: Database, topics: Iterable[str]) -> dict[tuple[str, int], int]:
    """The next offset to apply of each partition of ``topics`` the destination holds."""
    wanted = set(topics)
    rows = database.execute(f"SELECT topic, partition_id, next_offset FROM {STATE_TABLE}")
    return {(str(topic), int(partition)): int(offset)
            for topic, partition, offset in rows if topic in wanted}  # fmt: skip


def order_records(records: Iterable[SourceRecord]) -> list[SourceRecord]:
    """Offset order within each partition; partitions are independent logs."""
    return sorted(records, key=lambda record: (record.topic, record.partition, record.offset))


@collection_paused()
def apply_batch(
    database: Database,
    records: Sequence[SourceRecord],
    max_retries: int = DEFAULT_MAX_RETRIES,
    backoff_s: float = DEFAULT_BACKOFF_S,
    sleep: Callable[[float], None] = time.sleep,
    coalesce: bool = True,
    decoder: RecordDecoder | None = None,
) -> BatchResult:
    """Applies ``records`` (any order; sorted here) in one transaction, retried on error.

    Assumes ``ensure_state_table`` ran on the database. Raises ApplyError after
    ``max_retries`` retries (``max_retries + 1`` attempts), naming the failing record.
    ``coalesce=False`` skips the fast path (same result, record by record). ``decoder``
    reads the records (default: kshim's format, ``decode_kshim``). Python's cyclic
    collector is held off meanwhile (collector.py).
    """
    ordered = order_records(records)
    decode = decode_kshim if decoder is None else decoder
    attempts = 0
    while True:
        attempts += 1
        try:
            fast = coalesce and attempts == 1
            return BatchResult(*_attempt(database, ordered, fast, decode), attempts)
        except _RecordFailure as failure:
            if attempts > max_retries:
                if isinstance(failure.cause, SchemaRejected):
                    raise_alarm(failure.cause, failure.record.describe())
                raise ApplyError(failure.record, attempts, failure.cause) from failure.cause
        except Exception as error:  # the state read or the commit itself failed
            if attempts > max_retries:
                raise ApplyError(None, attempts, error) from error
        sleep(min(backoff_s * 2 ** (attempts - 1), MAX_BACKOFF_S))


def _attempt(
    database: Database, ordered: list[SourceRecord], fast: bool, decode: RecordDecoder
) -> tuple[int, int]:
    if fast:
        try:
            with database.transaction():
                return _apply_in_transaction(database, ordered, _apply_coalesced, decode)
        except Exception:  # the sequential path below finds and names the failing record
            pass
    with database.transaction():
        return _apply_in_transaction(database, ordered, _apply_sequentially, decode)


def _apply_in_transaction(
    database: Database,
    ordered: list[SourceRecord],
    apply: Callable[[Database, list[SourceRecord], RecordDecoder], None],
    decode: RecordDecoder,
) -> tuple[int, int]:
    """Skips what was applied, applies the rest, stores the next offsets: one transaction."""
    positions: dict[tuple[str, int], int] = {}
    pending: list[SourceRecord] = []
    for record in ordered:
        position = (record.topic, record.partition)
        if position not in positions:
            positions[position] = next_offset(database, record.topic, record.partition)
        if record.offset >= positions[position]:
            pending.append(record)
            positions[position] = record.offset + 1
    apply(database, pending, decode)
    for (topic, partition), offset in positions.items():
        database.execute(STORE_NEXT_OFFSET, (topic, partition, offset))
    return len(pending), len(ordered) - len(pending)


@dataclass(slots=True)
class _Tables:
    """Tables known to exist, and known not to, in this transaction (a rolled-back CREATE
    TABLE is gone). Absent ones are remembered too: a batch that meets a table for the first
    time may hold many deletes of its rows before the change that creates it, and asking
    the catalogue for each took most of such a batch's time on DuckDB (about 1 ms a
    question)."""

    answers: dict[str, bool] = field(default_factory=dict)  # table -> whether it exists

    def exists(self, database: Database, table: str) -> bool:
        if table not in self.answers:
            self.answers[table] = database.table_exists(table)
        return self.answers[table]

    def created(self, table: str) -> None:
        """Notes that ``table`` exists now (created or altered in this transaction)."""
        self.answers[table] = True

    def lookup(self, database: Database) -> ColumnLookup:
        """The destination's columns of a table, None when it has none (for decoders)."""

        def columns(table: str) -> Columns | None:
            return database.table_columns(table) if self.exists(database, table) else None

        return columns

    def ensure(self, database: Database, table: str, change: Change, key: list[str]) -> None:
        if not self.exists(database, table):
            # The key's JSON has sorted names; the source's column order is the better pk order.
            database.create_table(table, change.columns, [n for n in change.columns if n in key])
            self.created(table)


def _apply_sequentially(
    database: Database, records: list[SourceRecord], decode: RecordDecoder
) -> None:
    tables = _Tables()
    lookup = tables.lookup(database)
    for record in records:
        try:
            table, key, change = decode(record, lookup)
            if isinstance(change, TableSchema):
                apply_schema(database, change)
                tables.created(table)
            elif change is None:
                # Deleting an absent row (or from an absent table) is already done: a
                # destination bootstrapped from T.full may see tombstones of rows it never had.
                if tables.exists(database, table):
                    database.delete(table, _typed_key(database, table, key))
            else:
                if change.schema is not None:
                    apply_schema(database, change.schema)
                    tables.created(table)
                tables.ensure(database, table, change, list(key))
                database.upsert(table, change.row)
        except Exception as error:
            raise _RecordFailure(record, error) from error


def _apply_coalesced(
    database: Database, records: list[SourceRecord], decode: RecordDecoder
) -> None:
    tables = _Tables()
    lookup = tables.lookup(database)
    # A row is (table, primary key): Debezium's keys hold no table, and one batch may read
    # several topics.
    latest: dict[tuple[str, Hashable], _RowChange] = {}
    for record in records:
        table, key, change = decode(record, lookup)
        schema = change.schema if isinstance(change, Change) else change
        if schema is not None:
            # The rows before it were written under the old schema: apply them first.
            _write_latest(database, tables, latest)
            latest = {}
            apply_schema(database, schema)
            tables.created(table)
        if isinstance(change, TableSchema):
            continue
        row = (table, _row_identity(key))
        latest.pop(row, None)  # re-inserted last: keeps the order of last changes
        latest[row] = (table, key, change)
    _write_latest(database, tables, latest)


def _row_identity(key: JsonRow) -> Hashable:
    """What tells one row's key from another's within a batch: its values as they are (with
    their types, so that 1 and 1.0 or True stay apart, as their JSON does), or its JSON when
    a value is not hashable (a blob's {"$base64": ...}). Dumping every key as JSON took a
    tenth of the sink's time."""
    identity = tuple([(name, type(value), value) for name, value in sorted(key.items())])
    try:
        hash(identity)
    except TypeError:
        return json.dumps(key, sort_keys=True)
    return identity


def _write_latest(
    database: Database, tables: _Tables, latest: dict[tuple[str, Hashable], _RowChange]
) -> None:
    """Writes the last change of each row with multi-row statements."""
    deletes: dict[str, list[Row]] = {}
    upserts: dict[str, tuple[list[str], list[list[PortableValue]]]] = {}
    for table, key, change in latest.values():
        if change is None:
            if tables.exists(database, table):
                deletes.setdefault(table, []).append(_typed_key(database, table, key))
            continue
        tables.ensure(database, table, change, list(key))
        columns, rows = upserts.setdefault(table, (list(change.columns), []))
        rows.append([change.row[name] for name in columns])
    for table, keys in deletes.items():
        delete_keys(database, table, keys)
    for table, (columns, rows) in upserts.items():
        upsert_rows(database, table, columns, rows)


def decode_kshim(record: SourceRecord, destination: ColumnLookup) -> DecodedRecord:
    """A record of kshim's format (change_format.py): (table, primary key as JSON values,
    change or None for a delete). The format carries its types: ``destination`` is unused."""
    if record.key is None:
        raise ValueError("a change record needs a key (table and primary key)")
    table, key = decode_any_key(record.key)
    if key is None:
        if record.value is None:
            raise ValueError(f"the schema record of {table!r} has no value")
        _seq, schema = decode_schema_value(record.value)
        return table, {}, schema
    if record.value is None:
        return table, key, None
    change = decode_value(record.value)
    if change.table != table:
        raise ValueError(f"value names table {change.table!r} but the key names {table!r}")
    missing = [name for name in key if name not in change.row]
    if missing:
        raise ValueError(f"row image lacks primary key column(s) {missing}")
    return table, key, change


def decode_debezium(record: SourceRecord, destination: ColumnLookup) -> DecodedRecord:
    """A record of Debezium's format (debezium_format.py), from any of its topics."""
    return debezium_format.decode_change(record.topic, record.key, record.value, destination)


# The input formats, by the apply job's --format name.
FORMATS: dict[str, RecordDecoder] = {"kshim": decode_kshim, "debezium": decode_debezium}


def _typed_key(database: Database, table: str, key: JsonRow) -> Row:
    """Key values as python values of the destination's column types (dates, blobs...)."""
    columns = database.table_columns(table)
    return decode_row({name: columns[name] for name in key}, key)
