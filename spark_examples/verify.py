"""Consistency check between a source and a destination database.

    python -m spark_examples.verify --source URL --dest URL --tables t1,t2 [--limit 20]

For each table: the schema (column names, portable types, primary key), row counts, then
per primary key a hash of the row's values normalised
by the *source's* portable column types, so that engines' spellings of one value compare
equal (SQLite's 1 and PostgreSQL's true for a boolean, DuckDB's Decimal('1.5000000000')
and SQLite's 1.5 for a numeric, ISO text and datetime for a timestamp). Prints missing,
extra and differing rows (up to ``--limit`` per kind and table) and exits 0 only when
every table is equal.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
from collections.abc import Sequence
from decimal import Decimal
from typing import TypeAlias

from spark_examples.databases import (
    Columns,
    Database,
    PortableType,
    PortableValue,
    decode_value,
    open_database,
)

DIFFERENCE_LIMIT = 20

# A value in its canonical, JSON-able form, and a row of them.
NormalValue: TypeAlias = bool | int | str | None
NormalRow: TypeAlias = dict[str, NormalValue]


def normalise(portable: PortableType, value: PortableValue) -> NormalValue:
    """A JSON-able canonical form of ``value`` read as portable type ``portable``."""
    decoded = decode_value(portable, value)
    if isinstance(decoded, Decimal):  # numeric
        text = format(decoded.normalize(), "f")
        return "0" if Decimal(text) == 0 else text
    if isinstance(decoded, float):  # real
        return repr(decoded)
    if isinstance(decoded, bytes):  # blob
        return decoded.hex()
    if isinstance(decoded, datetime.date):  # date, and timestamp (a datetime is a date)
        return decoded.isoformat()
    return decoded


def _normalised_rows(
    db: Database, table: str, columns: Columns, key: list[str]
) -> dict[str, tuple[str, NormalRow]]:
    # primary key (as JSON text) -> (hash of the normalised row, the normalised row)
    result = {}
    for row in db.rows(table):
        values = {name: normalise(kind, row.get(name)) for name, kind in columns.items()}
        identity = json.dumps([values[name] for name in key])
        digest = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()
        result[identity] = (digest, values)
    return result


def compare_table(source: Database, dest: Database, table: str, limit: int) -> list[str]:
    """Differences of one table (empty when equal)."""
    problem = _schema_problem(source, dest, table)
    if problem is not None:
        return [problem]
    columns = source.table_columns(table)
    key = source.primary_key_cached(table)
    source_rows = _normalised_rows(source, table, columns, key)
    dest_rows = _normalised_rows(dest, table, columns, key)
    differences = []
    if len(source_rows) != len(dest_rows):
        differences.append(f"{table}: {len(source_rows)} rows in source, {len(dest_rows)} in dest")
    missing = [k for k in source_rows if k not in dest_rows]
    extra = [k for k in dest_rows if k not in source_rows]
    differences += _listed(table, "missing in destination", missing, limit)
    differences += _listed(table, "extra in destination", extra, limit)
    return differences + _differing(table, key, source_rows, dest_rows, limit)


def _schema_problem(source: Database, dest: Database, table: str) -> str | None:
    # Column names, portable types and the key; the engines' own type names may differ.
    if not dest.table_exists(table):
        return f"{table}: missing in destination {dest.url}"
    columns, found = source.table_columns(table), dest.table_columns(table)
    problems = []
    absent = [name for name in columns if name not in found]
    if absent:
        problems.append(f"destination lacks columns {absent}")
    extra = [name for name in found if name not in columns]
    if extra:
        problems.append(f"destination has columns the source has not: {extra}")
    differing = {
        name: (kind, found[name])
        for name, kind in columns.items()
        if name in found and found[name] != kind
    }
    if differing:
        problems.append(f"column types differ (source, dest): {differing}")
    source_key, dest_key = source.primary_key(table), dest.primary_key(table)
    if source_key != dest_key:
        problems.append(f"primary key differs: {source_key} in source, {dest_key} in dest")
    return f"{table}: " + "; ".join(problems) if problems else None


def _differing(
    table: str,
    key: list[str],
    source_rows: dict[str, tuple[str, NormalRow]],
    dest_rows: dict[str, tuple[str, NormalRow]],
    limit: int,
) -> list[str]:
    # Rows in both whose hashes differ, each with the columns that differ.
    differing = [k for k in source_rows if k in dest_rows and source_rows[k][0] != dest_rows[k][0]]
    lines = []
    for identity in differing[:limit]:
        wanted, found = source_rows[identity][1], dest_rows[identity][1]
        changed = {
            name: (wanted[name], found[name]) for name in wanted if wanted[name] != found[name]
        }
        lines.append(f"{table}: row {key}={identity} differs (source, dest): {changed}")
    if len(differing) > limit:
        lines.append(f"{table}: ... and {len(differing) - limit} more differing rows")
    return lines


def _listed(table: str, what: str, identities: list[str], limit: int) -> list[str]:
    lines = [f"{table}: row {identity} {what}" for identity in identities[:limit]]
    if len(identities) > limit:
        lines.append(f"{table}: ... and {len(identities) - limit} more rows {what}")
    return lines


def compare_tables(
    source_url: str, dest_url: str, tables: list[str], limit: int = DIFFERENCE_LIMIT
) -> list[str]:
    """Differences between the tables of two databases (empty when all are equal)."""
    source, dest = open_database(source_url), open_database(dest_url)
    try:
        differences: list[str] = []
        for table in tables:
            differences += compare_table(source, dest, table, limit)
        return differences
    finally:
        source.close()
        dest.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Compares the tables the command line names; returns 0 when all are equal, else 1."""
    parser = argparse.ArgumentParser(
        prog="python -m spark_examples.verify", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--source", required=True, help="source database URL")
    parser.add_argument("--dest", required=True, help="destination database URL")
    parser.add_argument("--tables", required=True, help="comma-separated table names")
    parser.add_argument("--limit", type=int, default=DIFFERENCE_LIMIT)
    args = parser.parse_args(argv)
    tables = [name.strip() for name in args.tables.split(",") if name.strip()]
    differences = compare_tables(args.source, args.dest, tables, args.limit)
    for line in differences:
        print(line)
    if differences:
        print(f"NOT EQUAL: {len(differences)} difference lines")
        return 1
    print(f"EQUAL: {', '.join(tables)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
