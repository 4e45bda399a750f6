"""KIP-430's authorized operations in Metadata (topics v8+, the cluster v8-v10) and
DescribeGroups (v3+): the principal's operations where ACLs apply, every supported one
without an authoriser or for a super user, and Kafka's "not asked" value otherwise.

The expected bitfields are spelled out from Kafka's operation codes (AclOperation), not
computed with the broker's own helpers.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kshim.broker.broker import Broker
from kshim.protocol.acls import Operation, Permission
from kshim.protocol.messages.describe_groups import DescribeGroupsRequest
from kshim.protocol.metadata_request import MetadataRequest
from tests.broker.access.support import (
    ADMIN,
    GROUP,
    OTHER,
    TOPIC,
    call,
    grant_cluster,
    grant_group,
    grant_topic,
    open_broker,
)

METADATA, DESCRIBE_GROUPS = 3, 15
NOT_ASKED = -(2**31)
# Bit n for AclOperation code n: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 8, 16, 32, 64, 128, 256
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 512, 1024, 2048, 4096
EVERY_TOPIC_OPERATION = (
    READ | WRITE | CREATE | DELETE | ALTER | DESCRIBE | DESCRIBE_CONFIGS | ALTER_CONFIGS
)
EVERY_CLUSTER_OPERATION = (
    CREATE | CLUSTER_ACTION | DESCRIBE_CONFIGS | ALTER_CONFIGS | IDEMPOTENT_WRITE | ALTER | DESCRIBE
)
# Kafka 4.0's: groups take config operations since KIP-848.
EVERY_GROUP_OPERATION = READ | DESCRIBE | DELETE | DESCRIBE_CONFIGS | ALTER_CONFIGS
VIEW = TOPIC + ".full"


@pytest.fixture
async def open_broker_without_acls(tmp_path: Path) -> AsyncIterator[Broker]:
    broker = await open_broker(tmp_path / "no-acls", **{"authorizer.class.name": ""})
    await broker.topics.create(TOPIC, 1, {"kshim.full.view": "true"})
    yield broker
    await broker.close()


def asking(*topics: str, cluster: bool = False) -> MetadataRequest:
    return MetadataRequest(
        topics=topics or None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=cluster,
        include_topic_authorized_operations=True,
    )


async def topic_operations(
    broker: Broker, request: MetadataRequest, version: int = 12, principal: str | None = None
) -> dict[str, int]:
    answer = await call(broker, METADATA, version, request, **_as(principal))
    return {topic.name: topic.topic_authorized_operations for topic in answer.topics}


async def cluster_operations(
    broker: Broker, principal: str | None = None, version: int = 10
) -> int:
    answer = await call(broker, METADATA, version, asking(TOPIC, cluster=True), **_as(principal))
    return int(answer.cluster_authorized_operations)


async def group_operations(
    broker: Broker,
    asked: bool = True,
    version: int = 5,
    principal: str | None = None,
    groups: tuple[str, ...] = (GROUP, "other-group"),
) -> dict[str, int]:
    request = DescribeGroupsRequest(groups=list(groups), include_authorized_operations=asked)
    answer = await call(broker, DESCRIBE_GROUPS, version, request, **_as(principal))
    return {group.group_id: group.authorized_operations for group in answer.groups}


def _as(principal: str | None) -> dict[str, str]:
    return {} if principal is None else {"principal": principal}


# Metadata: topics


async def test_a_topic_shows_the_operations_its_acls_allow_with_those_they_imply(
    broker: Broker,
) -> None:
    grant_topic(broker, TOPIC, Operation.READ)
    assert await topic_operations(broker, asking(TOPIC)) == {TOPIC: READ | DESCRIBE}
    grant_topic(broker, TOPIC, Operation.ALTER_CONFIGS, Operation.WRITE)
    assert await topic_operations(broker, asking(TOPIC)) == {
        TOPIC: READ | WRITE | DESCRIBE | DESCRIBE_CONFIGS | ALTER_CONFIGS
    }


async def test_a_deny_takes_its_operation_out(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.ALL)
    grant_topic(broker, TOPIC, Operation.DELETE, permission=Permission.DENY)
    assert await topic_operations(broker, asking(TOPIC)) == {TOPIC: EVERY_TOPIC_OPERATION & ~DELETE}


async def test_every_listed_topic_in_an_all_topics_answer_shows_its_own(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    grant_topic(broker, OTHER, Operation.WRITE)
    assert await topic_operations(broker, asking()) == {
        TOPIC: DESCRIBE,
        OTHER: WRITE | DESCRIBE,
    }


async def test_a_refused_topic_and_a_request_not_asking_show_not_asked(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.READ)
    assert await topic_operations(broker, asking(TOPIC, OTHER)) == {
        TOPIC: READ | DESCRIBE,
        OTHER: NOT_ASKED,
    }
    not_asking = MetadataRequest(topics=(TOPIC,), allow_auto_topic_creation=False)
    assert await topic_operations(broker, not_asking) == {TOPIC: NOT_ASKED}


async def test_a_view_shows_its_topics_operations(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.READ)
    assert await topic_operations(broker, asking(VIEW)) == {VIEW: READ | DESCRIBE}


async def test_a_super_user_sees_every_topic_operation(broker: Broker) -> None:
    answered = await topic_operations(broker, asking(TOPIC), principal=ADMIN)
    assert answered == {TOPIC: EVERY_TOPIC_OPERATION}


@pytest.mark.parametrize("version", [8, 9, 10, 11, 12])
async def test_every_version_from_8_carries_the_topics_operations(
    broker: Broker, version: int
) -> None:
    grant_topic(broker, TOPIC, Operation.WRITE)
    answered = await topic_operations(broker, asking(TOPIC), version=version)
    assert answered == {TOPIC: WRITE | DESCRIBE}


async def test_without_an_authoriser_every_supported_operation_is_shown(
    open_broker_without_acls: Broker,
) -> None:
    broker = open_broker_without_acls
    assert await topic_operations(broker, asking(TOPIC, VIEW)) == {
        TOPIC: EVERY_TOPIC_OPERATION,
        VIEW: EVERY_TOPIC_OPERATION,
    }
    assert await topic_operations(broker, asking()) == {TOPIC: EVERY_TOPIC_OPERATION}
    assert await cluster_operations(broker) == EVERY_CLUSTER_OPERATION
    assert await group_operations(broker) == {
        GROUP: EVERY_GROUP_OPERATION,
        "other-group": EVERY_GROUP_OPERATION,
    }
    assert await group_operations(broker, asked=False) == {
        GROUP: NOT_ASKED,
        "other-group": NOT_ASKED,
    }


# Metadata: the cluster (v8-v10)


async def test_the_cluster_shows_nothing_without_describe_on_it(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    grant_cluster(broker, Operation.CREATE)
    assert await cluster_operations(broker) == 0


async def test_the_cluster_shows_its_operations_with_describe_on_it(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    grant_cluster(broker, Operation.DESCRIBE, Operation.IDEMPOTENT_WRITE)
    assert await cluster_operations(broker) == DESCRIBE | IDEMPOTENT_WRITE
    assert await cluster_operations(broker, principal=ADMIN) == EVERY_CLUSTER_OPERATION


async def test_the_cluster_is_not_shown_unless_asked(broker: Broker) -> None:
    grant_cluster(broker, Operation.DESCRIBE)
    answer = await call(broker, METADATA, 10, asking(TOPIC))
    assert answer.cluster_authorized_operations == NOT_ASKED


# DescribeGroups (v3+)


async def test_a_group_shows_the_operations_its_acls_allow(broker: Broker) -> None:
    grant_group(broker, GROUP, Operation.READ)
    assert await group_operations(broker) == {GROUP: READ | DESCRIBE, "other-group": NOT_ASKED}
    assert await group_operations(broker, asked=False) == {
        GROUP: NOT_ASKED,
        "other-group": NOT_ASKED,
    }
    assert await group_operations(broker, principal=ADMIN) == {
        GROUP: EVERY_GROUP_OPERATION,
        "other-group": EVERY_GROUP_OPERATION,
    }


async def test_a_group_described_with_an_error_shows_not_asked(
    broker: Broker, open_broker_without_acls: Broker
) -> None:
    """Kafka puts operations on a group described without an error only: an empty group
    id is INVALID_GROUP_ID, with none."""
    grant_group(broker, "*", Operation.DESCRIBE)
    assert await group_operations(broker, groups=("",)) == {"": NOT_ASKED}
    assert await group_operations(broker, groups=("",), principal=ADMIN) == {"": NOT_ASKED}
    assert await group_operations(open_broker_without_acls, groups=("",)) == {"": NOT_ASKED}


# Versions without the fields, and entries without a name


@pytest.mark.parametrize("version", [8, 9])
async def test_the_cluster_operations_in_v8_and_v9(broker: Broker, version: int) -> None:
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    grant_cluster(broker, Operation.DESCRIBE)
    assert await cluster_operations(broker, version=version) == DESCRIBE
    assert await cluster_operations(broker, ADMIN, version) == EVERY_CLUSTER_OPERATION


async def test_metadata_below_v8_and_describe_groups_below_v3_ignore_the_flags(
    open_broker_without_acls: Broker,
) -> None:
    """Typed requests can carry the flags at any version: only the versions that have
    the fields may act on them."""
    broker = open_broker_without_acls
    answer = await call(broker, METADATA, 7, asking(TOPIC, cluster=True))
    assert [topic.name for topic in answer.topics] == [TOPIC]
    assert await group_operations(broker, version=2) == {
        GROUP: NOT_ASKED,
        "other-group": NOT_ASKED,
    }


async def test_a_topic_asked_for_by_an_unknown_id_shows_not_asked(
    open_broker_without_acls: Broker,
) -> None:
    request = MetadataRequest(
        topics=(None,),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
        topic_ids=(uuid.UUID(int=5).bytes,),
    )
    answer = await call(open_broker_without_acls, METADATA, 12, request)
    assert [(t.name, t.topic_authorized_operations) for t in answer.topics] == [(None, NOT_ASKED)]
