"""What differs between SQLite, PostgreSQL and DuckDB under ``Database``: one adapter each.

An adapter owns one driver connection (sqlite3, psycopg 3, duckdb) and answers in its
engine's own terms: statements with "?" placeholders, the beginning and end of a
transaction, and the catalogue queries for tables, columns and primary keys. Everything
engine-neutral (the portable SQL, per-table caches, nested transactions) is in database.py.
``connect`` picks the adapter by URL scheme (the URL forms are in the package docstring).

Threads: an adapter wraps one connection and is not safe to share between threads.
"""

from __future__ import annotations

import datetime
import sqlite3
import time
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias
from urllib.parse import unquote, urlsplit

from spark_examples.databases.portable import EngineName

if TYPE_CHECKING:
    import duckdb
    import psycopg

# One result row as the driver returns it: DB-API drivers type their values as Any.
DriverRow: TypeAlias = tuple[Any, ...]


def quote(identifier: str) -> str:
    """A double-quoted SQL identifier (all three engines use the standard quoting)."""
    return '"' + identifier.replace('"', '""') + '"'


class EngineAdapter(Protocol):
    """One engine's connection and dialect, as ``Database`` uses them."""

    @property
    def name(self) -> EngineName: ...

    def execute(self, sql: str, params: Sequence[object]) -> list[DriverRow]:
        """Runs one statement with "?" placeholders; returns its rows ([] if none)."""
        ...

    def begin(self) -> None:
        """Begins a transaction (statements commit on their own until then)."""
        ...

    def finish(self, commit: bool) -> None:
        """Commits or rolls back the transaction; statements commit on their own again."""
        ...

    def table_exists(self, table: str) -> bool: ...

    def declared_columns(self, table: str) -> list[tuple[str, str]]:
        """(column name, declared type) in column order; [] if the table is absent."""
        ...

    def primary_key(self, table: str) -> list[str]:
        """The primary key columns in key order ([] if there is none)."""
        ...

    def close(self) -> None: ...


def _information_schema_table_exists(engine: EngineAdapter, table: str) -> bool:
    sql = (
        "SELECT 1 FROM information_schema.tables WHERE table_name = ? "
        "AND table_schema = current_schema()"
    )
    return bool(engine.execute(sql, [table]))


def _pragma_table_info(engine: EngineAdapter, table: str) -> list[DriverRow]:
    # Rows of (cid, name, type, notnull, dflt_value, pk) in column order.
    return engine.execute(f"PRAGMA table_info({quote(table)})", ())


# How long a SQLite statement waits for another connection's lock before it fails.
_SQLITE_BUSY_S = 60.0


def _enter_wal(connection: sqlite3.Connection) -> None:
    """Puts the database in WAL mode, which lets the capture read while the application writes.

    Switching a new database to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at
    once, without its busy handler, when that would deadlock with another connection upgrading
    its own lock (https://www.sqlite.org/lockingv3.html): two processes opening the same new
    file together (the apply job and a reader) meet exactly that, so the switch is retried.
    The mode is stored in the file, so only the first opening of a database switches it.
    """
    deadline = time.monotonic() + _SQLITE_BUSY_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class SqliteEngine:
    """SQLite through the standard library's sqlite3 (no implicit transactions)."""

    name: EngineName = "sqlite"

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    @classmethod
    def open(cls, path: str) -> SqliteEngine:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: sqlite3 issues no implicit BEGIN; Database.transaction does.
        connection = sqlite3.connect(path, isolation_level=None, timeout=_SQLITE_BUSY_S)
        _enter_wal(connection)
        connection.execute(f"PRAGMA busy_timeout={int(_SQLITE_BUSY_S * 1000)}")
        return cls(connection)

    def execute(self, sql: str, params: Sequence[object]) -> list[DriverRow]:
        cursor = self._connection.cursor()
        try:
            cursor.execute(sql, [_sqlite_parameter(value) for value in params])
            if cursor.description is None:
                return []
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            cursor.close()

    def begin(self) -> None:
        # IMMEDIATE takes the write lock now, so a transaction never fails half-way
        # upgrading a read lock (SQLITE_BUSY without the busy timeout helping).
        self.execute("BEGIN IMMEDIATE", ())

    def finish(self, commit: bool) -> None:
        try:
            if self._connection.in_transaction:
                self.execute("COMMIT" if commit else "ROLLBACK", ())
        except sqlite3.Error:
            # A failed COMMIT leaves the transaction open: end it, so the connection can
            # begin the next one.
            if self._connection.in_transaction:
                self._connection.execute("ROLLBACK")
            raise

    def table_exists(self, table: str) -> bool:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return bool(self.execute(sql, [table]))

    def declared_columns(self, table: str) -> list[tuple[str, str]]:
        return [(row[1], row[2]) for row in _pragma_table_info(self, table)]

    def primary_key(self, table: str) -> list[str]:
        info = _pragma_table_info(self, table)
        # pk is the 1-based position of the column in the key.
        keyed = [(int(row[5]), index, row[1]) for index, row in enumerate(info) if row[5]]
        return [name for _, _, name in sorted(keyed)]

    def close(self) -> None:
        self._connection.close()


def _sqlite_parameter(value: object) -> object:
    # sqlite3's default date adapters are deprecated; store ISO text explicitly.
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return str(value)
    return value


class PostgresEngine:
    """PostgreSQL through psycopg 3, autocommit outside transactions."""

    name: EngineName = "postgresql"

    def __init__(self, connection: psycopg.Connection[DriverRow]) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Sequence[object]) -> list[DriverRow]:
        # psycopg uses %s; a literal % must be doubled. Assumes no "?" inside literals.
        statement = sql.replace("%", "%%").replace("?", "%s")
        with self._connection.cursor() as cursor:
            cursor.execute(statement, list(params))
            if cursor.description is None:
                return []
            return [tuple(row) for row in cursor.fetchall()]

    def begin(self) -> None:
        self._connection.autocommit = False  # psycopg begins at the first statement

    def finish(self, commit: bool) -> None:
        try:
            if commit:
                self._connection.commit()
            else:
                self._connection.rollback()
        finally:
            self._connection.autocommit = True

    def table_exists(self, table: str) -> bool:
        return _information_schema_table_exists(self, table)

    def declared_columns(self, table: str) -> list[tuple[str, str]]:
        rows = self.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_name = ? AND table_schema = current_schema()"
            " ORDER BY ordinal_position",
            [table],
        )
        return [(row[0], row[1]) for row in rows]

    def primary_key(self, table: str) -> list[str]:
        rows = self.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(?) AND"
            " i.indisprimary ORDER BY array_position(i.indkey, a.attnum)",
            [quote(table)],
        )
        return [row[0] for row in rows]

    def close(self) -> None:
        self._connection.close()


class DuckdbEngine:
    """DuckDB through its python module; statements run on the connection itself."""

    name: EngineName = "duckdb"

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Sequence[object]) -> list[DriverRow]:
        # DuckDB's cursor() opens a second connection (outside our transaction), so run on
        # the connection itself. An INSERT/UPDATE/DELETE answers one row: the row count.
        result = self._connection.execute(sql, list(params))
        if result.description is None:
            return []
        return [tuple(row) for row in result.fetchall()]

    def begin(self) -> None:
        self._connection.begin()

    def finish(self, commit: bool) -> None:
        if commit:
            self._connection.commit()
        else:
            self._connection.rollback()

    def table_exists(self, table: str) -> bool:
        return _information_schema_table_exists(self, table)

    def declared_columns(self, table: str) -> list[tuple[str, str]]:
        return [(row[1], row[2]) for row in _pragma_table_info(self, table)]

    def primary_key(self, table: str) -> list[str]:
        rows = self.execute(
            "SELECT constraint_column_names FROM duckdb_constraints()"
            " WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'",
            [table],
        )
        return list(rows[0][0]) if rows else []

    def close(self) -> None:
        self._connection.close()


def connect(url: str) -> EngineAdapter:
    """The adapter for the database named by ``url``; raises ValueError for an unknown scheme."""
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        return SqliteEngine.open(_file_path(url, "sqlite"))
    if scheme in ("postgresql", "postgres"):
        import psycopg  # imported on use: a SQLite-only run needs neither driver

        return PostgresEngine(psycopg.connect(url, autocommit=True))
    if scheme == "duckdb":
        import duckdb

        return DuckdbEngine(duckdb.connect(_file_path(url, "duckdb")))
    raise ValueError(f"unknown database URL scheme {scheme!r} in {url!r}")


def _file_path(url: str, scheme: str) -> str:
    # sqlite:///rel.db -> "rel.db"; sqlite:////abs.db -> "/abs.db" (SQLAlchemy's convention).
    prefix = f"{scheme}:///"
    if not url.startswith(prefix):
        raise ValueError(f"a {scheme} URL looks like {prefix}path, not {url!r}")
    path = unquote(url[len(prefix) :])
    if not path:
        raise ValueError(f"no file path in {url!r}")
    return path
