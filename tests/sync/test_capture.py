"""Capture on real sources and a real kshim broker: triggers, review hook, crashes.

The broker runs the capture's review hook (``kshim.review.hook=spark_examples.
capture_review:decide``) and finds the source through ``KSHIM_CAPTURE_REGISTRY``, set in
the environment before the broker and the capture start.
"""

from __future__ import annotations

import random
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from kshim.testing import BrokerProcess
from spark_examples import capture_review, capture_triggers, change_format
from spark_examples.capture import OP_HEADER, SEQ_HEADER, run_capture
from spark_examples.databases import Database, open_database

HOOK = "kshim.review.hook=spark_examples.capture_review:decide"
REPOSITORY = Path(__file__).resolve().parents[2]

ITEM_COLUMNS = {"id": "integer", "name": "text", "price": "numeric", "active": "boolean"}


@dataclass(frozen=True)
class Shipped:
    offset: int
    seq: int
    op: str
    key: bytes
    value: bytes | None


def create_items(db: Database) -> None:
    db.create_table("items", ITEM_COLUMNS, ["id"])


def random_change(db: Database, chooser: random.Random, next_id: list[int]) -> None:
    """One insert, update, delete or primary-key change of ``items`` (autocommitted)."""
    existing = [row[0] for row in db.execute("SELECT id FROM items ORDER BY id LIMIT 200")]
    kind = (
        chooser.choice(["insert", "insert", "update", "delete", "rekey"]) if existing else "insert"
    )
    if kind == "insert":
        next_id[0] += 1
        db.execute(
            "INSERT INTO items (id, name, price, active) VALUES (?, ?, ?, ?)",
            [next_id[0], f"item {next_id[0]}", f"{chooser.randint(0, 9999)}.25", True],
        )
        return
    target = chooser.choice(existing)
    if kind == "update":
        db.execute(
            "UPDATE items SET name = ?, active = ? WHERE id = ?",
            [f"renamed {chooser.random():.6f}", chooser.random() < 0.5, target],
        )
    elif kind == "delete":
        db.execute("DELETE FROM items WHERE id = ?", [target])
    else:
        next_id[0] += 1
        db.execute("UPDATE items SET id = ? WHERE id = ?", [next_id[0], target])


def read_topic(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[Shipped]:
    """Every committed record of partition 0 of ``topic`` (read_committed), in offset order."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{time.monotonic_ns()}",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    shipped: list[Shipped] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return shipped
                raise AssertionError(f"consumer error: {error}")
            headers = dict(message.headers() or [])
            shipped.append(Shipped(
                message.offset(),
                int(headers[SEQ_HEADER]),
                headers[OP_HEADER].decode(),
                message.key(),
                message.value(),
            ))  # fmt: skip
    finally:
        consumer.close()
    raise AssertionError(f"topic {topic} not read to its end within {timeout_s}s")


def final_state(shipped: list[Shipped]) -> dict[tuple[str, str], dict[str, Any]]:
    """What a destination applying ``shipped`` in order holds: (table, key json) -> row."""
    state: dict[tuple[str, str], dict[str, Any]] = {}
    for record in shipped:
        table, pk = change_format.decode_key(record.key)
        identity = (table, repr(sorted(pk.items())))
        if record.value is None:
            state.pop(identity, None)
        else:
            state[identity] = change_format.decode_value(record.value).row
    return state


def source_state(db: Database, table: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The rows of ``table`` keyed as in ``final_state``."""
    key = db.primary_key(table)
    return {(table, repr(sorted((k, row[k]) for k in key))): row for row in db.rows(table)}


def last_sequence(db: Database) -> int:
    return int(db.execute("SELECT last_seq FROM kshim_change_seq WHERE id = 1")[0][0])


# -- fixtures ---------------------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgresql"])
def source_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/source.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def source(source_url: str) -> Iterator[Database]:
    db = open_database(source_url)
    create_items(db)
    yield db
    db.close()


@pytest.fixture
def review_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BrokerProcess]:
    """A broker asking the capture's review hook; the registry is private to the test."""
    monkeypatch.setenv(capture_review.REGISTRY_VARIABLE, str(tmp_path / "registry"))
    settings = [HOOK, "kshim.review.retry.ms=300", "kshim.review.check.interval.ms=200"]
    broker = BrokerProcess(tmp_path / "broker", settings=settings).start()
    yield broker
    broker.stop()


# -- triggers -----------------------------------------------------------------------------
def test_triggers_log_every_change_in_order(source: Database) -> None:
    source.create_table("pairs", {"a": "text", "b": "integer", "c": "text"}, ["a", "b"])
    capture_triggers.install_capture(source, ["items", "pairs"])
    capture_triggers.install_capture(source, ["items", "pairs"])  # idempotent
    source.execute("INSERT INTO items (id, name) VALUES (1, 'a')")
    source.execute("INSERT INTO items (id, name) VALUES (2, 'b')")
    source.execute("UPDATE items SET name = 'c' WHERE id = 1")
    source.execute("UPDATE items SET id = 3 WHERE id = 2")
    source.execute("DELETE FROM items WHERE id = 1")
    with pytest.raises(RuntimeError), source.transaction():
        source.execute("INSERT INTO items (id, name) VALUES (9, 'rolled back')")
        raise RuntimeError("no gap may remain")
    source.execute("INSERT INTO pairs (a, b, c) VALUES ('x', 1, 'q')")
    source.execute("UPDATE pairs SET a = 'y'")
    changes = capture_triggers.read_changes(source, 0, ["items", "pairs"], 100)
    assert [(c.seq, c.table, c.pk, c.op) for c in changes] == [
        (1, "items", {"id": 1}, "insert"),
        (2, "items", {"id": 2}, "insert"),
        (3, "items", {"id": 1}, "update"),
        (4, "items", {"id": 2}, "delete"),
        (5, "items", {"id": 3}, "insert"),
        (6, "items", {"id": 1}, "delete"),
        (7, "pairs", {"a": "x", "b": 1}, "insert"),
        (8, "pairs", {"a": "x", "b": 1}, "delete"),
        (9, "pairs", {"a": "y", "b": 1}, "insert"),
    ]
    assert [c.seq for c in capture_triggers.read_changes(source, 4, ["items"], 2)] == [5, 6]
    assert capture_triggers.current_row(source, "items", {"id": 3})["name"] == "b"
    assert capture_triggers.current_row(source, "items", {"id": 1}) is None
    assert capture_triggers.current_row(source, "pairs", {"a": "y", "b": 1})["c"] == "q"
    assert capture_triggers.current_row(source, "pairs", {"a": "x", "b": 1}) is None


def test_postgres_sequence_follows_commit_order(postgres_url: str) -> None:
    first, second = open_database(postgres_url), open_database(postgres_url)
    create_items(first)
    capture_triggers.install_capture(first, ["items"])
    second_done = threading.Event()

    def second_writer() -> None:
        second.execute("INSERT INTO items (id, name) VALUES (2, 'second')")
        second_done.set()

    with first.transaction():
        first.execute("INSERT INTO items (id, name) VALUES (1, 'first')")
        writer = threading.Thread(target=second_writer)
        writer.start()
        # The counter row lock holds the second writer until the first commits.
        assert not second_done.wait(0.5)
    writer.join(10)
    with pytest.raises(RuntimeError), first.transaction():
        first.execute("INSERT INTO items (id, name) VALUES (3, 'rolled back')")
        raise RuntimeError("no gap")
    first.execute("INSERT INTO items (id, name) VALUES (4, 'fourth')")
    changes = capture_triggers.read_changes(first, 0, ["items"], 10)
    assert [(c.seq, c.pk["id"]) for c in changes] == [(1, 1), (2, 2), (3, 4)]
    first.close()
    second.close()


def test_postgres_writers_queue_before_taking_row_locks(postgres_url: str) -> None:
    holder, waiter = open_database(postgres_url), open_database(postgres_url)
    create_items(holder)
    holder.execute("INSERT INTO items (id, name) VALUES (1, 'a'), (3, 'c')")
    capture_triggers.install_capture(holder, ["items"])
    errors: list[Exception] = []

    def update_row_one() -> None:
        try:
            waiter.execute("UPDATE items SET name = 'waiter' WHERE id = 1")
        except Exception as error:
            errors.append(error)

    with holder.transaction():
        holder.execute("UPDATE items SET name = 'holder' WHERE id = 3")  # holds the counter
        thread = threading.Thread(target=update_row_one)
        thread.start()
        time.sleep(0.5)  # the waiter now queues for the counter, holding no row lock
        # Had the waiter locked row 1 first, this would deadlock (detected after 1 s).
        holder.execute("UPDATE items SET name = 'holder' WHERE id = 1")
    thread.join(10)
    assert errors == []
    assert [
        (c.pk["id"], c.seq) for c in capture_triggers.read_changes(holder, 0, ["items"], 9)
    ] == [
        (3, 1),
        (1, 2),
        (1, 3),
    ]
    assert capture_triggers.current_row(holder, "items", {"id": 1})["name"] == "waiter"
    holder.close()
    waiter.close()


# -- review hook --------------------------------------------------------------------------
def test_review_decisions_follow_the_source(
    source: Database, source_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(capture_review.REGISTRY_VARIABLE, str(tmp_path / "registry"))
    capture_triggers.install_capture(source, ["items"])
    request = {"transactional_id": capture_review.transactional_id_for("t"), "partitions": []}
    assert capture_review.decide(request) == "unknown"  # not registered
    capture_review.register(request["transactional_id"], source_url, "t")
    assert capture_review.decide(request) == "abort"  # no batch ever began
    state = capture_review.read_state(source, "t")
    capture_review.begin_pending(source, "t", state.last_seq, 10)
    assert capture_review.decide(request) == "abort"  # produced, never recorded
    assert capture_review.decide(request) == "abort"  # and it stays aborted
    assert not capture_review.record_captured(source, "t", 10)  # too late to record
    assert capture_review.read_state(source, "t").last_seq == 0
    capture_review.begin_pending(source, "t", 0, 12)
    assert capture_review.record_captured(source, "t", 12)
    assert capture_review.decide(request) == "commit"  # recorded before the review
    assert capture_review.decide(request) == "commit"
    assert capture_review.read_state(source, "t") == capture_review.CaptureState(12, None, None)
    with pytest.raises(RuntimeError, match="moved"):
        capture_review.begin_pending(source, "t", 0, 20)


def test_review_is_unknown_when_the_source_is_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(capture_review.REGISTRY_VARIABLE, str(tmp_path / "registry"))
    transactional_id = capture_review.transactional_id_for("gone")
    capture_review.register(transactional_id, "postgresql://nobody@127.0.0.1:1/none", "gone")
    assert capture_review.decide({"transactional_id": transactional_id}) == "unknown"


# -- capture through a real broker ---------------------------------------------------------
def test_capture_ships_every_change_once_in_order(
    source: Database,
    source_url: str,
    review_broker: BrokerProcess,
    capsys: pytest.CaptureFixture[str],
) -> None:
    chooser, next_id = random.Random(7), [0]
    assert run_capture(source_url, ["items"], review_broker.bootstrap, "cap", once=True) == 0
    for _ in range(300):
        random_change(source, chooser, next_id)
    captured = run_capture(
        source_url, ["items"], review_broker.bootstrap, "cap", once=True, batch_size=40
    )
    for _ in range(50):
        random_change(source, chooser, next_id)
    captured += run_capture(source_url, ["items"], review_broker.bootstrap, "cap", once=True)
    shipped = read_topic(review_broker.bootstrap, "cap")
    assert "WARNING" not in capsys.readouterr().out
    assert [record.seq for record in shipped] == list(range(1, last_sequence(source) + 1))
    assert captured == len(shipped)
    assert final_state(shipped) == source_state(source, "items")
    assert all(r.value is None for r in shipped if r.op == "delete")
    # Captured log rows are dropped once committed.
    assert source.execute("SELECT count(*) FROM kshim_change_log") == [(0,)]


def test_capture_warns_when_the_broker_lacks_the_review_hook(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shared_broker: BrokerProcess,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(capture_review.REGISTRY_VARIABLE, str(tmp_path / "registry"))
    url = f"sqlite:///{tmp_path}/source.db"
    db = open_database(url)
    create_items(db)
    db.close()
    topic = f"nohook-{time.monotonic_ns()}"
    assert run_capture(url, ["items"], shared_broker.bootstrap, topic, once=True) == 0
    assert "WARNING: the broker's kshim.review.hook is None" in capsys.readouterr().out


def test_capture_polls_until_stopped(
    source: Database, source_url: str, review_broker: BrokerProcess
) -> None:
    capture_triggers.install_capture(source, ["items"])
    capture_review.read_state(source, "poll")
    stop = threading.Event()
    result: list[int] = []
    thread = threading.Thread(
        target=lambda: result.append(
            run_capture(source_url, ["items"], review_broker.bootstrap, "poll", False, stop)
        )
    )
    thread.start()
    chooser, next_id = random.Random(3), [0]
    try:
        for _ in range(30):
            random_change(source, chooser, next_id)
        deadline = time.monotonic() + 30
        while capture_review.read_state(source, "poll").last_seq < last_sequence(source):
            assert time.monotonic() < deadline, "capture did not catch up"
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(30)
    assert result == [last_sequence(source)]
    assert final_state(read_topic(review_broker.bootstrap, "poll")) == source_state(source, "items")


CRASH_SCRIPT = """
import os, sys
from spark_examples import capture, capture_review
real_record = capture_review.record_captured
def record_then_crash(*args):
    if sys.argv[1] == "after_record":
        real_record(*args)
    os._exit(9)  # the process dies here: no abort, no commit, no cleanup
capture_review.record_captured = record_then_crash
capture.run_capture(sys.argv[2], ["items"], sys.argv[3], "exact", True, batch_size=10)
"""


@pytest.mark.parametrize(
    ("crash_point", "verdict"), [("before_record", "abort"), ("after_record", "commit")]
)
def test_crash_around_recording_is_settled_by_review(
    source: Database,
    source_url: str,
    review_broker: BrokerProcess,
    crash_point: str,
    verdict: str,
) -> None:
    capture_triggers.install_capture(source, ["items"])
    chooser, next_id = random.Random(5), [0]
    for _ in range(30):
        random_change(source, chooser, next_id)
    crashed = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, crash_point, source_url, review_broker.bootstrap],
        cwd=REPOSITORY,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert crashed.returncode == 9, crashed.stderr.decode()
    recorded = capture_review.read_state(source, "exact")
    assert recorded.last_seq == (10 if crash_point == "after_record" else 0)
    assert read_topic(review_broker.bootstrap, "exact") == []  # half messages stay hidden
    run_capture(source_url, ["items"], review_broker.bootstrap, "exact", once=True)
    shipped = read_topic(review_broker.bootstrap, "exact")
    assert [record.seq for record in shipped] == list(range(1, last_sequence(source) + 1))
    assert final_state(shipped) == source_state(source, "items")
    assert f"review of kshim-capture-exact (new producer instance): {verdict}" in (
        review_broker.log_text()
    )


def _writer(url: str, seed: int, stop: threading.Event) -> None:
    # The application keeps changing the source while the capture is killed and restarted.
    db, chooser = open_database(url), random.Random(seed)
    next_id = [1_000_000]
    try:
        while not stop.is_set():
            random_change(db, chooser, next_id)
            time.sleep(0.003)
    finally:
        db.close()


def _kill_mid_stream(command: list[str], chooser: random.Random, log: Any) -> None:
    """Starts the capture, waits for a random number of batches, kills it (-9) soon after."""
    process = subprocess.Popen(command, cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=log)
    assert process.stdout is not None
    wanted, seen = chooser.randint(1, 6), 0
    deadline = time.monotonic() + 60
    try:
        while seen < wanted and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], 1.0)
            if ready:
                line = process.stdout.readline()
                log.write(line)
                seen += line.startswith(b"captured")
                if not line:
                    break
        time.sleep(chooser.uniform(0.0, 0.02))  # somewhere inside the next batch
    finally:
        process.kill()
        process.wait(30)
        process.stdout.close()
    assert seen == wanted, "the capture did not make progress"


@pytest.mark.slow
def test_capture_killed_at_random_points_loses_and_doubles_nothing(
    source: Database, source_url: str, review_broker: BrokerProcess, tmp_path: Path
) -> None:
    chooser, next_id = random.Random(11), [0]
    command = [
        sys.executable, "-m", "spark_examples.capture", "--source", source_url,
        "--tables", "items", "--bootstrap", review_broker.bootstrap, "--topic", "crash",
        "--batch-size", "25", "--transaction-timeout-ms", "3000",
    ]  # fmt: skip
    capture_triggers.install_capture(source, ["items"])
    stop = threading.Event()
    writer = threading.Thread(target=_writer, args=(source_url, 5, stop))
    writer.start()
    with (tmp_path / "capture.log").open("ab") as log:
        try:
            for _round in range(8):
                for _ in range(150):  # a backlog, so that the capture is busy when killed
                    random_change(source, chooser, next_id)
                _kill_mid_stream(command, chooser, log)
        finally:
            stop.set()
            writer.join(30)
        done = subprocess.run([*command, "--once"], cwd=REPOSITORY, stdout=log, stderr=log,
                              timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, (tmp_path / "capture.log").read_text()
    shipped = read_topic(review_broker.bootstrap, "crash")
    assert last_sequence(source) > 1000
    assert [record.seq for record in shipped] == list(range(1, last_sequence(source) + 1))
    assert final_state(shipped) == source_state(source, "items")
    # Kills left transactions open, which the next instance's InitProducerId reviewed.
    assert "review of kshim-capture-crash" in review_broker.log_text()
