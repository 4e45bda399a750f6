"""Delayed delivery through ``T.delay`` with real clients against a real ``kshim serve``.

- confluent-kafka (idempotent): records due at ``kshim-deliver-at``, ``kshim-delay-ms``
  after their timestamp, or in the past arrive in ``T`` in due order, never before their
  due time, at new offsets, with key, value, headers and timestamp kept and
  ``kshim-delayed-from`` = ``partition:offset`` in ``T.delay``; a LogAppendTime topic
  stamps the delivery instead;
- kafka-python (gzip) and aiokafka producers deliver through ``T.delay`` too, partition p
  of ``T.delay`` to partition p of ``T``; ``kshim-delay-ms`` on a record without a
  timestamp is refused;
- ``kshim-delay-cancel`` removes every pending record with its key (from any partition,
  not those after it), ``kshim-delay-replace`` replaces them: the replaced value arrives
  once, the cancelled key never;
- each invalid record (no due time, a malformed one, both headers, cancel or replace
  without a key, due beyond ``kshim.delay.max.ms``) has its whole batch refused with
  INVALID_RECORD, nothing of it stored, and the broker goes on; a broker with
  ``kshim.delay.max.ms=60000`` refuses +120 s and accepts +30 s;
- a transactional producer's delayed records are scheduled when it commits, an aborted
  transaction's never;
- ``T.delay`` is write-only (Fetch and ListOffsets: INVALID_TOPIC_EXCEPTION), left out
  of the listing of all topics, read-only in its configs, not deletable, grows with ``T``,
  and no topic can be created under a ``.delay`` name;
- ``T.full`` shows a delivered record at its delivered offset;
- kill -9 before or while 20,000 records are delivered, then a restart: each arrives
  exactly once, in due order;
- a record due in a day is still pending after a clean restart and a kill -9, while one
  due now is delivered;
- deleting ``T`` deletes its pending records: a recreated ``T`` never gets them.

A record that must never arrive is looked for in ``T`` until well past its due time;
``kshim delays --json`` (the schedule, read from the data directory) shows that a record
is pending where absence alone could not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
)
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from kshim.testing import BrokerProcess, failure_lines
from tests.e2e import delay_scenarios as scenarios
from tests.e2e.client_helpers import Deadline, unique_topic
from tests.e2e.delay_max_scenario import MAX_DELAY_MS, furthest_due_time_is_the_setting
from tests.e2e.delay_records import (
    CANCEL,
    DELAY_SUFFIX,
    INVALID_BATCHES,
    NEVER_WAIT_S,
    Arrival,
    Headers,
    Outgoing,
    collect,
    collect_until,
    confluent_producer,
    create_topic,
    delayed_from,
    deliver_at,
    headers_of,
    high_watermark,
    now_ms,
    offsets,
    produce,
    reader,
    summary,
)
from tests.e2e.partition_reading import consume_until_end
from tests.e2e.test_full_view import view_consumer, wait_view_caught_up

pytestmark = pytest.mark.timeout(120)

KILL_RECORDS = 20_000
# Far enough ahead that the 20,000 records are produced and scheduled before they are due.
KILL_DUE_AHEAD_MS = 2500


def described_without_creating(bootstrap: str, name: str) -> Any:
    """The Metadata entry of ``name`` as a consumer asks for it: without auto-creation (an
    admin client is a producer to librdkafka, whose request for ``T.delay`` creates ``T``
    on a broker that auto-creates topics)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return consumer.list_topics(name, timeout=10).topics[name]
    finally:
        consumer.close()


def delay_status(broker: BrokerProcess) -> dict[str, dict[str, Any]]:
    """What ``kshim delays --json`` reads from the broker's data directory, per topic with
    records pending or delivered: ``pending``, ``next_due_ms``, ``delivered``, ..."""
    command = [sys.executable, "-m", "kshim", "delays", "--json", "--data-dir", broker.data_dir]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    return {row["topic"]: row for row in rows}


class BrokerBackend:
    """kshim's broker as the backend of the shared scenarios (tests/e2e/delay_scenarios.py):
    ``T.delay`` comes with ``T``, ``T``'s offsets count records only, and what is pending
    is what ``kshim delays --json`` reads from the data directory."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def topic(
        self, label: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        topic = unique_topic(label)
        create_topic(self.bootstrap, topic, partitions, config)
        return topic

    def numbered(self, arrivals: Sequence[Arrival]) -> list[Arrival]:
        return list(arrivals)

    def is_running(self) -> bool:
        return self.broker.is_running()

    def restart(self, kill: bool) -> None:
        if kill:
            self.broker.kill()
        else:
            self.broker.stop()
        self.broker.start()

    def pending(self, topic: str) -> tuple[int, int | None]:
        row = delay_status(self.broker).get(topic)
        return (0, None) if row is None else (row["pending"], row["next_due_ms"])


def wait_for_pending(broker: BrokerBackend, topic: str, expected: tuple[int, int]) -> None:
    """Returns once ``kshim delays`` shows ``expected`` (records pending, next due time)."""
    deadline = Deadline()
    while (pending := broker.pending(topic)) != expected:
        assert not deadline.expired(), f"{topic}: {pending} pending, not {expected}"
        time.sleep(0.05)


# --------------------------------------------------------------------------------------
# Due times, order and what a delivered record keeps
# --------------------------------------------------------------------------------------


def test_confluent_records_arrive_in_due_order(shared_broker: BrokerProcess) -> None:
    scenarios.confluent_records_arrive_in_due_order(BrokerBackend(shared_broker))


def test_kafka_python_producer_delivers_per_partition(shared_broker: BrokerProcess) -> None:
    scenarios.kafka_python_producer_delivers_per_partition(BrokerBackend(shared_broker))


def test_delay_ms_needs_a_timestamp(shared_broker: BrokerProcess) -> None:
    scenarios.delay_ms_needs_a_timestamp(BrokerBackend(shared_broker))


async def test_aiokafka_producer_delivers(shared_broker: BrokerProcess) -> None:
    await scenarios.aiokafka_producer_delivers(BrokerBackend(shared_broker))


def test_log_append_time_topic_stamps_the_delivery(shared_broker: BrokerProcess) -> None:
    scenarios.log_append_time_topic_stamps_the_delivery(BrokerBackend(shared_broker))


# --------------------------------------------------------------------------------------
# Cancel and replace by key
# --------------------------------------------------------------------------------------


def test_cancel_and_replace_by_key(shared_broker: BrokerProcess) -> None:
    scenarios.cancel_and_replace_by_key(BrokerBackend(shared_broker))


def test_cancel_reaches_every_partition(shared_broker: BrokerProcess) -> None:
    """A cancel applies to the pending records of ``T`` with its key, whichever partition
    of ``T.delay`` they came through (those read into the schedule before it: the status
    poll makes sure of that). Seen by delivery: a cancelled record still counts as pending
    in ``kshim delays`` until it is passed over at its due time."""
    broker = BrokerBackend(shared_broker)
    topic = broker.topic("delay-cancel-across", partitions=2)
    producer = confluent_producer(broker.bootstrap)
    # Far enough ahead that the status poll below sees both records pending before they
    # are due, even on a loaded machine.
    due = now_ms() + 4000
    records = [
        Outgoing(b"k", b"cancelled", (deliver_at(due),)),
        Outgoing(b"j", b"kept", (deliver_at(due),)),
    ]
    assert produce(producer, topic + DELAY_SUFFIX, records, partition=0) == offsets(2)
    wait_for_pending(broker, topic, (len(records), due))
    cancel = Outgoing(b"k", None, ((CANCEL, b""),))
    assert produce(producer, topic + DELAY_SUFFIX, [cancel], partition=1) == offsets(1)
    assert now_ms() < due, "the cancel was stored after the records fell due"
    with reader(broker.bootstrap, topic, partitions=(0, 1)) as consumer:
        arrivals = collect_until(consumer, due + int(NEVER_WAIT_S * 1000))
    assert [(a.partition, *summary([a])[0]) for a in arrivals] == [(0, 0, b"j", b"0:1")]


# --------------------------------------------------------------------------------------
# Invalid records: the whole batch refused, nothing stored
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(INVALID_BATCHES))
def test_invalid_batch_is_refused(shared_broker: BrokerProcess, case: str) -> None:
    scenarios.invalid_batch_is_refused(BrokerBackend(shared_broker), case)


def test_max_delay_setting(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", settings=[f"kshim.delay.max.ms={MAX_DELAY_MS}"])
    broker.start()
    try:
        topic = unique_topic("delay-max")
        create_topic(broker.bootstrap, topic)
        furthest_due_time_is_the_setting(broker.bootstrap, topic)
        assert broker.is_running()
    finally:
        broker.stop()
    assert failure_lines(broker.log_text()) == []


# --------------------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------------------


def test_transactional_records_scheduled_on_commit_only(shared_broker: BrokerProcess) -> None:
    scenarios.transactional_records_scheduled_on_commit_only(BrokerBackend(shared_broker))


# --------------------------------------------------------------------------------------
# What T.delay answers, and the names it reserves
# --------------------------------------------------------------------------------------


def test_delay_topic_is_write_only_and_unlisted(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-names")
    create_topic(bootstrap, topic, partitions=2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # Named, it is created with T's partition count; the listing of all topics leaves it out.
    named = admin.list_topics(topic + DELAY_SUFFIX, timeout=10).topics[topic + DELAY_SUFFIX]
    assert named.error is None and sorted(named.partitions) == [0, 1]
    listed = admin.list_topics(timeout=10).topics
    assert topic in listed and topic + DELAY_SUFFIX not in listed
    missing = unique_topic("delay-missing") + DELAY_SUFFIX  # no T: no companion
    unknown = described_without_creating(bootstrap, missing)
    assert unknown.error is not None
    assert unknown.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([ConfluentTopicPartition(topic + DELAY_SUFFIX, 0, 0)])  # Fetch at 0
        deadline = Deadline()
        while True:
            assert not deadline.expired(), "no error for a Fetch of T.delay"
            message = consumer.poll(deadline.poll_timeout_s())
            if message is None:
                continue
            error = message.error()
            assert error is not None, "a record was read from T.delay"
            assert error.code() == KafkaError.TOPIC_EXCEPTION, error
            break
        with pytest.raises(KafkaException) as listed_offsets:  # ListOffsets
            high_watermark(consumer, topic + DELAY_SUFFIX)
        assert listed_offsets.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    finally:
        consumer.close()

    for name in (unique_topic("x") + DELAY_SUFFIX, topic + DELAY_SUFFIX):
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=20)
        assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION, name
    with pytest.raises(KafkaException) as delete_refused:
        admin.delete_topics([topic + DELAY_SUFFIX])[topic + DELAY_SUFFIX].result(timeout=20)
    assert delete_refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
    head = ConfluentTopicPartition(topic + DELAY_SUFFIX, 0, OFFSET_END)
    with pytest.raises(KafkaException) as delete_records_refused:
        admin.delete_records([head])[head].result(timeout=20)
    assert delete_records_refused.value.args[0].code() == KafkaError.POLICY_VIOLATION

    # Described by name, every setting read-only; changes refused.
    companion = ConfigResource(ResourceType.TOPIC, topic + DELAY_SUFFIX)
    configs = admin.describe_configs([companion])[companion].result(timeout=20)
    assert configs and all(entry.is_read_only for entry in configs.values())
    entry = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
    change = ConfigResource(ResourceType.TOPIC, topic + DELAY_SUFFIX, incremental_configs=[entry])
    with pytest.raises(KafkaException) as alter_refused:
        admin.incremental_alter_configs([change])[change].result(timeout=20)
    assert alter_refused.value.args[0].code() == KafkaError.POLICY_VIOLATION


def test_delay_topic_grows_with_its_topic(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-grow")
    create_topic(bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    named = admin.list_topics(topic + DELAY_SUFFIX, timeout=10).topics[topic + DELAY_SUFFIX]
    assert sorted(named.partitions) == [0]
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=20)
    grown = admin.list_topics(topic + DELAY_SUFFIX, timeout=10).topics[topic + DELAY_SUFFIX]
    assert sorted(grown.partitions) == [0, 1, 2]
    with reader(bootstrap, topic, partitions=(0, 1, 2)) as consumer:
        record = Outgoing(b"p2", b"to partition 2", (deliver_at(now_ms()),))
        producer = confluent_producer(bootstrap)
        assert produce(producer, topic + DELAY_SUFFIX, [record], partition=2) == offsets(1)
        arrivals = collect(consumer, 1, Deadline())
        arrivals += collect_until(consumer, now_ms() + 100)
    assert [(a.partition, *summary([a])[0]) for a in arrivals] == [(2, 0, b"p2", b"2:0")]


# --------------------------------------------------------------------------------------
# The full-data view
# --------------------------------------------------------------------------------------

View = dict[bytes, tuple[int, bytes | None, Headers]]  # key -> (offset, value, headers)


def read_view(consumer: Consumer, topic: str, view: View, deadline: Deadline) -> View:
    """Applies ``T.full`` records to ``view`` until the view has caught up with ``T`` and
    librdkafka reports the end of the view's partition there (test_full_view.py)."""
    caught_up = wait_view_caught_up(consumer, topic, deadline)

    def apply(message: Message) -> None:
        key, offset = message.key(), message.offset()
        assert key is not None and offset is not None
        view[key] = (offset, message.value(), headers_of(message))

    consume_until_end(consumer, caught_up, deadline, apply)
    return view


def test_full_view_shows_delivered_records(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-full")
    create_topic(bootstrap, topic)
    producer = confluent_producer(bootstrap, **{"enable.idempotence": True})
    direct = [Outgoing(b"a", b"direct", ()), Outgoing(b"b", b"direct", ())]
    assert produce(producer, topic, direct) == offsets(2)
    deadline = Deadline()
    with view_consumer(bootstrap, topic) as consumer:  # a view being kept, streaming changes
        view = read_view(consumer, topic, {}, deadline)
        assert view == {b"a": (0, b"direct", ()), b"b": (1, b"direct", ())}
        due = now_ms() + 500
        delayed = [Outgoing(b"a", b"delayed", (deliver_at(due),))]
        assert produce(producer, topic + DELAY_SUFFIX, delayed) == offsets(1)
        while high_watermark(consumer, topic) < 3:
            assert not deadline.expired(), "the delayed record did not arrive"
            time.sleep(0.05)
        view = read_view(consumer, topic, view, deadline)
    expected = {
        b"a": (2, b"delayed", (deliver_at(due), delayed_from(0, 0))),
        b"b": (1, b"direct", ()),
    }
    assert view == expected
    with view_consumer(bootstrap, topic) as fresh:  # and a fresh reader of the view
        assert read_view(fresh, topic, {}, deadline) == expected


# --------------------------------------------------------------------------------------
# Restarts: exactly once across kill -9, pending records kept, deleted with their topic
# --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", ["before-due", "first-delivery", "past-due"])
def test_kill_during_dispatch_delivers_each_once(fresh_broker: BrokerProcess, kill_at: str) -> None:
    """20,000 records due at the same moment go out in batches of up to 1000; a kill -9
    (before they are due, when the first batch is in ``T``, or 150 ms past their due
    time) and a restart deliver each exactly once, all in produce order
    (equal due times), none before the due time. Which step the kill interrupted is
    printed (``-s``): a run where delivery had finished first is still valid."""
    broker = BrokerBackend(fresh_broker)
    plan = scenarios.KillPlan(kill_at, KILL_RECORDS, KILL_DUE_AHEAD_MS,
                              lambda topic: broker.restart(kill=True))  # fmt: skip
    run = scenarios.kill_during_dispatch_delivers_each_once(broker, plan)
    with reader(fresh_broker.bootstrap, run.topic) as consumer:
        assert high_watermark(consumer, run.topic) == KILL_RECORDS
    status = delay_status(fresh_broker)[run.topic]
    # A delivery found in T at restart has no known lateness: not counted as delivered.
    assert status["pending"] == 0 and 0 < status["delivered"] <= KILL_RECORDS
    log = fresh_broker.log_text()
    settled = [line.split(": ", 1)[-1] for line in log.splitlines() if "was under way" in line]
    print(  # what the kill interrupted
        f"\n{kill_at}: produced in {run.produced_ms - run.due + KILL_DUE_AHEAD_MS} ms "
        f"(due after {KILL_DUE_AHEAD_MS}), killed at due{run.killed_ms - run.due:+d} ms with "
        f"{run.delivered} of {KILL_RECORDS} in T; at restart: "
        f"{settled or 'no delivery under way'}"
    )
    assert failure_lines(log) == []


def test_far_record_stays_pending_across_restarts(fresh_broker: BrokerProcess) -> None:
    def unlisted(topic: str) -> None:
        listed = (
            AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
            .list_topics(timeout=10)
            .topics
        )
        assert topic in listed and topic + DELAY_SUFFIX not in listed

    scenarios.far_record_stays_pending_across_restarts(BrokerBackend(fresh_broker), unlisted)
    assert failure_lines(fresh_broker.log_text()) == []


def test_deleting_topic_drops_its_pending_records(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("delay-delete")
    create_topic(bootstrap, topic)
    # Far enough ahead to be still pending when seen: each status read is a `kshim delays`
    # process, which takes a second or more on a loaded machine.
    due = now_ms() + 8000
    pending = [
        Outgoing(b"old", b"1", (deliver_at(due),)),
        Outgoing(b"old", b"2", (deliver_at(due),)),
    ]
    assert produce(confluent_producer(bootstrap), topic + DELAY_SUFFIX, pending) == offsets(2)
    wait_for_pending(BrokerBackend(shared_broker), topic, (len(pending), due))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=20)
    assert topic not in delay_status(shared_broker)
    gone = described_without_creating(bootstrap, topic + DELAY_SUFFIX)
    assert gone.error is not None  # the companion went with its topic
    create_topic(bootstrap, topic)
    with reader(bootstrap, topic) as consumer:
        fresh = Outgoing(b"new", b"after recreation", (deliver_at(now_ms()),))
        # T.delay is created anew on being named, from offset 0
        assert produce(confluent_producer(bootstrap), topic + DELAY_SUFFIX, [fresh]) == offsets(1)
        arrivals = collect(consumer, 1, Deadline())
        arrivals += collect_until(consumer, due + int(NEVER_WAIT_S * 1000))
    assert summary(arrivals) == [(0, b"new", b"0:0")]
