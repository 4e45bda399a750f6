"""spark_examples.databases on real SQLite, DuckDB and PostgreSQL databases."""

from __future__ import annotations

import datetime
import multiprocessing
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spark_examples.databases import (
    PORTABLE_TO_ENGINE,
    PORTABLE_TYPES,
    Database,
    open_database,
    portable_type,
)

COLUMNS = {
    "id": "integer",
    "ratio": "real",
    "price": "numeric",
    "name": "text",
    "payload": "blob",
    "active": "boolean",
    "born": "date",
    "seen": "timestamp",
}
ROW: dict[str, Any] = {
    "id": 1,
    "ratio": 0.25,
    "price": Decimal("12.34"),
    "name": "Zoë",
    "payload": b"\x00\xff",
    "active": True,
    "born": datetime.date(2001, 2, 3),
    "seen": datetime.datetime(2024, 5, 6, 7, 8, 9, 123456),
}


@pytest.fixture(params=["sqlite", "duckdb", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/test.db"
    elif request.param == "duckdb":
        url = f"duckdb:///{tmp_path}/test.duckdb"
    else:
        url = request.getfixturevalue("postgres_url")
    db = open_database(url)
    yield db
    db.close()


def test_every_portable_type_has_a_column_type_per_engine() -> None:
    assert set(PORTABLE_TO_ENGINE) == set(PORTABLE_TYPES)
    for engine in ("sqlite", "postgresql", "duckdb"):
        for portable, engines in PORTABLE_TO_ENGINE.items():
            assert portable_type(engines[engine], engine) == portable


def test_unknown_scheme_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown database URL scheme"):
        open_database("mysql://x@y/z")


def test_create_table_reports_columns_and_key(database: Database) -> None:
    assert not database.table_exists("things")
    database.create_table("things", COLUMNS, ["id"])
    database.create_table("things", COLUMNS, ["id"])  # idempotent
    assert database.table_exists("things")
    assert database.table_columns("things") == COLUMNS
    assert list(database.table_columns("things")) == list(COLUMNS)
    assert database.primary_key("things") == ["id"]


def test_composite_key_keeps_key_order(database: Database) -> None:
    database.create_table("pairs", {"a": "text", "b": "integer", "c": "text"}, ["b", "a"])
    assert database.primary_key("pairs") == ["b", "a"]
    database.upsert("pairs", {"a": "x", "b": 2, "c": "first"})
    database.upsert("pairs", {"a": "w", "b": 2, "c": "second"})
    database.upsert("pairs", {"a": "z", "b": 1, "c": "third"})
    assert [row["c"] for row in database.rows("pairs")] == ["third", "second", "first"]


def test_round_trip_of_every_type_and_null(database: Database) -> None:
    database.create_table("things", COLUMNS, ["id"])
    database.upsert("things", ROW)
    database.upsert("things", {"id": 2, **dict.fromkeys(list(COLUMNS)[1:])})
    rows = list(database.rows("things"))
    assert rows[0] == ROW
    assert isinstance(rows[0]["price"], Decimal)
    assert rows[1] == {"id": 2, **dict.fromkeys(list(COLUMNS)[1:])}


def test_upsert_replaces_and_delete_is_idempotent(database: Database) -> None:
    database.create_table("things", COLUMNS, ["id"])
    with database.transaction():
        database.upsert("things", ROW)
        database.delete("things", {"id": 1})
        database.upsert("things", ROW)
        database.upsert("things", {**ROW, "name": "replaced", "active": False})
    assert list(database.rows("things")) == [{**ROW, "name": "replaced", "active": False}]
    database.delete("things", {"id": 1})
    database.delete("things", {"id": 1})
    assert list(database.rows("things")) == []


def test_transaction_rolls_back_on_exception(database: Database) -> None:
    database.create_table("things", COLUMNS, ["id"])
    database.upsert("things", ROW)
    with pytest.raises(RuntimeError), database.transaction():
        database.upsert("things", {**ROW, "id": 2})
        database.delete("things", {"id": 1})
        raise RuntimeError("roll back")
    assert [row["id"] for row in database.rows("things")] == [1]
    with database.transaction():  # the connection is usable again
        database.upsert("things", {**ROW, "id": 3})
    assert [row["id"] for row in database.rows("things")] == [1, 3]


def test_execute_uses_question_mark_placeholders(database: Database) -> None:
    database.create_table("things", COLUMNS, ["id"])
    database.execute("INSERT INTO things (id, name) VALUES (?, ?)", [7, "100%"])
    assert database.execute("SELECT name FROM things WHERE id = ?", [7]) == [("100%",)]
    database.execute("DELETE FROM things WHERE id = ?", [7])
    assert database.execute("SELECT count(*) FROM things") == [(0,)]


def _open_while_it_appears(path: str, started: Any, stop: Any) -> None:
    """Opens ``path`` over and over from the moment it exists, as a reader polling it does."""
    started.set()
    while not stop.is_set():
        if Path(path).exists():
            open_database(f"sqlite:///{path}").close()


def test_a_new_sqlite_file_opened_by_two_processes_at_once_opens_in_both(tmp_path: Path) -> None:
    """Switching a new file to WAL in two processes together can meet SQLite's deadlock
    avoidance (an immediate "database is locked", no busy wait): each opening must still
    succeed. Without a retry about one attempt in fifteen failed here."""
    context = multiprocessing.get_context("fork")
    for attempt in range(100):
        path = str(tmp_path / f"new-{attempt}.db")
        started, stop = context.Event(), context.Event()
        reader = context.Process(target=_open_while_it_appears, args=(path, started, stop))
        reader.start()
        try:
            assert started.wait(10)
            open_database(f"sqlite:///{path}").close()
        finally:
            stop.set()
            reader.join(10)
        assert reader.exitcode == 0, f"the reader failed on attempt {attempt}"
