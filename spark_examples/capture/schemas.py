"""Schema changes at the source: detected, shipped in order, and new tables taken in.

Neither SQLite nor a trigger on a table sees DDL, so the capture compares, at every batch,
each captured table's schema (databases/schema.py: portable column types, key, NOT NULL,
constant defaults) with the last one it shipped for that table. Those are kept per topic
in ``kshim_capture_schema(topic, table_name, schema_json)``, written in the same source
transaction that records the batch as captured (review.record_captured), so a batch the
review aborts is shipped again with its schema records, and a committed one never twice.

Order: the capture reads row images as they are when it captures (triggers.current_rows),
so every row record of a batch is under the schema read with it. A changed schema is
therefore shipped first in its batch, with ``seq`` = the last change shipped before it:
the shipped history is the source's with the DDL moved to just after that change, and
each row's image is its state under the new schema, which is what the source holds. The
schemas are read before and after the log and the rows; if they differ (DDL ran
meanwhile), the batch is read again, so no image is under a schema not shipped before it.

New tables: a capture of ``*`` takes every application table with a primary key. One
that appears later (or while the capture was stopped) gets its triggers and, in the same
source transaction, one logged insert per row it already holds, so rows written before
its triggers existed are captured too; its first schema record precedes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spark_examples import change_format
from spark_examples.capture import triggers
from spark_examples.databases import Database, quote
from spark_examples.databases.schema import TableSchema, read_schema

SCHEMA_TABLE = "kshim_capture_schema"
ALL_TABLES = "*"
_OWN_PREFIXES = ("kshim_", "sqlite_")


def ensure_schema_table(db: Database) -> None:
    """Creates ``kshim_capture_schema`` if absent."""
    with db.transaction():
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (topic TEXT NOT NULL, "
            "table_name TEXT NOT NULL, schema_json TEXT NOT NULL, "
            "PRIMARY KEY (topic, table_name))"
        )


def schema_text(schema: TableSchema) -> str:
    """The canonical text of ``schema``: equal texts, equal schemas."""
    return change_format.encode_schema_value(0, schema).decode("utf-8")


def shipped_schemas(db: Database, topic: str) -> dict[str, str]:
    """Table -> the text of the last schema shipped to ``topic`` for it."""
    rows = db.execute(
        f"SELECT table_name, schema_json FROM {SCHEMA_TABLE} WHERE topic = ?", [topic]
    )
    return {str(row[0]): str(row[1]) for row in rows}


def store_shipped(db: Database, topic: str, schemas: Iterable[TableSchema]) -> None:
    """Records ``schemas`` as shipped; call inside the transaction recording their batch."""
    for schema in schemas:
        db.execute(
            f"INSERT INTO {SCHEMA_TABLE} (topic, table_name, schema_json) VALUES (?, ?, ?) "
            "ON CONFLICT (topic, table_name) DO UPDATE SET schema_json = excluded.schema_json",
            [topic, schema.table, schema_text(schema)],
        )


def current_schemas(db: Database, tables: Iterable[str]) -> dict[str, TableSchema]:
    """The schemas of ``tables`` as they are now (uncached)."""
    return {table: read_schema(db, table) for table in tables}


def changed(schemas: Mapping[str, TableSchema], shipped: Mapping[str, str]) -> list[TableSchema]:
    """The schemas that differ from the last shipped (every one never shipped)."""
    return [schema for name, schema in schemas.items() if shipped.get(name) != schema_text(schema)]


def source_tables(db: Database) -> list[str]:
    """The application's tables with a primary key (not the capture's own), by name."""
    if db.engine == "sqlite":
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    else:
        sql = (
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name"
        )
    names = [str(row[0]) for row in db.execute(sql)]
    own = [name for name in names if not name.startswith(_OWN_PREFIXES)]
    return [name for name in own if db.primary_key(name)]


def take_in_new_table(db: Database, table: str) -> None:
    """Installs ``table``'s triggers and logs an insert of each row it holds, in one source
    transaction (on PostgreSQL, creating the triggers locks out writers to the end)."""
    with db.transaction():
        triggers.install_capture(db, [table])
        _log_existing_rows(db, table, db.primary_key(table))


def _log_existing_rows(db: Database, table: str, key: list[str]) -> None:
    # Numbers after the last issued one, in key order; then the counter is raised past
    # them, as the triggers number from it (SQLite) or from the log's highest (PostgreSQL).
    pairs = ", ".join(_string_literal(name) + f", source.{quote(name)}" for name in key)
    if db.engine == "postgresql":
        db.execute(f"SELECT 1 FROM {triggers.COUNTER_TABLE} WHERE id = 1 FOR UPDATE")
        pk_json, greatest = f"json_build_object({pairs})::text", "GREATEST"
    else:
        pk_json, greatest = f"json_object({pairs})", "max"
    base = triggers.last_issued_seq(db)
    order = ", ".join(f"source.{quote(name)}" for name in key)
    db.execute(
        f"INSERT INTO {triggers.LOG_TABLE} (seq, table_name, pk_json, op) "
        f"SELECT CAST(? AS BIGINT) + ROW_NUMBER() OVER (ORDER BY {order}), "
        f"CAST(? AS TEXT), {pk_json}, 'insert' "
        f"FROM {quote(table)} AS source",
        [base, table],
    )
    db.execute(
        f"UPDATE {triggers.COUNTER_TABLE} SET last_seq = {greatest}(last_seq, "
        f"COALESCE((SELECT max(seq) FROM {triggers.LOG_TABLE}), 0)) WHERE id = 1"
    )


def _string_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
