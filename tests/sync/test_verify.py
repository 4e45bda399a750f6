"""spark_examples.verify on real databases of different engines."""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spark_examples import verify
from spark_examples.databases import open_database

COLUMNS = {
    "id": "integer",
    "price": "numeric",
    "name": "text",
    "payload": "blob",
    "active": "boolean",
    "ratio": "real",
    "seen": "timestamp",
}


def _rows(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": number,
            "price": Decimal(number) / 4,
            "name": f"name {number}",
            "payload": bytes([number % 256]),
            "active": number % 2 == 0,
            "ratio": number / 3,
            "seen": datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=number),
        }
        for number in range(count)
    ]


def _fill(url: str, rows: list[dict[str, Any]]) -> None:
    db = open_database(url)
    db.create_table("items", COLUMNS, ["id"])
    with db.transaction():
        for row in rows:
            db.upsert("items", row)
    db.close()


@pytest.fixture(params=["sqlite", "duckdb", "postgresql"])
def dest_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/dest.db"
    if request.param == "duckdb":
        return f"duckdb:///{tmp_path}/dest.duckdb"
    return str(request.getfixturevalue("postgres_url"))


def test_equal_tables_across_engines(tmp_path: Path, dest_url: str) -> None:
    source_url = f"sqlite:///{tmp_path}/source.db"
    _fill(source_url, _rows(50))
    _fill(dest_url, _rows(50))
    assert verify.compare_tables(source_url, dest_url, ["items"]) == []
    assert verify.compare_tables(dest_url, source_url, ["items"]) == []
    assert verify.main(["--source", source_url, "--dest", dest_url, "--tables", "items"]) == 0


def test_missing_extra_and_differing_rows_are_reported(tmp_path: Path, dest_url: str) -> None:
    source_url = f"sqlite:///{tmp_path}/source.db"
    _fill(source_url, _rows(50))
    _fill(dest_url, _rows(52))  # rows 50 and 51 are extra
    dest = open_database(dest_url)
    dest.delete("items", {"id": 3})
    dest.upsert("items", {**_rows(50)[7], "price": Decimal("7.76")})
    dest.close()
    differences = verify.compare_tables(source_url, dest_url, ["items"])
    assert differences == [
        "items: 50 rows in source, 51 in dest",
        "items: row [3] missing in destination",
        "items: row [50] extra in destination",
        "items: row [51] extra in destination",
        "items: row ['id']=[7] differs (source, dest): {'price': ('1.75', '7.76')}",
    ]
    assert verify.main(["--source", source_url, "--dest", dest_url, "--tables", "items"]) == 1


def test_limit_and_missing_table(tmp_path: Path) -> None:
    source_url = f"sqlite:///{tmp_path}/source.db"
    dest_url = f"duckdb:///{tmp_path}/dest.duckdb"
    _fill(source_url, _rows(30))
    assert verify.compare_tables(source_url, dest_url, ["items"]) == [
        f"items: missing in destination {dest_url}"
    ]
    _fill(dest_url, [])
    differences = verify.compare_tables(source_url, dest_url, ["items"], limit=5)
    assert differences[0] == "items: 30 rows in source, 0 in dest"
    assert len(differences) == 1 + 5 + 1
    assert differences[-1] == "items: ... and 25 more rows missing in destination"


def test_normalise_makes_engine_spellings_equal() -> None:
    assert verify.normalise("numeric", Decimal("1.5000000000")) == verify.normalise("numeric", 1.5)
    assert verify.normalise("numeric", Decimal("-0.00")) == verify.normalise("numeric", 0)
    assert verify.normalise("boolean", 1) == verify.normalise("boolean", True)
    assert verify.normalise("timestamp", "2024-01-01 00:00:00") == verify.normalise(
        "timestamp", datetime.datetime(2024, 1, 1)
    )
    assert verify.normalise("integer", 2) != verify.normalise("integer", 3)
