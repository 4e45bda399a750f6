"""``kshim delays``: the schedule of a broker's data directory, as a table or JSON lines."""

from __future__ import annotations

import json
from pathlib import Path

import lmdb
import pytest

from kshim.cli.main import main
from kshim.cli.status_tables import DELAY_COLUMNS
from kshim.protocol.packed_record import pack_record
from kshim.protocol.records import Record
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.metadata import MetadataStore
from kshim.storage.schedule.delay_filing import ScheduleChange
from kshim.storage.schedule.delay_records import DelayedRecord, ScheduleLayoutError
from kshim.storage.schedule.delay_store import DelayStore

ORDERS = TopicPartition("orders", 0)
FAR_MS = 4_000_000_000_000  # due in the 2090s: pending whenever the test runs


def data_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "data"
    MetadataStore(str(directory / "meta")).close()
    return directory


def record(offset: int, due_ms: int) -> DelayedRecord:
    key = f"k{offset}".encode()
    return DelayedRecord(due_ms, ORDERS, offset, key, pack_record(Record(offset, 1, key, b"v")))


def fill(directory: Path) -> None:
    """Three records of ``orders``: two delivered 3 and 700 ms late, one pending far ahead."""
    store = DelayStore(str(directory / "delays"))
    records = [record(0, 1_000), record(1, 2_000), record(2, FAR_MS)]
    changes = [ScheduleChange(r.source_offset, r.key, False, r.due_ms, r.packed) for r in records]
    store.schedule(
        TopicPartition("orders.delay", 0), TopicPartition("orders", 0), changes, 3, 2_000
    )
    store.maintain(2_000)
    turn = store.take_due(2_000, 10)
    assert [r.source_offset for r in turn.records] == [0, 1]
    store.finish_turn(turn, 2_000, [3, 700])
    store.close()


def test_json_lines_per_topic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = data_dir(tmp_path)
    fill(directory)
    assert main(["delays", "--data-dir", str(directory), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows == [
        {"topic": "orders", "pending": 1, "next_due_ms": FAR_MS, "overdue_ms": None,
         "delivered": 2, "late_p50_ms": 5, "late_p99_ms": 1000, "late_max_ms": 1000}
    ]  # fmt: skip


def test_table_with_a_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = data_dir(tmp_path)
    fill(directory)
    assert main(["delays", "--data-dir", str(directory)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split("  ")[0] == DELAY_COLUMNS[0] and "LATE-P99-MS" in header
    assert row.split()[:2] == ["orders", "1"]
    assert row.split()[-3:] == ["<=5", "<=1000", "<=1000"]


def test_a_broker_that_never_delayed_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = data_dir(tmp_path)
    assert main(["delays", "--data-dir", str(directory)]) == 0
    assert capsys.readouterr().out.splitlines() == [header_line()]
    assert not (directory / "delays").exists(), "reading must not create the schedule"


def header_line() -> str:
    return "  ".join(DELAY_COLUMNS)


def test_not_a_data_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["delays", "--data-dir", str(tmp_path / "nowhere")]) == 1
    error = capsys.readouterr().err.strip()
    nowhere = tmp_path / "nowhere"
    assert error == f"kshim delays: error: {nowhere} is not a kshim data directory (no meta/ in it)"


def test_a_schedule_in_an_older_layout_is_refused_not_misread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = data_dir(tmp_path)
    older = lmdb.open(str(directory / "delays"), max_dbs=8)
    older.open_db(b"delay_pending")
    older.close()
    assert main(["delays", "--data-dir", str(directory)]) == 1
    assert "written by an older kshim" in capsys.readouterr().err
    with pytest.raises(ScheduleLayoutError):
        DelayStore(str(directory / "delays")).position(TopicPartition("orders.delay", 0))
