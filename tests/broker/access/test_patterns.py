"""ACL patterns and operations as requests see them: literal, prefixed and wildcard
resources, the wildcard principal, a DENY overriding any ALLOW, ALL, and the operations
an ALLOW implies (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
DESCRIBE_CONFIGS), for topics, groups and transactional ids."""

from __future__ import annotations

import pytest

from kshim.broker.broker import Broker
from kshim.protocol.acls import Operation, PatternType, Permission, ResourceType
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from kshim.protocol.messages.describe_groups import DescribeGroupsRequest
from kshim.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kshim.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kshim.protocol.metadata_request import MetadataRequest
from tests.broker.access.support import (
    ALICE,
    BOB,
    GROUP,
    OTHER,
    TOPIC,
    call,
    grant,
    grant_group,
    grant_topic,
)

FETCH, METADATA, DESCRIBE_GROUPS, DESCRIBE_CONFIGS, DESCRIBE_TRANSACTIONS = 1, 3, 15, 32, 65


async def may_read(broker: Broker, topic: str, principal: str = ALICE) -> bool:
    wanted = [FetchPartition(partition=0, partition_max_bytes=1024)]
    request = FetchRequest(topics=[FetchTopic(topic=topic, partitions=wanted)])
    answer = await call(broker, FETCH, 12, request, principal)
    return bool(
        answer.responses[0].partitions[0].error_code != ErrorCode.topic_authorization_failed
    )


async def may_describe_topic(broker: Broker, topic: str) -> bool:
    request = MetadataRequest(topics=(topic,), allow_auto_topic_creation=False)
    answer = await call(broker, METADATA, 12, request)
    return bool(answer.topics[0].error_code != ErrorCode.topic_authorization_failed)


async def may_describe_group(broker: Broker, group: str) -> bool:
    answer = await call(broker, DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[group]))
    return bool(answer.groups[0].error_code != ErrorCode.group_authorization_failed)


async def test_a_literal_acl_covers_its_name_only(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.READ)
    assert await may_read(broker, TOPIC)
    assert not await may_read(broker, OTHER)
    assert not await may_read(broker, TOPIC + "-2")


async def test_a_prefixed_acl_covers_every_name_starting_with_it(broker: Broker) -> None:
    grant_topic(broker, "ord", Operation.READ, pattern=PatternType.PREFIXED)
    assert await may_read(broker, TOPIC)
    assert not await may_read(broker, OTHER)


async def test_the_wildcard_name_covers_every_resource_of_its_type(broker: Broker) -> None:
    grant_topic(broker, "*", Operation.READ)
    assert await may_read(broker, TOPIC)
    assert await may_read(broker, OTHER)
    assert not await may_describe_group(broker, GROUP)  # another resource type


async def test_an_acl_is_for_its_principal_unless_it_names_every_user(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.READ, principal=BOB)
    assert not await may_read(broker, TOPIC)
    assert await may_read(broker, TOPIC, BOB)
    grant_topic(broker, OTHER, Operation.READ, principal="User:*")
    assert await may_read(broker, OTHER)
    assert await may_read(broker, OTHER, BOB)


@pytest.mark.parametrize(
    ("deny_name", "deny_pattern"),
    [(TOPIC, PatternType.LITERAL), ("ord", PatternType.PREFIXED), ("*", PatternType.LITERAL)],
)
async def test_a_deny_overrides_every_allow(
    broker: Broker, deny_name: str, deny_pattern: PatternType
) -> None:
    grant_topic(broker, "*", Operation.ALL)
    grant_topic(broker, TOPIC, Operation.READ)
    grant_topic(broker, deny_name, Operation.READ, pattern=deny_pattern, permission=Permission.DENY)
    assert not await may_read(broker, TOPIC)
    assert await may_read(broker, OTHER) == (deny_name != "*")
    # A DENY of READ denies READ only: DESCRIBE is still allowed (by ALL).
    assert await may_describe_topic(broker, TOPIC)


async def test_all_allows_every_operation(broker: Broker) -> None:
    grant_group(broker, GROUP, Operation.ALL)
    assert await may_describe_group(broker, GROUP)
    grant_topic(broker, TOPIC, Operation.ALL)
    assert await may_read(broker, TOPIC)


@pytest.mark.parametrize(
    "operation", [Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER]
)
async def test_describe_is_implied_by_read_write_delete_and_alter(
    broker: Broker, operation: Operation
) -> None:
    assert not await may_describe_topic(broker, TOPIC)
    grant_topic(broker, TOPIC, operation)
    assert await may_describe_topic(broker, TOPIC)
    grant_group(broker, GROUP, operation)
    assert await may_describe_group(broker, GROUP)


async def test_describe_is_not_implied_by_create_or_describe_configs(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.CREATE, Operation.DESCRIBE_CONFIGS)
    assert not await may_describe_topic(broker, TOPIC)


async def test_describe_configs_is_implied_by_alter_configs(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.ALTER_CONFIGS)
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=2, resource_name=TOPIC)]
    )
    answer = await call(broker, DESCRIBE_CONFIGS, 4, request)
    assert answer.results[0].error_code == ErrorCode.none


async def test_a_deny_of_describe_is_not_overridden_by_an_implying_allow(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.READ)
    grant_topic(broker, TOPIC, Operation.DESCRIBE, permission=Permission.DENY)
    assert not await may_describe_topic(broker, TOPIC)
    assert await may_read(broker, TOPIC)


async def test_transactional_id_patterns(broker: Broker) -> None:
    grant(
        broker, ResourceType.TRANSACTIONAL_ID, "app-", Operation.WRITE, pattern=PatternType.PREFIXED
    )
    request = DescribeTransactionsRequest(transactional_ids=["app-1", "other-1"])
    answer = await call(broker, DESCRIBE_TRANSACTIONS, 0, request)
    errors = {state.transactional_id: state.error_code for state in answer.transaction_states}
    assert errors == {
        "app-1": ErrorCode.transactional_id_not_found,  # WRITE implies DESCRIBE
        "other-1": ErrorCode.transactional_id_authorization_failed,
    }
