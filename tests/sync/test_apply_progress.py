"""The apply job's progress committed to a consumer group of its own (apply/progress.py), so
the broker reports its lag; a broker that cannot take the commit costs a warning, never
the batch. A real kshim broker (the pytest plugin's), no Spark: the job calls the same
function after each applied batch."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from kshim.client.group_admin import GroupAdmin
from kshim.testing import free_port
from spark_examples.apply.progress import default_group, next_offsets, report_progress
from spark_examples.apply.sink import SourceRecord

TIMEOUT_S = 20.0


def record(topic: str, partition: int, offset: int) -> SourceRecord:
    return SourceRecord(topic=topic, partition=partition, offset=offset, key=b"k", value=None)


def test_each_partition_goes_on_after_its_last_applied_record() -> None:
    records = [record("t", 0, 4), record("t", 1, 9), record("t", 0, 6), record("u", 0, 0)]
    assert next_offsets(records) == {"t": {0: 7, 1: 10}, "u": {0: 1}}


def test_the_group_differs_per_destination_and_holds_no_password() -> None:
    first = default_group("postgresql://sync:secret@db/replica")
    assert first.startswith("kshim-apply-") and "secret" not in first
    assert first == default_group("postgresql://sync:secret@db/replica")
    assert first != default_group("sqlite:////var/lib/replica.db")


def test_the_broker_reports_the_groups_committed_offsets(kafka_bootstrap: str) -> None:
    topic, group = "apply-progress", "kshim-apply-test"
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all"})
    for _ in range(5):
        producer.produce(topic, value=b"change", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    assert report_progress(kafka_bootstrap, group, [record(topic, 0, 0), record(topic, 0, 2)])
    with GroupAdmin.connected(kafka_bootstrap, TIMEOUT_S) as admin:
        assert admin.committed(group, topic, [0]) == {0: 3}
    assert report_progress(kafka_bootstrap, group, [record(topic, 0, 4)])
    with GroupAdmin.connected(kafka_bootstrap, TIMEOUT_S) as admin:
        assert admin.committed(group, topic, [0]) == {0: 5}


def test_a_broker_that_is_gone_costs_a_warning_not_the_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    unreachable = f"127.0.0.1:{free_port()}"
    assert not report_progress(unreachable, "kshim-apply-test", [record("t", 0, 0)])
    assert "apply progress not reported" in caplog.text
