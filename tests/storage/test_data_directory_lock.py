"""One broker per data directory: the ``.lock`` file's flock, its holder, its release."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.full_view.worker import NotTheLockHolder, applying_handler
from kshim.protocol.record_batch import read_header
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.files.data_directory_lock import DataDirectoryInUse, DataDirectoryLock, held_by
from kshim.storage.interface import TopicPartition

ORDERS = TopicPartition("orders", 0)
HOLD_LOCK = """
import sys, time
from kshim.storage.files.data_directory_lock import DataDirectoryLock
lock = DataDirectoryLock.acquire(sys.argv[1])
print("locked", flush=True)
time.sleep(60)
"""


def test_a_second_lock_in_the_same_process_is_refused_naming_the_holder(tmp_path: Path) -> None:
    lock = DataDirectoryLock.acquire(str(tmp_path))
    with pytest.raises(DataDirectoryInUse) as refused:
        DataDirectoryLock.acquire(str(tmp_path))
    assert str(refused.value) == (
        f"data directory {tmp_path} is in use by another kshim (pid {os.getpid()})"
    )
    assert held_by(str(tmp_path), os.getpid())
    lock.release()
    assert not lock.held
    assert not held_by(str(tmp_path), os.getpid())
    DataDirectoryLock.acquire(str(tmp_path)).release()


def test_a_lock_held_by_another_process_is_refused_and_freed_by_its_death(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(DataDirectoryInUse, match=f"pid {holder.pid}"):
            DataDirectoryLock.acquire(str(tmp_path))
        assert held_by(str(tmp_path), holder.pid)
        assert not held_by(str(tmp_path), os.getpid())
    finally:
        holder.kill()  # kill -9: the kernel drops the flock, the stale file stays
        holder.wait(10)
    assert (tmp_path / ".lock").read_text().strip() == str(holder.pid)
    assert not held_by(str(tmp_path), holder.pid)
    lock = DataDirectoryLock.acquire(str(tmp_path))
    assert (tmp_path / ".lock").read_text().strip() == str(os.getpid())
    lock.release()


def test_a_directory_that_cannot_hold_the_lock_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        DataDirectoryLock.acquire(str(tmp_path / "missing"))


def _tree(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


async def _append(broker: Broker, value: bytes) -> int:
    log = broker.topics.log(ORDERS)
    assert log is not None
    batch = bytearray(build_batch([Record(0, 0, b"k", value)], BatchSpec()))
    offset = log.append(batch, read_header(batch))
    await log.wait_durable(offset)
    return offset


async def test_a_second_broker_on_a_directory_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    settings = {"log.dirs": str(tmp_path), "kshim.full.view.process": "false"}
    first = Broker(BrokerConfig.load([settings]))
    await first.start()
    await first.topics.create(ORDERS.topic, 1, {})
    assert await _append(first, b"one") == 0
    before = _tree(tmp_path)
    with pytest.raises(DataDirectoryInUse, match=f"pid {os.getpid()}"):
        Broker(BrokerConfig.load([settings]))
    assert _tree(tmp_path) == before
    assert await _append(first, b"two") == 1
    await first.close()
    second = Broker(BrokerConfig.load([settings]))  # the lock went with the first's close
    await second.start()
    log = second.topics.log(ORDERS)
    assert log is not None
    assert log.log_end_offset == 2
    assert await _append(second, b"three") == 2
    await second.close()


def test_the_view_child_writes_only_for_a_parent_holding_the_lock(tmp_path: Path) -> None:
    view_dir = str(tmp_path / "full_view")
    with pytest.raises(NotTheLockHolder):
        applying_handler(view_dir, str(tmp_path), str(os.getpid()))  # nobody holds it
    lock = DataDirectoryLock.acquire(str(tmp_path))
    try:
        with pytest.raises(NotTheLockHolder):
            applying_handler(view_dir, str(tmp_path), str(os.getpid() + 1))  # not the holder
    finally:
        lock.release()
