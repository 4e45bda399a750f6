"""Applying a schema-change record: bring one destination table to the shipped schema.

The record holds the table's whole schema (change_format.py), so applying it is a
difference: create the table if it is absent; otherwise drop the columns it no longer has,
add the new ones (existing rows get the shipped default, as the source's did), and widen
the types that changed (databases/schema.py: ``WIDENINGS``; SQLite rebuilds the table).
A destination already at that schema is left alone, so applying a record twice (a replay
after a crash, a bootstrap from ``T.full`` after the table existed) changes nothing the
second time. Constraints other than the key are not carried over: a replica takes full
row images from a source that enforced them.

A change the destination cannot take without changing what it holds (a narrowing such as
real -> integer, a changed primary key) raises ``SchemaRejected``, naming the table and the
column: it is never applied half-way nor skipped. The sink then stops the job with an
alarm; once the operator has brought the destination table to the shipped schema (or to
anything the record can widen from), the replayed record applies.
"""

from __future__ import annotations

import logging

from spark_examples.databases import Columns, Database
from spark_examples.databases.schema import (
    WIDENINGS,
    TableSchema,
    add_column,
    change_column_types,
    drop_column,
)

log = logging.getLogger(__name__)


class SchemaRejected(ValueError):
    """A schema change the destination cannot take; names the table and column."""

    def __init__(self, table: str, column: str, reason: str) -> None:
        super().__init__(f"table {table!r} column {column!r}: {reason}")
        self.table = table
        self.column = column


def apply_schema(database: Database, target: TableSchema) -> None:
    """Brings ``target.table`` to ``target`` in the caller's transaction.

    Raises SchemaRejected (before changing anything) for a change it cannot make.
    """
    table = target.table
    if not database.table_exists(table):
        database.create_table(table, target.columns, list(target.primary_key), target.defaults)
        return
    database.forget_schema(table)
    current = database.table_columns(table)
    _check(database, target, current)
    for name in current:
        if name not in target.columns:
            drop_column(database, table, name)
    for name, kind in target.columns.items():
        if name not in current:
            add_column(database, table, name, kind, target.defaults.get(name))
    if any(name in current and current[name] != kind for name, kind in target.columns.items()):
        change_column_types(database, target)


def _check(database: Database, target: TableSchema, current: Columns) -> None:
    key = tuple(database.primary_key(target.table))
    if key != target.primary_key:
        column = next(iter(set(key) ^ set(target.primary_key)), key[0] if key else "")
        raise SchemaRejected(
            target.table, column, f"primary key {list(key)} cannot become {target.primary_key}"
        )
    for name, kind in target.columns.items():
        found = current.get(name, kind)
        if found != kind and (found, kind) not in WIDENINGS:
            raise SchemaRejected(
                target.table,
                name,
                f"type {found} cannot become {kind} (not a widening: values the destination "
                "holds could change); bring the destination column to the new type, "
                "then restart the apply",
            )


def raise_alarm(error: SchemaRejected, where: str) -> None:
    """The alarm line of a rejected schema change (docs/metrics.md, Alarms: an event)."""
    log.error(
        "ALARM: the apply stopped at %s: %s (kind=schema_rejected subject=%s value=%s "
        "threshold=- state=happened)",
        where,
        error,
        error.table,
        error.column,
    )
