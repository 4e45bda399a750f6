"""A full disk on a real filesystem: a size-limited tmpfs the test mounts for the broker's
data directory (so it needs root; skipped with the reason otherwise).

What a producer and an operator see: produce requests of 64 one-KiB records until the disk
is full are each answered, acknowledged or refused with KAFKA_STORAGE_ERROR, never left
waiting; the broker then stops with one line saying why and an alarm, as Kafka halts a
broker whose every log directory has failed; started again once the disk has room, it
serves every record it acknowledged, at its offset, and takes new ones.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kshim.client.wire import ConnectionClosedError, WireConnection, connect
from kshim.protocol.errors import ErrorCode
from kshim.testing import BrokerExited, BrokerProcess
from tests.bad_input_support import PRODUCE, make_batch, produce_fields

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FILESYSTEM_MB = 32
ROOMY_MB = 256
RECORDS_PER_BATCH = 64
RECORD_BYTES = 1024
MAX_BATCHES = FILESYSTEM_MB * 1024 // RECORDS_PER_BATCH * 4  # well past full
TOPIC = "filling"
STOP_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 60.0


def _mount(directory: Path, size_mb: int, *extra: str) -> subprocess.CompletedProcess[str]:
    options = ",".join([*extra, f"size={size_mb}m"])
    return subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A FILESYSTEM_MB tmpfs mounted for the test, unmounted after it."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a size-limited tmpfs needs root and mount(8)")
    directory = tmp_path / "small"
    directory.mkdir()
    mounted = _mount(directory, FILESYSTEM_MB)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False, timeout=30)


def value(batch: int, index: int) -> bytes:
    return f"{batch}:{index}:".encode().ljust(RECORD_BYTES, b"x")


def produce_batch(conn: WireConnection, number: int) -> tuple[int, int]:
    """Batch ``number`` of RECORDS_PER_BATCH records: (the error code, its base offset)."""
    batch = make_batch([value(number, i) for i in range(RECORDS_PER_BATCH)])
    response = conn.call(PRODUCE, 9, produce_fields({(TOPIC, 0): batch}))
    (answer,) = response.responses[0].partition_responses
    return answer.error_code, answer.base_offset


def fill(bootstrap: str) -> tuple[dict[int, int], int]:
    """Produces batches until one is refused; returns (base offset of each acknowledged
    batch, by batch number) and the refusal's error code (-1: the connection closed
    first, never answered)."""
    acknowledged: dict[int, int] = {}
    with connect(bootstrap, 30.0) as conn:
        for number in range(MAX_BATCHES):
            try:
                code, base = produce_batch(conn, number)
            except ConnectionClosedError:
                return acknowledged, -1
            if code != ErrorCode.none:
                return acknowledged, code
            acknowledged[number] = base
    return acknowledged, ErrorCode.none


def read_back(bootstrap: str, count: int) -> dict[int, bytes]:
    """The first ``count`` records of the topic, by offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-full",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    found: dict[int, bytes] = {}
    with contextlib.closing(consumer):
        for _ in range(int(READ_TIMEOUT_S)):
            for message in consumer.consume(10_000, 1.0):
                offset, data = message.offset(), message.value()
                if message.error() is None and offset is not None and data is not None:
                    found[offset] = data
            if len(found) >= count:
                break
    return found


def test_a_full_disk_refuses_produces_stops_the_broker_and_loses_nothing(
    small_filesystem: Path, tmp_path: Path
) -> None:
    broker = BrokerProcess(small_filesystem / "data", ["kshim.metrics.listen="])
    broker.log_path = str(tmp_path / "broker.log")  # not on the filesystem that fills
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        acknowledged, refusal = fill(broker.bootstrap)
        assert refusal == ErrorCode.kafka_storage_error, broker.log_tail()
        assert acknowledged, "the disk filled before the first batch"
        assert_stopped_for_the_full_disk(broker)

        # Started again on the disk still full: it stops again for the same reason, as
        # soon as recovery or the next produce writes (whichever fails first).
        restart_on_the_full_disk(broker)

        assert _mount(small_filesystem, ROOMY_MB, "remount").returncode == 0
        broker.start()
        found = assert_all_kept(broker.bootstrap, acknowledged)
        more, code = fill_one(broker.bootstrap)
        assert code == ErrorCode.none
        assert more == max(found) + 1  # appended right after what was kept
    finally:
        broker.stop()


def restart_on_the_full_disk(broker: BrokerProcess) -> None:
    before = len(broker.log_text())
    try:
        broker.start()
    except BrokerExited as exited:  # recovery's own write failed before it listened
        assert "exited with status 1" in str(exited)
        assert_said_why(broker.log_text()[before:])
        return
    with contextlib.suppress(OSError):  # it may stop before it answers
        assert fill_one(broker.bootstrap)[1] == ErrorCode.kafka_storage_error
    assert_stopped_for_the_full_disk(broker, before)


def assert_stopped_for_the_full_disk(broker: BrokerProcess, log_from: int = 0) -> None:
    assert broker.process is not None
    assert broker.process.wait(STOP_TIMEOUT_S) == 1
    broker.process = None
    assert_said_why(broker.log_text()[log_from:])


def assert_said_why(log: str) -> None:
    assert "stopped: a write to the log failed (no space left on device)" in log
    assert "kind=storage_failed" in log
    assert "Traceback" not in log


def assert_all_kept(bootstrap: str, acknowledged: dict[int, int]) -> dict[int, bytes]:
    """Every acknowledged record is there, at its offset; returns what was read."""
    found = read_back(bootstrap, len(acknowledged) * RECORDS_PER_BATCH)
    for number, base in acknowledged.items():
        for index in range(RECORDS_PER_BATCH):
            assert found.get(base + index) == value(number, index), (number, index)
    return found


def fill_one(bootstrap: str) -> tuple[int, int]:
    """One more batch: (its base offset, the error code)."""
    with connect(bootstrap, 30.0) as conn:
        code, base = produce_batch(conn, -1)
    return base, code
