"""Multi-row upserts and deletes: the fast path of a micro-batch.

Row-at-a-time statements cost about 5 ms each in DuckDB (0.05 ms in SQLite), so a batch of
10,000 changes would take a minute there. Within one destination transaction only the net
effect is ever visible, and every change carries the row's full image (or deletes it), so the
last change per key in the batch decides that row: the sink's fast path (sink.py) keeps it,
and the statements here apply the survivors a few hundred rows per statement. The SQL is the
common subset of SQLite (3.24+), PostgreSQL and DuckDB; "?" placeholders go through
``Database.execute``, which converts them per engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from spark_examples.databases import Database, PortableValue, conflict_action, quote

# Bound parameters per statement: far below SQLite's 32,766 and PostgreSQL's 65,535.
MAX_PARAMETERS = 8_000

Item = TypeVar("Item")


def chunks(items: Sequence[Item], size: int) -> Iterator[Sequence[Item]]:
    """Consecutive slices of ``items`` of at most ``size`` each."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def upsert_rows(
    database: Database,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[PortableValue]],
) -> None:
    """Inserts the rows, replacing those whose primary key exists; keys must be distinct."""
    key = database.primary_key_cached(table)
    action = conflict_action(columns, key)
    names = ", ".join(quote(name) for name in columns)
    placeholder = "(" + ", ".join("?" for _ in columns) + ")"
    conflict = ", ".join(quote(name) for name in key)
    for chunk in chunks(rows, max(1, MAX_PARAMETERS // max(1, len(columns)))):
        values = ", ".join(placeholder for _ in chunk)
        parameters = [value for row in chunk for value in row]
        database.execute(
            f"INSERT INTO {quote(table)} ({names}) VALUES {values} "
            f"ON CONFLICT ({conflict}) {action}",
            parameters,
        )


def delete_keys(
    database: Database, table: str, keys: Sequence[Mapping[str, PortableValue]]
) -> None:
    """Deletes the rows with these primary keys; absent ones are no error."""
    if not keys:
        return
    names = list(keys[0])
    for chunk in chunks(keys, max(1, MAX_PARAMETERS // len(names))):
        if len(names) == 1:
            # IN (...) rather than row values: SQLite has no IN list of row values.
            condition = f"{quote(names[0])} IN ({', '.join('?' for _ in chunk)})"
        else:
            one = "(" + " AND ".join(f"{quote(name)} = ?" for name in names) + ")"
            condition = " OR ".join(one for _ in chunk)
        parameters = [key[name] for key in chunk for name in names]
        database.execute(f"DELETE FROM {quote(table)} WHERE {condition}", parameters)
