"""A consumer group reading a full-data view ``T.full`` with auto-commit, with each Python
client, against a real ``kshim serve``.

The group consumes the view's live records, its client commits their positions on its
own (``enable.auto.commit``) as it would on any topic, and a new member of the group
resumes after them: only records that reached the view later come to it. The view's
last record is live, so every client's position ends at the high watermark (the view's
gaps are inside it).
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from kshim.testing import BrokerProcess
from tests.e2e.client_helpers import Deadline, unique_topic
from tests.e2e.group_clients import CLIENTS, GroupMember, make_member
from tests.e2e.test_full_view import create_topic, produce

pytestmark = pytest.mark.timeout(120)

POLL_S = 0.2
Write = tuple[bytes, bytes]
Consumed = tuple[int, bytes | None]  # (offset, key)
FIRST: list[Write] = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", b"2")]
FIRST_VIEW: list[Consumed] = [(2, b"a"), (3, b"c"), (4, b"b")]  # 0 and 1 were superseded
LATER: list[Write] = [(b"d", b"1"), (b"a", b"3")]
LATER_VIEW: list[Consumed] = [(5, b"d"), (6, b"a")]


def wait_view_at(bootstrap: str, view: str, high_watermark: int) -> None:
    """Waits until the view has applied its topic up to ``high_watermark``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    deadline = Deadline()
    try:
        while True:
            partition = ConfluentTopicPartition(view, 0)
            _, high = consumer.get_watermark_offsets(partition, timeout=5, cached=False)
            if high >= high_watermark:
                return
            assert not deadline.expired(), f"{view} at {high}, not {high_watermark}"
    finally:
        consumer.close()


def poll(member: GroupMember) -> list[Consumed]:
    return [(record.offset, record.key) for record in member.poll_records(POLL_S)]


def consume_and_commit(member: GroupMember, count: int, end: int) -> list[Consumed]:
    """Polls until ``count`` records came and the client's auto-commit has stored ``end``."""
    consumed: list[Consumed] = []
    deadline = Deadline(40)
    while len(consumed) < count:
        assert not deadline.expired(), f"consumed only {consumed}"
        consumed += poll(member)
    while (committed := member.committed(0)) != end:
        assert not deadline.expired(), f"auto-commit stored {committed}, not {end}"
        consumed += poll(member)  # nothing more; kafka-python auto-commits inside poll
    return consumed


@pytest.mark.parametrize("client", CLIENTS)
def test_group_on_a_view_auto_commits_and_resumes(
    shared_broker: BrokerProcess, client: str
) -> None:
    bootstrap = shared_broker.bootstrap
    topic = unique_topic("full-group")
    view, group = topic + ".full", topic + "-group"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, FIRST)
    wait_view_at(bootstrap, view, len(FIRST))

    first = make_member(
        client, bootstrap, view, group, "first", commit_on_revoke=False, auto_commit=True
    )
    try:
        consumed = consume_and_commit(first, len(FIRST_VIEW), len(FIRST))
    finally:
        first.close()
    assert consumed == FIRST_VIEW

    produce(bootstrap, topic, LATER)
    wait_view_at(bootstrap, view, len(FIRST) + len(LATER))
    second = make_member(
        client, bootstrap, view, group, "second", commit_on_revoke=False, auto_commit=True
    )
    try:
        resumed = consume_and_commit(second, len(LATER_VIEW), len(FIRST) + len(LATER))
    finally:
        second.close()
    assert resumed == LATER_VIEW  # from the committed position, not from the earliest
