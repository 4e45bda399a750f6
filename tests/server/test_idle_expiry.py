"""``connections.max.idle.ms``: a connection that reads nothing and is owed no answer for
that long is closed by the broker, as Kafka's network layer does (server/idle_connections.py);
one that keeps talking, or waits on a long-polling Fetch, is not; a negative limit closes
none. Against a broker process, over the wire, as a client sees it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from kshim.client.wire import WireConnection, connect
from kshim.testing import BrokerProcess, fetch_fields

LIMIT_MS = 400
API_VERSIONS, FETCH, CREATE_TOPICS = (18, 3), (1, 11), (19, 7)
WAIT_S = 10.0


@contextlib.contextmanager
def _idle_broker(tmp_path: Path, limit_ms: int) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", [f"connections.max.idle.ms={limit_ms}"])
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def _answered(connection: WireConnection) -> bool:
    return connection.call(*API_VERSIONS, {}).error_code == 0


def test_a_quiet_connection_is_closed_after_the_limit(tmp_path: Path) -> None:
    with _idle_broker(tmp_path, LIMIT_MS) as broker:
        quiet = connect(broker.bootstrap, WAIT_S)
        talking = connect(broker.bootstrap, WAIT_S)
        assert _answered(quiet)
        went_quiet = time.monotonic()
        # Spoken to every quarter of the limit for three limits: never closed.
        while time.monotonic() - went_quiet < 3 * LIMIT_MS / 1000:
            assert _answered(talking)
            time.sleep(LIMIT_MS / 4000)
        assert quiet.wait_closed(WAIT_S) == b""
        assert _answered(talking)
        # Not before the limit: closed after it (and within a few sweeps of it).
        quiet = connect(broker.bootstrap, WAIT_S)
        assert _answered(quiet)
        went_quiet = time.monotonic()
        quiet.wait_closed(WAIT_S)
        assert LIMIT_MS / 1000 <= time.monotonic() - went_quiet < 3 * LIMIT_MS / 1000 + 1


def test_a_long_polling_fetch_keeps_its_connection(tmp_path: Path) -> None:
    with _idle_broker(tmp_path, LIMIT_MS) as broker:
        connection = connect(broker.bootstrap, WAIT_S)
        spec = {"name": "quiet", "num_partitions": 1, "replication_factor": 1, "configs": []}
        created = connection.call(*CREATE_TOPICS, {"topics": [spec], "timeout": 5000})
        assert [topic.error_code for topic in created.topics] == [0]
        started = time.monotonic()
        # Waits 3 limits for a record that never comes: answered, empty, when the wait ends.
        answer = connection.call(*FETCH, fetch_fields("quiet", 0, 0, 3 * LIMIT_MS))
        assert time.monotonic() - started >= 3 * LIMIT_MS / 1000 * 0.9
        assert answer.responses[0].partitions[0].error_code == 0
        assert _answered(connection)


def test_a_negative_limit_closes_no_connection(tmp_path: Path) -> None:
    with _idle_broker(tmp_path, -1) as broker:
        connection = connect(broker.bootstrap, WAIT_S)
        assert _answered(connection)
        time.sleep(3 * LIMIT_MS / 1000)
        assert _answered(connection)
