"""The pipeline experiment's source workload (spark_examples/testing.py): transactions the
application rolls back leave no trace in the tables or the change log, and a paced workload
held at a share of its operations waits for its release."""

from __future__ import annotations

from pathlib import Path

from spark_examples.capture.triggers import LOG_TABLE
from spark_examples.databases import open_database
from spark_examples.testing import SOURCE_TABLES, PacedWorkload, Workload, create_source_tables

# Long enough to tell a held workload from a running one at 100 operations a second.
HELD_WINDOW_S = 0.5


def test_rolled_back_transactions_leave_no_row_and_no_logged_change(tmp_path: Path) -> None:
    database = open_database(f"sqlite:///{tmp_path}/source.db")
    try:
        create_source_tables(database)
        workload = Workload(database, seed=3, rollback_share=0.3)
        workload.run(300)
        assert workload.operations == 300 and workload.rolled_back > 0
        for table in SOURCE_TABLES:  # the rows are exactly those the workload kept
            ids = sorted(int(row[0]) for row in database.execute(f"SELECT id FROM {table}"))
            assert ids == sorted(workload.live[table]), table
        # Committed changes only, numbered without a gap: 300 statements, one change each.
        sequences = [int(row[0]) for row in database.execute(f"SELECT seq FROM {LOG_TABLE}")]
        assert sorted(sequences) == list(range(1, 301))
    finally:
        database.close()


def test_a_held_workload_waits_for_its_release(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/source.db"
    database = open_database(url)
    try:
        create_source_tables(database)
    finally:
        database.close()
    workload = PacedWorkload(url, 100, per_second=100, seed=5, hold_at=0.5)
    workload.start()
    try:
        workload.reached(0.5, timeout_s=30)
        workload.join(HELD_WINDOW_S)  # a running workload would make 50 more changes by then
        assert workload.is_alive() and workload.done == 50
        workload.release()
        workload.join(30)
        assert not workload.is_alive() and workload.error is None and workload.done == 100
    finally:
        workload.stop()
