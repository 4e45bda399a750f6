"""Bulk upserts and deletes: the fast path of a micro-batch.

Row-at-a-time statements cost about 5 ms each in DuckDB (0.05 ms in SQLite), so a batch of
10,000 changes would take a minute there. Within one destination transaction only the net
effect is ever visible, and every change carries the row's full image (or deletes it), so the
last change per key in the batch decides that row: the sink's fast path (sink.py) keeps it,
and the statements here apply the survivors in bulk, each engine through its fastest path:

- PostgreSQL and DuckDB: one statement per few thousand rows, binding each column as ONE
  array parameter and unnesting the arrays side by side
  (``INSERT ... SELECT unnest(CAST(? AS BIGINT[])), ... ON CONFLICT``). The driver converts
  one list per column instead of one parameter per value: about 13x faster than multi-row
  VALUES in DuckDB, and one round trip per chunk in PostgreSQL, the upsert form of COPY
  (COPY itself has no ON CONFLICT). Both engines run set-returning functions of one select
  list in lockstep, so the i-th elements form the i-th row.
- SQLite (in process, no round trip): multi-row VALUES, a few hundred rows per statement,
  faster there than executemany.

The SQL is the common subset of SQLite (3.24+), PostgreSQL and DuckDB; "?" placeholders go
through ``Database.execute``, which converts them per engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from spark_examples.databases import (
    PORTABLE_TO_ENGINE,
    Database,
    PortableValue,
    conflict_action,
    quote,
)

# Bound parameters per statement: far below SQLite's 32,766 and PostgreSQL's 65,535.
MAX_PARAMETERS = 8_000
# Rows per array statement: bounds the arrays' memory, not a parameter limit.
ARRAY_ROWS = 10_000
# The engines that take a column's values as one array parameter.
ARRAY_ENGINES = ("postgresql", "duckdb")

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
    head = f"INSERT INTO {quote(table)} ({', '.join(quote(name) for name in columns)}) "
    tail = f" ON CONFLICT ({', '.join(quote(name) for name in key)}) " + conflict_action(
        columns, key
    )
    if database.engine in ARRAY_ENGINES:
        select = _unnest_select(database, table, columns)
        for chunk in chunks(rows, ARRAY_ROWS):
            arrays = [list(values) for values in zip(*chunk, strict=True)]
            database.execute(head + select + tail, arrays)
        return
    placeholder = "(" + ", ".join("?" for _ in columns) + ")"
    for chunk in chunks(rows, max(1, MAX_PARAMETERS // max(1, len(columns)))):
        values = ", ".join(placeholder for _ in chunk)
        parameters = [value for row in chunk for value in row]
        database.execute(head + f"VALUES {values}" + tail, parameters)


def _unnest_select(database: Database, table: str, columns: Sequence[str]) -> str:
    """``SELECT * FROM (SELECT unnest(CAST(? AS type[])) AS c0, ...)``: one array a column.

    The cast names each array's element type, which an all-NULL array cannot tell.
    """
    kinds = database.table_columns(table)
    arrays = ", ".join(
        f"unnest(CAST(? AS {PORTABLE_TO_ENGINE[kinds[name]][database.engine]}[])) AS c{index}"
        for index, name in enumerate(columns)
    )
    return f"SELECT * FROM (SELECT {arrays}) AS rows_in"


def delete_keys(
    database: Database, table: str, keys: Sequence[Mapping[str, PortableValue]]
) -> None:
    """Deletes the rows with these primary keys; absent ones are no error."""
    if not keys:
        return
    names = list(keys[0])
    if len(names) == 1 and database.engine in ARRAY_ENGINES:
        name = names[0]
        kind = PORTABLE_TO_ENGINE[database.table_columns(table)[name]][database.engine]
        for chunk in chunks(keys, ARRAY_ROWS):
            database.execute(
                f"DELETE FROM {quote(table)} WHERE {quote(name)} IN "
                f"(SELECT unnest(CAST(? AS {kind}[])))",
                [[key[name] for key in chunk]],
            )
        return
    for chunk in chunks(keys, max(1, MAX_PARAMETERS // len(names))):
        if len(names) == 1:
            # IN (...) rather than row values: SQLite has no IN list of row values.
            condition = f"{quote(names[0])} IN ({', '.join('?' for _ in chunk)})"
        else:
            one = "(" + " AND ".join(f"{quote(name)} = ?" for name in names) + ")"
            condition = " OR ".join(one for _ in chunk)
        parameters = [key[name] for key in chunk for name in names]
        database.execute(f"DELETE FROM {quote(table)} WHERE {condition}", parameters)
