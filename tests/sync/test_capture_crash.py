"""Capture killed (-9) at random and at exact points: nothing lost, nothing doubled.

The broker runs the capture's review hook (``review_broker`` in conftest.py); a killed
capture's open transaction is settled by that review when the next instance starts.
"""

from __future__ import annotations

import random
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kshim.client.wire import WireConnection
from kshim.testing import BrokerProcess
from spark_examples.capture import review as capture_review
from spark_examples.capture import triggers as capture_triggers
from spark_examples.capture.shipper import run_capture
from spark_examples.databases import Database, open_database
from tests.sync.capture_helpers import (
    final_state,
    last_sequence,
    random_change,
    read_topic,
    source_state,
)

REPOSITORY = Path(__file__).resolve().parents[2]
LIST_TRANSACTIONS = 66

CRASH_SCRIPT = """
import os, sys
from spark_examples.capture import review, shipper
real_record = review.record_captured
def record_then_crash(*args):
    if sys.argv[1] == "after_record":
        real_record(*args)
    os._exit(9)  # the process dies here: no abort, no commit, no cleanup
review.record_captured = record_then_crash
shipper.run_capture(sys.argv[2], ["items"], sys.argv[3], "exact", True, batch_size=10)
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


def _wait_for_open_transaction(port: int, transactional_id: str, timeout_s: float) -> bool:
    """Polls the broker's ListTransactions until ``transactional_id`` is Ongoing (its half
    messages written, no EndTxn yet); False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    with WireConnection("127.0.0.1", port) as connection:
        while time.monotonic() < deadline:
            answer = connection.call(
                LIST_TRANSACTIONS, 0, {"state_filters": ["Ongoing"], "producer_id_filters": []}
            )
            if any(t.transactional_id == transactional_id for t in answer.transaction_states):
                return True
    return False


def _kill_mid_stream(
    command: list[str], chooser: random.Random, log: Any, inside_transaction: tuple[int, str] | None
) -> None:
    """Starts the capture, waits for a random number of batches, kills it (-9) soon after:
    at a random moment, or, given (broker port, transactional id), while the broker holds
    its transaction open, so that the next instance's InitProducerId has one to review."""
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
        if inside_transaction is not None:
            assert _wait_for_open_transaction(*inside_transaction, timeout_s=30)
        else:
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
            for round_number in range(8):
                for _ in range(150):  # a backlog, so that the capture is busy when killed
                    random_change(source, chooser, next_id)
                # Every other kill waits for an open transaction: a random moment often
                # falls between transactions, the more so the faster the broker answers.
                open_one = (review_broker.port, "kshim-capture-crash")
                _kill_mid_stream(command, chooser, log, open_one if round_number % 2 else None)
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


def test_capture_command_stops_cleanly_on_sigterm(
    source: Database, source_url: str, review_broker: BrokerProcess
) -> None:
    capture_triggers.install_capture(source, ["items"])
    chooser, next_id = random.Random(2), [0]
    for _ in range(20):
        random_change(source, chooser, next_id)
    command = [
        sys.executable, "-m", "spark_examples.capture", "--source", source_url,
        "--tables", "items", "--bootstrap", review_broker.bootstrap, "--topic", "term",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPOSITORY, stdout=subprocess.PIPE)
    assert process.stdout is not None
    try:
        first = process.stdout.readline()  # blocks until the first batch is shipped
        assert first.startswith(b"captured"), first
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
    assert process.returncode == 0
    assert b"capture stopped" in output
    shipped = read_topic(review_broker.bootstrap, "term")
    assert [record.seq for record in shipped] == list(range(1, last_sequence(source) + 1))


@pytest.mark.slow
def test_broker_killed_mid_stream_loses_and_doubles_nothing(
    source: Database, source_url: str, review_broker: BrokerProcess
) -> None:
    capture_triggers.install_capture(source, ["items"])
    stop_capture, stop_writer = threading.Event(), threading.Event()
    captured: list[int] = []
    capture = threading.Thread(
        target=lambda: captured.append(
            run_capture(
                source_url,
                ["items"],
                review_broker.bootstrap,
                "brokerkill",
                False,
                stop_capture,
                batch_size=25,
                transaction_timeout_ms=5000,
            )
        )
    )
    writer = threading.Thread(target=_writer, args=(source_url, 8, stop_writer))
    capture.start()
    writer.start()
    try:
        for _kill in range(2):
            time.sleep(2.0)
            review_broker.kill()  # kill -9 while batches are in flight
            time.sleep(0.5)
            review_broker.start()
        time.sleep(2.0)
    finally:
        stop_writer.set()
        writer.join(30)
    deadline = time.monotonic() + 120
    while capture_review.read_state(source, "brokerkill").last_seq < last_sequence(source):
        assert time.monotonic() < deadline, "capture did not catch up after the broker restarts"
        time.sleep(0.2)
    stop_capture.set()
    capture.join(60)
    shipped = read_topic(review_broker.bootstrap, "brokerkill")
    assert last_sequence(source) > 500
    assert [record.seq for record in shipped] == list(range(1, last_sequence(source) + 1))
    assert final_state(shipped) == source_state(source, "items")
