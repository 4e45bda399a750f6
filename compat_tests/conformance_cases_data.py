"""Conformance cases for the data path and the topic admin APIs.

Each case takes the version under test and returns an Exchange: the request, and the
whole response Kafka would send for it (https://kafka.apache.org/protocol#protocol_api_keys).
Fields a version lacks are dropped when the expected body is built for that version.
"""

from __future__ import annotations

from typing import Any

from compat_tests.conformance_bodies import LED_PARTITION, metadata_answer, produce_request
from compat_tests.conformance_probe import (
    INT32_MIN,
    TOPIC_RESOURCE,
    Exchange,
    Probe,
    as_stored,
    create_topic_request,
    record_batch,
)
from kshim.protocol.apis import ADVERTISED

RECORDS = 3
LATEST = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
CONFIG_SOURCE_DYNAMIC_TOPIC, CONFIG_SOURCE_DEFAULT = 1, 5
CONFIG_TYPE_LONG, CONFIG_TYPE_LIST = 5, 7
INCREMENTAL_SET = 0
DAY_MS = 86_400_000
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSET_MESSAGE = ""  # what Kafka sends for a nullable message its handler leaves unset


def produce(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic(f"produce-v{version}")
    request = produce_request(topic, 0, record_batch(RECORDS))
    partition: dict[str, Any] = {
        "index": 0,
        "error_code": 0,
        "base_offset": 0,
        "log_append_time": None,  # CreateTime topic: -1
        "log_start_offset": 0,
        "record_errors": [],
        "error_message": None,
    }
    expected = {"responses": [{"name": topic, "partition_responses": [partition]}]}
    return Exchange(request, lambda _: {**expected, "throttle_time": 0})


def fetch(probe: Probe, version: int) -> Exchange:
    """The lowest version reads uncommitted (no aborted list: null), the highest committed."""
    topic = probe.create_topic(f"fetch-v{version}")
    batch = probe.produce(topic, RECORDS)
    low = version == ADVERTISED[1][0]
    isolation = READ_UNCOMMITTED if low else READ_COMMITTED
    request = {
        "replica_id": -1,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": isolation,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
        "forgotten_topics_data": [],
    }
    partition: dict[str, Any] = {
        "partition_index": 0,
        "error_code": 0,
        "high_watermark": RECORDS,
        "last_stable_offset": RECORDS,
        "log_start_offset": 0,
        "aborted_transactions": None if low else [],
        "preferred_read_replica": -1,
        "records": as_stored(batch, 0),
    }
    expected = {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": topic, "partitions": [partition]}],
    }
    return Exchange(request, lambda _: expected)


def list_offsets(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic(f"list-offsets-v{version}")
    probe.produce(topic, RECORDS)
    request = {
        "replica_id": -1,
        "isolation_level": READ_UNCOMMITTED,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": LATEST}]}],
    }
    partition = {
        "partition_index": 0,
        "error_code": 0,
        "timestamp": -1,
        "offset": RECORDS,
        "leader_epoch": 0,
    }
    expected = {"throttle_time": 0, "topics": [{"name": topic, "partitions": [partition]}]}
    return Exchange(request, lambda _: expected)


def metadata(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic(f"metadata-v{version}")
    request = {
        "topics": [{"name": topic}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }

    def expect(actual: Any) -> dict[str, Any]:
        cluster_id = getattr(actual, "cluster_id", None)
        assert version < 2 or cluster_id, "a cluster id from v2 on"
        [described] = actual.topics
        topic_id = getattr(described, "topic_id", None)
        assert version < 10 or (topic_id is not None and topic_id.int != 0), "a topic id"
        described_topic = {
            "error_code": 0,
            "name": topic,
            "topic_id": topic_id,
            "is_internal": False,
            "partitions": [LED_PARTITION],
            "topic_authorized_operations": INT32_MIN,
        }
        return metadata_answer(probe, cluster_id, described_topic)

    return Exchange(request, expect)


def create_topics(probe: Probe, version: int) -> Exchange:
    """v5+ echo the partition count, replication factor and every config of the new topic;
    those configs must match what DescribeConfigs then reports."""
    topic = probe.name(f"create-v{version}")
    request = create_topic_request(topic, 2, {"retention.ms": "3600000"})

    def expect(actual: Any) -> dict[str, Any]:
        [created] = actual.topics
        topic_id = getattr(created, "topic_id", None)
        assert version < 7 or (topic_id is not None and topic_id.int != 0)
        result = {
            "name": topic,
            "topic_id": topic_id,
            "error_code": 0,
            "error_message": None,
            "topic_config_error_code": 0,
            "num_partitions": 2,
            "replication_factor": 1,
            "configs": described_configs(probe, topic),
        }
        return {"throttle_time": 0, "topics": [result]}

    return Exchange(request, expect)


def described_configs(probe: Probe, topic: str) -> list[dict[str, Any]]:
    """Every config of ``topic`` as DescribeConfigs v4 reports it, in CreateTopics' shape."""
    resource = {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configuration_keys": None}
    [result] = probe.call(32, 4, {"resources": [resource]}).results
    assert any(entry.name == "retention.ms" for entry in result.configs)
    return [
        {
            "name": entry.name,
            "value": entry.value,
            "read_only": entry.read_only,
            "config_source": entry.config_source,
            "is_sensitive": entry.is_sensitive,
        }
        for entry in result.configs
    ]


def delete_topics(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic(f"delete-v{version}")
    request = {"topic_names": [topic], "topics": [{"name": topic}], "timeout": 10_000}

    def expect(actual: Any) -> dict[str, Any]:
        [deleted] = actual.responses
        topic_id = getattr(deleted, "topic_id", None)
        assert version < 6 or (topic_id is not None and topic_id.int != 0)
        result = {"name": topic, "topic_id": topic_id, "error_code": 0, "error_message": None}
        return {"throttle_time": 0, "responses": [result]}

    return Exchange(request, expect)


def delete_records(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic(f"delete-records-v{version}")
    probe.produce(topic, 5)
    request = {
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 3}]}],
        "timeout": 10_000,
    }
    partition = {"partition_index": 0, "low_watermark": 3, "error_code": 0}
    expected = {"throttle_time": 0, "topics": [{"name": topic, "partitions": [partition]}]}
    return Exchange(request, lambda _: expected)


def describe_configs(probe: Probe, version: int) -> Exchange:
    """Two configs of a topic, one set on it and one default; and a topic that does not
    exist. Kafka sets no error message on either result, so both are sent as ""."""
    topic = probe.create_topic(f"describe-configs-v{version}", configs={"retention.ms": "3600000"})
    missing = probe.name("missing")
    request = {
        "resources": [
            {
                "resource_type": TOPIC_RESOURCE,
                "resource_name": topic,
                "configuration_keys": ["cleanup.policy", "retention.ms"],
            },
            {"resource_type": TOPIC_RESOURCE, "resource_name": missing, "configuration_keys": None},
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    common = {"read_only": False, "is_sensitive": False, "synonyms": [], "documentation": None}
    configs = [
        {
            "name": "cleanup.policy",
            "value": "delete",
            "config_source": CONFIG_SOURCE_DEFAULT,
            "config_type": CONFIG_TYPE_LIST,
            **common,
        },
        {
            "name": "retention.ms",
            "value": "3600000",
            "config_source": CONFIG_SOURCE_DYNAMIC_TOPIC,
            "config_type": CONFIG_TYPE_LONG,
            **common,
        },
    ]
    described = {
        "error_code": 0,
        "error_message": UNSET_MESSAGE,
        "resource_type": TOPIC_RESOURCE,
        "resource_name": topic,
        "configs": configs,  # Kafka lists them in name order
    }
    unknown = {
        "error_code": UNKNOWN_TOPIC_OR_PARTITION,
        "error_message": UNSET_MESSAGE,
        "resource_type": TOPIC_RESOURCE,
        "resource_name": missing,
        "configs": [],
    }
    expected = {"throttle_time": 0, "results": [described, unknown]}
    return Exchange(request, lambda _: expected)


def alter_configs(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic(f"alter-configs-v{version}")
    request = {
        "resources": [
            {
                "resource_type": TOPIC_RESOURCE,
                "resource_name": topic,
                "configs": [{"name": "retention.ms", "value": str(DAY_MS)}],
            }
        ],
        "validate_only": False,
    }
    return Exchange(request, lambda _: altered(topic))


def incremental_alter_configs(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic(f"incremental-v{version}")
    change = {"name": "retention.ms", "config_operation": INCREMENTAL_SET, "value": str(DAY_MS)}
    request = {
        "resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configs": [change]}
        ],
        "validate_only": False,
    }
    return Exchange(request, lambda _: altered(topic))


def altered(topic: str) -> dict[str, Any]:
    result = {
        "error_code": 0,
        "error_message": None,
        "resource_type": TOPIC_RESOURCE,
        "resource_name": topic,
    }
    return {"throttle_time": 0, "responses": [result]}


def create_partitions(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic(f"partitions-v{version}")
    request = {
        "topics": [{"name": topic, "count": 3, "assignments": None}],
        "timeout": 10_000,
        "validate_only": False,
    }
    expected = {
        "throttle_time": 0,
        "results": [{"name": topic, "error_code": 0, "error_message": None}],
    }
    return Exchange(request, lambda _: expected)


def api_versions(probe: Probe, version: int) -> Exchange:
    """Exactly the advertised table; no features (keeps clients on transaction protocol V1)."""
    request = {"client_software_name": "kshim-compat", "client_software_version": "1.0"}
    keys = [
        {"api_key": key, "min_version": low, "max_version": high}
        for key, (low, high) in sorted(ADVERTISED.items())
    ]
    expected = {
        "error_code": 0,
        "api_keys": keys,
        "throttle_time": 0,
        "supported_features": [],
        "finalized_features_epoch": -1,
        "finalized_features": [],
        "zk_migration_ready": False,
    }
    return Exchange(request, lambda _: expected)
