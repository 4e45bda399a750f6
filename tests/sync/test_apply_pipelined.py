"""The apply job's pipelined writes (apply/pipelined.py) and where a started job reads from
(job.starting_offsets, job.run_checkpoint), without Spark: real threads, a real SQLite
destination and the pytest plugin's kshim broker."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from spark_examples.apply import job
from spark_examples.apply.job import RUN_PREFIX, ApplyOptions, run_checkpoint, starting_offsets
from spark_examples.apply.pipelined import ApplyQuery, PipelinedWrites
from spark_examples.apply.sink import STORE_NEXT_OFFSET, ApplyError, SourceRecord
from spark_examples.databases import open_database

TIMEOUT_S = 20.0


def batch(offset: int) -> list[SourceRecord]:
    return [SourceRecord(topic="t", partition=0, offset=offset, key=b"k", value=None)]


def test_writes_run_in_order_one_at_a_time_beside_the_caller() -> None:
    written: list[int] = []
    release = threading.Event()

    def write(records: list[SourceRecord], batch_id: int) -> None:
        assert release.wait(TIMEOUT_S)
        written.append(batch_id)

    writes = PipelinedWrites(write)
    writes.submit(batch(0), 0)
    assert written == []  # the caller went on while batch 0 waits to be written
    release.set()
    writes.submit(batch(1), 1)  # waits for batch 0 first
    assert written == [0]
    writes.close()
    assert written == [0, 1]


def test_a_failed_write_is_raised_before_the_next_batch_is_written() -> None:
    written: list[int] = []

    def write(records: list[SourceRecord], batch_id: int) -> None:
        if batch_id == 1:
            raise ApplyError(records[0], 4, ValueError("a stricter column"))
        written.append(batch_id)

    writes = PipelinedWrites(write)
    writes.submit(batch(0), 0)
    writes.submit(batch(1), 1)
    with pytest.raises(ApplyError, match="offset 1"):
        writes.submit(batch(2), 2)
    assert written == [0]
    writes.close()  # nothing in flight any more


def test_the_last_write_failing_is_told_at_once_and_raised_when_closing() -> None:
    def write(records: list[SourceRecord], batch_id: int) -> None:
        raise ApplyError(records[0], 1, ValueError("no such column"))

    failed = threading.Event()
    writes = PipelinedWrites(write)
    writes.on_failure = failed.set  # the job stops its query: no next batch may ever come
    writes.submit(batch(7), 0)
    assert failed.wait(TIMEOUT_S)
    with pytest.raises(ApplyError, match="offset 7"):
        writes.close()


class _InterruptedQuery:
    """The part of Spark's StreamingQuery that ``job.run`` uses, as a query whose wait the
    user interrupted (Ctrl-C) looks: no failure of Spark's own."""

    isActive = True  # noqa: N815 (StreamingQuery's name)
    lastProgress = None  # noqa: N815

    def awaitTermination(self, timeout: float | None = None) -> None:  # noqa: N802
        raise KeyboardInterrupt

    def stop(self) -> None:
        self.isActive = False

    def exception(self) -> None:
        return None


def test_an_interrupted_job_exits_non_zero_when_its_last_write_failed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def write(records: list[SourceRecord], batch_id: int) -> None:
        raise ApplyError(records[0], 1, ValueError("no such column"))

    writes = PipelinedWrites(write)
    writes.submit(batch(9), 0)  # in flight when the user interrupts the job
    query = ApplyQuery(_InterruptedQuery(), writes)  # type: ignore[arg-type]
    monkeypatch.setattr(job, "start_apply", lambda *args, **kwargs: query)
    options = ApplyOptions("127.0.0.1:1", "t", "sqlite:///unused.db", "unused")
    assert job.run(None, options) == 1  # type: ignore[arg-type]
    assert "offset 9" in capsys.readouterr().err


def _topic(bootstrap: str, partitions: int) -> str:
    name = f"pipelined-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(TIMEOUT_S)
    return name


def test_a_job_starts_where_its_destination_left_off(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = _topic(kafka_bootstrap, 3)
    dest = f"sqlite:///{tmp_path}/dest.db"
    options = ApplyOptions(kafka_bootstrap, topic, dest, str(tmp_path / "checkpoint"))
    assert starting_offsets(options) == "earliest"  # a new destination: the whole topic
    database = open_database(dest)
    try:
        with database.transaction():
            database.execute(STORE_NEXT_OFFSET, (topic, 1, 42))
            database.execute(STORE_NEXT_OFFSET, ("another-topic", 0, 7))
    finally:
        database.close()
    # Every partition named, as Spark requires: the held one at its offset, others earliest.
    assert json.loads(starting_offsets(options)) == {topic: {"0": -2, "1": 42, "2": -2}}


def test_each_run_checkpoints_in_a_directory_of_its_own(tmp_path: Path) -> None:
    parent = tmp_path / "checkpoint"
    first = Path(run_checkpoint(str(parent)))
    (first / "commits").mkdir(parents=True)
    second = Path(run_checkpoint(str(parent)))
    assert first.parent == second.parent == parent and first != second
    assert second.name.startswith(RUN_PREFIX)
    assert not first.exists()  # an earlier run's checkpoint cannot be resumed from
    uri = run_checkpoint("hdfs:///checkpoints/replica/")
    assert uri.startswith(f"hdfs:///checkpoints/replica/{RUN_PREFIX}")
