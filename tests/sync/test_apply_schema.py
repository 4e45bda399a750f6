"""Schema-change records in the apply sink, on SQLite, DuckDB and PostgreSQL, without Spark.

ADD COLUMN with and without a default, DROP COLUMN and widenings apply in offset order with
the rows around them, on both of the sink's paths; a record applied twice changes nothing
the second time; a narrowing stops the batch with an error naming the table and column and
an alarm, commits nothing, and applies once the operator has fixed the destination; the
checker tells schemas apart.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spark_examples.apply.sink import ApplyError, SourceRecord, apply_batch, next_offset
from spark_examples.change_format import encode_schema_key, encode_schema_value
from spark_examples.databases import Columns, Database, open_database
from spark_examples.databases.schema import TableSchema, change_column_types, read_schema
from spark_examples.verify import compare_tables
from tests.sync.test_apply import Log, no_sleep

V1: Columns = {"id": "integer", "name": "text", "stock": "integer", "born": "date"}


class SchemaLog(Log):
    """A Log that also writes schema records, as the capture does."""

    def schema(self, columns: Columns, defaults: dict[str, Any] | None = None) -> SourceRecord:
        schema = TableSchema("t", columns, ("id",), (), defaults or {})
        seq = len(self.records)
        return self._add(encode_schema_key("t", seq), encode_schema_value(seq, schema))


def evolving_log() -> tuple[SchemaLog, Columns]:
    """Rows around each kind of schema change; returns the log and the final columns."""
    log = SchemaLog()
    log.schema(V1)
    log.upsert({"id": 1, "name": "a", "stock": 1, "born": "2024-01-01"}, columns=V1)
    log.upsert({"id": 2, "name": "b", "stock": 2, "born": "2024-01-02"}, columns=V1)
    v2: Columns = {**V1, "price": "numeric"}  # added with a default: rows 1 and 2 get it
    log.schema(v2, {"price": "9.5"})
    log.upsert({"id": 3, "name": "c", "stock": 3, "born": "2024-01-03", "price": "1"}, columns=v2)
    v3: Columns = {**v2, "note": "text"}  # added without a default: NULL
    log.schema(v3, {"price": "9.5"})
    v4: Columns = {name: kind for name, kind in v3.items() if name != "name"}  # dropped
    log.schema(v4, {"price": "9.5"})
    log.upsert({"id": 2, "stock": 5, "born": "2024-01-02", "price": "2", "note": "n"}, columns=v4)
    v5: Columns = {**v4, "stock": "real", "born": "timestamp"}  # widened
    log.schema(v5, {"price": "9.5"})
    log.upsert({"id": 4, "stock": 2.5, "born": "2024-01-04 05:06:07", "price": "3"}, columns=v5)
    log.delete({"id": 3})
    return log, v5


@pytest.mark.parametrize("coalesce", [True, False], ids=["bulk", "record-by-record"])
def test_schema_changes_apply_in_order_with_the_rows_around_them(
    any_database: Database, coalesce: bool
) -> None:
    log, final_columns = evolving_log()
    apply_batch(any_database, log.records[:4], coalesce=coalesce)
    apply_batch(any_database, log.records[4:], coalesce=coalesce)
    any_database.forget_schema()
    assert any_database.table_columns("t") == final_columns
    found = [(row["id"], row["stock"], row["price"], row["note"]) for row in any_database.rows("t")]
    assert found == [
        (1, 1.0, Decimal("9.5"), None),
        (2, 5.0, Decimal(2), "n"),
        (4, 2.5, Decimal(3), None),
    ]
    assert str(next(iter(any_database.rows("t")))["born"]) == "2024-01-01 00:00:00"
    # The last schema applied again (a bootstrap from T.full meets it too) does nothing.
    again = SourceRecord("bootstrap", 0, 0, log.records[8].key, log.records[8].value)
    apply_batch(any_database, [again], coalesce=coalesce)
    assert len(list(any_database.rows("t"))) == 3
    assert read_schema(any_database, "t").columns == final_columns


def test_a_narrowing_stops_with_an_alarm_and_applies_after_the_fix(
    any_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    wide: Columns = {"id": "integer", "stock": "real"}
    narrow: Columns = {"id": "integer", "stock": "integer"}
    log = SchemaLog()
    log.schema(wide)
    log.upsert({"id": 1, "stock": 2.0}, columns=wide)
    apply_batch(any_database, log.records)
    log.upsert({"id": 2, "stock": 3.0}, columns=wide)
    log.schema(narrow)
    log.upsert({"id": 3, "stock": 4}, columns=narrow)
    with caplog.at_level(logging.ERROR), pytest.raises(ApplyError) as raised:
        apply_batch(any_database, log.records, max_retries=1, sleep=no_sleep)
    assert raised.value.record == log.records[3]
    assert "table 't' column 'stock': type real cannot become integer" in str(raised.value)
    alarms = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ALARM:")]
    assert len(alarms) == 1 and "kind=schema_rejected subject=t value=stock" in alarms[0]
    assert [row["id"] for row in any_database.rows("t")] == [1]  # nothing committed
    assert next_offset(any_database, "orders-topic", 0) == 2
    # The operator narrows the destination column (accepting what it does to its values).
    with any_database.transaction():
        change_column_types(any_database, TableSchema("t", narrow, ("id",)))
    apply_batch(any_database, log.records)
    any_database.forget_schema()
    assert any_database.table_columns("t") == narrow
    assert list(any_database.rows("t")) == [{"id": n, "stock": n + 1} for n in (1, 2, 3)]


def test_the_checker_compares_schemas(tmp_path: Path) -> None:
    source_url, dest_url = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    source, dest = open_database(source_url), open_database(dest_url)
    try:
        source.create_table("t", {"id": "integer", "v": "real", "w": "text"}, ["id"])
        dest.create_table("t", {"id": "integer", "v": "integer", "w": "text", "x": "text"}, ["id"])
        for database in (source, dest):
            database.execute("INSERT INTO t (id, v, w) VALUES (1, 2, 'a')")
        assert compare_tables(source_url, dest_url, ["t"]) == [
            "t: destination has columns the source has not: ['x']; "
            "column types differ (source, dest): {'v': ('real', 'integer')}"
        ]
        dest.execute("ALTER TABLE t DROP COLUMN x")
        dest.execute("ALTER TABLE t DROP COLUMN w")
        assert compare_tables(source_url, dest_url, ["t"])[0].startswith(
            "t: destination lacks columns ['w']"
        )
    finally:
        source.close()
        dest.close()
