"""CreateAcls, DescribeAcls and DeleteAcls as functions of (request, broker): real handlers
over a broker on the in-memory log store, each answer also encoded in every served version,
as the connection would send it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kshim.api.context import RequestContext
from kshim.api.security import create_acls, delete_acls, describe_acls
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.security.session import Session
from kshim.protocol.acls import (
    CLUSTER_NAME,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from kshim.protocol.apis import ADVERTISED
from kshim.protocol.errors import ErrorCode
from kshim.protocol.headers import RequestHeader
from kshim.protocol.messages import serial
from kshim.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from kshim.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from kshim.protocol.messages.describe_acls import DescribeAclsRequest
from kshim.storage.log.memory_log import MemoryLogStore

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN, ALICE = "User:admin", "User:alice"
CLIENT_IP = "10.1.2.3"
NOW_MS = 1_700_000_000_000
CREATE_KEY, DESCRIBE_KEY, DELETE_KEY = 30, 29, 31
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def clock() -> int:
    return NOW_MS


async def started_broker(directory: Path, settings: dict[str, str]) -> Broker:
    values = {"log.dirs": str(directory), "kshim.full.view.process": "false", **settings}
    config = BrokerConfig.load([values])
    broker = Broker(config, clock=clock, logs=MemoryLogStore(clock))
    await broker.start()
    return broker


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    settings = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": ADMIN}
    started = await started_broker(tmp_path, settings)
    yield started
    await started.close()


def context(broker: Broker, api_key: int, principal: str = ADMIN) -> RequestContext:
    session = Session(principal=principal, client_address=CLIENT_IP)
    version = ADVERTISED[api_key][1]
    return RequestContext(RequestHeader(api_key, version, 7, "unit-test"), broker, session=session)


def encodes_in_every_version(api_key: int, response: object) -> None:
    low, high = ADVERTISED[api_key]
    for version in range(low, high + 1):
        assert serial.encode_response(api_key, version, response)


def creation(
    name: str,
    operation: Operation = Operation.READ,
    principal: str = ALICE,
    resource_type: ResourceType = TOPIC,
    pattern_type: PatternType = PatternType.LITERAL,
    permission: Permission = Permission.ALLOW,
) -> AclCreation:
    return AclCreation(
        resource_type=resource_type,
        resource_name=name,
        resource_pattern_type=pattern_type,
        principal=principal,
        host="*",
        operation=operation,
        permission_type=permission,
    )


async def create(broker: Broker, *creations: AclCreation, principal: str = ADMIN) -> list[Any]:
    request = CreateAclsRequest(creations=list(creations))
    response = await create_acls.handle(request, context(broker, CREATE_KEY, principal))
    encodes_in_every_version(CREATE_KEY, response)
    return [(result.error_code, result.error_message) for result in response.results]


async def describe(broker: Broker, principal: str = ADMIN, **filters: Any) -> Any:
    request = DescribeAclsRequest(
        resource_type_filter=filters.get("resource_type", ResourceType.ANY),
        resource_name_filter=filters.get("name"),
        pattern_type_filter=filters.get("pattern_type", PatternType.ANY),
        operation=filters.get("operation", Operation.ANY),
        permission_type=Permission.ANY,
    )
    response = await describe_acls.handle(request, context(broker, DESCRIBE_KEY, principal))
    encodes_in_every_version(DESCRIBE_KEY, response)
    return response


def listed(response: Any) -> list[tuple[int, str, int, str, int]]:
    assert response.error_code == ErrorCode.none
    return [
        (
            resource.resource_type,
            resource.resource_name,
            resource.pattern_type,
            acl.principal,
            acl.operation,
        )
        for resource in response.resources
        for acl in resource.acls
    ]


def every_acl_of(name: str | None = None) -> DeleteAclsFilter:
    """A filter of every ACL of the literal ``name`` (every ACL when None)."""
    pattern_type = PatternType.ANY if name is None else PatternType.LITERAL
    return DeleteAclsFilter(
        resource_type_filter=ResourceType.ANY,
        resource_name_filter=name,
        pattern_type_filter=pattern_type,
        operation=Operation.ANY,
        permission_type=Permission.ANY,
    )


async def delete(broker: Broker, *filters: DeleteAclsFilter, principal: str = ADMIN) -> Any:
    request = DeleteAclsRequest(filters=list(filters))
    response = await delete_acls.handle(request, context(broker, DELETE_KEY, principal))
    encodes_in_every_version(DELETE_KEY, response)
    return response.filter_results


async def test_created_acls_are_described_grouped_by_resource(broker: Broker) -> None:
    created = await create(
        broker,
        creation("orders"),
        creation("orders", Operation.WRITE),
        creation("events-", pattern_type=PatternType.PREFIXED),
        creation("readers", resource_type=GROUP),
    )
    assert created == [(ErrorCode.none, None)] * 4
    response = await describe(broker)
    assert [(resource.resource_name, len(resource.acls)) for resource in response.resources] == [
        ("events-", 1),
        ("orders", 2),
        ("readers", 1),
    ]
    matched = await describe(broker, name="events-2024", pattern_type=PatternType.MATCH)
    assert listed(matched) == [(TOPIC, "events-", PatternType.PREFIXED, ALICE, Operation.READ)]
    assert listed(await describe(broker, resource_type=GROUP)) == [
        (GROUP, "readers", PatternType.LITERAL, ALICE, Operation.READ)
    ]
    assert broker.acls.authorize(ALICE, CLIENT_IP, Operation.READ, TOPIC, "events-2024")


async def test_invalid_creations_fail_alone(broker: Broker) -> None:
    created = await create(
        broker,
        creation("orders"),
        creation("orders", Operation.ANY),
        creation("mine", resource_type=CLUSTER),
        creation("orders", resource_type=ResourceType.ANY),
        creation("orders", pattern_type=PatternType.MATCH),
        creation("orders", principal="alice"),
        creation(""),
        creation("orders", resource_type=99),  # type: ignore[arg-type]
    )
    assert created[0] == (ErrorCode.none, None)
    assert {code for code, _ in created[1:]} == {ErrorCode.invalid_request}
    assert len(listed(await describe(broker))) == 1


async def test_delete_answers_what_each_filter_matched(broker: Broker) -> None:
    await create(broker, creation("orders"), creation("orders", Operation.WRITE))
    results = await delete(
        broker,
        DeleteAclsFilter(
            resource_type_filter=TOPIC,
            resource_name_filter="orders",
            pattern_type_filter=PatternType.LITERAL,
            operation=Operation.WRITE,
            permission_type=Permission.ANY,
        ),
        DeleteAclsFilter(
            resource_type_filter=TOPIC,
            resource_name_filter="nothing-here",
            pattern_type_filter=PatternType.ANY,
            operation=Operation.ANY,
            permission_type=Permission.ANY,
        ),
        DeleteAclsFilter(resource_type_filter=ResourceType.UNKNOWN, operation=Operation.ANY),
    )
    first, second, third = results
    assert [(acl.resource_name, acl.operation) for acl in first.matching_acls] == [
        ("orders", Operation.WRITE)
    ]
    assert (second.error_code, second.matching_acls) == (ErrorCode.none, [])
    assert third.error_code == ErrorCode.invalid_request
    assert listed(await describe(broker)) == [
        (TOPIC, "orders", PatternType.LITERAL, ALICE, Operation.READ)
    ]


async def test_an_invalid_describe_filter_is_invalid_request(broker: Broker) -> None:
    response = await describe(broker, operation=Operation.UNKNOWN)
    assert (response.error_code, response.resources) == (ErrorCode.invalid_request, [])


async def test_changing_acls_needs_alter_and_listing_describe_on_the_cluster(
    broker: Broker,
) -> None:
    refused = ErrorCode.cluster_authorization_failed
    assert await create(broker, creation("orders"), principal=ALICE) == [
        (refused, "Cluster authorization failed.")
    ]
    assert (await describe(broker, principal=ALICE)).error_code == refused
    [result] = await delete(broker, every_acl_of(), principal=ALICE)
    assert result.error_code == refused
    await create(broker, creation(CLUSTER_NAME, Operation.DESCRIBE, resource_type=CLUSTER))
    assert len(listed(await describe(broker, principal=ALICE))) == 1
    await create(broker, creation(CLUSTER_NAME, Operation.ALTER, resource_type=CLUSTER))
    assert await create(broker, creation("orders"), principal=ALICE) == [(ErrorCode.none, None)]


async def test_without_an_authoriser_the_apis_answer_security_disabled(tmp_path: Path) -> None:
    broker = await started_broker(tmp_path, {})
    try:
        disabled = ErrorCode.security_disabled
        assert await create(broker, creation("orders")) == [
            (disabled, "No Authorizer is configured.")
        ]
        described = await describe(broker)
        assert (described.error_code, described.error_message) == (
            disabled,
            "No Authorizer is configured on the broker",
        )
        [result] = await delete(broker, every_acl_of())
        assert (result.error_code, result.error_message) == (
            disabled,
            "No Authorizer is configured.",
        )
    finally:
        await broker.close()


async def test_acls_survive_a_broker_restart(tmp_path: Path) -> None:
    settings = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": ADMIN}
    broker = await started_broker(tmp_path, settings)
    await create(broker, creation("orders"), creation("events-", pattern_type=PatternType.PREFIXED))
    [deleted] = await delete(broker, every_acl_of("orders"))
    assert len(deleted.matching_acls) == 1
    await broker.close()
    broker = await started_broker(tmp_path, settings)
    try:
        assert listed(await describe(broker)) == [
            (TOPIC, "events-", PatternType.PREFIXED, ALICE, Operation.READ)
        ]
        assert broker.acls.authorize(ALICE, CLIENT_IP, Operation.READ, TOPIC, "events-1")
        assert not broker.acls.authorize(ALICE, CLIENT_IP, Operation.READ, TOPIC, "orders")
    finally:
        await broker.close()
