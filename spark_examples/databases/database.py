"""One small interface over SQLite, PostgreSQL and DuckDB, named by URL.

URLs: ``sqlite:///relative.db`` or ``sqlite:////abs/path.db``,
``postgresql://user:pass@host:port/db`` (psycopg 3) and ``duckdb:///path.duckdb``.

Values cross this interface as *decoded python values* of a portable type, whatever the
engine stores: integer -> int, real -> float, numeric -> Decimal, text -> str,
blob -> bytes, boolean -> bool, date -> datetime.date, timestamp -> naive
datetime.datetime. ``PORTABLE_TO_ENGINE`` is the one table mapping portable types to each
engine's column types; ``portable_type`` maps an engine's declared type back.

Threads: a ``Database`` wraps one connection and is not safe to share between threads.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

PortableType = str
PORTABLE_TYPES = ("integer", "real", "numeric", "text", "blob", "boolean", "date", "timestamp")

# Column type used by create_table, per portable type and engine. SQLite keeps dates and
# timestamps as ISO-8601 text and booleans as 0/1; its NUMERIC affinity stores exact
# integers and reals, which is as exact as SQLite gets.
PORTABLE_TO_ENGINE: dict[PortableType, dict[str, str]] = {
    "integer": {"sqlite": "INTEGER", "postgresql": "BIGINT", "duckdb": "BIGINT"},
    "real": {"sqlite": "REAL", "postgresql": "DOUBLE PRECISION", "duckdb": "DOUBLE"},
    "numeric": {"sqlite": "NUMERIC", "postgresql": "NUMERIC", "duckdb": "DECIMAL(38,10)"},
    "text": {"sqlite": "TEXT", "postgresql": "TEXT", "duckdb": "VARCHAR"},
    "blob": {"sqlite": "BLOB", "postgresql": "BYTEA", "duckdb": "BLOB"},
    "boolean": {"sqlite": "BOOLEAN", "postgresql": "BOOLEAN", "duckdb": "BOOLEAN"},
    "date": {"sqlite": "DATE", "postgresql": "DATE", "duckdb": "DATE"},
    "timestamp": {"sqlite": "TIMESTAMP", "postgresql": "TIMESTAMP", "duckdb": "TIMESTAMP"},
}

# Declared type (upper case, without "(p,s)") -> portable type, for the engines' own names.
_DECLARED_TO_PORTABLE: dict[str, PortableType] = {
    **dict.fromkeys(("INTEGER", "INT", "BIGINT", "SMALLINT", "TINYINT"), "integer"),
    **dict.fromkeys(("INT2", "INT4", "INT8", "HUGEINT", "UBIGINT", "UINTEGER"), "integer"),
    **dict.fromkeys(("REAL", "DOUBLE", "DOUBLE PRECISION", "FLOAT", "FLOAT4"), "real"),
    **dict.fromkeys(("FLOAT8",), "real"),
    **dict.fromkeys(("NUMERIC", "DECIMAL"), "numeric"),
    **dict.fromkeys(("TEXT", "VARCHAR", "CHARACTER VARYING", "CHARACTER", "CHAR"), "text"),
    **dict.fromkeys(("BLOB", "BYTEA"), "blob"),
    **dict.fromkeys(("BOOLEAN", "BOOL"), "boolean"),
    "DATE": "date",
    **dict.fromkeys(("TIMESTAMP", "DATETIME", "TIMESTAMP WITHOUT TIME ZONE"), "timestamp"),
}


def portable_type(declared: str, engine: str) -> PortableType:
    """The portable type of an engine's declared column type; raises ValueError if none."""
    name = declared.upper().split("(")[0].strip()
    if name in _DECLARED_TO_PORTABLE:
        return _DECLARED_TO_PORTABLE[name]
    if engine == "sqlite":
        return _sqlite_affinity(name)
    raise ValueError(f"unsupported {engine} column type {declared!r}")


def _sqlite_affinity(name: str) -> PortableType:
    # SQLite's own affinity rules (https://sqlite.org/datatype3.html, section 3.1).
    if "INT" in name:
        return "integer"
    if any(part in name for part in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if name == "" or "BLOB" in name:
        return "blob"
    if any(part in name for part in ("REAL", "FLOA", "DOUB")):
        return "real"
    return "numeric"


def decode_value(portable: PortableType, value: Any) -> Any:
    """Turns what an engine returned (or a loosely typed value) into the portable python type."""
    if value is None:
        return None
    return _DECODERS[portable](value)


def _to_decimal(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def _to_boolean(value: Any) -> bool:
    if isinstance(value, str):
        return value.lower() in ("1", "true", "t")
    return bool(value)


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return base64.b64decode(value)
    return bytes(value)


def _to_date(value: Any) -> datetime.date:
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    return datetime.date.fromisoformat(str(value)[:10])


def _to_timestamp(value: Any) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, datetime.date):
        moment = datetime.datetime(value.year, value.month, value.day)
    else:
        moment = datetime.datetime.fromisoformat(str(value))
    if moment.tzinfo is not None:  # portable timestamps are naive UTC
        moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
    return moment


_DECODERS: dict[PortableType, Callable[[Any], Any]] = {
    "integer": int,
    "real": float,
    "numeric": _to_decimal,
    "text": str,
    "blob": _to_bytes,
    "boolean": _to_boolean,
    "date": _to_date,
    "timestamp": _to_timestamp,
}


def quote(identifier: str) -> str:
    """A double-quoted SQL identifier (all three engines use the standard quoting)."""
    return '"' + identifier.replace('"', '""') + '"'


class Database:
    """A connection to one database; see the module docstring for URLs and values."""

    url: str
    engine: str

    def __init__(self, url: str, engine: str, connection: Any) -> None:
        self.url = url
        self.engine = engine
        self._connection = connection
        self._transaction_depth = 0
        self._columns_cache: dict[str, dict[str, PortableType]] = {}
        self._key_cache: dict[str, list[str]] = {}

    # -- statements -------------------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Runs one statement with "?" placeholders; returns its rows ([] if none).

        Outside ``transaction()`` each statement commits on its own. DuckDB answers an
        INSERT/UPDATE/DELETE with one row holding the row count; the others with [].
        """
        # DuckDB's cursor() opens a second connection (outside our transaction), so run
        # on the connection itself there.
        cursor = self._connection if self.engine == "duckdb" else self._connection.cursor()
        try:
            cursor.execute(self._placeholders(sql), [self._bind(v) for v in params])
            if cursor.description is None:
                return []
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            if cursor is not self._connection:
                cursor.close()

    def _placeholders(self, sql: str) -> str:
        if self.engine != "postgresql":
            return sql
        # psycopg uses %s; a literal % must be doubled. Assumes no "?" inside literals.
        return sql.replace("%", "%%").replace("?", "%s")

    def _bind(self, value: Any) -> Any:
        if self.engine != "sqlite":
            return value
        # sqlite3's default date adapters are deprecated; store ISO text explicitly.
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, Decimal):
            return str(value)
        if isinstance(value, datetime.datetime | datetime.date):
            return value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else str(value)
        return value

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
        self._begin()
        self._transaction_depth = 1
        try:
            yield
        except BaseException:
            self._transaction_depth = 0
            self._finish("ROLLBACK")
            raise
        self._transaction_depth = 0
        self._finish("COMMIT")

    def _begin(self) -> None:
        if self.engine == "sqlite":
            # IMMEDIATE takes the write lock now, so a transaction never fails half-way
            # upgrading a read lock (SQLITE_BUSY without the busy timeout helping).
            self.execute("BEGIN IMMEDIATE")
        elif self.engine == "postgresql":
            self._connection.autocommit = False  # psycopg begins at the first statement
        else:
            self._connection.begin()

    def _finish(self, verb: str) -> None:
        if self.engine == "sqlite":
            try:
                if self._connection.in_transaction:
                    self.execute(verb)
            except sqlite3.Error:
                # A failed COMMIT leaves the transaction open: end it, so the connection
                # can begin the next one.
                if self._connection.in_transaction:
                    self._connection.execute("ROLLBACK")
                raise
            return
        try:
            self._connection.commit() if verb == "COMMIT" else self._connection.rollback()
        finally:
            if self.engine == "postgresql":
                self._connection.autocommit = True

    # -- schema -----------------------------------------------------------------------
    def table_exists(self, table: str) -> bool:
        """Whether ``table`` exists (in the main schema / public schema)."""
        if self.engine == "sqlite":
            sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        else:
            sql = (
                "SELECT 1 FROM information_schema.tables WHERE table_name = ? "
                "AND table_schema = current_schema()"
            )
        return bool(self.execute(sql, [table]))

    def table_columns(self, table: str) -> dict[str, PortableType]:
        """Column name -> portable type, in column order; raises ValueError if unsupported."""
        if table not in self._columns_cache:
            columns = {
                name: portable_type(declared, self.engine)
                for name, declared, _ in self._column_info(table)
            }
            if not columns:
                raise ValueError(f"table {table!r} not found in {self.url}")
            self._columns_cache[table] = columns
        return dict(self._columns_cache[table])

    def primary_key(self, table: str) -> list[str]:
        """The primary key columns of ``table``, in key order ([] if it has none)."""
        if self.engine == "postgresql":
            rows = self.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
                " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(?) AND"
                " i.indisprimary ORDER BY array_position(i.indkey, a.attnum)",
                [quote(table)],
            )
            return [row[0] for row in rows]
        if self.engine == "duckdb":
            rows = self.execute(
                "SELECT constraint_column_names FROM duckdb_constraints()"
                " WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'",
                [table],
            )
            return list(rows[0][0]) if rows else []
        info = self.execute(f"PRAGMA table_info({quote(table)})")
        # pk is the 1-based position of the column in the key.
        keyed = [(int(row[5]), index, row[1]) for index, row in enumerate(info) if row[5]]
        return [name for _, _, name in sorted(keyed)]

    def _column_info(self, table: str) -> list[tuple[str, str, bool]]:
        if self.engine == "postgresql":
            rows = self.execute(
                "SELECT column_name, data_type, false FROM information_schema.columns"
                " WHERE table_name = ? AND table_schema = current_schema()"
                " ORDER BY ordinal_position",
                [table],
            )
            return [(row[0], row[1], False) for row in rows]
        return [
            (row[1], row[2], bool(row[5]))
            for row in self.execute(f"PRAGMA table_info({quote(table)})")
        ]

    def create_table(
        self, table: str, columns: dict[str, PortableType], primary_key: list[str]
    ) -> None:
        """Creates ``table`` if absent, with each engine's type for the portable ones."""
        definitions = [
            f"{quote(name)} {PORTABLE_TO_ENGINE[kind][self.engine]}"
            for name, kind in columns.items()
        ]
        key = ", ".join(quote(name) for name in primary_key)
        self.execute(
            f"CREATE TABLE IF NOT EXISTS {quote(table)} "
            f"({', '.join(definitions)}, PRIMARY KEY ({key}))"
        )
        self._columns_cache.pop(table, None)

    # -- rows -------------------------------------------------------------------------
    def upsert(self, table: str, row: dict[str, Any]) -> None:
        """Inserts ``row`` or replaces the row with the same primary key."""
        key = self.primary_key_cached(table)
        names = list(row)
        values = ", ".join("?" for _ in names)
        updates = [name for name in names if name not in key]
        action = (
            "DO UPDATE SET "
            + ", ".join(f"{quote(name)} = excluded.{quote(name)}" for name in updates)
            if updates
            else "DO NOTHING"
        )
        self.execute(
            f"INSERT INTO {quote(table)} ({', '.join(quote(name) for name in names)}) "
            f"VALUES ({values}) ON CONFLICT ({', '.join(quote(k) for k in key)}) {action}",
            [row[name] for name in names],
        )

    def delete(self, table: str, key: dict[str, Any]) -> None:
        """Deletes the row with primary key ``key``; no error if there is none."""
        condition = " AND ".join(f"{quote(name)} = ?" for name in key)
        self.execute(f"DELETE FROM {quote(table)} WHERE {condition}", list(key.values()))

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        """Every row of ``table`` as decoded python values, ordered by primary key."""
        columns = self.table_columns(table)
        order = ", ".join(quote(name) for name in self.primary_key_cached(table))
        names = ", ".join(quote(name) for name in columns)
        for record in self.execute(f"SELECT {names} FROM {quote(table)} ORDER BY {order}"):
            yield {
                name: decode_value(kind, value)
                for (name, kind), value in zip(columns.items(), record, strict=True)
            }

    def primary_key_cached(self, table: str) -> list[str]:
        """``primary_key`` remembered per table (DDL is out of scope, so it cannot change)."""
        cache = self._key_cache
        if table not in cache:
            cache[table] = self.primary_key(table)
            if not cache[table]:
                raise ValueError(f"table {table!r} has no primary key")
        return list(cache[table])

    def close(self) -> None:
        """Closes the connection (an open transaction is rolled back by the engine)."""
        self._connection.close()


def open_database(url: str) -> Database:
    """Connects to the database named by ``url``; raises ValueError for an unknown scheme."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return _open_sqlite(url, _file_path(url, "sqlite"))
    if parts.scheme in ("postgresql", "postgres"):
        import psycopg

        connection = psycopg.connect(url, autocommit=True)
        return Database(url, "postgresql", connection)
    if parts.scheme == "duckdb":
        import duckdb

        return Database(url, "duckdb", duckdb.connect(_file_path(url, "duckdb")))
    raise ValueError(f"unknown database URL scheme {parts.scheme!r} in {url!r}")


def _file_path(url: str, scheme: str) -> str:
    # sqlite:///rel.db -> "rel.db"; sqlite:////abs.db -> "/abs.db" (SQLAlchemy's convention).
    prefix = f"{scheme}:///"
    if not url.startswith(prefix):
        raise ValueError(f"a {scheme} URL looks like {prefix}path, not {url!r}")
    path = unquote(url[len(prefix) :])
    if not path:
        raise ValueError(f"no file path in {url!r}")
    return path


def _open_sqlite(url: str, path: str) -> Database:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: sqlite3 issues no implicit BEGIN; transaction() does it.
    connection = sqlite3.connect(path, isolation_level=None, timeout=60.0)
    # WAL lets the capture read while the application writes.
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA busy_timeout=60000")
    return Database(url, "sqlite", connection)
