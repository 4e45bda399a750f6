"""The admin APIs behind their access rules: topics created, deleted, grown, their records
deleted and producers described; configs described and altered; ACLs and SCRAM
credentials managed."""

from __future__ import annotations

import uuid

from kshim.broker.broker import Broker
from kshim.protocol.acls import (
    AclFilter,
    Operation,
    PatternType,
    ResourceType,
)
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages import alter_configs as legacy
from kshim.protocol.messages import incremental_alter_configs as incremental
from kshim.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kshim.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from kshim.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kshim.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from kshim.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from kshim.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kshim.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from kshim.protocol.messages.describe_acls import DescribeAclsRequest
from kshim.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from kshim.protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from kshim.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from tests.broker.access.support import (
    BOB,
    OTHER,
    TOPIC,
    call,
    errors_by_topic,
    grant_cluster,
    grant_topic,
)

CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, CREATE_PARTITIONS = 19, 20, 21, 37
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_SCRAM, ALTER_SCRAM, DESCRIBE_PRODUCERS = 50, 51, 61
TAF, CAF = ErrorCode.topic_authorization_failed, ErrorCode.cluster_authorization_failed
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
ANY = 1  # the ANY code of a filter's resource type, pattern type, operation and permission


def exists(broker: Broker, name: str) -> bool:
    return broker.topics.get(name) is not None


# CreateTopics


def create_request(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[CreatableTopic(name=name, num_partitions=1, replication_factor=1) for name in names]
    )


async def test_create_topics_needs_create_on_the_topic(broker: Broker) -> None:
    grant_topic(
        broker, "new-", Operation.CREATE, Operation.DESCRIBE_CONFIGS, pattern=PatternType.PREFIXED
    )
    answer = await call(broker, CREATE_TOPICS, 7, create_request("new-1", "old-1"))
    found = {result.name: result for result in answer.topics}
    assert (found["new-1"].error_code, found["new-1"].num_partitions) == (0, 1)
    assert found["new-1"].configs  # DESCRIBE_CONFIGS: the created topic's configs shown
    refused = found["old-1"]
    assert (refused.error_code, refused.error_message) == (TAF, "Authorization failed.")
    assert (refused.num_partitions, refused.replication_factor, refused.configs) == (-1, -1, [])
    assert (exists(broker, "new-1"), exists(broker, "old-1")) == (True, False)


async def test_created_topics_configs_are_shown_only_with_describe_configs(broker: Broker) -> None:
    grant_cluster(broker, Operation.CREATE)
    answer = await call(broker, CREATE_TOPICS, 7, create_request("any-1"))
    [created] = answer.topics
    assert (created.error_code, created.topic_config_error_code) == (0, TAF)
    assert (created.num_partitions, created.replication_factor, created.configs) == (-1, -1, [])
    assert created.topic_id != uuid.UUID(int=0)
    assert exists(broker, "any-1")


# DeleteTopics


async def test_delete_topics_by_name_hides_what_the_client_may_not_describe(
    broker: Broker,
) -> None:
    grant_topic(broker, TOPIC, Operation.DESCRIBE)  # but not DELETE
    grant_topic(broker, "gone", Operation.DELETE)
    request = DeleteTopicsRequest(topic_names=[TOPIC, OTHER, "gone", "nope"])
    answer = await call(broker, DELETE_TOPICS, 5, request)
    assert {result.name: result.error_code for result in answer.responses} == {
        TOPIC: TAF,
        OTHER: TAF,
        "gone": ErrorCode.unknown_topic_or_partition,  # describable (DELETE implies it)
        "nope": TAF,  # unknown, but not describable: no different from OTHER
    }
    assert answer.responses[-1].error_message == "Topic authorization failed."
    assert exists(broker, TOPIC) and exists(broker, OTHER)
    grant_topic(broker, TOPIC, Operation.DELETE)
    deleted = await call(broker, DELETE_TOPICS, 5, DeleteTopicsRequest(topic_names=[TOPIC]))
    assert [result.error_code for result in deleted.responses] == [0]
    assert not exists(broker, TOPIC)


async def test_delete_topics_by_id_names_the_topic_only_to_who_may_describe_it(
    broker: Broker,
) -> None:
    ids = {}
    for name in (TOPIC, OTHER):
        resolved = broker.resolver.resolve(name)
        assert resolved is not None
        ids[name] = resolved.topic_id
    grant_topic(broker, OTHER, Operation.DESCRIBE)
    request = DeleteTopicsRequest(
        topics=[DeleteTopicState(topic_id=ids[TOPIC]), DeleteTopicState(topic_id=ids[OTHER])]
    )
    answer = await call(broker, DELETE_TOPICS, 6, request)
    found = {result.topic_id: result for result in answer.responses}
    assert (found[ids[TOPIC]].name, found[ids[TOPIC]].error_code) == (None, TAF)
    assert (found[ids[OTHER]].name, found[ids[OTHER]].error_code) == (OTHER, TAF)


async def test_delete_on_the_cluster_deletes_any_topic(broker: Broker) -> None:
    grant_cluster(broker, Operation.DELETE)
    answer = await call(broker, DELETE_TOPICS, 5, DeleteTopicsRequest(topic_names=[OTHER]))
    assert [result.error_code for result in answer.responses] == [0]
    assert not exists(broker, OTHER)


# DeleteRecords, CreatePartitions, DescribeProducers


async def test_delete_records_needs_delete_on_the_topic(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.DELETE)
    request = DeleteRecordsRequest(
        topics=[
            DeleteRecordsTopic(name=name, partitions=[DeleteRecordsPartition(offset=0)])
            for name in (TOPIC, OTHER)
        ]
    )
    answer = await call(broker, DELETE_RECORDS, 2, request)
    assert errors_by_topic(answer.topics) == {TOPIC: [0], OTHER: [TAF]}
    refused = next(topic for topic in answer.topics if topic.name == OTHER)
    assert refused.partitions[0].low_watermark == -1


async def test_create_partitions_needs_alter_on_the_topic(broker: Broker) -> None:
    grant_topic(broker, OTHER, Operation.ALTER)
    request = CreatePartitionsRequest(
        topics=[CreatePartitionsTopic(name=name, count=3) for name in (TOPIC, OTHER)]
    )
    answer = await call(broker, CREATE_PARTITIONS, 3, request)
    assert {
        result.name: (result.error_code, result.error_message) for result in answer.results
    } == {
        TOPIC: (TAF, None),
        OTHER: (0, None),
    }
    orders, payments = broker.topics.get(TOPIC), broker.topics.get(OTHER)
    assert orders is not None and payments is not None
    assert (orders.record.partitions, payments.record.partitions) == (2, 3)


async def test_describe_producers_needs_read_on_the_topic(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.READ)
    request = DescribeProducersRequest(
        topics=[TopicRequest(name=name, partition_indexes=[0]) for name in (TOPIC, OTHER)]
    )
    answer = await call(broker, DESCRIBE_PRODUCERS, 0, request)
    assert errors_by_topic(answer.topics) == {TOPIC: [0], OTHER: [TAF]}
    refused = next(topic for topic in answer.topics if topic.name == OTHER)
    assert refused.partitions[0].error_message == "Topic authorization failed."


# DescribeConfigs, AlterConfigs, IncrementalAlterConfigs


async def test_describe_configs_needs_describe_configs_which_alter_configs_implies(
    broker: Broker,
) -> None:
    grant_topic(broker, TOPIC, Operation.ALTER_CONFIGS)
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=TOPIC),
            DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=OTHER),
            DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name=""),
        ]
    )
    answer = await call(broker, DESCRIBE_CONFIGS, 4, request)
    found = {result.resource_name: result for result in answer.results}
    assert (found[TOPIC].error_code, bool(found[TOPIC].configs)) == (0, True)
    assert (found[OTHER].error_code, found[OTHER].error_message) == (
        TAF,
        "Topic authorization failed.",
    )
    assert (found[""].error_code, found[""].error_message, found[""].configs) == (
        CAF,
        "Cluster authorization failed.",
        [],
    )
    grant_cluster(broker, Operation.DESCRIBE_CONFIGS)
    answer = await call(broker, DESCRIBE_CONFIGS, 4, request)
    assert {result.resource_name: result.error_code for result in answer.results}[""] == 0


async def test_alter_configs_needs_alter_configs_on_the_topic(broker: Broker) -> None:
    grant_topic(broker, OTHER, Operation.ALTER_CONFIGS)
    grant_topic(broker, TOPIC, Operation.DESCRIBE_CONFIGS)  # not enough to alter
    legacy_request = legacy.AlterConfigsRequest(
        resources=[
            legacy.AlterConfigsResource(
                resource_type=TOPIC_RESOURCE,
                resource_name=name,
                configs=[legacy.AlterableConfig(name="retention.ms", value="1000")],
            )
            for name in (TOPIC, OTHER)
        ]
    )
    answer = await call(broker, ALTER_CONFIGS, 2, legacy_request)
    assert {result.resource_name: result.error_code for result in answer.responses} == {
        TOPIC: TAF,
        OTHER: 0,
    }
    incremental_request = incremental.IncrementalAlterConfigsRequest(
        resources=[
            incremental.AlterConfigsResource(
                resource_type=TOPIC_RESOURCE,
                resource_name=TOPIC,
                configs=[incremental.AlterableConfig(name="retention.ms", value="2000")],
            )
        ]
    )
    answer = await call(broker, INCREMENTAL_ALTER_CONFIGS, 1, incremental_request)
    [refused] = answer.responses
    assert (refused.error_code, refused.error_message) == (TAF, "Topic authorization failed.")
    orders, payments = broker.topics.get(TOPIC), broker.topics.get(OTHER)
    assert orders is not None and payments is not None
    assert "retention.ms" not in orders.record.configs
    assert payments.record.configs["retention.ms"] == "1000"


# The ACL and SCRAM credential APIs


async def test_the_acl_apis_need_describe_or_alter_on_the_cluster(broker: Broker) -> None:
    grant_topic(broker, TOPIC, Operation.READ, principal=BOB)
    described = DescribeAclsRequest(
        resource_type_filter=ANY, pattern_type_filter=ANY, operation=ANY, permission_type=ANY
    )
    refused = await call(broker, DESCRIBE_ACLS, 3, described)
    assert (refused.error_code, refused.error_message, refused.resources) == (
        CAF,
        "Cluster authorization failed.",
        [],
    )
    creation = AclCreation(
        resource_type=ResourceType.TOPIC,
        resource_name=OTHER,
        resource_pattern_type=PatternType.LITERAL,
        principal="User:alice",
        host="*",
        operation=Operation.WRITE,
        permission_type=3,
    )
    created = await call(broker, CREATE_ACLS, 3, CreateAclsRequest(creations=[creation] * 2))
    assert [result.error_code for result in created.results] == [CAF, CAF]
    deletion = DeleteAclsFilter(
        resource_type_filter=ANY, pattern_type_filter=ANY, operation=ANY, permission_type=ANY
    )
    deleted = await call(broker, DELETE_ACLS, 3, DeleteAclsRequest(filters=[deletion]))
    [result] = deleted.filter_results
    assert (result.error_code, result.matching_acls) == (CAF, [])
    assert len(broker.acls.describe(AclFilter())) == 1  # nothing created or deleted

    grant_cluster(broker, Operation.ALTER)  # implies DESCRIBE
    assert (await call(broker, DESCRIBE_ACLS, 3, described)).error_code == 0
    created = await call(broker, CREATE_ACLS, 3, CreateAclsRequest(creations=[creation]))
    assert [result.error_code for result in created.results] == [0]


async def test_the_credential_apis_need_describe_or_alter_on_the_cluster(broker: Broker) -> None:
    described = DescribeUserScramCredentialsRequest(users=[UserName(name="carol")])
    refused = await call(broker, DESCRIBE_SCRAM, 0, described)
    assert (refused.error_code, refused.error_message) == (CAF, None)
    assert [(result.user, result.error_code) for result in refused.results] == [("carol", CAF)]
    upsertion = ScramCredentialUpsertion(
        name="carol", mechanism=1, iterations=4096, salt=b"s" * 32, salted_password=b"x" * 32
    )
    altered = AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name="dave", mechanism=1)], upsertions=[upsertion]
    )
    refused = await call(broker, ALTER_SCRAM, 0, altered)
    assert [(result.user, result.error_code) for result in refused.results] == [
        ("carol", CAF),
        ("dave", CAF),
    ]
    assert broker.credentials.describe(None) == []
    grant_cluster(broker, Operation.ALTER)
    altered.deletions = []
    answer = await call(broker, ALTER_SCRAM, 0, altered)
    assert [(result.user, result.error_code) for result in answer.results] == [("carol", 0)]
    grant_cluster(broker, Operation.DESCRIBE, principal=BOB)
    answer = await call(broker, DESCRIBE_SCRAM, 0, described, BOB)
    assert [(result.user, result.error_code) for result in answer.results] == [("carol", 0)]
