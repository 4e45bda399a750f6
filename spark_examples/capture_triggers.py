"""Triggers and the change-log table on a source database (VENUS, section 3.1).

VENUS adds Sequence/recordID/isDeleted columns to every source table and a log table
that triggers fill. We leave the application's tables untouched and keep all of it in
three tables of our own:

- ``kshim_change_seq``: one row holding the last sequence number handed out. The trigger
  increments it, so the row lock serialises writers: on PostgreSQL (where a SEQUENCE
  leaves gaps on rollback and hands numbers out in start order, not commit order) a
  writer takes its number only after the previous writer committed, so sequence order is
  commit order, and a rollback undoes the increment: no gap. SQLite serialises writers
  anyway.
- ``kshim_change_log(seq, table_name, pk_json, op)``: one row per inserted, updated or
  deleted row. An update that changes the primary key is logged as a delete of the old
  key and an insert of the new one, so every log row names exactly one key. ``op =
  'delete'`` is VENUS's soft-delete flag: the delete is a log row, never a lost fact.
  The row image is not logged; capture reads it from the source table (see
  ``read_changes``). Captured rows are deleted once the broker holds them committed.
- ``kshim_capture_state(topic, last_seq, pending_seq, pending_status)``: per capture
  topic, the last sequence committed to the broker and the batch in flight
  (see capture_review.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from spark_examples import databases
from spark_examples.databases import Database, quote

LOG_TABLE = "kshim_change_log"
SEQUENCE_TABLE = "kshim_change_seq"
STATE_TABLE = "kshim_capture_state"
CAPTURE_ENGINES = ("sqlite", "postgresql")
ROWS_PER_QUERY = 500  # keys per row-reading query (SQLite allows 32766 parameters)

_TABLES_SQL = (
    f"CREATE TABLE IF NOT EXISTS {SEQUENCE_TABLE} "
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
    pk: dict[str, Any]
    op: str  # "insert" | "update" | "delete"


def install_capture(db: Database, tables: list[str]) -> None:
    """Creates the log tables and (re)creates the triggers on ``tables``; idempotent.

    Raises ValueError for an engine without capture support or a table without a key.
    """
    if db.engine not in CAPTURE_ENGINES:
        raise ValueError(f"capture supports {CAPTURE_ENGINES}, not {db.engine}")
    with db.transaction():
        for statement in _TABLES_SQL:
            db.execute(statement)
        if not db.execute(f"SELECT 1 FROM {SEQUENCE_TABLE} WHERE id = 1"):
            db.execute(f"INSERT INTO {SEQUENCE_TABLE} (id, last_seq) VALUES (1, 0)")
    for table in tables:
        key = db.primary_key(table)
        if not key:
            raise ValueError(f"table {table!r} has no primary key")
        # One table per transaction, and PostgreSQL triggers only when absent: creating a
        # trigger locks its table, and applications keep writing while capture starts.
        if db.engine == "postgresql" and _postgres_has_trigger(db, table):
            continue
        install = _sqlite_triggers if db.engine == "sqlite" else _postgres_trigger
        with db.transaction():
            for statement in install(table, key):
                db.execute(statement)


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
    bump = f"UPDATE {SEQUENCE_TABLE} SET last_seq = last_seq + 1 WHERE id = 1 AND ({when});"
    log = (
        f"INSERT INTO {LOG_TABLE} (seq, table_name, pk_json, op) SELECT last_seq, "
        f"{_sqlite_string(table)}, {_sqlite_pk_json(row, key)}, {op_sql} "
        f"FROM {SEQUENCE_TABLE} WHERE id = 1 AND ({when});"
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


def _postgres_trigger(table: str, key: list[str]) -> list[str]:
    function = quote(f"kshim_capture_{table}")

    def pk_json(row: str) -> str:
        pairs = ", ".join(f"'{k.replace(chr(39), chr(39) * 2)}', {row}.{quote(k)}" for k in key)
        return f"json_build_object({pairs})::text"

    old_key = ", ".join(f"OLD.{quote(k)}" for k in key)
    new_key = ", ".join(f"NEW.{quote(k)}" for k in key)
    literal = "'" + table.replace("'", "''") + "'"
    bump = f"UPDATE {SEQUENCE_TABLE} SET last_seq = last_seq + 1 WHERE id = 1 RETURNING last_seq"
    body = f"""
DECLARE
  next_seq BIGINT;
  key_changed BOOLEAN := TG_OP = 'UPDATE' AND ROW({old_key}) IS DISTINCT FROM ROW({new_key});
BEGIN
  IF TG_OP = 'DELETE' OR key_changed THEN
    {bump} INTO next_seq;
    INSERT INTO {LOG_TABLE} VALUES (next_seq, {literal}, {pk_json("OLD")}, 'delete');
  END IF;
  IF TG_OP <> 'DELETE' THEN
    {bump} INTO next_seq;
    INSERT INTO {LOG_TABLE} VALUES (next_seq, {literal}, {pk_json("NEW")},
      CASE WHEN TG_OP = 'INSERT' OR key_changed THEN 'insert' ELSE 'update' END);
  END IF;
  RETURN NULL;
END"""
    return [
        _POSTGRES_LOCK_FUNCTION,
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql "
        f"AS $kshim${body}$kshim$",
        f"CREATE OR REPLACE TRIGGER kshim_capture AFTER INSERT OR UPDATE OR DELETE "
        f"ON {quote(table)} FOR EACH ROW EXECUTE FUNCTION {function}()",
        # Before the statement touches any row, wait for the counter row. Taken after the
        # statement's row locks instead (the row trigger runs AFTER), a writer holding a
        # row could wait for the counter held by a writer waiting for that row: deadlock.
        f"CREATE OR REPLACE TRIGGER kshim_capture_lock BEFORE INSERT OR UPDATE OR DELETE "
        f"ON {quote(table)} FOR EACH STATEMENT EXECUTE FUNCTION kshim_capture_lock()",
    ]


_POSTGRES_LOCK_FUNCTION = (
    "CREATE OR REPLACE FUNCTION kshim_capture_lock() RETURNS trigger LANGUAGE plpgsql AS "
    f"$kshim$ BEGIN PERFORM 1 FROM {SEQUENCE_TABLE} WHERE id = 1 FOR UPDATE; RETURN NULL; "
    "END $kshim$"
)


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
        pk = {
            name: databases.decode_value(kind, logged[name])
            for name, kind in key_types[table].items()
        }
        changes.append(LoggedChange(int(seq), table, pk, op))
    return changes


def _key_types(db: Database, table: str) -> dict[str, databases.PortableType]:
    # Primary-key column -> portable type, in key order.
    columns = db.table_columns(table)
    return {name: columns[name] for name in db.primary_key_cached(table)}


def current_rows(
    db: Database, table: str, keys: list[dict[str, Any]]
) -> dict[tuple[Any, ...], dict[str, Any]]:
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
    positions = [list(columns).index(name) for name in key]
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
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
            row = {
                name: databases.decode_value(kind, value)
                for (name, kind), value in zip(columns.items(), record, strict=True)
            }
            found[tuple(row[list(columns)[p]] for p in positions)] = row
    return found


def current_row(db: Database, table: str, pk: dict[str, Any]) -> dict[str, Any] | None:
    """The row of ``table`` with key ``pk`` now, or None if there is none (see current_rows)."""
    key = db.primary_key_cached(table)
    return current_rows(db, table, [pk]).get(tuple(pk[name] for name in key))


def delete_captured(db: Database, up_to_seq: int, tables: list[str]) -> None:
    """Drops log rows of ``tables`` up to ``up_to_seq`` (call only once they are committed)."""
    marks = ", ".join("?" for _ in tables)
    db.execute(
        f"DELETE FROM {LOG_TABLE} WHERE seq <= ? AND table_name IN ({marks})",
        [up_to_seq, *tables],
    )
