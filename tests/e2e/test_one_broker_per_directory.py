"""Two ``kshim serve`` on one data directory: the second is refused at once and the first's
acknowledged records stay where it acknowledged them, before and after a restart."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

from kshim.testing import BrokerProcess, free_port

with warnings.catch_warnings():
    # kafka-python 3.0.12 reads its schemas with a deprecated importlib call at import.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

TOPIC = "orders"
REFUSAL_TIMEOUT_S = 30


def _produce(bootstrap: str, values: list[bytes]) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        futures = [producer.send(TOPIC, value) for value in values]
        return [future.get(timeout=20).offset for future in futures]
    finally:
        producer.close(timeout=10)


def _read_all(bootstrap: str) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partition = TopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        end = consumer.end_offsets([partition])[partition]
        found: list[tuple[int, bytes]] = []
        for _ in range(40):
            for records in consumer.poll(timeout_ms=500).values():
                found += [(record.offset, record.value) for record in records]
            if len(found) >= end:
                break
        return found
    finally:
        consumer.close()


def test_a_second_broker_on_the_directory_exits_naming_the_first(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = BrokerProcess(data_dir, ["auto.create.topics.enable=true"]).start()
    try:
        assert _produce(first.bootstrap, [b"a", b"b", b"c"]) == [0, 1, 2]
        assert first.process is not None
        second = subprocess.run(
            [sys.executable, "-m", "kshim", "serve", "--listen", f"127.0.0.1:{free_port()}",
             "--data-dir", str(data_dir)],
            capture_output=True, text=True, timeout=REFUSAL_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert second.returncode == 1
        assert second.stdout == ""
        assert second.stderr.splitlines() == [
            f"kshim: error: data directory {data_dir} is in use by another kshim "
            f"(pid {first.process.pid})"
        ]
        assert _produce(first.bootstrap, [b"d"]) == [3]
        first.stop()
        first.start()
        assert _read_all(first.bootstrap) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    finally:
        first.stop()
