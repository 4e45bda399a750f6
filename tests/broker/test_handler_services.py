"""Handlers given only the services their context names (api/services.py, combined in each
domain's services.py): each runs on the real in-memory components it reads, handed to it
without the rest of the broker, so a handler that reached for another service would fail
here with an AttributeError. Produce on the partition service alone is in
test_partition_service.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from kshim.api.admin import create_partitions
from kshim.api.context import RequestContext
from kshim.api.groups import delete_groups, offset_commit, offset_fetch
from kshim.api.security import create_acls, describe_acls
from kshim.api.transactions import add_offsets_to_txn, end_txn, init_producer_id, list_transactions
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.security.acls.service import Acls
from kshim.broker.security.session import Session
from kshim.broker.topic_resolver import TopicResolver
from kshim.broker.topics import TopicManager
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.broker.transactions.reviewer import TransactionReviewer
from kshim.protocol.acls import Operation, PatternType, Permission, ResourceType
from kshim.protocol.apis import ADVERTISED
from kshim.protocol.errors import ErrorCode
from kshim.protocol.headers import RequestHeader
from kshim.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kshim.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from kshim.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from kshim.protocol.messages.delete_groups import DeleteGroupsRequest
from kshim.protocol.messages.describe_acls import DescribeAclsRequest
from kshim.protocol.messages.end_txn import EndTxnRequest
from kshim.protocol.messages.init_producer_id import InitProducerIdRequest
from kshim.protocol.messages.list_transactions import ListTransactionsRequest
from kshim.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kshim.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kshim.storage.interface import TopicPartition
from kshim.storage.log.memory_log import MemoryLogStore
from tests.broker.handler_calls import fixed_clock, memory_broker

TOPIC, GROUP, TRANSACTIONAL_ID = "orders", "billing", "payments-1"
ADMIN = "User:admin"
ServicesT = TypeVar("ServicesT")


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with memory_broker(tmp_path, TOPIC, 2) as started:
        yield started


def context(api_key: int, services: ServicesT, principal: str = "") -> RequestContext[ServicesT]:
    """A request at the newest version kshim serves, with ``services`` as its broker."""
    header = RequestHeader(api_key, ADVERTISED[api_key][1], 7, "unit-test")
    session = Session(principal=principal) if principal else Session()
    return RequestContext(header, services, session=session)


@dataclass(frozen=True)
class GroupsOnly:
    groups: GroupCoordinator


@dataclass(frozen=True)
class GroupsAndResolver:
    groups: GroupCoordinator
    resolver: TopicResolver


@dataclass(frozen=True)
class GroupsAndTransactions:
    groups: GroupCoordinator
    transactions: TransactionCoordinator


async def committed(broker: Broker) -> dict[int, int]:
    topics = [OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1])]
    request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=GROUP, topics=topics)])
    services = GroupsAndTransactions(broker.groups, broker.transactions)
    response = await offset_fetch.handle(request, context(9, services))
    ((topic,),) = [group.topics for group in response.groups]
    return {p.partition_index: p.committed_offset for p in topic.partitions}


async def test_group_handlers_run_on_the_group_coordinator(broker: Broker) -> None:
    partitions = [OffsetCommitRequestPartition(partition_index=0, committed_offset=5)]
    request = OffsetCommitRequest(
        group_id=GROUP, topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=partitions)]
    )
    services = GroupsAndResolver(broker.groups, broker.resolver)
    response = await offset_commit.handle(request, context(8, services))
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    assert await committed(broker) == {0: 5, 1: -1}

    deleted = await delete_groups.handle(
        DeleteGroupsRequest(groups_names=[GROUP]), context(42, GroupsOnly(broker.groups))
    )
    assert [(r.group_id, r.error_code) for r in deleted.results] == [(GROUP, ErrorCode.none)]
    assert await committed(broker) == {0: -1, 1: -1}


@dataclass(frozen=True)
class TransactionsOnly:
    transactions: TransactionCoordinator


@dataclass(frozen=True)
class TransactionsAndReviewer:
    transactions: TransactionCoordinator
    reviewer: TransactionReviewer


async def test_transaction_handlers_run_on_the_transaction_coordinator(broker: Broker) -> None:
    init = InitProducerIdRequest(transactional_id=TRANSACTIONAL_ID, transaction_timeout_ms=60_000)
    services = TransactionsAndReviewer(broker.transactions, broker.reviewer)
    producer = await init_producer_id.handle(init, context(22, services))
    assert producer.error_code == ErrorCode.none
    coordinator = TransactionsOnly(broker.transactions)
    producer_id, epoch = producer.producer_id, producer.producer_epoch
    add = AddOffsetsToTxnRequest(
        transactional_id=TRANSACTIONAL_ID, producer_id=producer_id, producer_epoch=epoch,
        group_id=GROUP,
    )  # fmt: skip
    added = await add_offsets_to_txn.handle(add, context(25, coordinator))
    assert added.error_code == ErrorCode.none
    listed = await list_transactions.handle(ListTransactionsRequest(), context(66, coordinator))
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [
        (TRANSACTIONAL_ID, "Ongoing")
    ]
    end = EndTxnRequest(
        transactional_id=TRANSACTIONAL_ID, producer_id=producer_id, producer_epoch=epoch,
        committed=True,
    )  # fmt: skip
    assert (await end_txn.handle(end, context(26, coordinator))).error_code == ErrorCode.none
    listed = await list_transactions.handle(ListTransactionsRequest(), context(66, coordinator))
    assert [s.transaction_state for s in listed.transaction_states] == ["CompleteCommit"]


@dataclass(frozen=True)
class TopicsAndResolver:
    topics: TopicManager
    resolver: TopicResolver


async def test_admin_handlers_run_on_the_topic_manager_and_resolver(broker: Broker) -> None:
    request = CreatePartitionsRequest(
        topics=[
            CreatePartitionsTopic(name=TOPIC, count=5),
            CreatePartitionsTopic(name="gone", count=2),
        ]
    )
    services = TopicsAndResolver(broker.topics, broker.resolver)
    response = await create_partitions.handle(request, context(37, services))
    assert [(r.name, r.error_code) for r in response.results] == [
        (TOPIC, ErrorCode.none),
        ("gone", ErrorCode.unknown_topic_or_partition),
    ]
    assert broker.topics.log(TopicPartition(TOPIC, 4)) is not None


@dataclass(frozen=True)
class AclsOnly:
    acls: Acls


async def test_acl_handlers_run_on_the_acl_store(tmp_path: Path) -> None:
    settings = {
        "log.dirs": str(tmp_path),
        "kshim.full.view.process": "false",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ADMIN,
    }
    broker = Broker(BrokerConfig.load([settings]), fixed_clock, logs=MemoryLogStore(fixed_clock))
    await broker.start()
    try:
        store = AclsOnly(broker.acls)
        creation = AclCreation(
            resource_type=ResourceType.TOPIC,
            resource_name=TOPIC,
            resource_pattern_type=PatternType.LITERAL,
            principal="User:alice",
            host="*",
            operation=Operation.READ,
            permission_type=Permission.ALLOW,
        )
        created = await create_acls.handle(
            CreateAclsRequest(creations=[creation]), context(30, store, ADMIN)
        )
        assert [result.error_code for result in created.results] == [ErrorCode.none]
        request = DescribeAclsRequest(
            resource_type_filter=ResourceType.ANY,
            pattern_type_filter=PatternType.ANY,
            operation=Operation.ANY,
            permission_type=Permission.ANY,
        )
        described = await describe_acls.handle(request, context(29, store, ADMIN))
        assert described.error_code == ErrorCode.none
        assert [(r.resource_name, [a.principal for a in r.acls]) for r in described.resources] == [
            (TOPIC, ["User:alice"])
        ]
    finally:
        await broker.close()
