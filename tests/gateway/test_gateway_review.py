"""A gateway reviews the transactions left open on the Kafka cluster behind it: the review
hook's decision is carried out at the coordinator before Kafka's timeout would abort the
transaction, a producer's late EndTxn cannot change it, and a hook that cannot decide
raises the alarm in time (kshim/gateway/review.py); two reviewing gateways share the
transactions, each asked about its own (review_share.py), the one left takes the other's
over; and kshim's admin commands, the transactions command included, through a gateway.
Against Apache Kafka from Maven Central."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest

from kshim.broker.transactions.review_hooks import ReviewRequest
from kshim.client.transaction_admin import TransactionAdmin
from kshim.gateway.delay.upstream import Upstream
from kshim.gateway.review import UNDECIDED, GatewayReviewer, GatewayReviewSettings
from kshim.gateway.review_share import ReviewShare, ReviewShareSettings, share_of
from kshim.testing import KafkaProcess
from tests.gateway.running_gateway import RunningGateway

RECORDS = 10
SETTINGS = GatewayReviewSettings(first_share=0.2, retry_ms=500, check_interval_ms=200)
WAIT_S = 20.0
SHARE_PARTITIONS = 4


class ScriptedHook:
    """Answers every review with ``decision`` and keeps what it was asked."""

    def __init__(self, decision: str) -> None:
        self.decision = decision
        self.asked: list[ReviewRequest] = []

    async def __call__(self, request: ReviewRequest) -> str:
        self.asked.append(request)
        return self.decision


@pytest.fixture
def topic() -> str:
    return f"gw-review-{uuid.uuid4().hex[:8]}"


def _reviewing_gateway(kafka: KafkaProcess, hook: ScriptedHook) -> RunningGateway:
    reviewer = GatewayReviewer(lambda: TransactionAdmin(kafka.bootstrap), hook, SETTINGS)
    return RunningGateway(kafka.bootstrap, reviewer=reviewer)


def _left_open(bootstrap: str, topic: str, timeout_ms: int) -> confluent_kafka.Producer:
    """A transactional producer whose transaction holds RECORDS acknowledged records and is
    never ended by it."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": topic,
         "transaction.timeout.ms": timeout_ms, "message.timeout.ms": timeout_ms - 1000}
    )  # fmt: skip
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for index in range(RECORDS):
        producer.produce(topic, b"%d" % index)
    assert producer.flush(WAIT_S) == 0
    return producer


def _committed_values(bootstrap: str, topic: str, wait_s: float) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False,
         "isolation.level": "read_committed"}
    )  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + wait_s
    try:
        while len(values) < RECORDS and time.monotonic() < deadline:
            values += [m.value() or b"" for m in consumer.consume(100, 0.2) if not m.error()]
    finally:
        consumer.close()
    return values


def _state(kafka: KafkaProcess, transactional_id: str) -> str:
    admin = TransactionAdmin(kafka.bootstrap)
    try:
        return admin.describe_transaction(transactional_id).state
    finally:
        admin.close()


def _until_state(kafka: KafkaProcess, transactional_id: str, wanted: str) -> str:
    deadline = time.monotonic() + WAIT_S
    state = _state(kafka, transactional_id)
    while state != wanted and time.monotonic() < deadline:
        time.sleep(0.1)
        state = _state(kafka, transactional_id)
    return state


@pytest.fixture
def commit_hook(kafka_upstream: KafkaProcess) -> Iterator[tuple[ScriptedHook, RunningGateway]]:
    hook = ScriptedHook("commit")
    running = _reviewing_gateway(kafka_upstream, hook)
    yield hook, running
    running.stop()


def test_an_open_transaction_is_committed_as_the_hook_decides(
    kafka_upstream: KafkaProcess, commit_hook: tuple[ScriptedHook, RunningGateway], topic: str
) -> None:
    hook, running = commit_hook
    producer = _left_open(running.bootstrap, topic, timeout_ms=8_000)
    assert _until_state(kafka_upstream, topic, "CompleteCommit") == "CompleteCommit"
    assert _committed_values(kafka_upstream.bootstrap, topic, 10.0) == [
        b"%d" % index for index in range(RECORDS)
    ]
    [asked] = hook.asked
    assert asked["transactional_id"] == topic
    assert asked["partitions"] == [
        {"topic": topic, "partition": 0, "first_offset": -1, "last_offset": -1}
    ]
    producer.commit_transaction(WAIT_S)  # the same decision, late: answered as a retry


def test_an_abort_stands_against_the_producers_late_commit(
    kafka_upstream: KafkaProcess, topic: str
) -> None:
    hook = ScriptedHook("abort")
    running = _reviewing_gateway(kafka_upstream, hook)
    try:
        producer = _left_open(running.bootstrap, topic, timeout_ms=8_000)
        assert _until_state(kafka_upstream, topic, "CompleteAbort") == "CompleteAbort"
        with pytest.raises(confluent_kafka.KafkaException):
            producer.commit_transaction(WAIT_S)
        assert _committed_values(kafka_upstream.bootstrap, topic, 2.0) == []
        assert len(hook.asked) == 1
    finally:
        running.stop()


def test_an_undecided_transaction_raises_the_alarm_before_its_timeout(
    kafka_upstream: KafkaProcess, topic: str
) -> None:
    hook = ScriptedHook("unknown")
    running = _reviewing_gateway(kafka_upstream, hook)
    reviewer = running.gateway.reviewer
    assert reviewer is not None
    try:
        _left_open(running.bootstrap, topic, timeout_ms=5_000)
        deadline = time.monotonic() + WAIT_S
        while (UNDECIDED, topic) not in reviewer.alarms.active and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (UNDECIDED, topic) in reviewer.alarms.active
        assert _state(kafka_upstream, topic) == "Ongoing"  # raised before Kafka's abort
        assert len(hook.asked) >= 2
    finally:
        running.stop()


def _sharing_gateway(kafka: KafkaProcess, hook: ScriptedHook, group: str) -> RunningGateway:
    settings = ReviewShareSettings(
        group_id=group, topic=group, partitions=SHARE_PARTITIONS,
        session_timeout_ms=6_000, heartbeat_interval_ms=1_000,
    )  # fmt: skip
    share = ReviewShare(Upstream(kafka.bootstrap), settings)
    reviewer = GatewayReviewer(
        lambda: TransactionAdmin(kafka.bootstrap), hook, SETTINGS, share=share
    )
    return RunningGateway(kafka.bootstrap, reviewer=reviewer)


def _held(running: RunningGateway) -> frozenset[int]:
    assert running.gateway.reviewer is not None and running.gateway.reviewer.share is not None
    return running.gateway.reviewer.share.held


def _until_held(gateways: list[RunningGateway], wanted: int) -> list[frozenset[int]]:
    """Waits until each gateway holds a share and together they hold ``wanted`` partitions
    with none held twice; returns each one's."""
    deadline = time.monotonic() + WAIT_S
    while True:
        held = [_held(running) for running in gateways]
        if all(held) and len(frozenset().union(*held)) == sum(map(len, held)) == wanted:
            return held
        assert time.monotonic() < deadline, held
        time.sleep(0.1)


def _asked_ids(hook: ScriptedHook, prefix: str) -> list[str]:
    """The transactional ids ``hook`` was asked about that start with ``prefix-``."""
    asked = (str(request["transactional_id"]) for request in hook.asked)
    return [found for found in asked if found.startswith(f"{prefix}-")]


def _ids_of(prefix: str, share: frozenset[int], count: int) -> list[str]:
    """``count`` transactional ids (``prefix-N``) that belong to ``share``."""
    ids = (f"{prefix}-{index}" for index in range(10_000))
    return [found for found in ids if share_of(found, SHARE_PARTITIONS) in share][:count]


def test_two_reviewing_gateways_each_review_their_share_and_the_one_left_takes_over(
    kafka_upstream: KafkaProcess, topic: str
) -> None:
    hooks = [ScriptedHook("commit"), ScriptedHook("commit")]
    gateways = [_sharing_gateway(kafka_upstream, hook, topic) for hook in hooks]
    try:
        held = _until_held(gateways, SHARE_PARTITIONS)
        ids = [_ids_of(topic, share, 2) for share in held]
        everyone = [*ids[0], *ids[1]]
        producers = [_left_open(gateways[0].bootstrap, found, 8_000) for found in everyone]
        for found in everyone:
            assert _until_state(kafka_upstream, found, "CompleteCommit") == "CompleteCommit"
        # Each transaction was reviewed once, by the gateway whose share holds its id (an
        # earlier test's transaction, still open, may be reviewed too).
        for hook, mine in zip(hooks, ids, strict=True):
            assert sorted(_asked_ids(hook, topic)) == mine
        gateways.pop(0).stop()  # leaves the group: its share moves to the other at once
        _until_held(gateways, SHARE_PARTITIONS)
        [moved] = _ids_of(f"{topic}-moved", held[0], 1)
        producers.append(_left_open(gateways[0].bootstrap, moved, 8_000))
        assert _until_state(kafka_upstream, moved, "CompleteCommit") == "CompleteCommit"
        assert _asked_ids(hooks[1], topic) == [*ids[1], moved]
        assert sorted(_asked_ids(hooks[0], topic)) == ids[0]
    finally:
        for running in gateways:
            running.stop()


def test_the_admin_commands_work_through_a_gateway(
    kafka_upstream: KafkaProcess, topic: str
) -> None:
    """``kshim topics``, ``groups`` and ``transactions`` with a gateway as their bootstrap;
    the coordinator they are told of is the gateway's port for it."""
    running = RunningGateway(kafka_upstream.bootstrap)
    try:
        _left_open(running.bootstrap, topic, timeout_ms=8_000)
        kshim = [sys.executable, "-m", "kshim"]
        bootstrap = ["--bootstrap", running.bootstrap]
        create = [
            *kshim,
            "topics",
            "create",
            "--topic",
            f"{topic}-made",
            "--partitions",
            "2",
            *bootstrap,
        ]
        assert _run(create).returncode == 0
        assert f"{topic}-made" in _run([*kshim, "topics", "list", *bootstrap]).stdout
        before = running.gateway.counts.connections
        described = _run(
            [*kshim, "transactions", "describe", "--transactional-id", topic, *bootstrap]
        )
        assert described.returncode == 0 and "Ongoing" in described.stdout
        # The bootstrap, then the coordinator at the address the gateway named: its own.
        assert running.gateway.counts.connections - before == 2
        assert _run([*kshim, "groups", *bootstrap]).returncode == 0
    finally:
        running.stop()


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S, check=False)
