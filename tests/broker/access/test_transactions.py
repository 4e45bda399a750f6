"""The transaction APIs behind their access rules: WRITE on the transactional id for every
step, WRITE on the topics a transaction writes, READ on the group and topics whose
offsets it commits, DESCRIBE to describe or list it; an idempotent producer's id with
IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679)."""

from __future__ import annotations

from typing import Any

from kshim.broker.broker import Broker
from kshim.protocol.acls import Operation, PatternType
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kshim.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kshim.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kshim.protocol.messages.end_txn import EndTxnRequest
from kshim.protocol.messages.init_producer_id import InitProducerIdRequest
from kshim.protocol.messages.list_transactions import ListTransactionsRequest
from kshim.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from tests.broker.access.support import (
    ADMIN,
    GROUP,
    OTHER,
    TOPIC,
    call,
    errors_by_topic,
    grant_cluster,
    grant_group,
    grant_topic,
    grant_transactional_id,
)

INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
TXN = "tx-1"
TXN_REFUSED = ErrorCode.transactional_id_authorization_failed
TAF, GAF = ErrorCode.topic_authorization_failed, ErrorCode.group_authorization_failed


async def init_producer(broker: Broker, transactional_id: str | None, principal: str) -> Any:
    request = InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=60_000
    )
    return await call(broker, INIT_PRODUCER_ID, 4, request, principal)


def add_partitions_request(
    producer: Any, *partitions: tuple[str, int]
) -> AddPartitionsToTxnRequest:
    topics: dict[str, list[int]] = {}
    for name, index in partitions:
        topics.setdefault(name, []).append(index)
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TXN,
        v3_and_below_producer_id=producer.producer_id,
        v3_and_below_producer_epoch=producer.producer_epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnTopic(name=name, partitions=indexes)
            for name, indexes in topics.items()
        ],
    )


def added(answer: Any) -> dict[str, list[int]]:
    return errors_by_topic(
        answer.results_by_topic_v3_and_below, "results_by_partition", "partition_error_code"
    )


async def test_a_transactional_producer_id_needs_write_on_the_transactional_id(
    broker: Broker,
) -> None:
    refused = await init_producer(broker, TXN, "User:alice")
    assert (refused.error_code, refused.producer_id, refused.producer_epoch) == (
        TXN_REFUSED,
        -1,
        -1,
    )
    grant_transactional_id(broker, "tx-", Operation.WRITE, pattern=PatternType.PREFIXED)
    assert (await init_producer(broker, TXN, "User:alice")).error_code == ErrorCode.none


async def test_an_idempotent_producer_id_needs_idempotent_write_or_write_on_some_topic(
    broker: Broker,
) -> None:
    refused = await init_producer(broker, None, "User:alice")
    assert (refused.error_code, refused.producer_id) == (ErrorCode.cluster_authorization_failed, -1)
    grant_topic(broker, "pay", Operation.WRITE, pattern=PatternType.PREFIXED)  # KIP-679
    assert (await init_producer(broker, None, "User:alice")).error_code == ErrorCode.none
    grant_cluster(broker, Operation.IDEMPOTENT_WRITE, principal="User:bob")
    assert (await init_producer(broker, None, "User:bob")).error_code == ErrorCode.none


async def test_add_partitions_needs_write_on_the_transactional_id(broker: Broker) -> None:
    producer = await init_producer(broker, TXN, ADMIN)
    grant_topic(broker, TOPIC, Operation.WRITE)
    request = add_partitions_request(producer, (TOPIC, 0), (OTHER, 0))
    answer = await call(broker, ADD_PARTITIONS, 3, request)
    assert added(answer) == {TOPIC: [TXN_REFUSED], OTHER: [TXN_REFUSED]}


async def test_add_partitions_adds_none_when_a_topic_is_refused(broker: Broker) -> None:
    producer = await init_producer(broker, TXN, ADMIN)
    grant_transactional_id(broker, TXN, Operation.WRITE)
    grant_topic(broker, TOPIC, Operation.WRITE)
    request = add_partitions_request(producer, (TOPIC, 0), (TOPIC, 7), (OTHER, 0))
    answer = await call(broker, ADD_PARTITIONS, 3, request)
    assert added(answer) == {
        TOPIC: [ErrorCode.operation_not_attempted, ErrorCode.unknown_topic_or_partition],
        OTHER: [TAF],
    }
    described = broker.transactions.describe(TXN)
    assert described is not None
    assert not described.partitions
    grant_topic(broker, OTHER, Operation.WRITE)
    allowed = await call(broker, ADD_PARTITIONS, 3, add_partitions_request(producer, (TOPIC, 0)))
    assert added(allowed) == {TOPIC: [ErrorCode.none]}


async def test_add_offsets_needs_write_on_the_transactional_id_then_read_on_the_group(
    broker: Broker,
) -> None:
    producer = await init_producer(broker, TXN, ADMIN)
    request = AddOffsetsToTxnRequest(
        transactional_id=TXN,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        group_id=GROUP,
    )
    assert (await call(broker, ADD_OFFSETS, 3, request)).error_code == TXN_REFUSED
    grant_transactional_id(broker, TXN, Operation.WRITE)
    assert (await call(broker, ADD_OFFSETS, 3, request)).error_code == GAF
    grant_group(broker, GROUP, Operation.READ)
    assert (await call(broker, ADD_OFFSETS, 3, request)).error_code == ErrorCode.none


async def test_end_txn_needs_write_on_the_transactional_id(broker: Broker) -> None:
    producer = await init_producer(broker, TXN, ADMIN)
    request = EndTxnRequest(
        transactional_id=TXN,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        committed=True,
    )
    grant_transactional_id(broker, TXN, Operation.DESCRIBE)  # not enough
    assert (await call(broker, END_TXN, 3, request)).error_code == TXN_REFUSED
    grant_transactional_id(broker, TXN, Operation.WRITE)
    assert (await call(broker, END_TXN, 3, request)).error_code != TXN_REFUSED


async def test_txn_offset_commit_checks_the_id_the_group_then_each_topic(broker: Broker) -> None:
    producer = await init_producer(broker, TXN, ADMIN)
    request = TxnOffsetCommitRequest(
        transactional_id=TXN,
        group_id=GROUP,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        topics=[
            TxnOffsetCommitRequestTopic(
                name=name,
                partitions=[TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)],
            )
            for name in (TOPIC, OTHER)
        ],
    )

    async def errors() -> dict[str, list[int]]:
        return errors_by_topic((await call(broker, TXN_OFFSET_COMMIT, 3, request)).topics)

    assert await errors() == {TOPIC: [TXN_REFUSED], OTHER: [TXN_REFUSED]}
    grant_transactional_id(broker, TXN, Operation.WRITE)
    assert await errors() == {TOPIC: [GAF], OTHER: [GAF]}
    grant_group(broker, GROUP, Operation.READ)
    grant_topic(broker, TOPIC, Operation.READ)
    found = await errors()
    assert found[OTHER] == [TAF]
    assert found[TOPIC] != [TAF]  # the transaction's own answer


async def test_describe_transactions_shows_only_describable_ids_and_topics(broker: Broker) -> None:
    producer = await init_producer(broker, TXN, ADMIN)
    request = add_partitions_request(producer, (TOPIC, 0), (OTHER, 0))
    assert added(await call(broker, ADD_PARTITIONS, 3, request, ADMIN)) == {TOPIC: [0], OTHER: [0]}
    grant_transactional_id(broker, TXN, Operation.DESCRIBE)
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    described = DescribeTransactionsRequest(transactional_ids=[TXN, "tx-2"])
    answer = await call(broker, DESCRIBE_TRANSACTIONS, 0, described)
    states = {state.transactional_id: state for state in answer.transaction_states}
    assert (states[TXN].error_code, [topic.topic for topic in states[TXN].topics]) == (0, [TOPIC])
    refused = states["tx-2"]
    assert (refused.error_code, refused.transaction_state, refused.producer_id) == (
        TXN_REFUSED,
        "",
        0,
    )


async def test_list_transactions_lists_only_describable_ids(broker: Broker) -> None:
    await init_producer(broker, TXN, ADMIN)
    await init_producer(broker, "other-tx", ADMIN)
    listed = await call(broker, LIST_TRANSACTIONS, 0, ListTransactionsRequest())
    assert listed.transaction_states == []
    grant_transactional_id(broker, TXN, Operation.DESCRIBE)
    listed = await call(broker, LIST_TRANSACTIONS, 0, ListTransactionsRequest())
    assert [state.transactional_id for state in listed.transaction_states] == [TXN]
