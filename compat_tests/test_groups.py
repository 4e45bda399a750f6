"""Consumer groups: a subscribed member per client, and each admin's view of the groups.

Joining is slow on some brokers (Tansu's first JoinGroup takes 5-23 s), so one module
fixture starts a member of each client at once, each in its own group on one topic, and
keeps them in the group while the scenarios look at them; the last scenario closes them
and checks that each left its group.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.clients import GroupRun, GroupView, admin_client_params
from compat_tests.deviations import (
    TANSU_AUTHORIZED_OPERATIONS,
    TANSU_CONSUMER_GROUP_DESCRIBE,
    TANSU_DESCRIBE_GROUPS_EMPTY,
    TANSU_GENERATION_ZERO,
    TANSU_OFFSET_FETCH_ALL_TOPICS,
    deviates,
)
from compat_tests.drivers import admin_driver
from compat_tests.support import create_topic, reference, require_groups
from kshim.client.wire import WireConnection
from tests.e2e.client_helpers import SampleRecord, expected_records, sample_records

pytestmark = [pytest.mark.consumer_group, pytest.mark.timeout(180)]

GROUP_CLIENTS = ("kafka-python", "aiokafka", "confluent")
RECORDS = 6
JOIN_TIMEOUT_S = 60.0
DESCRIBE_GROUPS_KEY = 15
# With a single member the group takes that member's first assignor: kafka-python and
# librdkafka list range first, aiokafka roundrobin (docs/protocol-notes.md §1.1).
PROTOCOL = {"kafka-python": "range", "aiokafka": "roundrobin", "confluent": "range"}


@dataclass
class LiveGroups:
    topic: str
    records: list[SampleRecord]
    groups: dict[str, str]
    members: dict[str, GroupRun]
    closed: bool = field(default=False)

    def close_all(self) -> None:
        """Releases every member (each closes its consumer, leaving its group); idempotent."""
        if not self.closed:
            self.closed = True
            for member in self.members.values():
                member.finish()


@pytest.fixture(scope="module")
def live_groups(broker: BrokerUnderTest) -> Iterator[LiveGroups]:
    require_groups(broker)
    topic = create_topic(broker, "groups")
    records = sample_records(RECORDS)
    assert reference().produce(broker.bootstrap, topic, [records]) == list(range(RECORDS))
    groups = {client: f"compat-group-{client}-{uuid.uuid4().hex[:8]}" for client in GROUP_CLIENTS}
    members = {
        client: admin_driver(client).join_group(broker.bootstrap, topic, groups[client], RECORDS)
        for client in GROUP_CLIENTS
    }
    live = LiveGroups(topic, records, groups, members)
    try:
        for member in members.values():
            member.ready.wait(JOIN_TIMEOUT_S)
        yield live
    finally:
        live.close_all()


def described(broker: BrokerUnderTest, group: str) -> Any:
    """DescribeGroups v0 sent raw: the broker's own view, not a client library's."""
    with WireConnection(broker.host, broker.port) as connection:
        response = connection.call(DESCRIBE_GROUPS_KEY, 0, {"groups": [group]})
    [answer] = response.groups
    assert (int(answer.error_code), answer.group_id) == (0, group)
    return answer


def member_of(live: LiveGroups, client: str) -> GroupRun:
    member = live.members[client]
    assert member.error is None, f"{client} member failed: {member.error!r}"
    assert member.ready.is_set(), f"{client} member did not join within {JOIN_TIMEOUT_S} s"
    return member


@deviates(TANSU_DESCRIBE_GROUPS_EMPTY)
@pytest.mark.parametrize("client", admin_client_params())
def test_group_consumer(broker: BrokerUnderTest, live_groups: LiveGroups, client: str) -> None:
    """The member got every record, committed offset 6, and is the group's only member."""
    member = member_of(live_groups, client)
    group = live_groups.groups[client]

    assert member.records == expected_records(live_groups.records)
    assert reference().committed(broker.bootstrap, group, live_groups.topic) == {0: RECORDS}
    answer = described(broker, group)
    assert (answer.group_state, answer.protocol_type, answer.protocol_data) == (
        "Stable",
        "consumer",
        PROTOCOL[client],
    )
    assert [m.client_id for m in answer.members] == [member.client_id]


@pytest.mark.admin
@pytest.mark.parametrize("client", admin_client_params())
def test_admin_lists_groups(broker: BrokerUnderTest, live_groups: LiveGroups, client: str) -> None:
    listed = admin_driver(client).list_groups(broker.bootstrap)

    groups = live_groups.groups.values()
    assert {group: listed.get(group) for group in groups} == dict.fromkeys(groups, "consumer")


@pytest.mark.admin
@deviates(TANSU_AUTHORIZED_OPERATIONS, client="kafka-python")
@deviates(TANSU_DESCRIBE_GROUPS_EMPTY, client="aiokafka")
@deviates(TANSU_CONSUMER_GROUP_DESCRIBE, client="confluent")
@pytest.mark.parametrize("client", admin_client_params())
def test_admin_describes_a_group(
    broker: BrokerUnderTest, live_groups: LiveGroups, client: str
) -> None:
    """Every admin describes the kafka-python member's group the same way."""
    member = member_of(live_groups, "kafka-python")

    view = admin_driver(client).describe_group(broker.bootstrap, live_groups.groups["kafka-python"])

    assignment = ((live_groups.topic, (0,)),)
    assert view == GroupView("Stable", "consumer", "range", ((member.client_id, assignment),))


@pytest.mark.admin
@deviates(TANSU_OFFSET_FETCH_ALL_TOPICS, client="aiokafka")
@pytest.mark.parametrize("client", admin_client_params())
def test_admin_lists_committed_offsets(
    broker: BrokerUnderTest, live_groups: LiveGroups, client: str
) -> None:
    admin = admin_driver(client)

    committed = {
        owner: admin.committed(broker.bootstrap, group, live_groups.topic)
        for owner, group in live_groups.groups.items()
    }

    assert committed == {owner: {0: RECORDS} for owner in GROUP_CLIENTS}


@deviates(TANSU_GENERATION_ZERO, client="aiokafka")
@pytest.mark.parametrize("client", admin_client_params())
def test_member_leaves_its_group_on_close(
    broker: BrokerUnderTest, live_groups: LiveGroups, client: str
) -> None:
    """After close() the group is Empty at once (LeaveGroup), not after the session timeout,
    and keeps its protocol type and committed offsets."""
    member_of(live_groups, client)

    live_groups.close_all()

    answer = described(broker, live_groups.groups[client])
    assert (answer.group_state, answer.protocol_type, answer.protocol_data, answer.members) == (
        "Empty",
        "consumer",
        "",
        (),
    )
    committed = reference().committed(
        broker.bootstrap, live_groups.groups[client], live_groups.topic
    )
    assert committed == {0: RECORDS}
