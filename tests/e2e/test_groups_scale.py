"""Consumer groups at scale on one broker, with every client family.

- 100 members in one group, about a third each of kafka-python, aiokafka and
  confluent-kafka, share a 200-partition topic: every partition has exactly one owner
  (as the clients see it and as DescribeGroups reports it), and each record is consumed
  once. Then the group's leader leaves (close, so LeaveGroup) and the 99 others must
  hold their new assignment, covering every partition, within 10 s; records produced
  afterwards are again consumed once, and none from before comes again.
  The group is eager (every family's assignors are): a leave revokes everything, and
  members commit what they consumed on revocation (group_clients.py).
- OffsetCommit and OffsetFetch of 10,000 partitions in one request each, raw on the wire:
  each partition's error, and every offset, leader epoch and metadata fetched back exactly,
  by name and with null topics (all of the group's partitions).

A pattern subscription over 2,000 topics, with every client family and Spark, is in
test_groups_pattern.py.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from kshim.client.wire import connect
from kshim.protocol.consumer_protocol import assigned_partitions
from kshim.testing import BrokerProcess, failure_lines, running_broker
from tests.e2e.group_clients import CLIENTS, Consumed
from tests.e2e.group_helpers import (
    MemberPoller,
    MemberThread,
    create_topic,
    produce,
    unique,
    wait_until,
)

pytestmark = pytest.mark.slow

DESCRIBE_GROUPS = 15
STABLE = "Stable"

# ---------------------------------------------------------------------------------------
# 100 members in one group
# ---------------------------------------------------------------------------------------

MEMBERS_PER_CLIENT = 33  # and the leader: 100 members
PARTITIONS = 200  # two per member, so a leave also moves partitions between the others
RECORDS_PER_PARTITION = 5
REBALANCE_LIMIT_S = 10.0  # what the group must do after a member leaves
# Longer than the limit: only the leaver's LeaveGroup, never its session expiring, can
# start the rebalance in time. Also keeps a member slow to heartbeat on a loaded machine
# from being expired while the hundred join.
SESSION_TIMEOUT_MS = 30_000
# aiokafka offers only the roundrobin assignor, so it is the one every member supports.
COMMON_ASSIGNOR = "roundrobin"
FORM_WAIT_S = 90.0  # a hundred clients starting on a shared 2-core machine
CONSUME_WAIT_S = 60.0
OBSERVE_WAIT_S = 60.0  # how long to watch a rebalance that is too slow, to report its time


@dataclass(slots=True)
class Fleet:
    """The members of the big group: kafka-python members and the leader in a thread each,
    aiokafka's and confluent's in one poller per family.

    kafka-python 3.0.12 drops a JoinGroup answer that arrives while no poll() of that
    member is waiting (a finished join task is replaced by a new one), and its leader's
    new JoinGroup starts yet another rebalance: so each kafka-python member has a thread
    that is always inside poll(). The others join in their own background threads.
    """

    threads: list[MemberThread] = field(default_factory=list)
    pollers: list[MemberPoller] = field(default_factory=list)

    def assignments(self) -> dict[str, set[int]]:
        """Each live member's partitions as the client holds them, by client id."""
        owned = {thread.name: thread.assignment() for thread in self.threads if thread.is_alive()}
        for poller in self.pollers:
            owned |= poller.assignments()
        return owned

    def consumed(self) -> list[Consumed]:
        runners: list[MemberThread | MemberPoller] = [*self.threads, *self.pollers]
        return [record for runner in runners for record in runner.consumed()]

    def stop(self) -> None:
        """Closes every member, all families at once."""
        runners: list[MemberThread | MemberPoller] = [*self.threads, *self.pollers]
        for runner in runners:
            runner.request_stop()
        for runner in runners:
            if runner.ident is not None:
                runner.stop()


def member_thread(client: str, bootstrap: str, topic: str, group: str, name: str) -> MemberThread:
    """A member in a thread of its own that is always inside poll() (see Fleet)."""
    return MemberThread(
        client, bootstrap, topic, group, name, pace_s=0, session_timeout_ms=SESSION_TIMEOUT_MS
    )


def start_fleet(bootstrap: str, topic: str, group: str, fleet: Fleet) -> None:
    """Adds 33 members of each client family to ``fleet`` and starts them."""
    subscription = (bootstrap, topic, group)
    numbers = itertools.count(1)
    names = {
        client: [f"m{next(numbers):03d}-{client}" for _ in range(MEMBERS_PER_CLIENT)]
        for client in CLIENTS
    }
    threads = [member_thread("kafka-python", *subscription, name) for name in names["kafka-python"]]
    pollers = [
        MemberPoller(client, *subscription, names[client], session_timeout_ms=SESSION_TIMEOUT_MS)
        for client in ("aiokafka", "confluent")
    ]
    fleet.threads += threads
    fleet.pollers += pollers
    for runner in [*threads, *pollers]:
        runner.start()


def owners_by_client(
    bootstrap: str, group: str, topic: str
) -> tuple[str, str, dict[str, set[int]]]:
    """(state, protocol, each member's partitions of ``topic`` by client id) as
    DescribeGroups reports them; a member's assignment is only shown while Stable."""
    with connect(bootstrap) as connection:
        response = connection.call(DESCRIBE_GROUPS, 5, {"groups": [group]})
    (described,) = response.groups
    assert described.error_code == 0, described
    owners = {
        member.client_id: {
            partition
            for name, partition in assigned_partitions(member.member_assignment) or ()
            if name == topic
        }
        for member in described.members
    }
    return described.group_state, described.protocol_data, owners


def partitioned(owned: dict[str, set[int]]) -> bool:
    """Every member holds partitions, and together they hold each partition exactly once."""
    held = [partition for partitions in owned.values() for partition in partitions]
    return all(owned.values()) and sorted(held) == list(range(PARTITIONS))


def settled(fleet: Fleet, bootstrap: str, group: str, topic: str, members: int) -> bool:
    """The group is Stable with ``members`` members, every member holds the assignment the
    broker gave it in this generation, and these cover every partition once."""
    state, _, broker_view = owners_by_client(bootstrap, group, topic)
    clients_view = fleet.assignments()
    return (
        state == STABLE
        and len(broker_view) == len(clients_view) == members
        and clients_view == broker_view
        and partitioned(clients_view)
    )


def expected_records(rounds: int) -> set[Consumed]:
    return {
        (partition, offset)
        for partition in range(PARTITIONS)
        for offset in range(rounds * RECORDS_PER_PARTITION)
    }


def consume_round(fleet: Fleet, bootstrap: str, topic: str, rounds: int) -> None:
    """Produces RECORDS_PER_PARTITION more records to every partition and waits until the
    group has consumed every record so far; asserts none was consumed twice."""
    produce(bootstrap, topic, PARTITIONS, RECORDS_PER_PARTITION)
    expected = expected_records(rounds)
    wait_until(lambda: set(fleet.consumed()) >= expected, CONSUME_WAIT_S, "every record")
    consumed = fleet.consumed()
    assert len(consumed) == len(set(consumed)), "a record was consumed twice"
    assert set(consumed) == expected


@pytest.mark.timeout(240)
@pytest.mark.parametrize("leader_client", CLIENTS)
def test_hundred_mixed_members_rebalance_within_ten_seconds_after_the_leader_leaves(
    fresh_broker: BrokerProcess, leader_client: str
) -> None:
    """The first member leads (Kafka keeps a leader that rejoins), so each family's
    assignor serves the whole mixed group in one parametrisation, and the leave also
    hands leadership to another member."""
    bootstrap = fresh_broker.bootstrap
    topic, group = unique("scale"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    leader = member_thread(leader_client, bootstrap, topic, group, f"m000-{leader_client}")
    fleet = Fleet(threads=[leader])
    leader.start()
    try:
        wait_until(lambda: leader.assignment() == set(range(PARTITIONS)), 30, "the leader alone")
        start_fleet(bootstrap, topic, group, fleet)
        formed_s = wait_until(
            lambda: settled(fleet, bootstrap, group, topic, 100), FORM_WAIT_S, "100 members"
        )
        _, protocol, _ = owners_by_client(bootstrap, group, topic)
        assert protocol == COMMON_ASSIGNOR
        consume_round(fleet, bootstrap, topic, rounds=1)

        leader.commit()  # where its partitions' next owners start
        left_at = time.monotonic()
        leader.stop()  # close(): LeaveGroup
        wait_until(
            lambda: settled(fleet, bootstrap, group, topic, 99), OBSERVE_WAIT_S, "99 members"
        )
        rebalance_s = time.monotonic() - left_at
        print(f"leader {leader_client}: 100 members formed in {formed_s:.1f} s; "
              f"99 rebalanced {rebalance_s:.2f} s after the leader left")  # fmt: skip
        assert rebalance_s < REBALANCE_LIMIT_S
        consume_round(fleet, bootstrap, topic, rounds=2)
    finally:
        fleet.stop()
    problems = failure_lines(fresh_broker.log_text())
    assert not problems, "broker log:\n" + "\n".join(problems[:20])


# ---------------------------------------------------------------------------------------
# OffsetCommit and OffsetFetch of 10,000 partitions in one request
# ---------------------------------------------------------------------------------------

OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS, CREATE_PARTITIONS = 8, 9, 19, 37
NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE = 0, 3, 12
WIDE_TOPIC_PARTITIONS = 10_000  # one topic
NARROW_TOPICS, NARROW_TOPIC_PARTITIONS = 1_000, 10  # or many small ones: 10,000 as well
TOPICS_PER_CREATE = 500
# Records one CreateTopics or CreatePartitions may need (a record per partition added):
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP, which kshim applies as well.
MAX_PARTITIONS_PER_REQUEST = 10_000
MAX_METADATA_BYTES = 4_096  # offset.metadata.max.bytes, kshim's default as Kafka's
WIRE_TIMEOUT_S = 60.0
# (OffsetCommit, OffsetFetch) versions: the newest, flexible, with leader epochs and the
# batched OffsetFetch of KIP-709; and older ones without either.
VERSIONS = [(9, 8), (3, 5)]
FIRST_COMMIT_EPOCH_VERSION, FIRST_FETCH_EPOCH_VERSION = 6, 5

TopicPartition = tuple[str, int]
Fetched = tuple[int, int, str | None, int]  # offset, leader epoch, metadata, error


@dataclass(frozen=True, slots=True)
class OffsetTopics:
    """A broker of its own holding both shapes of 10,000 partitions, and a spare topic."""

    broker: BrokerProcess
    shapes: dict[str, list[TopicPartition]]
    spare: TopicPartition  # exists, and is committed to with metadata over the limit


@pytest.fixture(scope="module")
def offset_topics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OffsetTopics]:
    prefix = unique("offsets")
    wide = f"{prefix}-wide"
    narrow = [f"{prefix}-narrow-{index:04d}" for index in range(NARROW_TOPICS)]
    spare = f"{prefix}-spare"
    topics = {wide: WIDE_TOPIC_PARTITIONS, spare: 1}
    topics |= dict.fromkeys(narrow, NARROW_TOPIC_PARTITIONS)
    data_dir = tmp_path_factory.mktemp("offsets") / "data"
    with running_broker(data_dir=str(data_dir)) as broker:
        create_wire_topics(broker.bootstrap, topics)
        shapes = {
            "one topic of 10,000": [(wide, p) for p in range(WIDE_TOPIC_PARTITIONS)],
            "1,000 topics of 10": [(t, p) for t in narrow for p in range(NARROW_TOPIC_PARTITIONS)],
        }
        yield OffsetTopics(broker, shapes, (spare, 0))
    problems = failure_lines(broker.log_text())
    assert not problems, "broker log:\n" + "\n".join(problems[:20])


def create_wire_topics(bootstrap: str, partitions: dict[str, int]) -> None:
    """Creates each topic with one partition, at most TOPICS_PER_CREATE topics a
    CreateTopics v5, then grows each to its count with CreatePartitions v3, so that no
    request needs more than one controller batch of records (as Kafka's
    QuorumController.MAX_RECORDS_PER_USER_OP limits it); asserts every answer is NONE."""
    names = list(partitions)
    timeout_ms = int(WIRE_TIMEOUT_S * 1000)
    with connect(bootstrap, WIRE_TIMEOUT_S) as connection:
        for start in range(0, len(names), TOPICS_PER_CREATE):
            batch = names[start : start + TOPICS_PER_CREATE]
            topics = [
                {"name": name, "num_partitions": 1, "replication_factor": 1} for name in batch
            ]
            answer = connection.call(CREATE_TOPICS, 5, {"topics": topics, "timeout": timeout_ms})
            assert {(t.name, t.error_code) for t in answer.topics} == {(n, NONE) for n in batch}
        for batch in _growth_batches(partitions):
            grown = [
                {"name": name, "count": partitions[name], "assignments": None} for name in batch
            ]
            fields = {"topics": grown, "timeout": timeout_ms, "validate_only": False}
            answer = connection.call(CREATE_PARTITIONS, 3, fields)
            assert {(r.name, r.error_code) for r in answer.results} == {(n, NONE) for n in batch}


def _growth_batches(partitions: dict[str, int]) -> Iterator[list[str]]:
    """The topics to grow from one partition, grouped so that each group adds at most
    MAX_PARTITIONS_PER_REQUEST partitions."""
    batch: list[str] = []
    added = 0
    for name, count in partitions.items():
        if count <= 1:
            continue
        if batch and added + count - 1 > MAX_PARTITIONS_PER_REQUEST:
            yield batch
            batch, added = [], 0
        batch.append(name)
        added += count - 1
    if batch:
        yield batch


def commit_fields(
    group: str, offsets: dict[TopicPartition, tuple[int, int, str]]
) -> dict[str, object]:
    """A standalone OffsetCommit (no generation, no member) of (offset, epoch, metadata)."""
    by_topic: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), (offset, epoch, metadata) in offsets.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": epoch,
                "committed_metadata": metadata,
            }
        )
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time": -1,  # v2-4: keep them for offsets.retention.minutes
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    }


def commit_errors(answer: Any) -> list[tuple[TopicPartition, int]]:
    """Each partition's error in an OffsetCommit answer, in answer order."""
    return [
        ((topic.name, partition.partition_index), int(partition.error_code))
        for topic in answer.topics
        for partition in topic.partitions
    ]


def fetch_offsets(
    bootstrap: str, version: int, group: str, wanted: Sequence[TopicPartition] | None
) -> list[tuple[TopicPartition, Fetched]]:
    """One OffsetFetch of ``wanted`` (None: every partition the group committed), its
    partitions in answer order; asserts the group-level error is NONE."""
    topics = None
    if wanted is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in wanted:
            by_topic.setdefault(topic, []).append(partition)
        topics = [{"name": name, "partition_indexes": parts} for name, parts in by_topic.items()]
    if version >= 8:  # KIP-709: a list of groups
        fields: dict[str, object] = {"groups": [{"group_id": group, "topics": topics}]}
    else:
        fields = {"group_id": group, "topics": topics}
    with connect(bootstrap, WIRE_TIMEOUT_S) as connection:
        answer = connection.call(OFFSET_FETCH, version, fields)
    if version >= 8:
        (answer,) = answer.groups
    assert answer.error_code == NONE
    return [
        (
            (topic.name, partition.partition_index),
            (
                partition.committed_offset,
                partition.committed_leader_epoch,
                partition.metadata,
                int(partition.error_code),
            ),
        )
        for topic in answer.topics
        for partition in topic.partitions
    ]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("commit_version", "fetch_version"), VERSIONS)
@pytest.mark.parametrize("shape", ["one topic of 10,000", "1,000 topics of 10"])
def test_offset_commit_and_fetch_of_10000_partitions_in_one_request(
    offset_topics: OffsetTopics, shape: str, commit_version: int, fetch_version: int
) -> None:
    """Three more partitions ride in the commit, each refused alone: a partition and a
    topic that do not exist, and metadata one byte over the limit."""
    bootstrap, group = offset_topics.broker.bootstrap, unique("offsets")
    partitions = offset_topics.shapes[shape]
    first_topic = partitions[0][0]
    offsets = {
        topic_partition: (1_000 + index, index % 7, f"{topic_partition[0]}/{topic_partition[1]}")
        for index, topic_partition in enumerate(partitions)
    }
    too_large = "m" * (MAX_METADATA_BYTES + 1)
    refused = {  # (offset, epoch, metadata) and the error each must get
        (first_topic, 10_000_000): ((1, 0, ""), UNKNOWN_TOPIC_OR_PARTITION),
        (unique("no-such-topic"), 0): ((1, 0, ""), UNKNOWN_TOPIC_OR_PARTITION),
        offset_topics.spare: ((1, 0, too_large), OFFSET_METADATA_TOO_LARGE),
    }
    request = offsets | {
        topic_partition: commit for topic_partition, (commit, _) in refused.items()
    }
    started = time.monotonic()
    with connect(bootstrap, WIRE_TIMEOUT_S) as connection:
        answer = connection.call(OFFSET_COMMIT, commit_version, commit_fields(group, request))
    committed_s = time.monotonic() - started
    errors = commit_errors(answer)
    assert len(errors) == len(request)
    assert dict(errors) == dict.fromkeys(offsets, NONE) | {
        tp: error for tp, (_, error) in refused.items()
    }

    epochs_kept = commit_version >= FIRST_COMMIT_EPOCH_VERSION
    epochs_shown = fetch_version >= FIRST_FETCH_EPOCH_VERSION
    expected = {
        topic_partition: (offset, epoch if epochs_kept and epochs_shown else -1, metadata, NONE)
        for topic_partition, (offset, epoch, metadata) in offsets.items()
    }
    started = time.monotonic()
    by_name = fetch_offsets(bootstrap, fetch_version, group, [*offsets, offset_topics.spare])
    everything = fetch_offsets(bootstrap, fetch_version, group, None)
    fetched_s = time.monotonic() - started
    print(f"{shape}, v{commit_version}/v{fetch_version}: commit {committed_s:.2f} s, "
          f"two fetches {fetched_s:.2f} s")  # fmt: skip
    # The spare partition exists but has nothing committed: offset -1, no error (as Kafka).
    assert len(by_name) == len(offsets) + 1
    assert dict(by_name) == expected | {offset_topics.spare: (-1, -1, "", NONE)}
    assert len(everything) == len(offsets)
    assert dict(everything) == expected
