"""Consumer groups with each Python client (kafka-python, aiokafka, confluent-kafka).

The clients reach kshim on their own protocol versions (JoinGroup v7/v5/v5,
SyncGroup v5/v3/v3, OffsetCommit v8/v3/v9, OffsetFetch v8/v3/v9) and with
their own assignors (range for kafka-python and librdkafka, roundrobin for
aiokafka). Scenarios:

- one member consumes, commits, is restarted, and resumes right after its commit;
- two members split a 2-partition topic; a third joins mid-stream, the group
  rebalances, and with commits on revoke no record is consumed twice;
- a member killed with SIGKILL stops heartbeating, is expired after the
  session timeout (6 s), and the survivor gets its partition.

A group reading a full-data view ``T.full`` is in test_groups_full_view.py.
"""

from __future__ import annotations

import itertools
import time

import pytest

from kshim.testing import BrokerProcess
from tests.e2e.group_clients import CLIENTS, SESSION_TIMEOUT_MS
from tests.e2e.group_helpers import (
    MemberProcess,
    MemberThread,
    create_topic,
    produce,
    unique,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)

JOIN_WAIT_S = 20.0
# Expiry, then the survivor's next heartbeat (0.5 s) and its rejoin; the margin absorbs
# a loaded test machine.
REASSIGN_WITHIN_S = SESSION_TIMEOUT_MS / 1000 + 4.0


def split_evenly(first: set[int], second: set[int]) -> bool:
    """Each member owns one of the two partitions."""
    return len(first) == len(second) == 1 and first | second == {0, 1}


@pytest.mark.parametrize("client", CLIENTS)
def test_member_resumes_after_its_last_commit(shared_broker: BrokerProcess, client: str) -> None:
    bootstrap = shared_broker.bootstrap
    topic, group = unique("resume"), unique("group")
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, 1, 20)
    first = MemberThread(client, bootstrap, topic, group, "first", commit_on_revoke=False)
    first.start()
    wait_until(lambda: len(first.consumed()) >= 6, JOIN_WAIT_S, "the first records")
    first.commit()
    wait_until(lambda: len(first.consumed()) > first.committed[0], JOIN_WAIT_S, "more records")
    first.stop()  # what it consumed after the commit was never committed: it comes again
    resume_at = first.committed[0]
    assert 6 <= resume_at < 20

    second = MemberThread(client, bootstrap, topic, group, "second", commit_on_revoke=False)
    second.start()
    try:
        wait_until(lambda: len(second.consumed()) >= 20 - resume_at, JOIN_WAIT_S, "the rest")
    finally:
        second.stop()
    assert second.consumed() == [(0, offset) for offset in range(resume_at, 20)]


@pytest.mark.parametrize("client", CLIENTS)
def test_third_member_triggers_rebalance_without_duplicates(
    shared_broker: BrokerProcess, client: str
) -> None:
    bootstrap = shared_broker.bootstrap
    topic, group = unique("split"), unique("group")
    per_partition = 150
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 2, per_partition)
    # Member ids start with the client id, and both assignors order members by id: the
    # newcomer "a-..." sorts first, so the partitions change hands in the rebalance.
    first = MemberThread(client, bootstrap, topic, group, "b-member")
    second = MemberThread(client, bootstrap, topic, group, "c-member")
    third = MemberThread(client, bootstrap, topic, group, "a-member")
    members = [first, second, third]
    first.start()
    second.start()
    try:
        wait_until(
            lambda: split_evenly(first.assignment(), second.assignment()),
            JOIN_WAIT_S,
            "one partition each",
        )
        wait_until(
            lambda: min(len(first.consumed()), len(second.consumed())) >= 10,
            JOIN_WAIT_S,
            "both members consuming",
        )
        third.start()
        wait_until(lambda: bool(third.assignment()), JOIN_WAIT_S, "the third member's share")
        assert len(set().union(*(m.consumed() for m in members))) < 2 * per_partition
        wait_until(
            lambda: len(set().union(*(m.consumed() for m in members))) == 2 * per_partition,
            60,
            "every record",
        )
        final = [m.assignment() for m in members]
    finally:
        for member in members:
            member.stop()
    consumed = list(itertools.chain.from_iterable(m.consumed() for m in members))
    assert len(consumed) == len(set(consumed)) == 2 * per_partition, "a record came twice"
    assert sorted(p for assignment in final for p in assignment) == [0, 1]
    assert final[2] == {0}  # the newcomer took partition 0 over from the first member


@pytest.mark.parametrize("client", CLIENTS)
def test_silent_member_expires_and_its_partition_moves(
    shared_broker: BrokerProcess, client: str
) -> None:
    bootstrap = shared_broker.bootstrap
    topic, group = unique("expiry"), unique("group")
    create_topic(bootstrap, topic, 2)
    doomed = MemberProcess(client, bootstrap, topic, group, "doomed")
    survivor = MemberThread(client, bootstrap, topic, group, "survivor")
    survivor.start()
    try:
        wait_until(
            lambda: split_evenly(doomed.refresh(), survivor.assignment()),
            JOIN_WAIT_S,
            "one partition each",
        )
        killed_at = time.monotonic()
        doomed.kill()
        elapsed = wait_until(
            lambda: survivor.assignment() == {0, 1},
            REASSIGN_WITHIN_S,
            "the survivor to own both partitions",
        )
    finally:
        doomed.kill()
        survivor.stop()
    print(f"{client}: partitions reassigned {time.monotonic() - killed_at:.1f} s after kill -9")
    # Not before the session timeout: heartbeats, not the closed socket, decide expiry.
    assert elapsed >= SESSION_TIMEOUT_MS / 1000 - 1.0
