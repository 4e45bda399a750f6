"""A config value refused in Kafka's words, as Apache Kafka 3.9 answers the same mistake
(checked against it by compat_tests/test_protocol_conformance.py's config cases).

Kafka parses a value by its type with Java's syntax (ConfigDef.parseType), then checks it
(ConfigDef.Range, ValidString, ValidList), and a refusal is a ConfigException: "Invalid
value V for configuration K: REASON". Topic configs are refused so by CreateTopics,
AlterConfigs and IncrementalAlterConfigs; broker keys so at start-up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.keys import broker_validator
from kshim.broker.config.validators import INT_MAX, LONG_MAX, ConfigError
from kshim.protocol.errors import ErrorCode
from kshim.testing import FakeClock
from tests.full_view.support import open_broker
from tests.groups.wire import call

CREATE_TOPICS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 19, 33, 44
TOPIC_RESOURCE = 2
SET, APPEND, SUBTRACT = 0, 2, 3
TOPIC = "t"
POLICIES = "String must be one of: compact, delete"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("log.retention.ms", "soon", "Invalid value soon for configuration log.retention.ms: "
         "Not a number of type LONG"),
        ("log.retention.ms", "1_000", "Invalid value 1_000 for configuration log.retention.ms: "
         "Not a number of type LONG"),
        ("log.retention.ms", str(LONG_MAX + 1), f"Invalid value {LONG_MAX + 1} for "
         "configuration log.retention.ms: Not a number of type LONG"),
        ("log.retention.ms", " -2 ", "Invalid value -2 for configuration log.retention.ms: "
         "Value must be at least -1"),
        ("log.segment.bytes", " x ", "Invalid value  x  for configuration log.segment.bytes: "
         "Not a number of type INT"),
        ("log.segment.bytes", str(INT_MAX + 1), f"Invalid value {INT_MAX + 1} for "
         "configuration log.segment.bytes: Not a number of type INT"),
        ("log.segment.bytes", "13", "Invalid value 13 for configuration log.segment.bytes: "
         "Value must be at least 14"),
        ("default.replication.factor", "3", "Invalid value 3 for configuration "
         "default.replication.factor: Value must be no more than 1"),
        ("log.cleaner.min.cleanable.ratio", "half", "Invalid value half for configuration "
         "log.cleaner.min.cleanable.ratio: Not a number of type DOUBLE"),
        ("log.cleaner.min.cleanable.ratio", "nan", "Invalid value nan for configuration "
         "log.cleaner.min.cleanable.ratio: Not a number of type DOUBLE"),
        ("log.cleaner.min.cleanable.ratio", "2", "Invalid value 2.0 for configuration "
         "log.cleaner.min.cleanable.ratio: Value must be no more than 1"),
        ("log.cleaner.min.cleanable.ratio", "1e7", "Invalid value 1.0E7 for configuration "
         "log.cleaner.min.cleanable.ratio: Value must be no more than 1"),
        ("log.cleaner.min.cleanable.ratio", "Infinity", "Invalid value Infinity for "
         "configuration log.cleaner.min.cleanable.ratio: Value must be no more than 1"),
        ("log.cleaner.min.cleanable.ratio", "-0.1", "Invalid value -0.1 for configuration "
         "log.cleaner.min.cleanable.ratio: Value must be at least 0"),
        ("auto.create.topics.enable", "yes", "Invalid value yes for configuration "
         "auto.create.topics.enable: Expected value to be either true or false"),
        ("log.message.timestamp.type", " Other ", "Invalid value Other for configuration "
         "log.message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
        ("log.cleanup.policy", "compact, sometimes", "Invalid value sometimes for "
         f"configuration log.cleanup.policy: {POLICIES}"),
        ("log.cleanup.policy", "delete,,compact", "Invalid value  for configuration "
         f"log.cleanup.policy: {POLICIES}"),
        ("compression.type", "zip", "Invalid value zip for configuration compression.type: "
         "String must be one of: producer"),
    ],
)  # fmt: skip
def test_a_broker_key_is_refused_in_kafkas_words(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig.load([{key: value}])
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("key", "value", "normalised"),
    [
        ("log.retention.ms", "+7", "7"),
        ("log.cleaner.min.cleanable.ratio", "1e-1", "0.1"),
        ("log.cleaner.min.cleanable.ratio", " 0.5d ", "0.5"),
        ("log.message.timestamp.type", " LogAppendTime ", "LogAppendTime"),
        ("log.cleanup.policy", " compact , delete ", "compact,delete"),
    ],
)
def test_what_java_parses_is_taken(key: str, value: str, normalised: str) -> None:
    validator = broker_validator(key)
    assert validator is not None
    assert validator(value) == normalised


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    broker = await open_broker(tmp_path, FakeClock())
    await broker.topics.create(TOPIC, 1, {})
    yield broker
    await broker.close()


async def created(broker: Broker, configs: list[tuple[str, str | None]]) -> tuple[int, str]:
    topic = {
        "name": "new",
        "num_partitions": 1,
        "replication_factor": 1,
        "configs": [{"name": name, "value": value} for name, value in configs],
    }
    response = await call(broker, CREATE_TOPICS, 7, {"topics": [topic], "validate_only": True})
    [answer] = response.topics
    return answer.error_code, answer.error_message


async def test_create_topics_words_a_refused_config_as_kafka(broker: Broker) -> None:
    """Null values first, then unknown names, then the values in the order Kafka's
    LogConfig defines its keys (segment.ms before retention.ms), whatever the request's."""
    assert await created(broker, [("retention.ms", "soon")]) == (
        ErrorCode.invalid_config,
        "Invalid value soon for configuration retention.ms: Not a number of type LONG",
    )
    assert await created(broker, [("retention.ms", "x"), ("segment.ms", "0")]) == (
        ErrorCode.invalid_config,
        "Invalid value 0 for configuration segment.ms: Value must be at least 1",
    )
    assert await created(broker, [("retention.ms", "x"), ("no.such.config", "1")]) == (
        ErrorCode.invalid_config,
        "Unknown topic config name: no.such.config",
    )
    assert await created(broker, [("no.such.config", "1"), ("retention.ms", None)]) == (
        ErrorCode.invalid_config,
        "Null value not supported for topic configs: retention.ms",
    )


def alter_request(name: str, value: str | None, topic: str = TOPIC) -> dict[str, Any]:
    configs = [{"name": name, "value": value}]
    return {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic,
                           "configs": configs}]}  # fmt: skip


def incremental_request(
    name: str, operation: int, value: str | None, topic: str = TOPIC
) -> dict[str, Any]:
    configs = [{"name": name, "config_operation": operation, "value": value}]
    return {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic,
                           "configs": configs}]}  # fmt: skip


async def answered(broker: Broker, api_key: int, request: dict[str, Any]) -> tuple[int, str]:
    [answer] = (await call(broker, api_key, 1, request)).responses  # v1: both serve it
    return answer.error_code, answer.error_message


async def test_alter_configs_words_a_refused_config_as_kafka(broker: Broker) -> None:
    """A null value is a malformed request (INVALID_REQUEST), even for a topic that does
    not exist, as Kafka's ConfigAdminManager refuses it."""
    assert await answered(broker, ALTER_CONFIGS, alter_request("cleanup.policy", "x")) == (
        ErrorCode.invalid_config,
        f"Invalid value x for configuration cleanup.policy: {POLICIES}",
    )
    assert await answered(broker, ALTER_CONFIGS, alter_request("nope", "1")) == (
        ErrorCode.invalid_config,
        "Unknown topic config name: nope",
    )
    for topic in (TOPIC, "missing"):
        assert await answered(broker, ALTER_CONFIGS, alter_request("nope", None, topic)) == (
            ErrorCode.invalid_request,
            "Null value not supported for : nope",
        )


async def test_incremental_alter_configs_words_a_refused_config_as_kafka(broker: Broker) -> None:
    """The values are checked before the topic is looked up, as Kafka's controller does."""
    cases = {
        ("retention.ms", SET, "soon", TOPIC):
            "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        ("retention.ms", SET, "soon", "missing"):
            "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        ("cleanup.policy", APPEND, "sometimes", TOPIC):
            f"Invalid value sometimes for configuration cleanup.policy: {POLICIES}",
        ("cleanup.policy", APPEND, "", TOPIC):
            f"Invalid value  for configuration cleanup.policy: {POLICIES}",
        ("segment.bytes", APPEND, "1", TOPIC):
            "Can't APPEND to key segment.bytes because its type is not LIST.",
        ("segment.bytes", SUBTRACT, "1", TOPIC):
            "Can't SUBTRACT to key segment.bytes because its type is not LIST.",
        ("nope", SET, "1", TOPIC): "Unknown topic config name: nope",
    }  # fmt: skip
    for (name, operation, value, topic), message in cases.items():
        request = incremental_request(name, operation, value, topic)
        assert await answered(broker, INCREMENTAL_ALTER_CONFIGS, request) == (
            ErrorCode.invalid_config,
            message,
        ), (name, operation, value, topic)
    resolved = broker.resolver.resolve(TOPIC)
    assert resolved is not None and resolved.configs().overrides() == {}
