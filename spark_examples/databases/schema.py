"""A table's schema in portable terms, read from any engine, and the DDL that changes it.

``TableSchema`` is what the capture ships when a source table's schema changes and what
the apply sink brings a destination table to: columns with portable types (in column
order), the primary key, the NOT NULL columns and the constant defaults as decoded python
values. Only constant defaults are portable: an expression (``nextval(...)``,
``CURRENT_TIMESTAMP``) gives each engine, and each row, its own value, so ``read_schema``
refuses it rather than let an ADD COLUMN fill the destination with something else.

The DDL is the common ``ALTER TABLE ... ADD COLUMN / DROP COLUMN`` (SQLite has DROP COLUMN
since 3.35) and a type change per engine: PostgreSQL's and DuckDB's ``ALTER COLUMN ...
TYPE``; SQLite cannot change a declared type in place, so the table is rebuilt in the
procedure its documentation gives (https://sqlite.org/lang_altertable.html, section 7:
create the new table, copy, drop the old, rename). Every statement runs in the caller's
transaction: on all three engines DDL is transactional, so a schema change commits or
rolls back with the records around it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from spark_examples.databases.database import Database
from spark_examples.databases.engines import quote
from spark_examples.databases.portable import (
    PORTABLE_TO_ENGINE,
    Columns,
    PortableType,
    PortableValue,
    Row,
    decode_value,
    portable_type,
    sql_literal,
)

# (from, to) portable type changes every engine makes without losing a value. Anything
# else (real -> integer, text -> integer...) would round or fail on rows the destination
# already holds, so it is refused (the sink's SchemaRejected).
WIDENINGS: frozenset[tuple[PortableType, PortableType]] = frozenset({
    ("integer", "real"),
    ("integer", "numeric"),
    ("date", "timestamp"),
})  # fmt: skip

_QUOTED_LITERAL = re.compile(r"'(?:[^']|'')*'")


@dataclass(frozen=True)
class TableSchema:
    """One table's schema in portable terms (see the module docstring)."""

    table: str
    columns: Columns
    primary_key: tuple[str, ...]
    not_null: tuple[str, ...] = ()
    defaults: Row = field(default_factory=dict)


def read_schema(db: Database, table: str) -> TableSchema:
    """The schema of ``table`` as it is now (uncached).

    Raises ValueError when the table is absent, a column type has no portable type or a
    default is not a constant.
    """
    details = _column_details(db, table)
    if not details:
        raise ValueError(f"table {table!r} not found in {db.url}")
    columns: Columns = {}
    not_null: list[str] = []
    defaults: Row = {}
    for name, declared, required, default_sql in details:
        kind = portable_type(declared, db.engine)
        columns[name] = kind
        if required:
            not_null.append(name)
        if default_sql is not None:
            value = _default_value(db, table, name, kind, default_sql)
            if value is not None:
                defaults[name] = value
    key = tuple(db.primary_key(table))
    return TableSchema(table, columns, key, tuple(n for n in not_null if n not in key), defaults)


def _column_details(db: Database, table: str) -> list[tuple[str, str, bool, str | None]]:
    # (name, declared type, NOT NULL, default expression) in column order.
    if db.engine == "postgresql":
        rows = db.execute(
            "SELECT column_name, data_type, is_nullable = 'NO', column_default"
            " FROM information_schema.columns WHERE table_name = ?"
            " AND table_schema = current_schema() ORDER BY ordinal_position",
            [table],
        )
        return [(row[0], row[1], bool(row[2]), row[3]) for row in rows]
    # SQLite and DuckDB: (cid, name, type, notnull, dflt_value, pk)
    rows = db.execute(f"PRAGMA table_info({quote(table)})")
    return [(row[1], row[2], bool(row[3]), row[4]) for row in rows]


def _default_value(
    db: Database, table: str, column: str, kind: PortableType, expression: str
) -> PortableValue:
    # A constant has no call once its quoted literals are removed: 'x'::text, 42, 1.5, TRUE.
    bare = _QUOTED_LITERAL.sub("", str(expression)).upper()
    if "(" in bare or "CURRENT_" in bare:
        raise ValueError(
            f"{table}.{column}: default {expression!r} is not a constant; only constant "
            "defaults can be given to a destination's existing rows"
        )
    return decode_value(kind, db.execute(f"SELECT {expression}")[0][0])


def _engine_type(db: Database, kind: PortableType) -> str:
    return PORTABLE_TO_ENGINE[kind][db.engine]


def add_column(
    db: Database, table: str, name: str, kind: PortableType, default: PortableValue
) -> None:
    """Adds a nullable column; existing rows get ``default`` (NULL when None)."""
    clause = "" if default is None else f" DEFAULT {sql_literal(db.engine, kind, default)}"
    db.execute(
        f"ALTER TABLE {quote(table)} ADD COLUMN {quote(name)} {_engine_type(db, kind)}{clause}"
    )
    db.forget_schema(table)


def drop_column(db: Database, table: str, name: str) -> None:
    """Drops a column (not one of the primary key)."""
    db.execute(f"ALTER TABLE {quote(table)} DROP COLUMN {quote(name)}")
    db.forget_schema(table)


def change_column_types(db: Database, target: TableSchema) -> None:
    """Gives the columns of ``target.table`` the types ``target`` names (widenings only:
    the caller checks). SQLite rebuilds the table with ``target``'s columns, which must
    then be the destination's columns already (added and dropped first)."""
    table = target.table
    if db.engine == "sqlite":
        _sqlite_rebuild(db, target)
    else:
        current = db.table_columns(table)
        for name, kind in target.columns.items():
            if current[name] != kind:
                engine_type = _engine_type(db, kind)
                # PostgreSQL wants USING for a change without an assignment cast.
                using = f" USING CAST({quote(name)} AS {engine_type})"
                db.execute(
                    f"ALTER TABLE {quote(table)} ALTER COLUMN {quote(name)} TYPE {engine_type}"
                    + (using if db.engine == "postgresql" else "")
                )
    db.forget_schema(table)


def _sqlite_rebuild(db: Database, target: TableSchema) -> None:
    # SQLite's type affinity would keep the values anyway, but the declared type is what
    # names a column's portable type when it is read back (portable.portable_type).
    table, staging = target.table, f"kshim_rebuild_{target.table}"
    db.execute(f"DROP TABLE IF EXISTS {quote(staging)}")
    db.create_table(staging, target.columns, list(target.primary_key), target.defaults)
    names = ", ".join(quote(name) for name in target.columns)
    db.execute(f"INSERT INTO {quote(staging)} ({names}) SELECT {names} FROM {quote(table)}")
    db.execute(f"DROP TABLE {quote(table)}")
    db.execute(f"ALTER TABLE {quote(staging)} RENAME TO {quote(table)}")
