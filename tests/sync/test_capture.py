"""Capture on real sources and a real kshim broker: triggers, review hook, capture.

The broker runs the capture's review hook and finds the source through
``KSHIM_CAPTURE_REGISTRY`` (fixture ``review_broker`` in conftest.py).
"""

from __future__ import annotations

import importlib
import random
import threading
import time
from pathlib import Path

import pytest

from kshim.testing import BrokerProcess
from spark_examples.capture import review as capture_review
from spark_examples.capture import triggers as capture_triggers
from spark_examples.capture.shipper import run_capture
from spark_examples.databases import Database, open_database
from tests.sync.capture_helpers import (
    create_items,
    final_state,
    last_sequence,
    random_change,
    read_topic,
    source_state,
)


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


def test_review_hook_setting_names_the_hook() -> None:
    # The capture warns unless the broker's kshim.review.hook is exactly this string.
    module_name, function_name = capture_review.REVIEW_HOOK.split(":")
    hook = getattr(importlib.import_module(module_name), function_name)
    assert hook is capture_review.decide


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
