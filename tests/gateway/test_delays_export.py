"""Moving a kshim's pending delayed records to a Kafka cluster (``kshim delays --export-to``,
kshim/cli/delays_export.py): a broker with records pending (one due at a time, one after a
delay, one cancelled) is stopped, its schedule produced to the cluster's ``T.delay`` through
a gateway, and a gateway given ``--delay`` delivers each pending one to ``T`` once, not
before the due time the broker had, with its key, value and headers; the cancelled one
never."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kshim.broker.delay.naming import CANCEL_HEADER, DELAY_MS_HEADER, DELIVER_AT_HEADER
from kshim.testing import BrokerProcess, KafkaProcess
from tests.gateway.delay_clients import (
    TAKEN_OVER,
    create_topics,
    delay_gateway,
    now_ms,
    read_arrivals,
    unique,
    wait_for_log,
)

pytestmark = pytest.mark.timeout(120)
AHEAD_MS = 8_000  # far enough for the broker to stop and the export to run first
WAIT_S = 20.0


def _schedule_on_kshim(bootstrap: str, topic: str, start_ms: int) -> dict[bytes, int]:
    """Delayed records produced to the broker's ``topic``.delay: key -> due time."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    due_a, due_c = start_ms + AHEAD_MS, start_ms + AHEAD_MS
    delay = str(AHEAD_MS + 1_000).encode()
    now = 0  # librdkafka's "stamp it when produced"
    sends: list[tuple[bytes, bytes | None, list[tuple[str, str | bytes | None]], int]] = [
        (b"a", b"at", [(DELIVER_AT_HEADER, str(due_a).encode()), ("trace", b"t1")], now),
        (b"b", b"after", [(DELAY_MS_HEADER, delay)], start_ms),
        (b"c", b"cancelled", [(DELIVER_AT_HEADER, str(due_c).encode())], now),
        (b"c", None, [(CANCEL_HEADER, b"")], now),
    ]
    for key, value, headers, timestamp in sends:
        producer.produce(
            f"{topic}.delay", value=value, key=key, headers=headers, timestamp=timestamp
        )
        assert producer.flush(20) == 0
    return {b"a": due_a, b"b": start_ms + AHEAD_MS + 1_000}


def _wait_filed(data_dir: Path, topic: str, pending: int) -> None:
    """Until ``kshim delays`` shows ``pending`` records of ``topic`` filed in the schedule
    (the broker files what reaches ``T.delay`` a moment later; docs/gateway.md)."""
    command = [sys.executable, "-m", "kshim", "delays", "--data-dir", str(data_dir), "--json"]
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
        rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        if any(row["topic"] == topic and row["pending"] >= pending for row in rows):
            return
        time.sleep(0.1)
    raise AssertionError(f"the broker did not file {pending} records of {topic}")


def test_pending_delays_move_to_kafka_and_fall_due_when_they_would_have(
    kafka_upstream: KafkaProcess, tmp_path: Path
) -> None:
    topic = unique("moved")
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        due = _schedule_on_kshim(broker.bootstrap, topic, now_ms())
        _wait_filed(tmp_path / "data", topic, 3)  # the cancelled one counts until due
    finally:
        broker.stop()
    asyncio.run(create_topics(kafka_upstream.bootstrap, [topic], 1))
    gateway = delay_gateway(str(tmp_path), kafka_upstream.bootstrap, unique("moved-group"),
                            [f"{topic}.delay"])  # fmt: skip
    gateway.start()
    try:
        wait_for_log(gateway, TAKEN_OVER)
        command = [sys.executable, "-m", "kshim", "delays", "--data-dir", str(tmp_path / "data"),
                   "--export-to", gateway.bootstrap]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert "exported 2 pending delayed records" in done.stdout
        arrived = asyncio.run(read_arrivals(kafka_upstream.bootstrap, topic, 2, linger_s=1.0))
    finally:
        gateway.stop()
    assert sorted(record.key for record in arrived if record.key) == [b"a", b"b"]
    for record in arrived:
        assert record.arrived_ms >= due[record.key or b""]  # never before its due time
        assert record.header(DELIVER_AT_HEADER) == str(due[record.key or b""]).encode()
    first = next(record for record in arrived if record.key == b"a")
    assert (first.value, first.header("trace")) == (b"at", b"t1")
