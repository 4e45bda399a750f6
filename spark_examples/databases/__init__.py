"""One small interface over SQLite, PostgreSQL and DuckDB, named by URL.

URLs: ``sqlite:///relative.db`` or ``sqlite:////abs/path.db``,
``postgresql://user:pass@host:port/db`` (psycopg 3) and ``duckdb:///path.duckdb``.

- portable.py: the portable column types, their mapping to each engine's types, and the
  decoding of what an engine returns into python values of those types;
- engines.py: one adapter per engine (its connection, placeholders, transactions, catalogue);
- database.py: ``Database`` and ``open_database``, the engine-neutral interface the capture,
  the apply sink and the checker use.
"""

from spark_examples.databases.database import (
    Database,
    conflict_action,
    decode_record,
    open_database,
)
from spark_examples.databases.engines import DriverRow, quote
from spark_examples.databases.portable import (
    PORTABLE_TO_ENGINE,
    PORTABLE_TYPES,
    Columns,
    PortableType,
    PortableValue,
    Row,
    decode_value,
    is_portable_type,
    portable_type,
    value_decoder,
)

__all__ = [
    "PORTABLE_TO_ENGINE",
    "PORTABLE_TYPES",
    "Columns",
    "Database",
    "DriverRow",
    "PortableType",
    "PortableValue",
    "Row",
    "conflict_action",
    "decode_record",
    "decode_value",
    "is_portable_type",
    "open_database",
    "portable_type",
    "quote",
    "value_decoder",
]
