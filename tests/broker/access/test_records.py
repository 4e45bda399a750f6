"""Produce, Fetch, ListOffsets and Metadata behind their access rules: what each answers
for topics the client may and may not use, and a topic's view (``T.full``) and delay
companion (``T.delay``) decided by ``T``'s ACLs."""

from __future__ import annotations

import asyncio
from typing import Any

from kshim.broker.broker import Broker
from kshim.protocol.acls import Operation, PatternType, Permission
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kshim.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kshim.protocol.metadata_request import MetadataRequest
from kshim.protocol.record_batch import TRANSACTIONAL_FLAG_MASK
from kshim.protocol.records import BatchSpec
from kshim.storage.interface import TopicPartition
from tests.broker.access.support import (
    ADMIN,
    ALICE,
    OTHER,
    TOPIC,
    call,
    errors_by_topic,
    grant_cluster,
    grant_topic,
    grant_transactional_id,
    produce_request,
)

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
PRODUCE_VERSION, FETCH_VERSION, METADATA_VERSION = 9, 12, 12
TAF = ErrorCode.topic_authorization_failed
VIEW, COMPANION = TOPIC + ".full", TOPIC + ".delay"


def log_end(broker: Broker, topic: str) -> int:
    log = broker.topics.log(TopicPartition(topic, 0))
    assert log is not None
    return log.log_end_offset


async def produce(broker: Broker, *topics: str, **options: Any) -> dict[str, list[int]]:
    answer = await call(broker, PRODUCE, PRODUCE_VERSION, produce_request(*topics, **options))
    return errors_by_topic(answer.responses, "partition_responses")


def fetch_request(*topics: str, replica_id: int = -1, max_wait_ms: int = 0) -> FetchRequest:
    wanted = [FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)]
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=1 if max_wait_ms else 0,
        max_bytes=1 << 20,
        topics=[FetchTopic(topic=name, partitions=list(wanted)) for name in topics],
    )


async def fetch(broker: Broker, request: FetchRequest, principal: str = ALICE) -> dict[str, Any]:
    answer = await call(broker, FETCH, FETCH_VERSION, request, principal)
    return {topic.topic: topic.partitions[0] for topic in answer.responses}


async def metadata(
    broker: Broker, request: MetadataRequest, version: int = METADATA_VERSION
) -> list[tuple[str, int]]:
    answer = await call(broker, METADATA, version, request)
    return [(topic.name, int(topic.error_code)) for topic in answer.topics]


# Produce


async def test_produce_without_write_is_refused_per_partition_and_writes_nothing(
    broker: Broker,
) -> None:
    assert await produce(broker, TOPIC, OTHER) == {TOPIC: [TAF], OTHER: [TAF]}
    assert (log_end(broker, TOPIC), log_end(broker, OTHER)) == (0, 0)


async def test_produce_writes_the_topics_allowed_and_refuses_the_others(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.WRITE)
    assert await produce(broker, TOPIC, OTHER) == {TOPIC: [0], OTHER: [TAF]}
    assert (log_end(broker, TOPIC), log_end(broker, OTHER)) == (1, 0)


async def test_a_refused_partition_answers_with_no_offsets(broker: Broker) -> None:
    answer = await call(broker, PRODUCE, PRODUCE_VERSION, produce_request(OTHER))
    [partition] = answer.responses[0].partition_responses
    assert (partition.base_offset, partition.log_start_offset) == (-1, -1)


async def test_produce_with_acks_0_answers_nothing_even_when_refused(broker: Broker) -> None:
    assert await call(broker, PRODUCE, PRODUCE_VERSION, produce_request(TOPIC, acks=0)) is None
    assert log_end(broker, TOPIC) == 0


async def test_an_idempotent_producer_needs_only_write_on_the_topic(broker: Broker) -> None:
    """KIP-679: no IDEMPOTENT_WRITE on the cluster for the batches themselves."""
    grant_topic(broker, TOPIC, Operation.WRITE)
    idempotent = BatchSpec(producer_id=9, producer_epoch=0, base_sequence=0)
    assert await produce(broker, TOPIC, spec=idempotent) == {TOPIC: [0]}


async def test_transactional_records_need_write_on_the_transactional_id(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.WRITE)
    spec = BatchSpec(
        attributes=TRANSACTIONAL_FLAG_MASK, producer_id=9, producer_epoch=0, base_sequence=0
    )
    refused = await produce(broker, TOPIC, OTHER, spec=spec, transactional_id="tx")
    txn_refused = ErrorCode.transactional_id_authorization_failed
    assert refused == {TOPIC: [txn_refused], OTHER: [txn_refused]}
    # Transactional records without a transactional id are refused the same way.
    assert await produce(broker, TOPIC, spec=spec) == {TOPIC: [txn_refused]}
    grant_transactional_id(broker, "tx", Operation.WRITE)
    allowed = await produce(broker, TOPIC, OTHER, spec=spec, transactional_id="tx")
    # Past the access rule: the transaction coordinator refuses a partition never added.
    assert allowed[TOPIC] != [txn_refused]
    assert allowed[OTHER] == [TAF]


async def test_a_super_user_produces_without_any_acl(broker: Broker) -> None:
    answer = await call(broker, PRODUCE, PRODUCE_VERSION, produce_request(TOPIC), ADMIN)
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none


# Fetch


async def test_fetch_reads_the_topics_allowed_and_refuses_the_others(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.WRITE, Operation.READ)
    await produce(broker, TOPIC)
    fetched = await fetch(broker, fetch_request(TOPIC, OTHER))
    read, refused = fetched[TOPIC], fetched[OTHER]
    assert (read.error_code, read.high_watermark) == (ErrorCode.none, 1)
    assert read.records
    assert (refused.error_code, refused.high_watermark, refused.log_start_offset) == (
        TAF,
        -1,
        -1,
    )
    assert not refused.records


async def test_a_fetch_of_refused_topics_only_does_not_wait(broker: Broker) -> None:
    request = fetch_request(TOPIC, max_wait_ms=60_000)
    fetched = await asyncio.wait_for(fetch(broker, request), timeout=5)
    assert fetched[TOPIC].error_code == TAF


async def test_fetch_answers_refused_and_unknown_partitions_in_the_order_asked(
    broker: Broker,
) -> None:
    """Read partitions first, then the refused and the unknown together in the order the
    request names them (Kafka's ``erroneous``)."""
    grant_topic(broker, TOPIC, Operation.WRITE, Operation.READ)
    grant_topic(broker, "missing-a", Operation.READ)
    grant_topic(broker, "missing-b", Operation.READ)
    await produce(broker, TOPIC)
    request = fetch_request("missing-a", OTHER, TOPIC, "missing-b")
    answer = await call(broker, FETCH, FETCH_VERSION, request)
    unknown = ErrorCode.unknown_topic_or_partition
    assert [(topic.topic, topic.partitions[0].error_code) for topic in answer.responses] == [
        (TOPIC, ErrorCode.none),
        ("missing-a", unknown),
        (OTHER, TAF),
        ("missing-b", unknown),
    ]


async def test_produce_answers_the_refused_topics_after_the_others(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.WRITE)
    answer = await call(broker, PRODUCE, PRODUCE_VERSION, produce_request(OTHER, TOPIC))
    assert [topic.name for topic in answer.responses] == [TOPIC, OTHER]


async def test_a_follower_fetch_needs_cluster_action(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.READ)
    refused = await fetch(broker, fetch_request(TOPIC, replica_id=0))
    assert refused[TOPIC].error_code == TAF
    grant_cluster(broker, Operation.CLUSTER_ACTION)
    fetched = await fetch(broker, fetch_request(TOPIC, OTHER, replica_id=0))
    assert [partition.error_code for partition in fetched.values()] == [0, 0]


async def test_a_view_is_read_with_its_topics_read_permission(broker: Broker) -> None:
    refused = await fetch(broker, fetch_request(VIEW))
    assert refused[VIEW].error_code == TAF
    grant_topic(broker, TOPIC, Operation.READ)
    fetched = await fetch(broker, fetch_request(VIEW))
    assert fetched[VIEW].error_code == ErrorCode.none


async def test_a_deny_on_the_topic_denies_its_view_over_a_prefixed_allow(broker: Broker) -> None:
    grant_topic(broker, "ord", Operation.READ, pattern=PatternType.PREFIXED)
    assert (await fetch(broker, fetch_request(VIEW)))[VIEW].error_code == ErrorCode.none
    grant_topic(broker, TOPIC, Operation.READ, permission=Permission.DENY)
    assert (await fetch(broker, fetch_request(VIEW)))[VIEW].error_code == TAF
    assert (await fetch(broker, fetch_request(TOPIC)))[TOPIC].error_code == TAF


# A topic's delay companion


async def test_a_delay_companion_is_written_with_its_topics_write_permission(
    broker: Broker,
) -> None:
    await broker.resolver.create_companion(COMPANION)
    assert await produce(broker, COMPANION) == {COMPANION: [TAF]}
    grant_topic(broker, TOPIC, Operation.WRITE)
    # Past the access rule: a companion's record must say when it is due.
    assert await produce(broker, COMPANION) == {COMPANION: [ErrorCode.invalid_record]}


async def test_write_on_a_companions_own_name_grants_nothing(broker: Broker) -> None:
    """ACLs are written for ``T`` only: one naming ``T.delay`` itself is never consulted."""
    await broker.resolver.create_companion(COMPANION)
    grant_topic(broker, COMPANION, Operation.WRITE)
    grant_topic(broker, VIEW, Operation.READ)
    assert await produce(broker, COMPANION) == {COMPANION: [TAF]}
    assert (await fetch(broker, fetch_request(VIEW)))[VIEW].error_code == TAF


# ListOffsets


async def test_list_offsets_needs_describe_which_read_implies(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.READ)
    wanted = [ListOffsetsPartition(partition_index=0, timestamp=-1)]
    request = ListOffsetsRequest(
        topics=[ListOffsetsTopic(name=name, partitions=list(wanted)) for name in (TOPIC, OTHER)]
    )
    answer = await call(broker, LIST_OFFSETS, 9, request)
    by_topic = {topic.name: topic.partitions[0] for topic in answer.topics}
    assert (by_topic[TOPIC].error_code, by_topic[TOPIC].offset) == (ErrorCode.none, 0)
    refused = by_topic[OTHER]
    assert (refused.error_code, refused.offset, refused.timestamp, refused.leader_epoch) == (
        TAF,
        -1,
        -1,
        -1,
    )


async def test_list_offsets_of_refused_topics_only(broker: Broker) -> None:
    request = ListOffsetsRequest(
        topics=[ListOffsetsTopic(name=OTHER, partitions=[ListOffsetsPartition(timestamp=-2)])]
    )
    answer = await call(broker, LIST_OFFSETS, 9, request)
    assert errors_by_topic(answer.topics) == {OTHER: [TAF]}


# Metadata


async def test_metadata_for_all_topics_lists_only_describable_ones(broker: Broker) -> None:
    assert await metadata(broker, MetadataRequest(topics=None)) == []
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    assert await metadata(broker, MetadataRequest(topics=None)) == [(TOPIC, 0)]
    assert await metadata(broker, MetadataRequest(topics=()), version=0) == [(TOPIC, 0)]


async def test_metadata_refuses_a_named_topic_without_describe_whether_or_not_it_exists(
    broker: Broker,
) -> None:
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    request = MetadataRequest(topics=(TOPIC, OTHER, "nope"), allow_auto_topic_creation=False)
    answer = await call(broker, METADATA, METADATA_VERSION, request)
    found = {topic.name: topic for topic in answer.topics}
    assert {name: int(topic.error_code) for name, topic in found.items()} == {
        TOPIC: 0,
        OTHER: TAF,
        "nope": TAF,
    }
    # No topic id (the zero id, which kio reads as None) and no partitions.
    assert (found[OTHER].topic_id, found[OTHER].partitions) == (None, ())


async def test_metadata_by_id_refuses_a_topic_without_describe_by_its_id(broker: Broker) -> None:
    """Kafka 3.9 (v12): an id is no secret, so a topic found by id the principal may not
    describe is TOPIC_AUTHORIZATION_FAILED with its id and a null name, after the others."""
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    ids = [broker.resolver.resolve(name) for name in (OTHER, TOPIC)]
    request = MetadataRequest(
        topics=(None, None), topic_ids=tuple(found.topic_id.bytes for found in ids if found)
    )
    answer = await call(broker, METADATA, METADATA_VERSION, request)
    other = broker.resolver.resolve(OTHER)
    assert other is not None
    assert [(t.name, int(t.error_code), t.topic_id) for t in answer.topics][1:] == [
        (None, TAF, other.topic_id)
    ]
    assert [(t.name, int(t.error_code)) for t in answer.topics][:1] == [(TOPIC, 0)]


async def test_metadata_v0_naming_only_refused_topics_lists_no_others(broker: Broker) -> None:
    """In v0 an empty list asks for every topic: the refused names must not become one."""
    grant_topic(broker, OTHER, Operation.DESCRIBE)
    assert await metadata(broker, MetadataRequest(topics=(TOPIC,)), version=0) == [(TOPIC, TAF)]


async def test_auto_creation_needs_create_on_the_topic_or_the_cluster(broker: Broker) -> None:
    grant_topic(broker, "new", Operation.DESCRIBE, pattern=PatternType.PREFIXED)
    named = MetadataRequest(topics=("new-1",), allow_auto_topic_creation=True)
    assert await metadata(broker, named) == [("new-1", TAF)]
    assert broker.resolver.resolve("new-1") is None
    grant_topic(broker, "new-1", Operation.CREATE)
    assert await metadata(broker, named) == [("new-1", 0)]
    grant_cluster(broker, Operation.CREATE)
    assert await metadata(broker, MetadataRequest(topics=("new-2",))) == [("new-2", 0)]


async def test_without_auto_creation_an_unknown_describable_topic_is_unknown(
    broker: Broker,
) -> None:
    grant_topic(broker, "*", Operation.DESCRIBE)
    named = MetadataRequest(topics=("nope",), allow_auto_topic_creation=False)
    assert await metadata(broker, named) == [("nope", ErrorCode.unknown_topic_or_partition)]


async def test_a_view_and_a_companion_are_described_with_their_topics_describe(
    broker: Broker,
) -> None:
    named = MetadataRequest(topics=(VIEW, COMPANION), allow_auto_topic_creation=False)
    assert await metadata(broker, named) == [(VIEW, TAF), (COMPANION, TAF)]
    assert broker.resolver.resolve(COMPANION) is None  # not created for a refused client
    grant_topic(broker, TOPIC, Operation.DESCRIBE)
    assert await metadata(broker, named) == [(VIEW, 0), (COMPANION, 0)]
