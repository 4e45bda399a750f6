"""``Database``: one small interface over SQLite, PostgreSQL and DuckDB, named by URL.

The SQL here is the common subset of the three engines ("?" placeholders, ``INSERT ... ON
CONFLICT``, double-quoted identifiers); what differs per engine is behind an
``EngineAdapter`` (engines.py). Rows go in and come out as decoded python values of the
portable types (portable.py).

Threads: a ``Database`` wraps one connection and is not safe to share between threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

from spark_examples.databases.engines import DriverRow, EngineAdapter, connect, quote
from spark_examples.databases.portable import (
    PORTABLE_TO_ENGINE,
    Columns,
    EngineName,
    PortableValue,
    Row,
    decode_value,
    portable_type,
    sql_literal,
)


class Database:
    """A connection to one database (URL forms: the package docstring; values: portable.py)."""

    url: str
    engine: EngineName

    def __init__(self, url: str, adapter: EngineAdapter) -> None:
        self.url = url
        self.engine = adapter.name
        self._adapter = adapter
        self._transaction_depth = 0
        self._columns_cache: dict[str, Columns] = {}
        self._key_cache: dict[str, list[str]] = {}

    # -- statements -------------------------------------------------------------------
    def execute(self, sql: str, params: Sequence[object] = ()) -> list[DriverRow]:
        """Runs one statement with "?" placeholders; returns its rows ([] if none).

        Outside ``transaction()`` each statement commits on its own. DuckDB answers an
        INSERT/UPDATE/DELETE with one row holding the row count; the others with [].
        """
        return self._adapter.execute(sql, params)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction: commits on normal exit, rolls back on an exception.

        Nested use joins the outer transaction.
        """
        if self._transaction_depth:
            self._transaction_depth += 1
            try:
                yield
            finally:
                self._transaction_depth -= 1
            return
        self._adapter.begin()
        self._transaction_depth = 1
        try:
            yield
        except BaseException:
            self._transaction_depth = 0
            # A rolled-back ALTER TABLE leaves the remembered columns wrong.
            self.forget_schema()
            self._adapter.finish(commit=False)
            raise
        self._transaction_depth = 0
        self._adapter.finish(commit=True)

    # -- schema -----------------------------------------------------------------------
    def table_exists(self, table: str) -> bool:
        """Whether ``table`` exists (in the main schema / public schema)."""
        return self._adapter.table_exists(table)

    def table_columns(self, table: str) -> Columns:
        """Column name -> portable type, in column order; raises ValueError if unsupported."""
        if table not in self._columns_cache:
            columns = {
                name: portable_type(declared, self.engine)
                for name, declared in self._adapter.declared_columns(table)
            }
            if not columns:
                raise ValueError(f"table {table!r} not found in {self.url}")
            self._columns_cache[table] = columns
        return dict(self._columns_cache[table])

    def primary_key(self, table: str) -> list[str]:
        """The primary key columns of ``table``, in key order ([] if it has none)."""
        return self._adapter.primary_key(table)

    def forget_schema(self, table: str | None = None) -> None:
        """Forgets the remembered columns and key of ``table`` (of every table if None): call
        after a schema change, which the caches would otherwise hide."""
        for cache in (self._columns_cache, self._key_cache):
            if table is None:
                cache.clear()
            else:
                cache.pop(table, None)

    def primary_key_cached(self, table: str) -> list[str]:
        """``primary_key`` remembered per table (until ``forget_schema``).

        Raises ValueError if the table has no primary key.
        """
        cache = self._key_cache
        if table not in cache:
            cache[table] = self.primary_key(table)
            if not cache[table]:
                raise ValueError(f"table {table!r} has no primary key")
        return list(cache[table])

    def create_table(
        self,
        table: str,
        columns: Columns,
        primary_key: list[str],
        defaults: Mapping[str, PortableValue] | None = None,
    ) -> None:
        """Creates ``table`` if absent, with each engine's type for the portable ones and
        the constant ``defaults`` (column -> value) as column defaults."""
        defaults = defaults or {}
        definitions = []
        for name, kind in columns.items():
            definition = f"{quote(name)} {PORTABLE_TO_ENGINE[kind][self.engine]}"
            if name in defaults:
                definition += f" DEFAULT {sql_literal(self.engine, kind, defaults[name])}"
            definitions.append(definition)
        key = ", ".join(quote(name) for name in primary_key)
        self.execute(
            f"CREATE TABLE IF NOT EXISTS {quote(table)} "
            f"({', '.join(definitions)}, PRIMARY KEY ({key}))"
        )
        self.forget_schema(table)

    # -- rows -------------------------------------------------------------------------
    def upsert(self, table: str, row: Mapping[str, PortableValue]) -> None:
        """Inserts ``row`` or replaces the row with the same primary key."""
        key = self.primary_key_cached(table)
        names = list(row)
        values = ", ".join("?" for _ in names)
        self.execute(
            f"INSERT INTO {quote(table)} ({', '.join(quote(name) for name in names)}) "
            f"VALUES ({values}) ON CONFLICT ({', '.join(quote(k) for k in key)}) "
            + conflict_action(names, key),
            [row[name] for name in names],
        )

    def delete(self, table: str, key: Mapping[str, PortableValue]) -> None:
        """Deletes the row with primary key ``key``; no error if there is none."""
        condition = " AND ".join(f"{quote(name)} = ?" for name in key)
        self.execute(f"DELETE FROM {quote(table)} WHERE {condition}", list(key.values()))

    def rows(self, table: str) -> Iterator[Row]:
        """Every row of ``table`` as decoded python values, ordered by primary key."""
        columns = self.table_columns(table)
        order = ", ".join(quote(name) for name in self.primary_key_cached(table))
        names = ", ".join(quote(name) for name in columns)
        for record in self.execute(f"SELECT {names} FROM {quote(table)} ORDER BY {order}"):
            yield decode_record(columns, record)

    def close(self) -> None:
        """Closes the connection (an open transaction is rolled back by the engine)."""
        self._adapter.close()


def conflict_action(columns: Sequence[str], key: Sequence[str]) -> str:
    """The ``ON CONFLICT`` action of an upsert: replace every non-key column."""
    updates = [name for name in columns if name not in key]
    if not updates:
        return "DO NOTHING"
    return "DO UPDATE SET " + ", ".join(
        f"{quote(name)} = excluded.{quote(name)}" for name in updates
    )


def decode_record(columns: Columns, record: DriverRow) -> Row:
    """A driver's row of ``columns`` (in that order) as decoded python values."""
    return {
        name: decode_value(kind, value)
        for (name, kind), value in zip(columns.items(), record, strict=True)
    }


def open_database(url: str) -> Database:
    """Connects to the database named by ``url``; raises ValueError for an unknown scheme."""
    return Database(url, connect(url))
