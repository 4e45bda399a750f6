"""Committed offsets across broker restarts and kill -9, and the ``kshim groups`` table.

Each OffsetCommit is an fsynced LMDB transaction before the client hears back,
so a commit acknowledged just before kill -9 must be there after the restart.
Group membership is not persisted (members rejoin, as after a Kafka
coordinator move); only the offsets matter for resuming.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Consumer, TopicPartition

from kshim.testing import BrokerProcess
from tests.e2e.group_clients import CLIENTS
from tests.e2e.group_helpers import MemberThread, create_topic, produce, unique, wait_until

pytestmark = pytest.mark.timeout(120)

WAIT_S = 20.0
RECORDS = 20


def restart(broker: BrokerProcess, how: str) -> None:
    if how == "kill -9":
        broker.kill()
    else:
        broker.stop()
    broker.start()


@pytest.mark.parametrize("how", ["stop", "kill -9"])
@pytest.mark.parametrize("client", CLIENTS)
def test_commit_survives_broker_restart(fresh_broker: BrokerProcess, client: str, how: str) -> None:
    bootstrap = fresh_broker.bootstrap
    topic, group = unique("durable"), unique("group")
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, 1, RECORDS)
    first = MemberThread(client, bootstrap, topic, group, "first", commit_on_revoke=False)
    first.start()
    try:
        wait_until(lambda: len(first.consumed()) >= 6, WAIT_S, "the first records")
        first.commit()
        restart(fresh_broker, how)  # right after the acknowledgement
    finally:
        first.stop()
    resume_at = first.committed[0]

    second = MemberThread(client, bootstrap, topic, group, "second", commit_on_revoke=False)
    second.start()
    try:
        wait_until(lambda: len(second.consumed()) >= RECORDS - resume_at, WAIT_S, "the rest")
    finally:
        second.stop()
    assert second.consumed()[0] == (0, resume_at)
    assert second.consumed() == [(0, offset) for offset in range(resume_at, RECORDS)]


def kshim_groups(*arguments: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-m", "kshim", "groups", *arguments],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return completed.stdout


def commit_standalone(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """An OffsetCommit with generation -1, as tools that reset offsets send it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        partitions = [TopicPartition(topic, p, offset) for p, offset in offsets.items()]
        consumer.commit(offsets=partitions, asynchronous=False)
    finally:
        consumer.close()


def test_kshim_groups_prints_committed_offsets_and_lag(fresh_broker: BrokerProcess) -> None:
    bootstrap = fresh_broker.bootstrap
    create_topic(bootstrap, "orders", 2)
    produce(bootstrap, "orders", 2, 5)
    commit_standalone(bootstrap, "billing", "orders", {0: 3, 1: 5})
    member = MemberThread(
        "confluent", bootstrap, "orders", "billing", "billing-app", commit_on_revoke=False
    )
    member.start()
    try:
        wait_until(lambda: member.assignment() == {0, 1}, WAIT_S, "the member's assignment")
        live = kshim_groups("--bootstrap", bootstrap)
    finally:
        member.stop()
    assert live.splitlines() == [
        "GROUP    TOPIC   PARTITION  COMMITTED  LOG-END  LAG  MEMBERS",
        "billing  orders          0          3        5    2        1",
        "billing  orders          1          5        5    0        1",
    ]
    after = kshim_groups("--bootstrap", bootstrap, "--group", "billing")
    assert after.splitlines()[1:] == [
        "billing  orders          0          3        5    2        0",
        "billing  orders          1          5        5    0        0",
    ]
    unknown = subprocess.run(
        [sys.executable, "-m", "kshim", "groups", "--bootstrap", bootstrap, "--group", "nobody"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert unknown.returncode == 1
    assert unknown.stdout == ""
    assert unknown.stderr.splitlines() == [
        "kshim groups: error: consumer group nobody does not exist"
    ]


def test_kshim_groups_reports_an_unreachable_broker() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "kshim", "groups", "--bootstrap", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert completed.returncode == 1
    assert completed.stderr.startswith("kshim groups:")
