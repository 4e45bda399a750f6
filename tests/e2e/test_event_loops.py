"""The broker on each event loop it can run on (``kshim.event.loop``): uvloop, the default,
and asyncio's own. With no in-memory tail every fetch answer is sent from the segment file,
so both ways of sending a file region are exercised (asyncio's loop.sendfile; os.sendfile
and a queued remainder on uvloop), with answers larger than a socket's send buffer."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from kshim.testing import running_broker
from tests.e2e.client_helpers import unique_topic
from tests.e2e.test_python_clients import confluent_read_all, kafka_python_read_all

RECORDS = 3000
VALUE_BYTES = 3000  # 9 MB in all: several 1 MiB fetch answers, each from the file


def value_of(index: int) -> bytes:
    return index.to_bytes(4, "big") * (VALUE_BYTES // 4)


def produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for index in range(RECORDS):
        producer.produce(topic, key=b"%d" % index, value=value_of(index))
        producer.poll(0)
    assert producer.flush(30) == 0


@pytest.mark.parametrize("loop_name", ["uvloop", "asyncio"])
def test_fetches_from_the_segment_file_on_each_event_loop(loop_name: str) -> None:
    settings = [f"kshim.event.loop={loop_name}", "kshim.memtable.bytes=0"]
    with running_broker(settings) as broker:
        topic = unique_topic(f"loop-{loop_name}")
        produce(broker.bootstrap, topic)
        expected = [value_of(index) for index in range(RECORDS)]

        for read_all in (confluent_read_all, kafka_python_read_all):
            records = read_all(broker.bootstrap, topic, RECORDS)
            assert [record.value for record in records] == expected, read_all.__name__
        assert f"event loop: {loop_name}" in broker.log_text()
