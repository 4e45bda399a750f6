"""TxnOffsetCommit checks the sender against the consumer group (KIP-447), as Kafka 3.9 does.

TxnOffsetCommit v3+ carries the consumer's generation, member id and group instance id,
so a producer whose consumer was fenced out of its group cannot commit offsets for
partitions now assigned elsewhere. The expected codes are what Apache Kafka 3.9.2
answered to these exact requests; they run on every broker of the matrix:

- generation -1 commits to a group with no members whoever sends it, and to any group
  when it names no member (nothing to check, as every v0-v2 request);
- otherwise the sender must be a current member (UNKNOWN_MEMBER_ID), hold its static
  instance id (FENCED_INSTANCE_ID; UNKNOWN_MEMBER_ID for an instance id the group does
  not know) and be in the group's generation (ILLEGAL_GENERATION);
- an empty group id is INVALID_GROUP_ID before anything else; the transaction is checked
  before the group (without AddOffsetsToTxn: INVALID_TXN_STATE, TRANSACTION_ABORTABLE
  from v4 on, KIP-890; a stale epoch is fenced);
- a partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION, and only that one; the
  response lists those first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from compat_tests.brokers import BrokerUnderTest, acts_as_kafka, fronted
from compat_tests.conformance_probe import ASSIGNMENT, PROTOCOL, SUBSCRIPTION, Producer
from compat_tests.kafka_sources import JARS, REFERENCE_JARS, jars_command, kafka_source, launched
from compat_tests.raw_transactions import (
    RETRIABLE,
    add_offsets,
    end_transaction,
    find_group_coordinator,
    init_producer,
    probe,
    retried,
    wait_for_leader,
)
from compat_tests.support import create_topic, require_groups, require_transactions

pytestmark = [pytest.mark.wire, pytest.mark.timeout(120)]

TXN_OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, SYNC_GROUP = 28, 9, 11, 14
JOIN_V, SYNC_V, OFFSET_FETCH_V = 5, 3, 5
NONE, INVALID_GROUP_ID, UNKNOWN_TOPIC_OR_PARTITION = 0, 24, 3
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID = 22, 25, 82
INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, MEMBER_ID_REQUIRED = 48, 47, 79
TRANSACTION_ABORTABLE = 120
OFFSET = 7
SESSION_TIMEOUT_MS = 30_000
COMMITTED_TIMEOUT_S = 30.0
INSTANCE = "instance-1"
STRANGER = "someone-else"
NO_MEMBER = ""
FIRST_CHECKED_VERSION, LATEST_VERSION = 3, 4


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    generation_id: int


@pytest.fixture(scope="module")
def fenced(broker: BrokerUnderTest) -> Iterator[BrokerUnderTest]:
    """The column's broker; on Kafka's columns, a Kafka of the module's own from the
    reference jars (where the comparison's Kafka is theirs) that runs a new group's first
    rebalance at once, as Kafka's own test harness and the conformance probes
    (conformance_brokers.py) set it. Every scenario here joins a new group, and the 3 s that
    Kafka's default waits for more members changes no answer compared, only the run's time
    (about a minute over Kafka's three columns)."""
    if not acts_as_kafka(broker.name) or kafka_source().kind != JARS:
        yield broker
        return
    settings = {"group.initial.rebalance.delay.ms": "0"}
    with (
        launched(jars_command(REFERENCE_JARS, settings)) as kafka,
        fronted(broker.name, kafka.bootstrap) as front,
    ):
        yield front


@pytest.fixture
def topic(fenced: BrokerUnderTest) -> str:
    require_transactions(fenced)
    require_groups(fenced)
    created = create_topic(fenced, "txn-fencing")
    wait_for_leader(fenced, created)
    return created


Sender = tuple[int, str, str | None]  # generation id, member id, group instance id
Answer = list[tuple[str, list[tuple[int, int]]]]  # (topic, [(partition, error code)])


def txn_offset_commit(
    broker: BrokerUnderTest,
    topic: str,
    group: str,
    version: int,
    generation_id: int,
    member_id: str,
    instance_id: str | None,
    *,
    add_group: bool = True,
    epoch_change: int = 0,
) -> list[int]:
    """The error code of a TxnOffsetCommit for partition 0 of ``topic`` from a new
    transaction, with the group added by AddOffsetsToTxn unless ``add_group`` is False."""
    transactional_id = probe(broker).name("fencing")
    producer = init_producer(broker, transactional_id)
    if add_group:
        assert add_offsets(broker, transactional_id, producer, group) == NONE
    sender = (generation_id, member_id, instance_id)
    answer = commit_in(broker, transactional_id, producer, group, version, sender,
                       {topic: (0,)}, epoch_change=epoch_change)  # fmt: skip
    return [code for _, partitions in answer for _, code in partitions]


def commit_in(
    broker: BrokerUnderTest,
    transactional_id: str,
    producer: Producer,
    group: str,
    version: int,
    sender: Sender,
    partitions: dict[str, tuple[int, ...]],
    *,
    epoch_change: int = 0,
) -> Answer:
    """TxnOffsetCommit's answer, in the broker's order; retried while it says to retry."""
    generation_id, member_id, instance_id = sender
    request = {
        "transactional_id": transactional_id,
        "group_id": group,
        "producer_id": producer.producer_id,
        "producer_epoch": producer.epoch + epoch_change,
        "generation_id": generation_id,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": index, "committed_offset": OFFSET, "committed_metadata": ""}
                    for index in indexes
                ],
            }
            for topic, indexes in partitions.items()
        ],
    }
    find_group_coordinator(broker, group or "any")

    def call() -> CommitAnswer:
        response = probe(broker).call(TXN_OFFSET_COMMIT, version, request)
        return CommitAnswer(
            [
                (answer.name, [(p.partition_index, int(p.error_code)) for p in answer.partitions])
                for answer in response.topics
            ]
        )

    answer: CommitAnswer = retried(call)
    return answer.topics


@dataclass(frozen=True, slots=True)
class CommitAnswer:
    """A TxnOffsetCommit response; ``error_code`` is one a client would retry on, if any."""

    topics: Answer

    @property
    def error_code(self) -> int:
        codes = [code for _, partitions in self.topics for _, code in partitions]
        return next((code for code in codes if code in RETRIABLE), NONE)


def join(broker: BrokerUnderTest, group: str, instance_id: str | None = None) -> Member:
    """A one-member Stable group (JoinGroup v5, SyncGroup v3); static with ``instance_id``."""
    find_group_coordinator(broker, group)
    raw = probe(broker)
    request: dict[str, Any] = {
        "group_id": group,
        "session_timeout": SESSION_TIMEOUT_MS,
        "rebalance_timeout": SESSION_TIMEOUT_MS,
        "member_id": "",
        "group_instance_id": instance_id,
        "protocol_type": "consumer",
        "protocols": [{"name": PROTOCOL, "metadata": SUBSCRIPTION}],
    }
    joined = raw.call(JOIN_GROUP, JOIN_V, request)
    if int(joined.error_code) == MEMBER_ID_REQUIRED:
        joined = raw.call(JOIN_GROUP, JOIN_V, {**request, "member_id": joined.member_id})
    assert int(joined.error_code) == NONE, joined
    sync = {
        "group_id": group,
        "generation_id": joined.generation_id,
        "member_id": joined.member_id,
        "group_instance_id": instance_id,
        "assignments": [{"member_id": joined.member_id, "assignment": ASSIGNMENT}],
    }
    assert int(raw.call(SYNC_GROUP, SYNC_V, sync).error_code) == NONE
    return Member(joined.member_id, joined.generation_id)


def test_a_group_without_members_takes_generation_minus_one_from_anyone(
    fenced: BrokerUnderTest, topic: str
) -> None:
    """Kafka creates the group empty; a generation makes the sender a member it is not."""
    senders = {
        "nobody": (-1, NO_MEMBER, None),
        "a member id": (-1, "m", None),
        "an instance id": (-1, NO_MEMBER, INSTANCE),
        "generation 0": (0, NO_MEMBER, None),
        "generation 1": (1, NO_MEMBER, None),
    }
    answers = {
        (version, name): txn_offset_commit(fenced, topic, probe(fenced).name("g"), version, *sender)
        for version in (0, 2, FIRST_CHECKED_VERSION)
        for name, sender in senders.items()
    }

    expected = {key: [NONE] for key in answers}
    expected[FIRST_CHECKED_VERSION, "generation 0"] = [UNKNOWN_MEMBER_ID]
    expected[FIRST_CHECKED_VERSION, "generation 1"] = [UNKNOWN_MEMBER_ID]
    assert answers == expected


@pytest.mark.parametrize("version", [2, FIRST_CHECKED_VERSION, LATEST_VERSION])
def test_a_stable_group_takes_commits_from_its_current_member_only(
    fenced: BrokerUnderTest, topic: str, version: int
) -> None:
    group = probe(fenced).name("stable")
    member = join(fenced, group)
    current, generation = member.member_id, member.generation_id
    senders = {
        "the member": (generation, current, None),
        "nobody": (-1, NO_MEMBER, None),
        "the member, next generation": (generation + 1, current, None),
        "the member, generation -1": (-1, current, None),
        "a stranger": (generation, STRANGER, None),
        "no member id": (generation, NO_MEMBER, None),
        "an unknown instance id": (generation, current, INSTANCE),
        "an instance id alone": (-1, NO_MEMBER, INSTANCE),
    }
    answers = {
        name: txn_offset_commit(fenced, topic, group, version, *sender)
        for name, sender in senders.items()
    }

    refused = {
        "the member, next generation": [ILLEGAL_GENERATION],
        "the member, generation -1": [ILLEGAL_GENERATION],
        "a stranger": [UNKNOWN_MEMBER_ID],
        "no member id": [UNKNOWN_MEMBER_ID],
        "an unknown instance id": [UNKNOWN_MEMBER_ID],
        "an instance id alone": [UNKNOWN_MEMBER_ID],
    }
    checked = version >= FIRST_CHECKED_VERSION
    assert answers == {name: refused.get(name, [NONE]) if checked else [NONE] for name in senders}


def test_a_static_member_is_known_by_its_instance_id(fenced: BrokerUnderTest, topic: str) -> None:
    group = probe(fenced).name("static")
    member = join(fenced, group, INSTANCE)
    current, generation = member.member_id, member.generation_id
    senders = {
        "the member": (generation, current, INSTANCE),
        "the member without its instance id": (generation, current, None),
        "another member id with the instance id": (generation, STRANGER, INSTANCE),
        "the instance id alone": (-1, NO_MEMBER, INSTANCE),
        "the member with another instance id": (generation, current, "instance-2"),
        "the member, next generation": (generation + 1, current, INSTANCE),
    }
    answers = {
        name: txn_offset_commit(fenced, topic, group, LATEST_VERSION, *sender)
        for name, sender in senders.items()
    }

    assert answers == {
        "the member": [NONE],
        "the member without its instance id": [NONE],
        "another member id with the instance id": [FENCED_INSTANCE_ID],
        "the instance id alone": [FENCED_INSTANCE_ID],
        "the member with another instance id": [UNKNOWN_MEMBER_ID],
        "the member, next generation": [ILLEGAL_GENERATION],
    }


@pytest.mark.parametrize("version", [FIRST_CHECKED_VERSION, LATEST_VERSION])
def test_the_group_id_then_the_transaction_are_checked_before_the_member(
    fenced: BrokerUnderTest, topic: str, version: int
) -> None:
    """TxnOffsetCommit v4 (KIP-890) says TRANSACTION_ABORTABLE where v3 says
    INVALID_TXN_STATE: the producer may abort and go on."""
    group = probe(fenced).name("order")
    member = join(fenced, group)
    stale = (member.generation_id + 1, member.member_id, None)

    answers = {
        "empty group id": txn_offset_commit(fenced, topic, "", version, *stale),
        "group not added": txn_offset_commit(
            fenced, topic, group, version, *stale, add_group=False
        ),
        "newer epoch": txn_offset_commit(fenced, topic, group, version, *stale, epoch_change=1),
        "a missing topic": txn_offset_commit(fenced, f"{topic}-missing", group, version, *stale),
    }

    assert answers == {
        "empty group id": [INVALID_GROUP_ID],
        "group not added": [INVALID_TXN_STATE if version < 4 else TRANSACTION_ABORTABLE],
        "newer epoch": [INVALID_PRODUCER_EPOCH],
        "a missing topic": [UNKNOWN_TOPIC_OR_PARTITION],
    }


def test_missing_partitions_are_answered_first(fenced: BrokerUnderTest, topic: str) -> None:
    """Kafka refuses partitions that do not exist before it asks the group coordinator, and
    lists them first: per topic, then the topics whose partitions all exist."""
    group, other = probe(fenced).name("missing"), create_topic(fenced, "txn-fencing-other")
    wait_for_leader(fenced, other)
    member = join(fenced, group)
    transactional_id = probe(fenced).name("missing")
    producer = init_producer(fenced, transactional_id)
    assert add_offsets(fenced, transactional_id, producer, group) == NONE
    stale = (member.generation_id + 1, member.member_id, None)
    missing_topic = f"{topic}-missing"
    wanted = {topic: (0, 5, 1), missing_topic: (0,), other: (0,)}

    answer = commit_in(fenced, transactional_id, producer, group, LATEST_VERSION, stale, wanted)

    assert answer == [
        (
            topic,
            [
                (5, UNKNOWN_TOPIC_OR_PARTITION),
                (1, UNKNOWN_TOPIC_OR_PARTITION),
                (0, ILLEGAL_GENERATION),
            ],
        ),
        (missing_topic, [(0, UNKNOWN_TOPIC_OR_PARTITION)]),
        (other, [(0, ILLEGAL_GENERATION)]),
    ]


def test_only_the_accepted_commit_reaches_the_group(fenced: BrokerUnderTest, topic: str) -> None:
    """A refused TxnOffsetCommit holds nothing back: the transaction commits, the group's
    offset stays what the accepted member commit said."""
    group = probe(fenced).name("outcome")
    member = join(fenced, group)
    transactional_id = probe(fenced).name("outcome")
    producer = init_producer(fenced, transactional_id)
    assert add_offsets(fenced, transactional_id, producer, group) == NONE
    current = (member.generation_id, member.member_id, None)
    stale = (member.generation_id + 1, member.member_id, None)

    refused = commit_in(
        fenced, transactional_id, producer, group, LATEST_VERSION, stale, {topic: (0,)}
    )
    assert refused == [(topic, [(0, ILLEGAL_GENERATION)])]
    assert end_transaction(fenced, transactional_id, producer, commit=True) == NONE
    assert committed_offset(fenced, group, topic) == -1

    transactional_id = probe(fenced).name("outcome")
    producer = init_producer(fenced, transactional_id)
    assert add_offsets(fenced, transactional_id, producer, group) == NONE
    accepted = commit_in(
        fenced, transactional_id, producer, group, LATEST_VERSION, current, {topic: (0,)}
    )
    assert accepted == [(topic, [(0, NONE)])]
    assert end_transaction(fenced, transactional_id, producer, commit=True) == NONE
    deadline = time.monotonic() + COMMITTED_TIMEOUT_S
    while committed_offset(fenced, group, topic) != OFFSET:  # markers land after EndTxn
        assert time.monotonic() < deadline, "the committed offset never appeared"
        time.sleep(0.1)


def committed_offset(broker: BrokerUnderTest, group: str, topic: str) -> int:
    find_group_coordinator(broker, group)
    request = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
    response = probe(broker).call(OFFSET_FETCH, OFFSET_FETCH_V, request)
    assert int(response.error_code) == NONE, response
    [[partition]] = [answer.partitions for answer in response.topics]
    assert int(partition.error_code) == NONE, partition
    return int(partition.committed_offset)
