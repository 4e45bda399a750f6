"""Triggers and the change-log table on a source database (VENUS, section 3.1).

VENUS adds Sequence/recordID/isDeleted columns to every source table and a log table
that triggers fill. We leave the application's tables untouched and keep all of it in
tables of our own:

- ``kshim_change_counter``: one row, the counter (``kshim_change_seq`` is a view of the
  last number issued: ``last_issued_seq``). A SEQUENCE would not do on PostgreSQL: it
  leaves gaps on rollback and hands numbers out in start order, not commit order. Here a
  writer locks the counter row (a statement-level trigger, before the statement takes any
  row lock) and holds it to commit, so writers take numbers one after another, each after
  the previous one committed: sequence order is commit order. The next number is
  ``max(counter, highest logged seq) + 1``, computed inside that lock, so a rollback
  leaves no gap. The counter row itself is only raised when captured log rows are
  deleted (``delete_captured``): updating it per change would make a transaction of n
  changes build an n-long version chain of one row, quadratic in n. SQLite serialises
  writers anyway; its trigger simply increments the counter.
- ``kshim_change_log(seq, table_name, pk_json, op)``: one row per inserted, updated or
  deleted row. An update that changes the primary key is logged as a delete of the old
  key and an insert of the new one, so every log row names exactly one key. ``op =
  'delete'`` is VENUS's soft-delete flag: the delete is a log row, never a lost fact.
  The row image is not logged; capture reads it from the source table (see
  ``read_changes``). Captured rows are deleted once the broker holds them committed.
- ``kshim_capture_state(topic, last_seq, pending_seq, pending_status)``: per capture
  topic, the last sequence committed to the broker and the batch in flight
  (see review.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from spark_examples.databases import (
    Columns,
    Database,
    PortableValue,
    Row,
    decode_record,
    decode_value,
    quote,
)

LOG_TABLE = "kshim_change_log"
SEQUENCE_TABLE = "kshim_change_seq"  # view: (id = 1, last_seq = the last number issued)
COUNTER_TABLE = "kshim_change_counter"
STATE_TABLE = "kshim_capture_state"
CAPTURE_ENGINES = ("sqlite", "postgresql")
ROWS_PER_QUERY = 500  # keys per row-reading query (SQLite allows 32766 parameters)

# A row's primary key values, in key order: how current_rows indexes what it found.
KeyValues: TypeAlias = tuple[PortableValue, ...]

_TABLES_SQL = (
    f"CREATE TABLE IF NOT EXISTS {COUNTER_TABLE} "
    "(id INTEGER PRIMARY KEY, last_seq BIGINT NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {LOG_TABLE} (seq BIGINT PRIMARY KEY, "
    "table_name TEXT NOT NULL, pk_json TEXT NOT NULL, op TEXT NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (topic TEXT PRIMARY KEY, "
    "last_seq BIGINT NOT NULL, pending_seq BIGINT, pending_status TEXT)",
)


@dataclass(frozen=True)
class LoggedChange:
    """One change-log row: ``pk`` holds decoded python values in primary-key order."""

    seq: int
    table: str
    pk: Row
    op: str  # "insert" | "update" | "delete"


def install_capture(db: Database, tables: list[str]) -> None:
    """Creates the log tables and (re)creates the triggers on ``tables``; idempotent.

    Raises ValueError for an engine without capture support or a table without a key.
    """
    if db.engine not in CAPTURE_ENGINES:
        raise ValueError(f"capture supports {CAPTURE_ENGINES}, not {db.engine}")
    _install_log_tables(db)
    for table in tables:
        key = db.primary_key(table)
        if not key:
            raise ValueError(f"table {table!r} has no primary key")
        if db.engine == "sqlite":
            _install_sqlite_triggers(db, table, key)
        else:
            _install_postgres_triggers(db, table, key)


def _install_log_tables(db: Database) -> None:
    with db.transaction():
        for statement in _TABLES_SQL:
            db.execute(statement)
        if not db.execute(f"SELECT 1 FROM {COUNTER_TABLE} WHERE id = 1"):
            db.execute(f"INSERT INTO {COUNTER_TABLE} (id, last_seq) VALUES (1, 0)")
        greatest = "max" if db.engine == "sqlite" else "GREATEST"
        if not db.table_exists(SEQUENCE_TABLE) and not _view_exists(db, SEQUENCE_TABLE):
            db.execute(
                f"CREATE VIEW {SEQUENCE_TABLE} AS SELECT id, {greatest}(last_seq, "
                f"COALESCE((SELECT max(seq) FROM {LOG_TABLE}), 0)) AS last_seq "
                f"FROM {COUNTER_TABLE}"
            )


def _install_sqlite_triggers(db: Database, table: str, key: list[str]) -> None:
    with db.transaction():
        for statement in _sqlite_triggers(table, key):
            db.execute(statement)


def _install_postgres_triggers(db: Database, table: str, key: list[str]) -> None:
    # Functions are replaced every time (no table lock); triggers are created only when
    # absent and one table per transaction, because creating a trigger locks its table
    # while applications keep writing.
    functions, triggers = _postgres_trigger(table, key)
    for statement in functions:
        db.execute(statement)
    if not _postgres_has_trigger(db, table):
        with db.transaction():
            for statement in triggers:
                db.execute(statement)


def _view_exists(db: Database, name: str) -> bool:
    if db.engine == "sqlite":
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = ?"
    else:
        sql = "SELECT 1 FROM pg_views WHERE viewname = ? AND schemaname = current_schema()"
    return bool(db.execute(sql, [name]))


def last_issued_seq(db: Database) -> int:
    """The highest sequence number handed out so far (0 if none)."""
    return int(db.execute(f"SELECT last_seq FROM {SEQUENCE_TABLE} WHERE id = 1")[0][0])


def tables_without_triggers(db: Database, tables: list[str]) -> list[str]:
    """Those of ``tables`` whose capture triggers are gone (a SQLite table rebuilt to change
    a column's type loses its triggers with the old table)."""
    if db.engine == "sqlite":
        rows = db.execute("SELECT tbl_name FROM sqlite_master WHERE type = 'trigger'")
        installed = {str(row[0]) for row in rows}
        return [table for table in tables if table not in installed]
    return [table for table in tables if not _postgres_has_trigger(db, table)]


def _postgres_has_trigger(db: Database, table: str) -> bool:
    found = db.execute(
        "SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(?) AND tgname IN (?, ?)",
        [quote(table), "kshim_capture", "kshim_capture_lock"],
    )
    return int(found[0][0]) == 2


def _sqlite_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sqlite_pk_json(row: str, key: list[str]) -> str:
    return "json_object(" + ", ".join(f"{_sqlite_string(k)}, {row}.{quote(k)}" for k in key) + ")"


def _sqlite_log(table: str, key: list[str], row: str, op_sql: str, when: str) -> str:
    # One logged change: take the next number, then log it (both skipped unless `when`).
    bump = f"UPDATE {COUNTER_TABLE} SET last_seq = last_seq + 1 WHERE id = 1 AND ({when});"
    log = (
        f"INSERT INTO {LOG_TABLE} (seq, table_name, pk_json, op) SELECT last_seq, "
        f"{_sqlite_string(table)}, {_sqlite_pk_json(row, key)}, {op_sql} "
        f"FROM {COUNTER_TABLE} WHERE id = 1 AND ({when});"
    )
    return bump + "\n  " + log


def _sqlite_triggers(table: str, key: list[str]) -> list[str]:
    name = table.replace('"', "")
    key_changed = " OR ".join(f"OLD.{quote(k)} IS NOT NEW.{quote(k)}" for k in key)
    bodies = {
        "insert": ("INSERT", _sqlite_log(table, key, "NEW", "'insert'", "1")),
        "update": (
            "UPDATE",
            _sqlite_log(table, key, "OLD", "'delete'", key_changed)
            + "\n  "
            + _sqlite_log(
                table,
                key,
                "NEW",
                f"CASE WHEN {key_changed} THEN 'insert' ELSE 'update' END",
                "1",
            ),
        ),
        "delete": ("DELETE", _sqlite_log(table, key, "OLD", "'delete'", "1")),
    }
    statements = []
    for suffix, (event, body) in bodies.items():
        trigger = quote(f"kshim_{name}_{suffix}")
        statements.append(f"DROP TRIGGER IF EXISTS {trigger}")
        statements.append(
            f"CREATE TRIGGER {trigger} AFTER {event} ON {quote(table)} FOR EACH ROW BEGIN\n"
            f"  {body}\nEND"
        )
    return statements


def _postgres_trigger(table: str, key: list[str]) -> tuple[list[str], list[str]]:
    """(functions, triggers) capturing ``table``."""
    function = quote(f"kshim_capture_{table}")
    body = _postgres_function_body(table, key)
    functions = [
        _POSTGRES_LOCK_FUNCTION,
        _POSTGRES_NEXT_SEQ_FUNCTION,
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql "
        f"AS $kshim${body}$kshim$",
    ]
    triggers = [
        f"CREATE OR REPLACE TRIGGER kshim_capture AFTER INSERT OR UPDATE OR DELETE "
        f"ON {quote(table)} FOR EACH ROW EXECUTE FUNCTION {function}()",
        # Before the statement touches any row, wait for the counter row. Taken after the
        # statement's row locks instead (the row trigger runs AFTER), a writer holding a
        # row could wait for the counter held by a writer waiting for that row: deadlock.
        f"CREATE OR REPLACE TRIGGER kshim_capture_lock BEFORE INSERT OR UPDATE OR DELETE "
        f"ON {quote(table)} FOR EACH STATEMENT EXECUTE FUNCTION kshim_capture_lock()",
    ]
    return functions, triggers


def _postgres_function_body(table: str, key: list[str]) -> str:
    """The row trigger's PL/pgSQL: log a delete of the old key, an insert or update of the new."""

    def pk_json(row: str) -> str:
        pairs = ", ".join(f"'{k.replace(chr(39), chr(39) * 2)}', {row}.{quote(k)}" for k in key)
        return f"json_build_object({pairs})::text"

    old_key = ", ".join(f"OLD.{quote(k)}" for k in key)
    new_key = ", ".join(f"NEW.{quote(k)}" for k in key)
    literal = "'" + table.replace("'", "''") + "'"
    return f"""
DECLARE
  key_changed BOOLEAN := TG_OP = 'UPDATE' AND ROW({old_key}) IS DISTINCT FROM ROW({new_key});
BEGIN
  IF TG_OP = 'DELETE' OR key_changed THEN
    INSERT INTO {LOG_TABLE} VALUES (kshim_next_seq(), {literal}, {pk_json("OLD")}, 'delete');
  END IF;
  IF TG_OP <> 'DELETE' THEN
    INSERT INTO {LOG_TABLE} VALUES (kshim_next_seq(), {literal}, {pk_json("NEW")},
      CASE WHEN TG_OP = 'INSERT' OR key_changed THEN 'insert' ELSE 'update' END);
  END IF;
  RETURN NULL;
END"""


_POSTGRES_LOCK_FUNCTION = (
    "CREATE OR REPLACE FUNCTION kshim_capture_lock() RETURNS trigger LANGUAGE plpgsql AS "
    f"$kshim$ BEGIN PERFORM 1 FROM {COUNTER_TABLE} WHERE id = 1 FOR UPDATE; RETURN NULL; "
    "END $kshim$"
)
# The lock is normally held already (kshim_capture_lock); taking it again costs nothing.
# Each query here takes a fresh snapshot (READ COMMITTED), after the lock was granted, so
# it sees the log rows of every earlier writer.
_POSTGRES_NEXT_SEQ_FUNCTION = f"""
CREATE OR REPLACE FUNCTION kshim_next_seq() RETURNS BIGINT LANGUAGE plpgsql AS $kshim$
DECLARE
  floor_seq BIGINT;
  top_seq BIGINT;
BEGIN
  SELECT last_seq INTO floor_seq FROM {COUNTER_TABLE} WHERE id = 1 FOR UPDATE;
  SELECT seq INTO top_seq FROM {LOG_TABLE} ORDER BY seq DESC LIMIT 1;
  RETURN GREATEST(floor_seq, COALESCE(top_seq, 0)) + 1;
END $kshim$"""


def read_changes(db: Database, after_seq: int, tables: list[str], limit: int) -> list[LoggedChange]:
    """Up to ``limit`` logged changes of ``tables`` with seq > ``after_seq``, in seq order."""
    marks = ", ".join("?" for _ in tables)
    rows = db.execute(
        f"SELECT seq, table_name, pk_json, op FROM {LOG_TABLE} WHERE seq > ? "
        f"AND table_name IN ({marks}) ORDER BY seq LIMIT ?",
        [after_seq, *tables, limit],
    )
    key_types = {table: _key_types(db, table) for table in {row[1] for row in rows}}
    changes = []
    for seq, table, pk_json, op in rows:
        logged = json.loads(pk_json)
        pk = {name: decode_value(kind, logged[name]) for name, kind in key_types[table].items()}
        changes.append(LoggedChange(int(seq), table, pk, op))
    return changes


def _key_types(db: Database, table: str) -> Columns:
    # Primary-key column -> portable type, in key order.
    columns = db.table_columns(table)
    return {name: columns[name] for name in db.primary_key_cached(table)}


def current_rows(
    db: Database, table: str, keys: Sequence[Mapping[str, PortableValue]]
) -> dict[KeyValues, Row]:
    """The rows of ``table`` with the given keys as they are now, by key-value tuple.

    Capture ships rows as they are when captured, not as they were at the change. That is
    still right in the end: a later change to the same row has a higher seq and is
    shipped after this one, so the last record per key carries the row's final state, and
    a row deleted meanwhile (absent here) becomes a tombstone here and again at its delete.
    Logging the row image in the trigger instead would cost every application write a
    JSON serialisation of the row and put engine-specific encodings in the log.
    """
    columns = db.table_columns(table)
    key = db.primary_key_cached(table)
    names = ", ".join(quote(name) for name in columns)
    key_sql = "(" + ", ".join(quote(name) for name in key) + ")"
    one_key = "(" + ", ".join("?" for _ in key) + ")"
    found: dict[KeyValues, Row] = {}
    distinct = list({tuple(pk[name] for name in key): None for pk in keys})
    for start in range(0, len(distinct), ROWS_PER_QUERY):
        chunk = distinct[start : start + ROWS_PER_QUERY]
        # Row-value IN ((?, ?), ...): one query per chunk, for simple and composite keys.
        records = db.execute(
            f"SELECT {names} FROM {quote(table)} WHERE {key_sql} IN "
            f"({', '.join(one_key for _ in chunk)})",
            [value for identity in chunk for value in identity],
        )
        for record in records:
            row = decode_record(columns, record)
            found[tuple(row[name] for name in key)] = row
    return found


def current_row(db: Database, table: str, pk: Mapping[str, PortableValue]) -> Row | None:
    """The row of ``table`` with key ``pk`` now, or None if there is none (see current_rows)."""
    key = db.primary_key_cached(table)
    return current_rows(db, table, [pk]).get(tuple(pk[name] for name in key))


def delete_captured(db: Database, up_to_seq: int, tables: list[str]) -> None:
    """Drops log rows of ``tables`` up to ``up_to_seq`` (call only once they are committed).

    First raises the counter to ``up_to_seq``, so that numbers stay unique once the rows
    that held them are gone (PostgreSQL numbers from the log's highest seq).
    """
    marks = ", ".join("?" for _ in tables)
    with db.transaction():
        db.execute(
            f"UPDATE {COUNTER_TABLE} SET last_seq = ? WHERE id = 1 AND last_seq < ?",
            [up_to_seq, up_to_seq],
        )
        db.execute(
            f"DELETE FROM {LOG_TABLE} WHERE seq <= ? AND table_name IN ({marks})",
            [up_to_seq, *tables],
        )
