"""The topic and config admin APIs end to end through decode, handler and encode, at the
lowest and highest version kshim serves, over a real broker in a temporary directory
(no socket): what each answers, and what a full-data view ``T.full`` refuses."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kshim.api import api_versions
from kshim.broker.broker import Broker
from kshim.broker.config.describe import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG
from kshim.protocol.apis import ADVERTISED
from kshim.protocol.errors import ErrorCode
from kshim.protocol.record_batch import read_header
from kshim.protocol.records import Record, build_batch
from kshim.storage.interface import TopicPartition
from kshim.testing import FakeClock
from tests.full_view.support import append, as_dict, open_broker, read_all, transactional
from tests.groups.wire import call

API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 18, 19, 20, 21
DESCRIBE_CONFIGS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 37, 44
TOPIC_RESOURCE = 2
SET = 0
UNKNOWN_TOPIC, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT = 3, 37, 39
TOPIC, VIEW = "t", "t.full"  # tests.full_view.support writes to partition 0 of "t"
# What AlterConfigs and IncrementalAlterConfigs both answer for the view and for "nope".
VIEW_IS_READ_ONLY = (
    ErrorCode.policy_violation,
    "t.full is a read-only full-data view; change its topic instead",
)
# Kafka's words (ZkAdminManager's, which Kafka 3.9 in KRaft mode sends too)
NOPE_IS_UNKNOWN = (ErrorCode.unknown_topic_or_partition, "The topic 'nope' does not exist.")


def edges(api_key: int) -> list[int]:
    low, high = ADVERTISED[api_key]
    return sorted({low, high})


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    broker = await open_broker(tmp_path, FakeClock())  # the view applied in threads
    await broker.topics.create(TOPIC, 1, {"retention.ms": "3600000"})
    yield broker
    await broker.close()


def resource(name: str, **fields: Any) -> dict[str, Any]:
    return {"resource_type": TOPIC_RESOURCE, "resource_name": name, **fields}


@pytest.mark.parametrize("version", edges(API_VERSIONS))
async def test_api_versions_answers_the_advertised_table_encoded_once(
    broker: Broker, version: int
) -> None:
    response = await call(broker, API_VERSIONS, version, {})
    assert response.error_code == ErrorCode.none
    assert [(key.api_key, key.min_version, key.max_version) for key in response.api_keys] == [
        (key, low, high) for key, (low, high) in sorted(ADVERTISED.items())
    ]
    assert api_versions.encoded_answer(version) is api_versions.encoded_answer(version)


@pytest.mark.parametrize("version", edges(CREATE_TOPICS))
async def test_create_topics(broker: Broker, version: int) -> None:
    topics = [
        {"name": "new", "num_partitions": -1, "replication_factor": -1,
         "configs": [{"name": "retention.ms", "value": "5000"}]},
        {"name": "x.full", "num_partitions": 1, "replication_factor": 1},
        {"name": "replicated", "num_partitions": 1, "replication_factor": 3},
        {"name": TOPIC, "num_partitions": 1, "replication_factor": 1},
    ]  # fmt: skip
    response = await call(broker, CREATE_TOPICS, version, {"topics": topics})
    created, reserved, replicated, existing = response.topics
    assert created.error_code == ErrorCode.none
    resolved = broker.resolver.resolve("new")
    assert resolved is not None and resolved.partition_count == 1  # num.partitions
    if version >= 5:
        assert (created.num_partitions, created.replication_factor) == (1, 1)
        configs = {config.name: config for config in created.configs}
        assert configs["retention.ms"].value == "5000"
        assert configs["retention.ms"].config_source == DYNAMIC_TOPIC_CONFIG
        assert configs["cleanup.policy"].config_source == DEFAULT_CONFIG
    if version >= 7:
        assert created.topic_id == resolved.topic_id
    assert (reserved.error_code, reserved.error_message) == (
        ErrorCode.policy_violation,  # as Kafka's create.topic.policy refusals
        "names ending in '.full' are reserved for full-data views",
    )
    assert replicated.error_code == ErrorCode.invalid_replication_factor
    assert existing.error_code == ErrorCode.topic_already_exists
    assert broker.resolver.resolve("replicated") is None


async def test_create_topics_validate_only_creates_nothing(broker: Broker) -> None:
    topics = [{"name": "checked", "num_partitions": 2, "replication_factor": 1}]
    response = await call(broker, CREATE_TOPICS, 7, {"topics": topics, "validate_only": True})
    [checked] = response.topics
    assert (checked.error_code, checked.num_partitions) == (ErrorCode.none, 2)
    assert checked.topic_id is None  # no topic, no id: the zero id, which kio reads as null
    assert broker.resolver.resolve("checked") is None


@pytest.mark.parametrize("version", edges(DELETE_TOPICS))
async def test_delete_topics_refuses_a_view_and_deletes_its_topic(
    broker: Broker, version: int
) -> None:
    await append(broker, [(b"k", b"v")])
    await read_all(broker)  # the view holds the key
    names = [VIEW, "nope", TOPIC]
    request = {"topic_names": names, "topics": [{"name": name} for name in names]}
    response = await call(broker, DELETE_TOPICS, version, request)
    view, unknown, deleted = response.responses
    assert view.error_code == ErrorCode.policy_violation
    if version >= 5:  # error messages came with v5; Kafka's controller gives Errors' own
        assert view.error_message == (
            "t.full is a read-only full-data view; delete its topic instead"
        )
        assert unknown.error_message == "This server does not host this topic-partition."
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    assert deleted.error_code == ErrorCode.none
    assert broker.resolver.resolve(TOPIC) is None and broker.resolver.resolve(VIEW) is None
    assert broker.full_view.store.live_records(TopicPartition(TOPIC, 0)) == []


async def test_delete_topics_by_id(broker: Broker) -> None:
    resolved = broker.resolver.resolve(TOPIC)
    assert resolved is not None
    missing = uuid.uuid4()
    topics = [{"name": None, "topic_id": resolved.topic_id}, {"name": None, "topic_id": missing}]
    response = await call(broker, DELETE_TOPICS, 6, {"topics": topics})
    deleted, unknown = response.responses
    assert (deleted.name, deleted.topic_id, deleted.error_code) == (
        TOPIC,
        resolved.topic_id,
        ErrorCode.none,
    )
    assert (unknown.name, unknown.topic_id, unknown.error_code, unknown.error_message) == (
        None,
        missing,
        ErrorCode.unknown_topic_id,
        "This server does not host this topic ID.",
    )


def test_only_partitions_of_stored_topics_are_writable(broker: Broker) -> None:
    """What AddPartitionsToTxn and DescribeProducers accept: a view's partition, like a
    missing one, is not writable."""
    assert broker.resolver.is_writable(TopicPartition(TOPIC, 0))
    for missing_or_view in [TopicPartition(TOPIC, 1), TopicPartition(VIEW, 0),
                            TopicPartition("nope", 0), TopicPartition(TOPIC, -1)]:  # fmt: skip
        assert not broker.resolver.is_writable(missing_or_view)
    assert broker.resolver.readable_partition(TopicPartition(VIEW, 0)) is not None


@pytest.mark.parametrize("version", edges(CREATE_PARTITIONS))
async def test_create_partitions(broker: Broker, version: int) -> None:
    topics = [{"name": TOPIC, "count": 3, "assignments": None},
              {"name": "nope", "count": 3, "assignments": None}]  # fmt: skip
    response = await call(broker, CREATE_PARTITIONS, version, {"topics": topics})
    grown, unknown = response.results
    assert (grown.error_code, grown.error_message) == (ErrorCode.none, None)
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    resolved = broker.resolver.resolve(VIEW)
    assert resolved is not None and resolved.partition_count == 3  # the view follows


@pytest.mark.parametrize("version", edges(CREATE_PARTITIONS))
async def test_create_partitions_refuses_in_kafkas_words(broker: Broker, version: int) -> None:
    """ReplicationControlManager.createPartitions' refusals, in its order: the count, then
    the number of assignments, then each one's brokers (only node 1 is registered)."""
    await broker.topics.create("two", 2, {})
    not_more = "The topic two currently has 2 partition(s); {} would not be an increase."
    placement = "The manual partition assignment includes "
    refused = [
        (2, None, INVALID_PARTITIONS, "Topic already has 2 partition(s)."),
        (1, None, INVALID_PARTITIONS, not_more.format(1)),
        (0, [[1]], INVALID_PARTITIONS, not_more.format(0)),
        (-1, None, INVALID_PARTITIONS, not_more.format(-1)),
        (4, [[1]], INVALID_REPLICA_ASSIGNMENT,
         "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        (3, [[]], INVALID_REPLICA_ASSIGNMENT, placement + "an empty replica list."),
        (3, [[7, 1]], INVALID_REPLICA_ASSIGNMENT,
         placement + "broker 7, but no such broker is registered."),
        (3, [[1, 1]], INVALID_REPLICA_ASSIGNMENT, placement + "the broker 1 more than once."),
    ]  # fmt: skip
    for count, assignments, error_code, message in refused:
        placed = None if assignments is None else [{"broker_ids": ids} for ids in assignments]
        topics = [{"name": "two", "count": count, "assignments": placed}]
        [result] = (await call(broker, CREATE_PARTITIONS, version, {"topics": topics})).results
        assert (result.error_code, result.error_message) == (error_code, message), count
    topics = [{"name": "two", "count": 3, "assignments": [{"broker_ids": [1]}]},
              {"name": "nope", "count": 3, "assignments": None}]  # fmt: skip
    grown, unknown = (await call(broker, CREATE_PARTITIONS, version, {"topics": topics})).results
    assert (grown.error_code, grown.error_message) == (ErrorCode.none, None)
    assert (unknown.error_code, unknown.error_message) == (UNKNOWN_TOPIC, None)
    resolved = broker.resolver.resolve("two")
    assert resolved is not None and resolved.partition_count == 3


@pytest.mark.parametrize("version", edges(DESCRIBE_CONFIGS))
async def test_describe_configs_of_a_topic_and_its_view(broker: Broker, version: int) -> None:
    keys = ["cleanup.policy", "retention.ms", "kshim.full.view"]
    resources = [resource(TOPIC, configuration_keys=keys),
                 resource(VIEW, configuration_keys=keys),
                 resource("nope", configuration_keys=None)]  # fmt: skip
    request = {"resources": resources, "include_synonyms": True}
    topic, view, unknown = (await call(broker, DESCRIBE_CONFIGS, version, request)).results
    described = {config.name: config for config in topic.configs}
    assert {name: config.value for name, config in described.items()} == {
        "cleanup.policy": "delete",
        "kshim.full.view": "true",
        "retention.ms": "3600000",
    }
    assert not any(config.read_only for config in topic.configs)
    assert [(s.name, s.value) for s in described["retention.ms"].synonyms] == [
        ("retention.ms", "3600000"),  # the topic's own, then its broker key's default
        ("log.retention.ms", "604800000"),
    ]
    assert {config.name: config.value for config in view.configs} == {
        "cleanup.policy": "compact",
        "kshim.full.view": "false",
        "retention.ms": "3600000",
    }
    assert all(config.read_only for config in view.configs)
    # Kafka's ConfigHelper sets no message: the field's default, "".
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.unknown_topic_or_partition, "")
    assert topic.error_message == view.error_message == ""


async def test_describe_configs_sends_synonyms_only_when_asked(broker: Broker) -> None:
    request = {"resources": [resource(TOPIC, configuration_keys=[])], "include_synonyms": False}
    [topic] = (await call(broker, DESCRIBE_CONFIGS, 4, request)).results
    assert len(topic.configs) > 3  # an empty key list asks for every config
    assert all(config.synonyms == () for config in topic.configs)


@pytest.mark.parametrize("version", edges(ALTER_CONFIGS))
async def test_alter_configs(broker: Broker, version: int) -> None:
    change = [{"name": "retention.ms", "value": "1000"}]
    resources = [resource(VIEW, configs=change), resource(TOPIC, configs=change),
                 resource("nope", configs=change),
                 resource(TOPIC, configs=[{"name": "retention.ms", "value": None}])]  # fmt: skip
    response = await call(broker, ALTER_CONFIGS, version, {"resources": resources})
    view, topic, unknown, null = response.responses
    assert (view.error_code, view.error_message) == VIEW_IS_READ_ONLY
    assert topic.error_code == ErrorCode.none
    assert (unknown.error_code, unknown.error_message) == NOPE_IS_UNKNOWN
    assert (null.error_code, null.error_message) == (
        ErrorCode.invalid_request,  # Kafka's ConfigAdminManager: a malformed request
        "Null value not supported for : retention.ms",
    )
    resolved = broker.resolver.resolve(TOPIC)
    assert resolved is not None and resolved.configs().overrides() == {"retention.ms": "1000"}


@pytest.mark.parametrize("version", edges(INCREMENTAL_ALTER_CONFIGS))
async def test_incremental_alter_configs(broker: Broker, version: int) -> None:
    def change(name: str, operation: int, value: str | None) -> dict[str, Any]:
        return {"name": name, "config_operation": operation, "value": value}

    append_compact = [change("cleanup.policy", 2, "compact")]
    resources = [resource(VIEW, configs=[change("retention.ms", SET, "1")]),
                 resource(TOPIC, configs=append_compact),
                 resource("nope", configs=append_compact)]  # fmt: skip
    response = await call(broker, INCREMENTAL_ALTER_CONFIGS, version, {"resources": resources})
    view, appended, unknown = response.responses
    assert (view.error_code, view.error_message) == VIEW_IS_READ_ONLY
    assert appended.error_code == ErrorCode.none
    assert (unknown.error_code, unknown.error_message) == NOPE_IS_UNKNOWN
    request = {"resources": [resource(TOPIC, configs=[change("segment.bytes", 2, "1")])]}
    [not_a_list] = (await call(broker, INCREMENTAL_ALTER_CONFIGS, version, request)).responses
    assert (not_a_list.error_code, not_a_list.error_message) == (
        ErrorCode.invalid_config,
        "Can't APPEND to key segment.bytes because its type is not LIST.",
    )
    resolved = broker.resolver.resolve(TOPIC)
    assert resolved is not None
    assert resolved.configs().overrides() == {
        "retention.ms": "3600000",
        "cleanup.policy": "delete,compact",
    }


@pytest.mark.parametrize("version", edges(INCREMENTAL_ALTER_CONFIGS))
async def test_incremental_alter_configs_refuses_what_kafka_refuses_first(
    broker: Broker, version: int
) -> None:
    # Kafka's ConfigAdminManager.preprocess: nothing of such a resource is changed.
    def change(name: str, operation: int, value: str | None) -> dict[str, Any]:
        return {"name": name, "config_operation": operation, "value": value}

    set_one = [change("retention.ms", SET, "1")]
    cases = {
        "Each resource must appear at most once.": [resource(TOPIC, configs=set_one)] * 2,
        "Error due to duplicate config keys": [
            resource(
                TOPIC, configs=[change("retention.ms", SET, "1"), change("retention.ms", 1, None)]
            )
        ],
        "Null value not supported for : retention.ms": [
            resource(TOPIC, configs=[change("retention.ms", SET, None)])
        ],
    }
    for message, resources in cases.items():
        response = await call(broker, INCREMENTAL_ALTER_CONFIGS, version, {"resources": resources})
        assert [(answer.error_code, answer.error_message) for answer in response.responses] == [
            (ErrorCode.invalid_request, message)
        ] * len(resources)
    resolved = broker.resolver.resolve(TOPIC)
    assert resolved is not None and resolved.configs().overrides() == {"retention.ms": "3600000"}


def records_request(name: str, *partitions: tuple[int, int]) -> dict[str, Any]:
    wanted = [{"partition_index": index, "offset": offset} for index, offset in partitions]
    return {"topics": [{"name": name, "partitions": wanted}]}


def answers(response: Any) -> list[tuple[int, int, ErrorCode]]:
    [topic] = response.topics
    return [(p.partition_index, p.low_watermark, p.error_code) for p in topic.partitions]


@pytest.mark.parametrize("version", edges(DELETE_RECORDS))
async def test_delete_records_refuses_views_and_bad_offsets(broker: Broker, version: int) -> None:
    for index in range(3):
        await append(broker, [(b"k%d" % index, b"v")])
    view = await call(broker, DELETE_RECORDS, version, records_request(VIEW, (0, 1), (7, 1)))
    assert answers(view) == [(0, -1, ErrorCode.policy_violation),
                             (7, -1, ErrorCode.policy_violation)]  # fmt: skip
    unknown = await call(broker, DELETE_RECORDS, version, records_request("nope", (0, 1)))
    assert answers(unknown) == [(0, -1, ErrorCode.unknown_topic_or_partition)]
    request = records_request(TOPIC, (0, 4), (0, 1), (1, 1))
    response = await call(broker, DELETE_RECORDS, version, request)
    # A refusal has no low watermark (-1), as Kafka's ReplicaManager.deleteRecordsOnLocalLog.
    assert answers(response) == [(0, -1, ErrorCode.offset_out_of_range),
                                 (0, 1, ErrorCode.none),
                                 (1, -1, ErrorCode.unknown_topic_or_partition)]  # fmt: skip


async def test_delete_records_stops_where_the_view_stops(broker: Broker) -> None:
    """The view first applies what is stable; an open transaction holds the log start at
    its first offset, so the view keeps every committed record."""
    for index in range(3):
        await append(broker, [(b"k%d" % index, b"v")])
    await append(broker, [(b"open", b"v")], transactional(producer_id=9))  # offset 3
    await append(broker, [(b"after", b"v")])  # offset 4
    response = await call(broker, DELETE_RECORDS, 2, records_request(TOPIC, (0, -1)))
    assert answers(response) == [(0, 3, ErrorCode.none)]
    assert broker.metadata.log_start_offset(TopicPartition(TOPIC, 0)) == 3
    assert as_dict(await read_all(broker)) == {b"k0": (0, b"v"), b"k1": (1, b"v"),
                                               b"k2": (2, b"v")}  # fmt: skip


async def test_delete_records_of_a_topic_without_a_view_goes_to_the_high_watermark(
    broker: Broker,
) -> None:
    await broker.topics.create("plain", 1, {"kshim.full.view": "false"})
    partition = broker.resolver.deletable_partition(TopicPartition("plain", 0))
    assert partition is not None and await partition.log_start_limit() is None
    for _ in range(2):
        batch = build_batch([Record(0, 0, b"k", b"v")])
        await partition.log.wait_durable(partition.log.append(batch, read_header(batch)))
    response = await call(broker, DELETE_RECORDS, 2, records_request("plain", (0, -1)))
    assert answers(response) == [(0, 2, ErrorCode.none)]
    assert broker.metadata.log_start_offset(TopicPartition("plain", 0)) == 2
