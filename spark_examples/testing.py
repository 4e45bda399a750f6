"""Reusable pieces for running the whole pipeline: the demo, the end-to-end tests, the benchmark.

- ``create_source_tables`` and ``Workload``: a source database with two tables and a
  generator of random inserts, updates and deletes (application transactions of a few
  statements each, some of them rolled back by the application), the activity the VENUS
  consistency experiment replays.
- ``CaptureProcess``: ``python -m spark_examples.capture`` as a child process that can be
  killed with -9 and restarted, as a crashed capture would be.
- ``capture_drained``, ``topic_end_offset`` and ``last_record_offset``: when everything
  written is in the broker.
"""

from __future__ import annotations

import datetime
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from kshim.testing import kill_process, stop_process
from spark_examples.capture.review import REGISTRY_VARIABLE
from spark_examples.capture.triggers import SEQUENCE_TABLE, STATE_TABLE, install_capture
from spark_examples.databases import Columns, Database, Row, open_database, quote

SOURCE_TABLES: dict[str, Columns] = {
    "customers": {
        "id": "integer",
        "name": "text",
        "balance": "numeric",
        "active": "boolean",
        "updated_at": "timestamp",
    },
    "orders": {
        "id": "integer",
        "customer_id": "integer",
        "amount": "real",
        "placed": "date",
        "note": "text",
        "payload": "blob",
    },
}
TABLE_NAMES = list(SOURCE_TABLES)
REPOSITORY_ROOT = Path(__file__).resolve().parent.parent
TRANSACTION_ATTEMPTS = 5
HOLD_TIMEOUT_S = 300.0


def create_source_tables(database: Database) -> None:
    """Creates the demo tables (primary key ``id``) if absent, with the capture triggers.

    The triggers go in before any activity: a change made before them is never logged.
    """
    with database.transaction():
        for table, columns in SOURCE_TABLES.items():
            database.create_table(table, columns, ["id"])
    install_capture(database, TABLE_NAMES)


def _random_row(generator: random.Random, table: str, row_id: int) -> Row:
    moment = datetime.datetime(2026, 1, 1) + datetime.timedelta(
        seconds=generator.randrange(10**7), microseconds=generator.randrange(1000) * 1000
    )
    if table == "customers":
        return {
            "id": row_id,
            "name": generator.choice(["Ada", "Grace", "Linus", "Zoë", "Ken"])
            + f" {generator.randrange(1000)}",
            "balance": Decimal(generator.randrange(-(10**6), 10**6)) / 100,
            "active": generator.random() < 0.7,
            "updated_at": moment,
        }
    return {
        "id": row_id,
        "customer_id": generator.randrange(1, 500),
        "amount": round(generator.uniform(0, 1000), 3),
        "placed": moment.date(),
        "note": None if generator.random() < 0.2 else f"note {generator.random():.5f}",
        "payload": generator.randbytes(generator.randrange(0, 24)),
    }


@dataclass
class Workload:
    """Random inserts, updates and deletes on the source tables, a transaction at a time.

    Ids already in the tables (from an earlier run) are loaded first, so updates and deletes
    hit real rows. ``rollback_share`` of the transactions are rolled back by the
    application after their statements ran (their triggers fired and logged changes that
    the rollback takes back with them); those statements are not counted in ``operations``
    but in ``rolled_back``. Not thread-safe; run it from one thread.
    """

    database: Database
    seed: int = 1
    rollback_share: float = 0.0
    generator: random.Random = field(init=False)
    live: dict[str, list[int]] = field(init=False)
    next_id: dict[str, int] = field(init=False)
    operations: int = field(default=0, init=False)
    rolled_back: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.generator = random.Random(self.seed)
        self.live = {
            table: [int(row[0]) for row in self.database.execute(f"SELECT id FROM {table}")]
            for table in SOURCE_TABLES
        }
        self.next_id = {table: max(ids, default=0) + 1 for table, ids in self.live.items()}

    def run(self, operations: int, per_transaction: int = 5) -> None:
        """Performs ``operations`` statements, ``per_transaction`` per source transaction.

        A transaction that fails transiently (a PostgreSQL deadlock, say with the capture
        installing its triggers) is rolled back and run again, as applications do.
        """
        remaining = operations
        while remaining > 0:
            count = min(remaining, self.generator.randint(1, 2 * per_transaction - 1))
            if self.rollback_share and self.generator.random() < self.rollback_share:
                self._rolled_back_transaction(count)
            self._transaction(count)
            remaining -= count
            self.operations += count

    def _transaction(self, count: int) -> None:
        for attempt in range(1, TRANSACTION_ATTEMPTS + 1):
            undo: list[tuple[str, str, int]] = []  # in-memory effects to revert on rollback
            try:
                with self.database.transaction():
                    for _ in range(count):
                        self._one_statement(undo)
                return
            except Exception as error:
                if attempt == TRANSACTION_ATTEMPTS or not _transient(error):
                    raise
                self._revert(undo)
                time.sleep(0.05 * attempt)

    def _rolled_back_transaction(self, count: int) -> None:
        """``count`` statements in a transaction the application then rolls back."""
        undo: list[tuple[str, str, int]] = []
        try:
            with self.database.transaction():
                for _ in range(count):
                    self._one_statement(undo)
                raise _ApplicationRollback
        except _ApplicationRollback:
            pass
        except Exception as error:  # rolled back all the same
            if not _transient(error):
                raise
        self._revert(undo)
        self.rolled_back += count

    def _revert(self, undo: list[tuple[str, str, int]]) -> None:
        """Takes back the in-memory effects of a rolled-back transaction's statements."""
        for action, table, row_id in reversed(undo):
            if action == "insert":
                self.live[table].remove(row_id)
            else:
                self.live[table].append(row_id)

    def _one_statement(self, undo: list[tuple[str, str, int]]) -> None:
        table = self.generator.choice(TABLE_NAMES)
        ids = self.live[table]
        draw = self.generator.random()
        if not ids or draw < 0.4:
            undo.append(("insert", table, self._insert(table)))
        elif draw < 0.8:
            row = _random_row(self.generator, table, self.generator.choice(ids))
            names = [name for name in row if name != "id"]
            assignments = ", ".join(f"{quote(name)} = ?" for name in names)
            self.database.execute(
                f"UPDATE {table} SET {assignments} WHERE id = ?",
                [*(row[name] for name in names), row["id"]],
            )
        else:
            victim = ids.pop(self.generator.randrange(len(ids)))
            undo.append(("delete", table, victim))
            self.database.execute(f"DELETE FROM {table} WHERE id = ?", [victim])

    def _insert(self, table: str) -> int:
        row_id = self.next_id[table]
        row = _random_row(self.generator, table, row_id)
        self.next_id[table] += 1
        names = ", ".join(quote(name) for name in row)
        marks = ", ".join("?" for _ in row)
        self.database.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))
        self.live[table].append(row_id)
        return row_id


class _ApplicationRollback(Exception):
    """Raised inside a transaction to roll it back, as an application that changes its mind."""


def _transient(error: Exception) -> bool:
    """Errors after which the same transaction may succeed: deadlock victim, lock timeout."""
    name = type(error).__name__
    return name in ("DeadlockDetected", "SerializationFailure", "LockNotAvailable") or (
        name == "OperationalError" and "locked" in str(error)
    )


class PacedWorkload(threading.Thread):
    """Runs a ``Workload`` in a background thread at a bounded rate until done or stopped.

    ``done`` counts the operations committed so far, ``rolled_back`` the statements of the
    transactions rolled back on purpose (``rollback_share``, see ``Workload``); ``error``
    holds what stopped it early. With ``hold_at``, the thread waits at that share of the
    operations until ``release`` (``HOLD_TIMEOUT_S`` at most): whatever a test does while
    the changes flow, however long a loaded machine makes it, changes still follow it.
    """

    def __init__(
        self,
        source_url: str,
        operations: int,
        per_second: int,
        seed: int,
        rollback_share: float = 0.0,
        hold_at: float | None = None,
    ) -> None:
        super().__init__(daemon=True, name="kshim-workload")
        self.source_url, self.total, self.per_second, self.seed = (
            source_url, operations, per_second, seed,
        )  # fmt: skip
        self.rollback_share, self.hold_at = rollback_share, hold_at
        self.done = 0
        self.rolled_back = 0
        self.error: BaseException | None = None
        self.stop_event = threading.Event()
        self.released = threading.Event()

    def release(self) -> None:
        """Lets the workload go on past ``hold_at``."""
        self.released.set()

    def stop(self) -> None:
        """Ends the workload after its current transaction, held or not."""
        self.stop_event.set()
        self.released.set()

    def _hold(self) -> None:
        if self.hold_at is None or self.done < self.hold_at * self.total:
            return
        if not self.released.wait(HOLD_TIMEOUT_S):
            raise TimeoutError(f"workload held at {self.done} operations for {HOLD_TIMEOUT_S} s")

    def run(self) -> None:
        database = open_database(self.source_url)
        try:
            workload = Workload(database, seed=self.seed, rollback_share=self.rollback_share)
            chunk = max(1, self.per_second // 10)
            while self.done < self.total and not self.stop_event.is_set():
                self._hold()
                started = time.monotonic()
                step = min(chunk, self.total - self.done)
                workload.run(step)
                self.done, self.rolled_back = self.done + step, workload.rolled_back
                self.stop_event.wait(max(0.0, 0.1 - (time.monotonic() - started)))
        except BaseException as error:
            self.error = error
        finally:
            database.close()

    def reached(self, fraction: float, timeout_s: float = 120) -> None:
        """Waits until ``fraction`` of the operations are done (or the thread ended)."""
        wait_until(
            lambda: self.done >= fraction * self.total or not self.is_alive(),
            timeout_s,
            f"{fraction:.0%} of the workload",
        )


class CaptureProcess:
    """``python -m spark_examples.capture`` in a child process; output goes to a log file."""

    def __init__(
        self,
        source_url: str,
        bootstrap: str,
        topic: str,
        log_path: str | Path,
        extra_arguments: tuple[str, ...] = ("--transaction-timeout-ms", "10000"),
    ) -> None:
        self.command = [
            sys.executable, "-m", "spark_examples.capture", "--source", source_url,
            "--tables", ",".join(TABLE_NAMES), "--bootstrap", bootstrap, "--topic", topic,
            *extra_arguments,
        ]  # fmt: skip
        self.log_path = Path(log_path)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, once: bool = False) -> CaptureProcess:
        """Starts it (the environment, KSHIM_CAPTURE_REGISTRY included, is inherited)."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        command = [*self.command, "--once"] if once else self.command
        # Unbuffered, so a kill -9 loses none of its progress lines.
        environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, cwd=REPOSITORY_ROOT, env=environment
        )
        log.close()
        return self

    def wait(self, timeout_s: float) -> int:
        """Waits for a ``--once`` run to exit; returns its status."""
        assert self.process is not None
        status = self.process.wait(timeout_s)
        self.process = None
        return status

    def kill(self) -> None:
        """kill -9, as a crash: no flush, no abort of the open transaction."""
        kill_process(self.process)
        self.process = None

    def stop(self) -> None:
        """SIGTERM (the capture finishes its batch and exits), then kill -9 if it hangs."""
        stop_process(self.process)
        self.process = None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def capture_drained(source_url: str, topic: str) -> bool:
    """True when the capture recorded every logged change and has no batch in flight."""
    database = open_database(source_url)
    try:
        issued = database.execute(f"SELECT last_seq FROM {SEQUENCE_TABLE}")
        state = database.execute(
            f"SELECT last_seq, pending_status FROM {STATE_TABLE} WHERE topic = ?", [topic]
        )
    finally:
        database.close()
    last_issued = int(issued[0][0]) if issued else 0
    return bool(state) and int(state[0][0]) == last_issued and state[0][1] is None


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Polls ``condition`` every 0.2 s; raises TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached after {timeout_s:.0f} s")
        time.sleep(0.2)


def topic_end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The partition's high watermark (everything written, markers included)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kshim-end-offset"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        return int(high)
    finally:
        consumer.close()


def registry_environment(work_dir: str | Path) -> dict[str, str]:
    """KSHIM_CAPTURE_REGISTRY in ``work_dir``: set it in os.environ before starting the
    broker and the capture, which both inherit it (see capture/review.py)."""
    return {REGISTRY_VARIABLE: os.path.join(str(work_dir), "capture-registry")}


def last_record_offset(bootstrap: str, topic: str) -> int:
    """The offset of the partition's last committed record (transaction markers follow it)."""
    from confluent_kafka import Consumer, TopicPartition

    end = topic_end_offset(bootstrap, topic)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "kshim-last-record",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    # A capture transaction ends with one commit marker; a few more offsets cover aborts.
    consumer.assign([TopicPartition(topic, 0, max(0, end - 3))])
    try:
        messages = consumer.consume(10, timeout=5.0)
        offsets = [offset for message in messages if (offset := message.offset()) is not None]
    finally:
        consumer.close()
    if not offsets:
        raise RuntimeError(f"no committed record near the end of {topic} (offset {end})")
    return max(offsets)
