"""Conformance cases for refusals and edge answers of the topic admin APIs: CreatePartitions
asked for no more partitions than a topic has, or given assignments that do not fit, in the
words of Kafka's controller (ReplicationControlManager.createPartitions); DescribeConfigs'
synonyms, where a topic default comes from the broker's configuration."""

from __future__ import annotations

from typing import Any

from compat_tests.conformance_brokers import SAMPLE_TOPIC_DEFAULTS
from compat_tests.conformance_probe import NODE_ID, TOPIC_RESOURCE, Exchange, Probe

UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT = 3, 37, 39
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
CONFIG_TYPE_INT, CONFIG_TYPE_LIST = 3, 7
DEFAULT_SEGMENT_BYTES = str(1 << 30)  # Kafka's and kshim's log.segment.bytes default


def create_fewer_partitions(probe: Probe, version: int) -> Exchange:
    topic = probe.create_topic("fewer", partitions=2)
    request = {
        "topics": [{"name": topic, "count": 1, "assignments": None}],
        "timeout": 10_000,
        "validate_only": False,
    }
    result = {
        "name": topic,
        "error_code": INVALID_PARTITIONS,
        "error_message": f"The topic {topic} currently has 2 partition(s); 1 would not be an "
        "increase.",
    }
    return Exchange(request, lambda _: {"throttle_time": 0, "results": [result]})


def create_partitions_refusals(probe: Probe, version: int) -> Exchange:
    """ReplicationControlManager.createPartitions' other refusals, one topic each: the
    same count, none, fewer than none, assignments that do not fit (only node 1 is
    registered), and a topic that does not exist (the error alone, no message)."""
    asked: list[tuple[str, int, list[list[int]] | None]] = [
        (probe.create_topic("same", partitions=2), 2, None),
        (probe.create_topic("zero"), 0, None),
        (probe.create_topic("negative"), -1, None),
        (probe.create_topic("assignments"), 3, [[NODE_ID]]),
        (probe.create_topic("empty-replicas"), 2, [[]]),
        (probe.create_topic("other-broker"), 2, [[NODE_ID + 6]]),
        (probe.create_topic("twice"), 2, [[NODE_ID, NODE_ID]]),
        (probe.name("missing"), 2, None),
    ]
    request = {
        "topics": [
            {
                "name": name,
                "count": count,
                "assignments": None if placed is None else [{"broker_ids": ids} for ids in placed],
            }
            for name, count, placed in asked
        ],
        "timeout": 10_000,
        "validate_only": False,
    }
    not_more = "currently has 1 partition(s); {} would not be an increase."
    placement = "The manual partition assignment includes "
    answers = [
        (INVALID_PARTITIONS, "Topic already has 2 partition(s)."),
        (INVALID_PARTITIONS, f"The topic {asked[1][0]} {not_more.format(0)}"),
        (INVALID_PARTITIONS, f"The topic {asked[2][0]} {not_more.format(-1)}"),
        (INVALID_REPLICA_ASSIGNMENT,
         "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        (INVALID_REPLICA_ASSIGNMENT, placement + "an empty replica list."),
        (INVALID_REPLICA_ASSIGNMENT,
         f"{placement}broker {NODE_ID + 6}, but no such broker is registered."),
        (INVALID_REPLICA_ASSIGNMENT, f"{placement}the broker {NODE_ID} more than once."),
        (UNKNOWN_TOPIC_OR_PARTITION, None),
    ]  # fmt: skip
    results = [
        {"name": name, "error_code": error_code, "error_message": message}
        for (name, _, _), (error_code, message) in zip(asked, answers, strict=True)
    ]
    return Exchange(request, lambda _: {"throttle_time": 0, "results": results})


def describe_configs_synonyms(probe: Probe, version: int) -> Exchange:
    """Two defaults of a new topic with their synonyms: segment.bytes, which both brokers'
    configuration sets under its broker key (Kafka's sample server.properties, and the
    same given to kshim: conformance_brokers.py), and cleanup.policy, which neither sets."""
    topic = probe.create_topic("synonyms")
    segment_bytes = SAMPLE_TOPIC_DEFAULTS["log.segment.bytes"]
    resource = {
        "resource_type": TOPIC_RESOURCE,
        "resource_name": topic,
        "configuration_keys": ["segment.bytes", "cleanup.policy"],
    }
    request = {"resources": [resource], "include_synonyms": True, "include_documentation": False}
    common: dict[str, Any] = {"read_only": False, "is_sensitive": False, "documentation": None}
    configs = [
        {
            "name": "cleanup.policy",
            "value": "delete",
            "config_source": DEFAULT_CONFIG,
            "synonyms": [
                {"name": "log.cleanup.policy", "value": "delete", "source": DEFAULT_CONFIG}
            ],
            "config_type": CONFIG_TYPE_LIST,
            **common,
        },
        {
            "name": "segment.bytes",
            "value": segment_bytes,
            "config_source": STATIC_BROKER_CONFIG,
            "synonyms": [
                {"name": "log.segment.bytes", "value": value, "source": source}
                for value, source in (
                    (segment_bytes, STATIC_BROKER_CONFIG),
                    (DEFAULT_SEGMENT_BYTES, DEFAULT_CONFIG),
                )
            ],
            "config_type": CONFIG_TYPE_INT,
            **common,
        },
    ]
    described = {
        "error_code": 0,
        "error_message": "",  # Kafka's ConfigHelper leaves it unset
        "resource_type": TOPIC_RESOURCE,
        "resource_name": topic,
        "configs": configs,
    }
    return Exchange(request, lambda _: {"throttle_time": 0, "results": [described]})


ADMIN_ERROR_CASES = {
    "create-fewer-partitions": (37, create_fewer_partitions),
    "create-partitions-refusals": (37, create_partitions_refusals),
    "describe-configs-synonyms": (32, describe_configs_synonyms),
}
