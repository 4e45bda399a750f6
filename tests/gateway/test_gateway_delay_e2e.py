"""The broker's delayed-delivery end-to-end scenarios (tests/e2e/delay_scenarios.py, the
same scenarios and assertions as tests/e2e/test_delayed_delivery.py) through two gateways
with ``--delay`` in front of Apache Kafka, the clients bootstrapped to both: due order,
kafka-python and aiokafka producers, a timestamp for ``kshim-delay-ms``, LogAppendTime,
cancel and replace by key, each invalid batch refused with INVALID_RECORD, transactional
records on commit only, a gateway killed with kill -9 while records are delivered (each
arrives once, each partition's in due order), a far record pending across restarts.

Two differences from the broker's runs, neither a verdict: ``T``'s offsets are compared as
each record's place in its partition, since Kafka's ``T`` holds the commit marker of each
delivery transaction too (KIP-98); "pending" is read from the upstream schedule topic
``__kshim_delay_schedule`` rather than from ``kshim delays --json``.

Not run through a gateway, with why:

- ``kshim delays --json``'s reads: it reads a broker's data directory; a gateway has none.
- ``T.delay`` write-only, unlisted, read-only configs, not creatable: on Kafka a plain topic.
- ``T.delay`` growing with ``T``: created by hand on Kafka, with ``T``'s partition count.
- ``T.full`` of a delayed topic: these gateways run without ``--full`` (the view through
  gateways: test_gateway_full_e2e.py).
- Deleting ``T`` drops its pending records: the gateway keeps no link from ``T`` to them.
- A cancel reaching every partition: each applies to its own partition (docs/gateway.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kshim.gateway.delay.entries import (
    SCHEDULE_TOPIC,
    decode_entry,
    parse_entry_key,
    schedule_partition,
)
from kshim.testing import GatewayProcess, KafkaProcess
from tests.e2e import delay_scenarios as scenarios
from tests.e2e.client_helpers import Deadline, unique_topic
from tests.e2e.delay_max_scenario import MAX_DELAY_MS, furthest_due_time_is_the_setting
from tests.e2e.delay_records import (
    DELAY_SUFFIX,
    INVALID_BATCHES,
    Arrival,
    create_topic,
    high_watermark,
    renumbered,
)
from tests.e2e.partition_reading import consume_until_end
from tests.gateway.delay_clients import TAKEN_OVER, delay_gateway, wait_for_log

pytestmark = pytest.mark.timeout(120)

TopicPlan = tuple[int, Mapping[str, str]]  # partitions, configs of T
TOPICS: dict[str, TopicPlan] = {
    "delay-order": (1, {}),
    "delay-kp": (2, {}),
    "delay-no-ts": (1, {}),
    "delay-aio": (2, {}),
    "delay-lat": (1, {"message.timestamp.type": "LogAppendTime"}),
    "delay-cancel": (1, {}),
    "delay-txn": (1, {}),
    "delay-kill": (2, {}),
    "delay-far": (1, {}),
    **{f"delay-invalid-{case}": (1, {}) for case in INVALID_BATCHES},
}
# A few hundred rather than the broker's 20,000: each delivery is a Kafka transaction, and
# the due times spread over a second and a half so that the kill lands mid-dispatch.
KILL_RECORDS = 400
KILL_DUE_AHEAD_MS = 1500
KILL_SPREAD_MS = 1500


class Gateways:
    """Two gateways with ``--delay`` in one group, delivering every topic of ``names``
    (label -> ``T``), created upstream with ``T.delay`` of ``T``'s partition count."""

    def __init__(self, upstream: KafkaProcess, log_dir: Path, names: Mapping[str, str]) -> None:
        self.upstream = upstream
        self.names = dict(names)
        delays = [name + DELAY_SUFFIX for name in self.names.values()]
        group = unique_topic("delay-group")
        self.members = [
            delay_gateway(str(log_dir), upstream.bootstrap, group, delays) for _ in range(2)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(member.bootstrap for member in self.members)

    def start(self) -> None:
        """Both started at once, and each delivering its share of the partitions."""
        before = [member.log_text().count(TAKEN_OVER) for member in self.members]
        with ThreadPoolExecutor(len(self.members)) as pool:
            list(pool.map(GatewayProcess.start, self.members))
        for member, count in zip(self.members, before, strict=True):
            wait_for_log(member, TAKEN_OVER, count + 1)

    def stop(self) -> None:
        """SIGTERM to both at once (each leaves the group and closes its producers), then
        waits for each."""
        for member in self.members:
            if member.process is not None and member.process.poll() is None:
                member.process.terminate()
        for member in self.members:
            member.stop()

    def topic(
        self, label: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        assert TOPICS[label] == (partitions, dict(config or {})), f"{label}: not as created"
        return self.names[label]

    def numbered(self, arrivals: Sequence[Arrival]) -> list[Arrival]:
        return renumbered(arrivals)

    def is_running(self) -> bool:
        return all(member.is_running() for member in self.members)

    def restart(self, kill: bool) -> None:
        if kill:
            for member in self.members:
                member.kill()
        else:
            self.stop()
        self.start()

    def crash_owner(self, topic: str) -> None:
        """kill -9 of the gateway delivering ``topic``'s partition 0, then its restart."""
        owned = f"topic='{topic}{DELAY_SUFFIX}', partition=0)"
        owner = self.members[0]
        for member in self.members:
            takeovers = [line for line in member.log_text().splitlines() if TAKEN_OVER in line]
            if takeovers and owned in takeovers[-1]:
                owner = member
        owner.kill()
        owner.start()

    def pending(self, topic: str) -> tuple[int, int | None]:
        """(records pending, next due time) of ``topic``: the live entries of its
        ``T.delay`` in the upstream schedule topic, read read_committed to its end."""
        live: dict[bytes, int] = {}
        settings = {"enable.partition.eof": True, "enable.auto.commit": False}
        consumer = Consumer({"bootstrap.servers": self.upstream.bootstrap, "group.id": "unused",
                             **settings})  # fmt: skip
        try:
            metadata = consumer.list_topics(SCHEDULE_TOPIC, timeout=10).topics[SCHEDULE_TOPIC]
            partitions, _ = TOPICS[self._label(topic)]
            for partition in range(partitions):
                where = schedule_partition(
                    topic + DELAY_SUFFIX, partition, len(metadata.partitions)
                )
                self._read_entries(consumer, topic, where, live)
        finally:
            consumer.close()
        return len(live), min(live.values(), default=None)

    def _label(self, topic: str) -> str:
        return next(label for label, name in self.names.items() if name == topic)

    @staticmethod
    def _read_entries(
        consumer: Consumer, topic: str, partition: int, live: dict[bytes, int]
    ) -> None:
        consumer.assign([ConfluentTopicPartition(SCHEDULE_TOPIC, partition, OFFSET_BEGINNING)])
        end = high_watermark(consumer, SCHEDULE_TOPIC, partition)

        def apply(message: Message) -> None:
            key, value = message.key(), message.value()
            assert key is not None
            source, _, offset = parse_entry_key(key)  # offset: the record's in T.delay
            if source != topic + DELAY_SUFFIX:
                return
            if value is None:
                live.pop(key, None)
            else:
                live[key] = decode_entry(offset, value).due_ms

        if end > 0:
            consume_until_end(consumer, end, Deadline(), apply)


@pytest.fixture(scope="module")
def gateways(
    kafka_upstream: KafkaProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateways]:
    names = {label: unique_topic(label) for label in TOPICS}
    admin = AdminClient({"bootstrap.servers": kafka_upstream.bootstrap})
    new = []
    for label, (partitions, config) in TOPICS.items():
        new.append(NewTopic(names[label], partitions, 1, config=dict(config)))
        new.append(NewTopic(names[label] + DELAY_SUFFIX, partitions, 1))
    for future in admin.create_topics(new).values():
        future.result(timeout=20)
    pair = Gateways(kafka_upstream, tmp_path_factory.mktemp("gw-delay-e2e"), names)
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()


def test_confluent_records_arrive_in_due_order(gateways: Gateways) -> None:
    scenarios.confluent_records_arrive_in_due_order(gateways)


def test_kafka_python_producer_delivers_per_partition(gateways: Gateways) -> None:
    scenarios.kafka_python_producer_delivers_per_partition(gateways)


def test_delay_ms_needs_a_timestamp(gateways: Gateways) -> None:
    scenarios.delay_ms_needs_a_timestamp(gateways)


async def test_aiokafka_producer_delivers(gateways: Gateways) -> None:
    await scenarios.aiokafka_producer_delivers(gateways)


def test_log_append_time_topic_stamps_the_delivery(gateways: Gateways) -> None:
    scenarios.log_append_time_topic_stamps_the_delivery(gateways)


def test_cancel_and_replace_by_key(gateways: Gateways) -> None:
    scenarios.cancel_and_replace_by_key(gateways)


@pytest.mark.parametrize("case", sorted(INVALID_BATCHES))
def test_invalid_batch_is_refused(gateways: Gateways, case: str) -> None:
    scenarios.invalid_batch_is_refused(gateways, case)


def test_max_delay_setting(kafka_upstream: KafkaProcess, tmp_path: Path) -> None:
    """The broker's test_max_delay_setting: a gateway given ``--delay-max-ms`` checks
    Produce to ``T.delay`` against it (no ``--delay`` needed to check)."""
    topic = unique_topic("delay-max")
    create_topic(kafka_upstream.bootstrap, topic)
    create_topic(kafka_upstream.bootstrap, topic + DELAY_SUFFIX)
    options = ["--delay-max-ms", str(MAX_DELAY_MS)]
    gateway = GatewayProcess(str(tmp_path), kafka_upstream.bootstrap, options=options)
    gateway.start()
    try:
        furthest_due_time_is_the_setting(gateway.bootstrap, topic)
        assert gateway.is_running()
    finally:
        gateway.stop()


def test_transactional_records_scheduled_on_commit_only(gateways: Gateways) -> None:
    scenarios.transactional_records_scheduled_on_commit_only(gateways)


def test_kill_of_a_gateway_during_dispatch_delivers_each_once(gateways: Gateways) -> None:
    """Records of two partitions falling due over 1.5 s; the gateway delivering partition 0
    is killed with kill -9 once its first delivery is in ``T``, and started again."""
    plan = scenarios.KillPlan(
        "first-delivery", KILL_RECORDS, KILL_DUE_AHEAD_MS, gateways.crash_owner,
        partitions=2, spread_ms=KILL_SPREAD_MS,
    )  # fmt: skip
    run = scenarios.kill_during_dispatch_delivers_each_once(gateways, plan)
    assert run.delivered < KILL_RECORDS // 2, "partition 0 was delivered before the kill"


def test_far_record_stays_pending_across_restarts(gateways: Gateways) -> None:
    scenarios.far_record_stays_pending_across_restarts(gateways, lambda topic: None)
